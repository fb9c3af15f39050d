/**
 * Raw HTTP against the origin stub: what SDKs cannot send (path-escape attempts,
 * virtual-host requests, multi-range, hand-built aws-chunked bodies), faults, stats,
 * atomic writes and the seeded sample data.
 */
import { expect, it, layer } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs/promises"
import * as http from "node:http"
import * as path from "node:path"
import * as zlib from "node:zlib"
import { noFaults } from "../../src/origin/faults.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { SAMPLE_KEY, SAMPLE_SIZE, sampleBytes, seed, SEED_BUCKET } from "../../src/origin/seed.js"
import { sameBytes } from "../support/checks.js"
import { eventually } from "../support/eventually.js"
import { raw, rawEffect, tempDir, TestOrigin } from "./fixtures/testOrigin.js"

const AZ = { "x-ms-version": "2025-05-05" }
const SECRET = "TOP-SECRET-OUTSIDE-ROOT"

const withCleanFaults = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.flatMap(OriginStub, (stub) => self.pipe(Effect.ensuring(stub.setFaults(noFaults))))

const crc32b64 = (b: Buffer) => {
  const out = Buffer.alloc(4)
  out.writeUInt32BE(zlib.crc32(b) >>> 0)
  return out.toString("base64")
}

/** An aws-chunked body as the SDK frames it, optionally with chunk signatures. */
const awsChunked = (data: Buffer, chunk: number, trailers: Record<string, string>, signed = false) => {
  const parts: Buffer[] = []
  const sig = signed ? ";chunk-signature=" + "0".repeat(64) : ""
  for (let off = 0; off < data.length; off += chunk) {
    const piece = data.subarray(off, off + chunk)
    parts.push(Buffer.from(`${piece.length.toString(16)}${sig}\r\n`), piece, Buffer.from("\r\n"))
  }
  parts.push(Buffer.from(`0${sig}\r\n`))
  for (const [k, v] of Object.entries(trailers)) parts.push(Buffer.from(`${k}:${v}\r\n`))
  parts.push(Buffer.from("\r\n"))
  return Buffer.concat(parts)
}

