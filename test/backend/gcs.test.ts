import { generateKeyPairSync } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import { Chunk, Config, ConfigProvider, Effect, Layer, Logger, LogLevel, Stream } from "effect"
import * as Gcs from "../../src/backend/Gcs.js"
import * as Router from "../../src/backend/Router.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { OriginStub } from "../../src/origin/index.js"
import { backendContract, ContractTarget } from "./contract.js"
import { tempDir } from "./servers.js"

const bucket = "talon-gcs"

const stubLayer = Layer.unwrapScoped(
  Effect.gen(function* () {
    const root = yield* tempDir("talon-gcs-stub-")
    yield* Effect.promise(() => fs.mkdir(path.join(root, bucket)))
    return OriginStub.layer({ root, port: 0 })
  })
).pipe(Layer.orDie)

backendContract(
  "GCS backend against the origin stub (metadata-server tokens)",
  Layer.scoped(
    ContractTarget,
    Effect.gen(function* () {
      const stub = yield* OriginStub
      return { store: yield* Gcs.make(Gcs.localOptions(stub.url)), backend: Backend.Gcs, bucket }
    })
  ).pipe(Layer.provide(stubLayer))
)

const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

/** Every log line written while `effect` runs, as text (to prove no token is ever in one). */
const withCapturedLogs = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const lines: Array<string> = []
    const logger = Logger.make(({ message, cause }) => {
      lines.push(`${JSON.stringify(message)} ${String(cause)}`)
    })
    const result = yield* effect.pipe(Effect.provide(Logger.replace(Logger.defaultLogger, logger)), Logger.withMinimumLogLevel(LogLevel.All))
    return { result, lines }
  })

const id = (objectPath: string): ObjectId => ({ backend: Backend.Gcs, bucket, objectPath })
const fastPolicy = { timeoutMs: 5_000, retries: 2, retryBaseMs: 1, retryMaxMs: 5, maxSockets: 8 }

