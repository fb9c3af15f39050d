/**
 * Uploads stream: `talon origin` and `talon gateway` run as child processes, and a 512 MiB
 * multipart upload (64 parts of 8 MiB, 8 at a time, the AWS CLI's shape) goes through the
 * gateway. Neither process's VmRSS may grow by 64 MiB or more; the object at the origin
 * must hash like the bytes sent. 512 MiB is eight times the bound, so buffering the object
 * shows; buffering each part in flight is capped by the concurrency (8 x 8 MiB), not by the
 * object's size, so a bigger object would show nothing more. The origin's root is on
 * /dev/shm so the time goes to the gateway, not the disk.
 */
import { CompleteMultipartUploadCommand, CreateMultipartUploadCommand, S3Client, UploadPartCommand } from "@aws-sdk/client-s3"
import { expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import { rssBytes, startListeningChild } from "../../bench/kit/slowReader.js"

const MiB = 1024 * 1024
const PART = 8 * MiB
const PARTS = 64
const CONCURRENCY = 8

/** Part `n`'s bytes: deterministic, different per part, cheap to make. */
const partBytes = (n: number): Buffer => {
  const seed = createHash("sha256").update(`part-${n}`).digest()
  const b = Buffer.allocUnsafe(PART)
  for (let off = 0; off < PART; off += seed.length) seed.copy(b, off)
  b.writeUInt32BE(n, 0)
  return b
}

const shmDir = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(process.platform === "linux" ? "/dev/shm" : os.tmpdir(), "talon-gw-upload-"))),
  (d) => Effect.promise(() => fs.rm(d, { recursive: true, force: true }))
)

it.scopedLive(
  "a 512 MiB multipart upload through the gateway grows neither the gateway nor the origin by 64 MiB",
  () =>
    Effect.gen(function* () {
      const dir = yield* shmDir
      const origin = yield* startListeningChild(["bin/talon.mjs", "origin", "--root", path.join(dir, "root"), "--port", "0"], {})
      const originUrl = `http://127.0.0.1:${origin.port}`
      const gateway = yield* startListeningChild(["bin/talon.mjs", "gateway", "--listen", "127.0.0.1:0", "--route", "origin", "--auth", "off"], {
        TALON_S3_ENDPOINT: originUrl,
        TALON_S3_ACCESS_KEY_ID: "talon",
        TALON_S3_SECRET_ACCESS_KEY: "talon"
      })
      const s3 = new S3Client({
        endpoint: `http://127.0.0.1:${gateway.port}`,
        forcePathStyle: true,
        region: "us-east-1",
        credentials: { accessKeyId: "any", secretAccessKey: "any" },
        maxAttempts: 1
      })
      const pids = { gateway: gateway.child.pid!, origin: origin.child.pid! }
      const result = yield* Effect.promise(async () => {
        const put = await fetch(`${originUrl}/big`, { method: "PUT" })
        expect(put.status).toBe(200)
        const baseline = { gateway: await rssBytes(pids.gateway), origin: await rssBytes(pids.origin) }
        const peak = { ...baseline }
        const sampler = setInterval(() => {
          for (const k of ["gateway", "origin"] as const) {
            rssBytes(pids[k]).then((r) => (peak[k] = Math.max(peak[k], r)), () => undefined)
          }
        }, 50)
        const started = performance.now()
        try {
          const { UploadId } = await s3.send(new CreateMultipartUploadCommand({ Bucket: "big", Key: "half-gib.bin" }))
          const etags: Array<string> = new Array(PARTS)
          let next = 0
          await Promise.all(
            Array.from({ length: CONCURRENCY }, async () => {
              while (next < PARTS) {
                const n = next++
                const r = await s3.send(new UploadPartCommand({ Bucket: "big", Key: "half-gib.bin", UploadId, PartNumber: n + 1, Body: partBytes(n) }))
                etags[n] = r.ETag!
              }
            })
          )
          await s3.send(
            new CompleteMultipartUploadCommand({
              Bucket: "big",
              Key: "half-gib.bin",
              UploadId,
              MultipartUpload: { Parts: etags.map((ETag, i) => ({ ETag, PartNumber: i + 1 })) }
            })
          )
        } finally {
          clearInterval(sampler)
        }
        return { baseline, peak, seconds: (performance.now() - started) / 1000 }
      })
      const growth = { gateway: result.peak.gateway - result.baseline.gateway, origin: result.peak.origin - result.baseline.origin }
      console.log(
        `512 MiB multipart upload through the gateway in ${result.seconds.toFixed(1)} s: ` +
          `gateway RSS ${(result.baseline.gateway / MiB).toFixed(0)} -> peak ${(result.peak.gateway / MiB).toFixed(0)} MiB (+${(growth.gateway / MiB).toFixed(1)}), ` +
          `origin RSS ${(result.baseline.origin / MiB).toFixed(0)} -> peak ${(result.peak.origin / MiB).toFixed(0)} MiB (+${(growth.origin / MiB).toFixed(1)})`
      )
      expect(growth.gateway).toBeLessThan(64 * MiB)
      expect(growth.origin).toBeLessThan(64 * MiB)
      // Every byte arrived, in order.
      const expected = createHash("sha256")
      for (let n = 0; n < PARTS; n++) expected.update(partBytes(n))
      const actual = createHash("sha256")
      const h = yield* Effect.promise(() => fs.open(path.join(dir, "root", "big", "half-gib.bin")))
      yield* Effect.promise(async () => {
        for await (const c of h.createReadStream()) actual.update(c as Buffer)
      })
      expect(actual.digest("hex")).toBe(expected.digest("hex"))
    }),
  { timeout: 600_000 }
)
