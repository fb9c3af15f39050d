/**
 * Sample data so a newcomer has something to read: bucket (= Azure container) `talon`
 * with a 64 MiB pseudo-random object and a few small ones. Content is a pure function
 * of the byte position (`sampleBytes`), so any range can be checked without the file.
 */
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { Readable } from "node:stream"
import { objectPath } from "./layout.js"
import { OriginStubError } from "./OriginStub.js"
import { createBucket, putObject } from "./store.js"

export const SEED_BUCKET = "talon"
export const SAMPLE_KEY = "datasets/sample-64m.bin"
export const SAMPLE_SIZE = 64 * 1024 * 1024

const fmix32 = (h: number): number => {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** Bytes `[offset, offset + length)` of the deterministic sample stream. */
export const sampleBytes = (offset: number, length: number): Buffer => {
  const firstWord = Math.floor(offset / 4)
  const words = Math.ceil((offset + length) / 4) - firstWord
  const buf = Buffer.alloc(words * 4)
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength)
  for (let i = 0; i < words; i++) {
    // Word index mixed with a constant; >>> 0 keeps positions past 16 GiB well defined.
    view.setUint32(i * 4, fmix32(((firstWord + i) ^ 0x7a104e11) >>> 0), true)
  }
  const skip = offset - firstWord * 4
  return buf.subarray(skip, skip + length)
}

const text = (s: string) => ({ size: Buffer.byteLength(s), bytes: () => Buffer.from(s, "utf8") })

/** Every seeded object: key, size and content. */
export const SEED_OBJECTS: ReadonlyArray<{ readonly key: string; readonly size: number; readonly content: () => Buffer | "sample" }> = [
  { key: SAMPLE_KEY, size: SAMPLE_SIZE, content: () => "sample" },
  { key: "datasets/sample-1m.bin", size: 1024 * 1024, content: () => "sample" },
  { key: "datasets/small-4k.bin", size: 4096, content: () => "sample" },
  ...[
    ["hello.txt", "hello from the talon origin stub\n"],
    [
      "docs/readme.txt",
      "Sample data for Talon. datasets/sample-*.bin hold a deterministic pseudo-random stream: byte i is the same in every object.\n"
    ],
    ["nested/a/b/c/deep.txt", "a deep prefix\n"],
    ["unicode/naïve café +100%.txt", "keys may hold spaces, unicode, + and %\n"]
  ].map(([key, body]) => {
    const t = text(body!)
    return { key: key!, size: t.size, content: t.bytes }
  })
]

async function* sampleStream(size: number) {
  const step = 1024 * 1024
  for (let off = 0; off < size; off += step) yield sampleBytes(off, Math.min(step, size - off))
}

export interface SeedResult {
  readonly bucket: string
  readonly objects: ReadonlyArray<{ readonly key: string; readonly size: number; readonly written: boolean }>
}

/** Creates the sample bucket and objects under `root`; objects already there at the right size are kept. */
export const seed = (root: string): Effect.Effect<SeedResult, OriginStubError> =>
  Effect.tryPromise({
    try: async () => {
      const abs = path.resolve(root)
      await createBucket(abs, SEED_BUCKET)
      const objects = []
      for (const o of SEED_OBJECTS) {
        const existing = await fs.stat(objectPath(abs, SEED_BUCKET, o.key)).catch(() => undefined)
        if (existing?.isFile() && existing.size === o.size) {
          objects.push({ key: o.key, size: o.size, written: false })
          continue
        }
        const c = o.content()
        await putObject(abs, SEED_BUCKET, o.key, c === "sample" ? Readable.from(sampleStream(o.size)) : Readable.from([c]))
        objects.push({ key: o.key, size: o.size, written: true })
      }
      return { bucket: SEED_BUCKET, objects }
    },
    catch: (e) => new OriginStubError({ message: `seeding ${root} failed: ${(e as Error).message}` })
  })