layer(stubLayer, { excludeTestServices: true, timeout: "30 seconds" })("GCS over the origin stub", (it) => {
  describe("generations", () => {
    it.effect("the version is the generation, it changes on overwrite, and a read pinned to the old one is refused with 412", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const store = yield* Gcs.make(Gcs.localOptions(stub.url))
          const a = yield* store.put(id("gen/x.bin"), Buffer.from("first generation"))
          expect(a.version).toMatch(/^\d+$/)
          const b = yield* store.put(id("gen/x.bin"), Buffer.from("second generation"))
          expect(BigInt(b.version)).toBeGreaterThan(BigInt(a.version))
          expect((yield* store.stat(id("gen/x.bin"))).version).toBe(b.version)
          const listed = yield* store.list(bucket, { prefix: "gen/" })
          expect(listed.objects).toMatchObject([{ key: "gen/x.bin", version: b.version, size: 17 }])
          const pinned = yield* collect(store.getRange(id("gen/x.bin"), 0, 6, { version: b.version }))
          expect(pinned.toString()).toBe("second")
          const stale = yield* Effect.flip(collect(store.getRange(id("gen/x.bin"), 0, 6, { version: a.version })))
          expect(stale).toMatchObject({ _tag: "BackendRequestError", status: 412, retryable: false })
        })
      )
    )

    it.effect("the router sends gs:// objects to GCS and s3:// ones to S3 over the same stored bytes", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const store = yield* Router.make(Router.localOptions(stub.url))
          yield* store.put({ backend: Backend.S3, bucket, objectPath: "both/o.txt" }, Buffer.from("one store, three protocols"))
          const viaGcs = yield* collect(store.getRange(id("both/o.txt"), 4, 5))
          expect(viaGcs.toString()).toBe("store")
          const page = yield* store.list(bucket, { prefix: "both/", backend: Backend.Gcs })
          expect(page.objects.map((o) => o.key)).toEqual(["both/o.txt"])
        })
      )
    )
  })

  describe("metadata-server tokens", () => {
    it.effect("a request without a token is refused with 401", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const anonymous = yield* Gcs.make({ endpoint: stub.url, credential: { _tag: "Anonymous" }, policy: fastPolicy })
          const error = yield* Effect.flip(anonymous.stat(id("nothing")))
          expect(error).toMatchObject({ _tag: "BackendRequestError", status: 401 })
        })
      )
    )

    it.effect("a token refused early (revoked) is replaced on the next attempt; a token that never works fails with a clear message; no token reaches a log", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          yield* stub.setTokens({ ttlSeconds: 3600, refuse: false })
          const store = yield* Gcs.make({ ...Gcs.localOptions(stub.url), policy: fastPolicy })
          yield* store.put(id("tok/a.bin"), Buffer.from("abc"))
          const before = (yield* stub.tokenStats()).issued.metadata
          yield* stub.expireTokens()
          const { lines } = yield* withCapturedLogs(store.stat(id("tok/a.bin")))
          expect((yield* stub.tokenStats()).issued.metadata).toBe(before + 1)

          // The stub now honours tokens for 0 s while advertising an hour: every attempt is refused.
          yield* stub.setTokens({ honourSeconds: 0 })
          yield* stub.expireTokens()
          const failed = yield* withCapturedLogs(Effect.flip(store.stat(id("tok/a.bin"))))
          expect(failed.result).toMatchObject({ _tag: "BackendRequestError", status: 401 })
          expect(failed.result.message).toContain("GCS refused the bearer token from the GCE metadata server")
          expect(failed.result.message).toContain("check that the service account may read the bucket")
          yield* stub.setTokens({ honourSeconds: 3600 })

          // Every token the stub issues starts with "ya29." (as Google's do).
          expect(lines.length + failed.lines.length).toBeGreaterThan(0)
          for (const text of [...lines, ...failed.lines, failed.result.message]) expect(text).not.toContain("ya29.")
        })
      )
    )

    it.effect("the metadata server refusing every grant fails the request and names the source", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const store = yield* Gcs.make({ ...Gcs.localOptions(stub.url), policy: fastPolicy })
          yield* stub.setTokens({ refuse: true })
          const error = yield* Effect.flip(store.stat(id("tok/none"))).pipe(Effect.ensuring(stub.setTokens({ refuse: false })))
          expect(error.message).toContain("could not get credentials from the GCE metadata server")
          expect(error.message).toContain("HTTP 403")
        })
      )
    )
  })

  describe("service-account key file (JWT bearer grant)", () => {
    it.effect("a key file's signed assertion buys a token that reads the object; a bad key file says what is wrong", () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const dir = yield* tempDir("talon-gcs-key-")
          const keyFile = path.join(dir, "key.json")
          const { privateKey } = generateKeyPairSync("rsa", { modulusLength: 2048 })
          const key = {
            type: "service_account",
            project_id: "talon-test",
            private_key_id: "k1",
            private_key: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
            client_email: "cache@talon-test.iam.gserviceaccount.com",
            token_uri: `${stub.url}/_talon/oauth2/token`
          }
          yield* Effect.promise(() => fs.writeFile(keyFile, JSON.stringify(key)))
          const before = (yield* stub.tokenStats()).issued.jwt
          const store = yield* Gcs.make({ endpoint: stub.url, credential: { _tag: "KeyFile", path: keyFile }, policy: fastPolicy })
          yield* store.put(id("jwt/a.txt"), Buffer.from("signed for"))
          expect((yield* collect(store.getRange(id("jwt/a.txt"), 0, 6))).toString()).toBe("signed")
          expect((yield* stub.tokenStats()).issued.jwt).toBe(before + 1)

          yield* Effect.promise(() => fs.writeFile(keyFile, JSON.stringify({ ...key, token_uri: `${stub.url}/elsewhere` })))
          const wrongAud = yield* Gcs.make({ endpoint: stub.url, credential: { _tag: "KeyFile", path: keyFile }, policy: fastPolicy })
          const refused = yield* Effect.flip(wrongAud.stat(id("jwt/a.txt")))
          expect(refused.message).toContain("service account cache@talon-test.iam.gserviceaccount.com")

          yield* Effect.promise(() => fs.writeFile(keyFile, "{}"))
          const broken = yield* Gcs.make({ endpoint: stub.url, credential: { _tag: "KeyFile", path: keyFile }, policy: fastPolicy })
          const notAKey = yield* Effect.flip(broken.stat(id("jwt/a.txt")))
          expect(notAKey.message).toContain("is not a service-account key")
          expect(notAKey.message).not.toContain("PRIVATE KEY")
        })
      )
    )
  })
})

describe("GcsConfig", () => {
  it("is absent without any GCS setting, picks the key file, the emulator (anonymous) or the metadata server", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromise(
        Config.option(Gcs.GcsConfig).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
      )
    expect((await read({}))._tag).toBe("None")
    const emulator = await read({ STORAGE_EMULATOR_HOST: "127.0.0.1:4443" })
    expect(emulator).toMatchObject({ value: { endpoint: "http://127.0.0.1:4443", credential: { _tag: "Anonymous" } } })
    const keyed = await read({ GOOGLE_APPLICATION_CREDENTIALS: "/k.json" })
    expect(keyed).toMatchObject({ value: { endpoint: undefined, credential: { _tag: "KeyFile", path: "/k.json" } } })
    const gke = await read({ TALON_GCS_AUTH: "metadata", GCE_METADATA_HOST: "10.0.0.9:8080" })
    expect(gke).toMatchObject({ value: { credential: { _tag: "Metadata", host: "10.0.0.9:8080" } } })
  })
})
