/**
 * Request bodies have a read deadline and their own slots: clients trickling bodies in
 * cannot take the slots readers need, and each is cut off with RequestTimeout (nothing
 * written at the origin) once it falls below the floor rate. A large body refused before it
 * is read reaches the SDK as its status and code, not as a broken pipe.
 */
import { PutObjectCommand, S3Client, UploadPartCommand } from "@aws-sdk/client-s3"
import { expect, layer } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import * as http from "node:http"
import { Gateway } from "../../src/gateway/Gateway.js"
import { raw } from "../origin/fixtures/testOrigin.js"
import { gatewayFixture, S3_KEY, TestOriginStub } from "./fixtures/targets.js"

const BUCKET = "slow"

/** A PUT that announces 1000 bytes and sends one every 100 ms; resolves with the answer (or "reset"). */
const trickle = (url: string, key: string): { readonly done: Promise<{ status: number; body: string } | "reset">; readonly stop: () => void } => {
  const u = new URL(url)
  let timer: NodeJS.Timeout | undefined
  const req = http.request({ host: u.hostname, port: u.port, method: "PUT", path: `/${BUCKET}/${key}`, headers: { "content-length": "1000" }, agent: false })
  const done = new Promise<{ status: number; body: string } | "reset">((resolve) => {
    req.on("response", (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }))
      res.on("error", () => resolve("reset"))
    })
    req.on("error", () => resolve("reset"))
  }).finally(() => clearInterval(timer))
  req.flushHeaders()
  timer = setInterval(() => req.write("x"), 100)
  return { done, stop: () => req.destroy() }
}

layer(
  gatewayFixture("origin", { gateway: { auth: false, maxConcurrentUploads: 4, bodyIdleMs: 800, minBodyBytesPerSec: 1000 } }),
  { excludeTestServices: true, timeout: "60 seconds" }
)("gateway request bodies", (it) => {
  it.effect("slow uploaders get their own slots and a deadline; readers are served meanwhile", () =>
    Effect.gen(function* () {
      const gw = yield* Gateway
      const origin = yield* TestOriginStub
      yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}`))
      const data = Buffer.from("read me while uploads crawl")
      yield* Effect.promise(() => raw(origin.url, "PUT", `/${BUCKET}/data.txt`, {}, data))
      const uploads = Array.from({ length: 10 }, (_, i) => trickle(gw.url, `slow-${i}.bin`))
      try {
        // While they crawl, reads are served (uploads do not count against the read limit).
        for (let i = 0; i < 5; i++) {
          const r = yield* Effect.promise(() => raw(gw.url, "GET", `/${BUCKET}/data.txt`))
          expect(r.status).toBe(200)
          expect(r.body.equals(data)).toBe(true)
        }
        const answers = yield* Effect.promise(() => Promise.all(uploads.map((u) => u.done)))
        const busy = answers.filter((a) => a !== "reset" && a.status === 503)
        const timedOut = answers.filter((a) => a !== "reset" && a.status === 400 && a.body.includes("<Code>RequestTimeout</Code>"))
        // Four slots: the other six are turned away at once, the four cut off by the deadline.
        expect(busy.length).toBe(6)
        expect(timedOut.length).toBe(4)
        for (const a of busy) expect(a !== "reset" && a.body).toContain("<Code>SlowDown</Code>")
      } finally {
        for (const u of uploads) u.stop()
      }
      for (let i = 0; i < 10; i++) {
        expect((yield* Effect.promise(() => raw(origin.url, "HEAD", `/${BUCKET}/slow-${i}.bin`))).status).toBe(404)
      }
    })
  )
})

layer(gatewayFixture("origin", { gateway: { maxBodyBytes: 1024 * 1024 } }), { excludeTestServices: true, timeout: "60 seconds" })(
  "gateway refusals before the body",
  (it) => {
    it.effect("a 20 MiB upload refused for its signature or its size gets the 403 / 400, not EPIPE", () =>
      Effect.gen(function* () {
        const gw = yield* Gateway
        const client = (secretAccessKey: string) =>
          new S3Client({ endpoint: gw.url, forcePathStyle: true, region: "us-east-1", credentials: { ...S3_KEY, secretAccessKey }, maxAttempts: 1 })
        const outcome = (p: Promise<unknown>) =>
          Effect.promise(() => p.then(() => "served", (e: { name?: string; $metadata?: { httpStatusCode?: number } }) => `${e.$metadata?.httpStatusCode} ${e.name}`))
        const body = randomBytes(20 * 1024 * 1024)
        expect(yield* outcome(client("wrong").send(new PutObjectCommand({ Bucket: "early", Key: "k", Body: body })))).toBe("403 SignatureDoesNotMatch")
        expect(yield* outcome(client("wrong").send(new UploadPartCommand({ Bucket: "early", Key: "k", UploadId: "0".repeat(32), PartNumber: 1, Body: body })))).toBe(
          "403 SignatureDoesNotMatch"
        )
        expect(yield* outcome(client(S3_KEY.secretAccessKey).send(new PutObjectCommand({ Bucket: "early", Key: "k", Body: body })))).toBe("400 EntityTooLarge")
      })
    )
  }
)