layer(TestOrigin(), { excludeTestServices: true })("origin stub over raw HTTP", (it) => {
  it.effect("seeds deterministic sample data, idempotently", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const first = yield* seed(stub.root)
      expect(first.objects.every((o) => o.written)).toBe(true)
      const second = yield* seed(stub.root)
      expect(second.objects.some((o) => o.written)).toBe(false)
      const head = yield* rawEffect(stub.url, "HEAD", `/${SEED_BUCKET}/${SAMPLE_KEY}`)
      expect(Number(head.headers["content-length"])).toBe(SAMPLE_SIZE)
      for (const offset of [0, 1, 12_345_677, SAMPLE_SIZE - 100]) {
        const r = yield* rawEffect(stub.url, "GET", `/${SEED_BUCKET}/${SAMPLE_KEY}`, { Range: `bytes=${offset}-${offset + 99}` })
        expect(r.status).toBe(206)
        expect(sameBytes(r.body, sampleBytes(offset, 100))).toBe("equal")
      }
      const uni = yield* rawEffect(stub.url, "GET", `/${SEED_BUCKET}/${encodeURIComponent("unicode/naïve café +100%.txt").replace(/%2F/g, "/")}`)
      expect(uni.status).toBe(200)
    })
  )

  it.effect("never lets a path escape the root", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const outside = path.dirname(stub.root)
      // The bucket must exist, or every attempt would be a trivially safe NoSuchBucket.
      expect((yield* rawEffect(stub.url, "PUT", "/talon")).status).toBe(200)
      yield* Effect.promise(() => fs.writeFile(path.join(outside, "secret.txt"), SECRET))
      yield* Effect.promise(() => fs.writeFile(path.join(stub.root, "secret.txt"), SECRET))
      const s3Paths = [
        "/talon/../secret.txt",
        "/talon/../../secret.txt",
        "/talon/%2e%2e/secret.txt",
        "/talon/%2E%2E%2Fsecret.txt",
        "/talon/..%2f..%2fsecret.txt",
        "/talon/./../secret.txt",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/talon/../../../../../../etc/passwd",
        "/talon//etc/passwd",
        "/talon/%2Fetc%2Fpasswd",
        "http://127.0.0.1/talon/../secret.txt",
        "/talon/%00secret.txt",
        "/secret.txt"
      ]
      for (const p of s3Paths) {
        const r = yield* rawEffect(stub.url, "GET", p)
        expect([400, 404], p).toContain(r.status)
        expect(r.body.toString(), p).not.toContain(SECRET)
        expect(r.body.toString(), p).not.toContain("root:")
      }
      const vhost = yield* rawEffect(stub.url, "GET", "/../secret.txt", { Host: `talon.localhost:${stub.port}` })
      expect([400, 404]).toContain(vhost.status)
      expect(vhost.body.toString()).not.toContain(SECRET)
      const azPaths = [
        "/devstoreaccount1/talon/../../secret.txt",
        "/devstoreaccount1/talon/%2e%2e/%2e%2e/secret.txt",
        "/devstoreaccount1/%2e%2e/secret.txt",
        "/devstoreaccount1/talon/..%2f..%2fsecret.txt",
        "/../devstoreaccount1/secret.txt"
      ]
      for (const p of azPaths) {
        const r = yield* rawEffect(stub.url, "GET", p, AZ)
        expect([400, 404], p).toContain(r.status)
        expect(r.headers["x-ms-error-code"], p).toBeDefined()
        expect(r.body.toString(), p).not.toContain(SECRET)
      }
      // Writes cannot land outside the root either.
      for (const p of ["/talon/%2e%2e/%2e%2e/escaped.txt", "/talon/../escaped.txt", "/talon/..%2F..%2Fescaped.txt"]) {
        const r = yield* rawEffect(stub.url, "PUT", p, {}, "pwned")
        expect(r.status, p).toBe(400)
        const az = yield* rawEffect(stub.url, "PUT", `/devstoreaccount1${p}`, { ...AZ, "x-ms-blob-type": "BlockBlob" }, "pwned")
        expect(az.status, p).toBe(400)
      }
      for (const f of [path.join(outside, "escaped.txt"), path.join(stub.root, "escaped.txt"), path.join(path.dirname(outside), "escaped.txt")]) {
        expect(yield* Effect.promise(() => fs.stat(f).then(() => true, () => false)), f).toBe(false)
      }
    })
  )

  it.effect("serves virtual-host-style requests", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const host = { Host: `talon.localhost:${stub.port}` }
      const r = yield* rawEffect(stub.url, "GET", "/hello.txt", host)
      expect(r.status).toBe(200)
      expect(r.body.toString()).toBe("hello from the talon origin stub\n")
      const list = yield* rawEffect(stub.url, "GET", "/?list-type=2&prefix=docs/", host)
      expect(list.body.toString()).toContain("<Key>docs/readme.txt</Key>")
      expect(list.body.toString()).toContain("<Name>talon</Name>")
      const put = yield* rawEffect(stub.url, "PUT", "/vhost/new.txt", host, "via vhost")
      expect(put.status).toBe(200)
      const back = yield* rawEffect(stub.url, "GET", "/talon/vhost/new.txt")
      expect(back.body.toString()).toBe("via vhost")
    })
  )

  it.effect("applies If-Range and rejects multiple ranges in each provider's shape", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const p = "/talon/datasets/small-4k.bin"
      const head = yield* rawEffect(stub.url, "HEAD", p)
      const etag = head.headers.etag!
      const hit = yield* rawEffect(stub.url, "GET", p, { Range: "bytes=0-9", "If-Range": etag })
      expect(hit.status).toBe(206)
      expect(hit.body.length).toBe(10)
      const miss = yield* rawEffect(stub.url, "GET", p, { Range: "bytes=0-9", "If-Range": '"stale"' })
      expect(miss.status).toBe(200)
      expect(miss.body.length).toBe(4096)
      const old = yield* rawEffect(stub.url, "GET", p, { Range: "bytes=0-9", "If-Range": new Date(0).toUTCString() })
      expect(old.status).toBe(200)

      const s3 = yield* rawEffect(stub.url, "GET", p, { Range: "bytes=0-1,5-6" })
      expect(s3.status).toBe(416)
      expect(s3.body.toString()).toContain("<Code>InvalidRange</Code>")
      expect(s3.headers["x-amz-request-id"]).toBeDefined()
      const az = yield* rawEffect(stub.url, "GET", `/devstoreaccount1${p}`, { ...AZ, "x-ms-range": "bytes=0-1,5-6" })
      expect(az.status).toBe(416)
      expect(az.headers["x-ms-error-code"]).toBe("InvalidRange")
      expect(az.body.toString()).toContain("<Code>InvalidRange</Code>")
      // x-ms-range wins over Range.
      const both = yield* rawEffect(stub.url, "GET", `/devstoreaccount1${p}`, { ...AZ, "x-ms-range": "bytes=10-19", Range: "bytes=0-1" })
      expect(both.headers["content-range"]).toBe("bytes 10-19/4096")
      const unsat = yield* rawEffect(stub.url, "GET", `/devstoreaccount1${p}`, { ...AZ, "x-ms-range": "bytes=4096-" })
      expect(unsat.status).toBe(416)
      expect(unsat.headers["content-range"]).toBe("bytes */4096")
    })
  )

  it.effect("returns provider XML errors with request ids", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const s3 = yield* rawEffect(stub.url, "GET", "/talon/missing.txt")
      expect(s3.status).toBe(404)
      expect(s3.headers["x-amz-request-id"]).toMatch(/^[0-9A-F]{16}$/)
      expect(s3.body.toString()).toMatch(/<Error><Code>NoSuchKey<\/Code><Message>[^<]+<\/Message><Key>missing.txt<\/Key>/)
      const az = yield* rawEffect(stub.url, "GET", "/devstoreaccount1/talon/missing.txt", { ...AZ, "x-ms-client-request-id": "abc" })
      expect(az.status).toBe(404)
      expect(az.headers["x-ms-error-code"]).toBe("BlobNotFound")
      expect(az.headers["x-ms-request-id"]).toMatch(/^[0-9a-f-]{36}$/)
      expect(az.headers["x-ms-client-request-id"]).toBe("abc")
      expect(az.body.toString()).toContain("<Error><Code>BlobNotFound</Code>")
      const azHead = yield* rawEffect(stub.url, "HEAD", "/devstoreaccount1/talon/missing.txt", AZ)
      expect(azHead.headers["x-ms-error-code"]).toBe("BlobNotFound")
      const bad = yield* rawEffect(stub.url, "GET", "/Not_A_Bucket/x")
      expect(bad.body.toString()).toContain("<Code>InvalidBucketName</Code>")
      // Azure is detected by its query parameters as well as its headers.
      const byQuery = yield* rawEffect(stub.url, "GET", "/devstoreaccount1/talon?restype=container&comp=list&prefix=docs/")
      expect(byQuery.body.toString()).toContain("<Name>docs/readme.txt</Name>")
      const md5 = yield* rawEffect(stub.url, "PUT", "/devstoreaccount1/talon/md5.txt", { ...AZ, "x-ms-blob-type": "BlockBlob", "Content-MD5": "AAAAAAAAAAAAAAAAAAAAAA==" }, "x")
      expect(md5.headers["x-ms-error-code"]).toBe("Md5Mismatch")
    })
  )

  it.effect("decodes hand-built aws-chunked bodies and verifies their trailers", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const data = sampleBytes(3, 70_000)
      const headers = (body: Buffer, sha = "STREAMING-UNSIGNED-PAYLOAD-TRAILER") => ({
        "x-amz-content-sha256": sha,
        "content-encoding": "aws-chunked",
        "x-amz-decoded-content-length": String(data.length),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "content-length": String(body.length)
      })
      const good = awsChunked(data, 8192, { "x-amz-checksum-crc32": crc32b64(data) })
      const ok = yield* rawEffect(stub.url, "PUT", "/talon/chunked.bin", headers(good), good)
      expect(ok.status).toBe(200)
      expect(ok.headers["x-amz-checksum-crc32"]).toBe(crc32b64(data))
      expect(sameBytes((yield* rawEffect(stub.url, "GET", "/talon/chunked.bin")).body, data)).toBe("equal")

      const signed = awsChunked(data, 65536, { "x-amz-checksum-crc32": crc32b64(data), "x-amz-trailer-signature": "0".repeat(64) }, true)
      const s = yield* rawEffect(stub.url, "PUT", "/talon/signed.bin", headers(signed, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"), signed)
      expect(s.status).toBe(200)
      expect(sameBytes((yield* rawEffect(stub.url, "GET", "/talon/signed.bin")).body, data)).toBe("equal")

      const wrong = awsChunked(sampleBytes(4, 70_000), 8192, { "x-amz-checksum-crc32": crc32b64(data) })
      const bad = yield* rawEffect(stub.url, "PUT", "/talon/chunked.bin", headers(wrong), wrong)
      expect(bad.status).toBe(400)
      expect(bad.body.toString()).toContain("<Code>BadDigest</Code>")
      const truncated = good.subarray(0, good.length - 40)
      const cut = yield* rawEffect(stub.url, "PUT", "/talon/chunked.bin", headers(truncated), truncated)
      expect(cut.status).toBe(400)
      // Neither failed write replaced the object.
      expect(sameBytes((yield* rawEffect(stub.url, "GET", "/talon/chunked.bin")).body, data)).toBe("equal")
    })
  )

  it.effect("writes atomically: a reader sees the old object until the new one is complete", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      yield* rawEffect(stub.url, "PUT", "/talon/atomic.bin", {}, "old contents")
      const next = sampleBytes(0, 200_000)
      const u = new URL(stub.url)
      let finish!: () => void
      const done = new Promise<number>((resolve, reject) => {
        const req = http.request(
          { host: u.hostname, port: u.port, method: "PUT", path: "/talon/atomic.bin", headers: { "content-length": next.length }, agent: false },
          (res) => {
            res.resume()
            res.on("end", () => resolve(res.statusCode ?? 0))
          }
        )
        req.on("error", reject)
        req.write(next.subarray(0, 100_000))
        finish = () => req.end(next.subarray(100_000))
      })
      // Half the body is on the wire; wait until the server has written it to its temp file.
      const tmpDir = path.join(stub.root, ".talon-tmp")
      yield* eventually(
        Effect.promise(async () => {
          const names = await fs.readdir(tmpDir).catch(() => [])
          const sizes = await Promise.all(names.map((n) => fs.stat(path.join(tmpDir, n)).then((s) => s.size, () => 0)))
          expect(sizes.some((s) => s >= 100_000)).toBe(true)
        }),
        { what: "half the body in the temp file" }
      )
      const during = yield* rawEffect(stub.url, "GET", "/talon/atomic.bin")
      expect(during.body.toString()).toBe("old contents")
      finish()
      expect(yield* Effect.promise(() => done)).toBe(200)
      expect(sameBytes((yield* rawEffect(stub.url, "GET", "/talon/atomic.bin")).body, next)).toBe("equal")
    })
  )

  it.effect("injects 503s and resets, configurable at runtime over the admin API", () =>
    withCleanFaults(
      Effect.gen(function* () {
        const stub = yield* OriginStub
        const set = yield* rawEffect(stub.url, "POST", "/_talon/faults", { "content-type": "application/json" }, JSON.stringify({ failureRate: 1 }))
        expect(JSON.parse(set.body.toString()).failureRate).toBe(1)
        const s3 = yield* rawEffect(stub.url, "GET", "/talon/hello.txt")
        expect(s3.status).toBe(503)
        expect(s3.body.toString()).toContain("<Code>SlowDown</Code>")
        const az = yield* rawEffect(stub.url, "GET", "/devstoreaccount1/talon/hello.txt", AZ)
        expect(az.status).toBe(503)
        expect(az.headers["x-ms-error-code"]).toBe("ServerBusy")

        yield* rawEffect(stub.url, "POST", "/_talon/faults", {}, JSON.stringify({ failureMode: "reset" }))
        const err = yield* Effect.flip(Effect.tryPromise(() => raw(stub.url, "GET", "/talon/hello.txt")))
        expect(String((err.cause as NodeJS.ErrnoException).code)).toMatch(/ECONNRESET|EPIPE/)

        // A truncated GET promises the full length, delivers half, then resets.
        yield* stub.setFaults({ failureMode: "truncate" })
        const cut = yield* Effect.promise(
          () =>
            new Promise<{ length: number; promised: number; error: string }>((resolve) => {
              const u = new URL(stub.url)
              http.get({ host: u.hostname, port: u.port, path: "/talon/datasets/small-4k.bin", agent: false }, (res) => {
                let length = 0
                res.on("data", (c: Buffer) => (length += c.length))
                res.on("error", (e) => resolve({ length, promised: Number(res.headers["content-length"]), error: String(e) }))
                res.on("end", () => resolve({ length, promised: Number(res.headers["content-length"]), error: "" }))
              })
            })
        )
        expect(cut.promised).toBe(4096)
        expect(cut.length).toBe(2048)
        expect(cut.error).toMatch(/aborted|ECONNRESET/)

        // Faults can target request kinds: only GETs fail, HEADs pass.
        yield* stub.setFaults({ failureMode: "503", kinds: ["get"] })
        expect((yield* rawEffect(stub.url, "HEAD", "/talon/hello.txt")).status).toBe(200)
        expect((yield* rawEffect(stub.url, "GET", "/talon/hello.txt")).status).toBe(503)

        const invalid = yield* rawEffect(stub.url, "POST", "/_talon/faults", {}, JSON.stringify({ failureRate: 7 }))
        expect(invalid.status).toBe(400)
        const stats = JSON.parse((yield* rawEffect(stub.url, "GET", "/_talon/stats")).body.toString())
        expect(stats.faults.failed).toBeGreaterThanOrEqual(4)
        expect(stats.faults.reset).toBeGreaterThanOrEqual(1)
      })
    )
  )

  it.effect("delays requests and caps bandwidth", () =>
    withCleanFaults(
      Effect.gen(function* () {
        const stub = yield* OriginStub
        yield* stub.setFaults({ latency: { kind: "fixed", ms: 300 } })
        let t = performance.now()
        expect((yield* rawEffect(stub.url, "HEAD", "/talon/hello.txt")).status).toBe(200)
        // Lower bounds only: injected delay makes a request at least this slow.
        expect(performance.now() - t).toBeGreaterThanOrEqual(290)

        yield* stub.setFaults({ latency: { kind: "pareto", minMs: 20, alpha: 1.2, maxMs: 200 }, seed: 7 })
        t = performance.now()
        expect((yield* rawEffect(stub.url, "HEAD", "/talon/hello.txt")).status).toBe(200)
        expect(performance.now() - t).toBeGreaterThanOrEqual(19)

        yield* stub.setFaults({ latency: { kind: "none" }, bandwidthBytesPerSec: 256 * 1024 })
        t = performance.now()
        const r = yield* rawEffect(stub.url, "GET", `/talon/${SAMPLE_KEY}`, { Range: "bytes=0-131071" })
        expect(sameBytes(r.body, sampleBytes(0, 131072))).toBe("equal")
        expect(performance.now() - t).toBeGreaterThanOrEqual(450)
      })
    )
  )

  it.effect("counts requests by kind, through the service and the admin API", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      yield* stub.resetStats()
      yield* rawEffect(stub.url, "HEAD", "/talon/hello.txt")
      yield* rawEffect(stub.url, "GET", "/talon/hello.txt")
      yield* rawEffect(stub.url, "GET", "/devstoreaccount1/talon/datasets/small-4k.bin", { ...AZ, "x-ms-range": "bytes=0-99" })
      yield* rawEffect(stub.url, "GET", "/talon?list-type=2")
      yield* rawEffect(stub.url, "PUT", "/talon/counted.txt", {}, "12345")
      yield* rawEffect(stub.url, "DELETE", "/talon/counted.txt")
      const s = yield* stub.stats()
      expect(s.requests).toEqual({ head: 1, get: 2, list: 1, put: 1, delete: 1, other: 0 })
      expect(s.byProtocol).toEqual({ s3: 5, azure: 1, gcs: 0 })
      expect(s.bytesServed).toBe(33 + 100)
      expect(s.bytesReceived).toBe(5)
      const viaHttp = JSON.parse((yield* rawEffect(stub.url, "GET", "/_talon/stats")).body.toString())
      expect(viaHttp).toEqual(s)
      yield* rawEffect(stub.url, "POST", "/_talon/stats/reset")
      expect((yield* stub.stats()).total).toBe(0)
    })
  )
})

it.scopedLive("removes temp files of dead writers at start-up", () =>
  Effect.gen(function* () {
    const dir = yield* tempDir
    const root = path.join(dir, "root")
    // A pid that certainly ran and exited: a finished child of ours.
    const dead = yield* Effect.promise(
      () =>
        new Promise<number>((resolve) => {
          const c = spawn(process.execPath, ["-e", ""])
          c.on("exit", () => resolve(c.pid!))
        })
    )
    yield* Effect.promise(async () => {
      await fs.mkdir(path.join(root, ".talon-tmp"), { recursive: true })
      await fs.writeFile(path.join(root, ".talon-tmp", `put-${dead}-deadbeef`), "partial")
      await fs.writeFile(path.join(root, ".talon-tmp", `put-${process.pid}-cafe`), "ours")
    })
    yield* OriginStub.make({ root })
    const left = yield* Effect.promise(() => fs.readdir(path.join(root, ".talon-tmp")))
    expect(left).toEqual([`put-${process.pid}-cafe`])
  })
)
