import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, layer } from "@effect/vitest"
import { Chunk, ConfigProvider, Context, Effect, Layer, Stream } from "effect"
import * as Azure from "../../src/backend/Azure.js"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import * as S3 from "../../src/backend/S3.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { OriginStub } from "../../src/origin/index.js"
import { backendContract, ContractTarget } from "./contract.js"
import { tempDir } from "./servers.js"

const bucket = "talon-contract"

/** The origin stub over a temp root with one bucket (a directory, visible to both protocols). */
const stubLayer = Layer.unwrapScoped(
  Effect.gen(function* () {
    const root = yield* tempDir("talon-stub-")
    yield* Effect.promise(() => fs.mkdir(path.join(root, bucket)))
    return OriginStub.layer({ root, port: 0 })
  })
).pipe(Layer.orDie)

const target = (provider: "s3" | "azure") =>
  Layer.scoped(
    ContractTarget,
    Effect.gen(function* () {
      const stub = yield* OriginStub
      const store = provider === "s3" ? yield* S3.make(S3.localOptions(stub.url)) : yield* Azure.make(Azure.localOptions(stub.url))
      return { store, backend: provider === "s3" ? Backend.S3 : Backend.Azure, bucket }
    })
  ).pipe(Layer.provide(stubLayer))

backendContract("S3 backend against the origin stub", target("s3"))
backendContract("Azure backend against the origin stub", target("azure"))

const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

class Stub extends Context.Tag("test/Stub")<Stub, { readonly url: string }>() {}
const routed = Layer.merge(
  Layer.effect(Stub, Effect.map(OriginStub, (s) => ({ url: s.url }))),
  Layer.unwrapEffect(Effect.map(OriginStub, (s) => Router.layerLocal(s.url)))
).pipe(Layer.provide(stubLayer))

layer(routed, { excludeTestServices: true, timeout: "30 seconds" })("Router over the origin stub", (it) => {
  describe("dispatch by ObjectId.backend", () => {
    it.effect("an object written as s3:// is read back as az:// through the same router", () =>
      Effect.gen(function* () {
        const store = yield* BackendStore
        const key = `router/${Date.now()}/both ways.bin`
        const s3Object: ObjectId = { backend: Backend.S3, bucket, objectPath: key }
        const azObject: ObjectId = { backend: Backend.Azure, bucket, objectPath: key }
        const body = Buffer.from("one origin, two protocols")
        yield* store.put(s3Object, body)
        const [viaS3, viaAz] = [yield* store.stat(s3Object), yield* store.stat(azObject)]
        expect(viaS3.size).toBe(body.length)
        expect(viaAz.size).toBe(body.length)
        expect((yield* collect(store.getRange(azObject, 4, 6))).toString()).toBe("origin")
        const s3List = yield* store.list(bucket, { prefix: key, backend: Backend.S3 })
        const azList = yield* store.list(bucket, { prefix: key, backend: Backend.Azure })
        expect(s3List.objects.map((o) => o.key)).toEqual([key])
        expect(azList.objects.map((o) => o.key)).toEqual([key])
      })
    )

    it.effect("list without a backend is refused when both are configured", () =>
      Effect.gen(function* () {
        const store = yield* BackendStore
        const error = yield* Effect.flip(store.list(bucket))
        expect(error).toMatchObject({ _tag: "BackendRequestError", retryable: false })
        expect(error.message).toContain("options.backend")
      })
    )

    it.effect("a missing GCS object is BackendNotFound naming its gs:// URI", () =>
      Effect.gen(function* () {
        const store = yield* BackendStore
        const error = yield* Effect.flip(store.stat({ backend: Backend.Gcs, bucket, objectPath: "x" }))
        expect(error).toMatchObject({ _tag: "BackendNotFound" })
        expect(error.message).toContain("gs://")
      })
    )
  })

  describe("configuration", () => {
    it.effect("TALON_S3_* alone configures only S3; az:// objects then fail naming the missing settings", () =>
      Effect.gen(function* () {
        const { url } = yield* Stub
        const env = new Map([
          ["TALON_S3_ENDPOINT", url],
          ["TALON_S3_ACCESS_KEY_ID", "k"],
          ["TALON_S3_SECRET_ACCESS_KEY", "s"]
        ])
        const store = yield* Effect.provide(
          BackendStore,
          Router.layerConfig.pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env))))
        )
        const key = `config/${Date.now()}`
        yield* store.put({ backend: Backend.S3, bucket, objectPath: key }, Buffer.from("x"))
        expect((yield* store.list(bucket, { prefix: key })).objects.length).toBe(1)
        const error = yield* Effect.flip(store.stat({ backend: Backend.Azure, bucket, objectPath: key }))
        expect(error.message).toContain("TALON_AZURE_")
      }).pipe(Effect.scoped)
    )

    it.effect("TALON_AZURE_* with an endpoint and key configures Azure", () =>
      Effect.gen(function* () {
        const { url } = yield* Stub
        const env = new Map([
          ["TALON_AZURE_ACCOUNT", Azure.devAccount.account],
          ["TALON_AZURE_KEY", Azure.devAccount.key],
          ["TALON_AZURE_ENDPOINT", `${url}/${Azure.devAccount.account}`],
          ["TALON_AZURE_TIMEOUT_MS", "5000"]
        ])
        const options = yield* Effect.withConfigProvider(Router.RouterConfig, ConfigProvider.fromMap(env))
        expect(options.s3).toBeUndefined()
        expect(options.azure?.policy.timeoutMs).toBe(5000)
        expect(String(options.azure?.credential._tag === "SharedKey" && options.azure.credential.key)).not.toContain(
          Azure.devAccount.key
        )
        const store = Router.route({ azure: yield* Azure.make(options.azure!) })
        const key = `config-az/${Date.now()}`
        yield* store.put({ backend: Backend.Azure, bucket, objectPath: key }, Buffer.from("xyz"))
        expect((yield* store.stat({ backend: Backend.Azure, bucket, objectPath: key })).size).toBe(3)
      }).pipe(Effect.scoped)
    )

    it.effect("TALON_GCS_ENDPOINT with the metadata server at GCE_METADATA_HOST configures GCS alone; s3:// then names TALON_S3_*", () =>
      Effect.gen(function* () {
        const { url } = yield* Stub
        const env = new Map([
          ["TALON_GCS_ENDPOINT", url],
          ["GCE_METADATA_HOST", new URL(url).host]
        ])
        const options = yield* Effect.withConfigProvider(Router.RouterConfig, ConfigProvider.fromMap(env))
        expect(options.s3).toBeUndefined()
        expect(options.azure).toBeUndefined()
        expect(options.gcs?.credential).toEqual({ _tag: "Metadata", host: new URL(url).host })
        const store = yield* Router.make(options)
        const key = `config-gs/${Date.now()}`
        yield* store.put({ backend: Backend.Gcs, bucket, objectPath: key }, Buffer.from("gcs"))
        expect((yield* store.list(bucket, { prefix: key })).objects.map((o) => o.key)).toEqual([key])
        const error = yield* Effect.flip(store.stat({ backend: Backend.S3, bucket, objectPath: key }))
        expect(error.message).toContain("TALON_S3_")
      }).pipe(Effect.scoped)
    )
  })
})
