/**
 * Origin-side fixtures the worker tests share: the origin stub on a temp dir,
 * objects written straight into an origin root, and the bytes of a read reply
 * copied out of its file segments.
 */
import * as fs from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { Effect, ManagedRuntime } from "effect"
import { expect } from "vitest"
import { OriginStub, type OriginStubShape } from "../../../src/origin/index.js"
import type { RangeReply } from "../../../src/worker/ReadPath.js"
import { type Cleanup, tempDir } from "./harness.js"

/** An origin stub over a fresh temp dir, disposed by `cleanup`. */
export const startOriginStub = async (cleanup: Cleanup, prefix: string): Promise<OriginStubShape> => {
  const root = await tempDir(cleanup, prefix)
  const runtime = ManagedRuntime.make(OriginStub.layer({ root }))
  cleanup.add(() => runtime.dispose())
  return runtime.runPromise(OriginStub)
}

/** Writes `bytes` as object `bucket/key` of the origin rooted at `root` (the stub's or a dir backend's). */
export const putObjectAt = async (root: string, bucket: string, key: string, bytes: Uint8Array): Promise<void> => {
  const p = path.join(root, bucket, key)
  await fsp.mkdir(path.dirname(p), { recursive: true })
  await fsp.writeFile(p, bytes)
}

export const stubStats = (stub: OriginStubShape) => Effect.runPromise(stub.stats())

/** The reply's bytes, read from its segments (each read must be whole), then the reply handed back to `release`. */
export const replyBytes = (reply: RangeReply, release: (reply: RangeReply) => void): Buffer => {
  try {
    const buf = Buffer.alloc(reply.length)
    let at = 0
    for (const s of reply.segments) {
      expect(fs.readSync(s.fd, buf, at, s.length, s.offset)).toBe(s.length)
      at += s.length
    }
    return buf
  } finally {
    release(reply)
  }
}
