/**
 * Abandoned writes do not stay forever: a multipart upload nobody completes or aborts and
 * blocks nobody commits are removed once older than the stub's upload TTL, on its timer.
 */
import { expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { raw, TestOrigin } from "./fixtures/testOrigin.js"
import { eventually } from "../support/eventually.js"

const AZ = { "x-ms-version": "2021-12-02" }

layer(TestOrigin({ uploadTtlMs: 400 }), { excludeTestServices: true, timeout: "60 seconds" })("origin stub upload expiry", (it) => {
  it.effect("an abandoned multipart upload and uncommitted blocks expire", () =>
    Effect.gen(function* () {
      const stub = yield* OriginStub
      yield* Effect.promise(() => raw(stub.url, "PUT", "/expiry"))
      const created = yield* Effect.promise(() => raw(stub.url, "POST", "/expiry/mp.bin?uploads"))
      const uploadId = /<UploadId>([^<]+)<\/UploadId>/.exec(created.body.toString())![1]!
      const part = yield* Effect.promise(() => raw(stub.url, "PUT", `/expiry/mp.bin?partNumber=1&uploadId=${uploadId}`, {}, "part one"))
      expect(part.status).toBe(200)
      const block = yield* Effect.promise(() => raw(stub.url, "PUT", `/acct/expiry/b.bin?comp=block&blockid=${encodeURIComponent(Buffer.from("b1").toString("base64"))}`, AZ, "block one"))
      expect(block.status).toBe(201)
      expect((yield* Effect.promise(() => raw(stub.url, "GET", `/expiry/mp.bin?uploadId=${uploadId}`))).status).toBe(200)
      expect((yield* Effect.promise(() => raw(stub.url, "GET", "/acct/expiry/b.bin?comp=blocklist&blocklisttype=uncommitted", AZ))).status).toBe(200)
      // Both disappear once older than the TTL (on the wall clock: the sweep judges file mtimes).
      yield* eventually(
        Effect.promise(async () => {
          expect((await raw(stub.url, "GET", `/expiry/mp.bin?uploadId=${uploadId}`)).status).toBe(404)
          expect((await raw(stub.url, "GET", "/acct/expiry/b.bin?comp=blocklist&blocklisttype=uncommitted", AZ)).status).toBe(404)
        }),
        { what: "the abandoned upload and blocks swept", within: "30 seconds", every: "100 millis" }
      )
      const parts = yield* Effect.promise(() => raw(stub.url, "GET", `/expiry/mp.bin?uploadId=${uploadId}`))
      expect(parts.body.toString()).toContain("<Code>NoSuchUpload</Code>")
      const left = yield* Effect.promise(() => fs.readdir(path.join(stub.root, ".talon-tmp", "uploads")).catch(() => []))
      expect(left).toEqual([])
    })
  )
})
