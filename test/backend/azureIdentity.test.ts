/**
 * The Azure backend on Entra ID bearer tokens from the origin stub's emulated token endpoints
 * (a federated token file, as AKS workload identity projects it, and the managed identity
 * endpoint): fetched, used, replaced after a 401, refused grants named, no token in a log.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { describe, expect, it, layer } from "@effect/vitest"
import { Chunk, ConfigProvider, Effect, Layer, Logger, LogLevel, Stream } from "effect"
import * as Azure from "../../src/backend/Azure.js"
import type { AzureIdentity } from "../../src/backend/azureIdentity.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { OriginStub, type OriginStubShape } from "../../src/origin/index.js"
import { tempDir } from "./servers.js"

const container = "talon-az"
const fastPolicy = { timeoutMs: 5_000, retries: 2, retryBaseMs: 1, retryMaxMs: 5, maxSockets: 8 }

const stubLayer = Layer.unwrapScoped(
  Effect.gen(function* () {
    const root = yield* tempDir("talon-az-stub-")
    yield* Effect.promise(() => fs.mkdir(path.join(root, container)))
    return OriginStub.layer({ root, port: 0 })
  })
).pipe(Layer.orDie)

const id = (objectPath: string): ObjectId => ({ backend: Backend.Azure, bucket: container, objectPath })
const collect = <E>(stream: Stream.Stream<Uint8Array, E>) =>
  Effect.map(Stream.runCollect(stream), (chunks) => Buffer.concat(Chunk.toArray(chunks)))

const captureLogs = <A, E, R>(effect: Effect.Effect<A, E, R>, lines: Array<string>) =>
  effect.pipe(
    Effect.provide(Logger.replace(Logger.defaultLogger, Logger.make(({ message, cause }) => void lines.push(`${JSON.stringify(message)} ${String(cause)}`)))),
    Logger.withMinimumLogLevel(LogLevel.All)
  )

const identityFor = (stub: OriginStubShape, flow: "entra" | "msi") =>
  Effect.gen(function* () {
    if (flow === "msi") return { _tag: "ManagedIdentity", endpoint: stub.url } satisfies AzureIdentity
    const dir = yield* tempDir("talon-akswi-")
    const tokenFile = path.join(dir, "azure-identity-token")
    yield* Effect.promise(() => fs.writeFile(tokenFile, "eyJhbGciOiJSUzI1NiJ9.federated.sig"))
    return { _tag: "WorkloadIdentity", tenantId: "00000000-1111-2222-3333-444444444444", clientId: "app-1", tokenFile, authorityHost: `${stub.url}/_talon/entra` } satisfies AzureIdentity
  })

const storeWith = (stub: OriginStubShape, identity: AzureIdentity) =>
  Azure.make({ account: "devstoreaccount1", endpoint: stub.azureUrl, credential: { _tag: "Identity", identity }, policy: fastPolicy })

layer(stubLayer, { excludeTestServices: true, timeout: "30 seconds" })("Azure on workload and managed identity", (it) => {
  for (const flow of ["entra", "msi"] as const) {
    it.effect(`${flow}: a token is fetched once, used, replaced after a 401, and never logged`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          yield* stub.setTokens({ ttlSeconds: 3600, honourSeconds: 3600, refuse: false })
          const lines: Array<string> = []
          const store = yield* captureLogs(storeWith(stub, yield* identityFor(stub, flow)), lines)
          const before = (yield* stub.tokenStats()).issued[flow]
          yield* captureLogs(store.put(id(`${flow}/a.txt`), Buffer.from("federated")), lines)
          expect((yield* captureLogs(collect(store.getRange(id(`${flow}/a.txt`), 0, 4)), lines)).toString()).toBe("fede")
          expect((yield* stub.tokenStats()).issued[flow]).toBe(before + 1)

          yield* stub.expireTokens()
          const rejected = (yield* stub.tokenStats()).rejected
          expect((yield* captureLogs(store.stat(id(`${flow}/a.txt`)), lines)).size).toBe(9)
          const after = yield* stub.tokenStats()
          expect(after.rejected).toBe(rejected + 1)
          expect(after.issued[flow]).toBe(before + 2)

          expect(lines.length).toBeGreaterThan(0)
          for (const line of lines) expect(line).not.toContain("stub-aad-")
        })
      )
    )

    it.effect(`${flow}: a refused grant fails the request naming the source`, () =>
      Effect.scoped(
        Effect.gen(function* () {
          const stub = yield* OriginStub
          const store = yield* storeWith(stub, yield* identityFor(stub, flow))
          yield* stub.setTokens({ refuse: true })
          const error = yield* Effect.flip(store.stat(id("nothing"))).pipe(Effect.ensuring(stub.setTokens({ refuse: false })))
          expect(error.message).toContain(flow === "entra" ? "could not get credentials from Entra ID at" : "could not get credentials from the Azure managed identity endpoint")
          expect(error.message).toContain(flow === "entra" ? "AADSTS70021" : "Identity not found")
        })
      )
    )
  }

  it.effect("a token the origin keeps refusing ends in a 401 that says what to check", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const stub = yield* OriginStub
        const store = yield* storeWith(stub, yield* identityFor(stub, "msi"))
        yield* stub.setTokens({ honourSeconds: 0 })
        const error = yield* Effect.flip(store.stat(id("x"))).pipe(Effect.ensuring(stub.setTokens({ honourSeconds: 3600 })))
        expect(error).toMatchObject({ _tag: "BackendRequestError", status: 401 })
        expect(error.message).toContain("Azure refused the bearer token from the Azure managed identity endpoint")
        expect(error.message).toContain("Storage Blob Data Reader")
      })
    )
  )
})

describe("AzureConfig identity", () => {
  it("AKS's injected variables select workload identity; a key wins over them; managed identity only when asked", async () => {
    const read = (env: Record<string, string>) =>
      Effect.runPromise(Azure.AzureConfig.pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))))
    const aks = { TALON_AZURE_ACCOUNT: "acct", AZURE_FEDERATED_TOKEN_FILE: "/var/run/secrets/azure/tokens/azure-identity-token", AZURE_CLIENT_ID: "c", AZURE_TENANT_ID: "t" }
    expect((await read(aks)).credential).toEqual({
      _tag: "Identity",
      identity: { _tag: "WorkloadIdentity", tenantId: "t", clientId: "c", tokenFile: aks.AZURE_FEDERATED_TOKEN_FILE, authorityHost: "https://login.microsoftonline.com" }
    })
    expect((await read({ ...aks, TALON_AZURE_KEY: "a2V5" })).credential._tag).toBe("SharedKey")
    expect((await read({ TALON_AZURE_ACCOUNT: "acct", TALON_AZURE_AUTH: "managed-identity", TALON_AZURE_IMDS_ENDPOINT: "http://127.0.0.1:1" })).credential).toEqual({
      _tag: "Identity",
      identity: { _tag: "ManagedIdentity", endpoint: "http://127.0.0.1:1", clientId: undefined }
    })
  })
})
