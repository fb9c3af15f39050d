import {
  AccountSASPermissions,
  AccountSASResourceTypes,
  AccountSASServices,
  BlobServiceClient,
  generateAccountSASQueryParameters,
  SASProtocol,
  StorageSharedKeyCredential
} from "@azure/storage-blob"
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import * as Azure from "../../src/backend/Azure.js"
import { Backend } from "../../src/core/ids.js"
import { backendContract, ContractTarget, expectTerminal } from "./contract.js"
import { Azurite, azuriteLayer } from "./servers.js"

const container = "talon-contract"
const credential = new StorageSharedKeyCredential(Azure.devAccount.account, Azure.devAccount.key)

/** The container is made with the official SDK, so our client is not testing itself. */
const createContainer = (endpoint: string, name: string) =>
  Effect.promise(() =>
    new BlobServiceClient(`${endpoint}/${Azure.devAccount.account}`, credential).getContainerClient(name).create()
  )

const sharedKeyTarget = Layer.scoped(
  ContractTarget,
  Effect.gen(function* () {
    const { endpoint } = yield* Azurite
    yield* createContainer(endpoint, container)
    const store = yield* Azure.make(Azure.localOptions(endpoint))
    return { store, backend: Backend.Azure, bucket: container }
  })
).pipe(Layer.provide(azuriteLayer))

const sasTarget = Layer.scoped(
  ContractTarget,
  Effect.gen(function* () {
    const { endpoint } = yield* Azurite
    yield* createContainer(endpoint, container)
    const sas = generateAccountSASQueryParameters(
      {
        services: AccountSASServices.parse("b").toString(),
        resourceTypes: AccountSASResourceTypes.parse("sco").toString(),
        permissions: AccountSASPermissions.parse("rwdlac"),
        protocol: SASProtocol.HttpsAndHttp,
        expiresOn: new Date(Date.now() + 3600_000)
      },
      credential
    ).toString()
    const store = yield* Azure.make({
      ...Azure.localOptions(endpoint),
      credential: { _tag: "Sas", token: Redacted.make(`?${sas}`) }
    })
    return { store, backend: Backend.Azure, bucket: container }
  })
).pipe(Layer.provide(azuriteLayer))

backendContract("Azure backend (Shared Key) against Azurite", sharedKeyTarget)
backendContract("Azure backend (SAS from the official SDK) against Azurite", sasTarget)

layer(azuriteLayer, { excludeTestServices: true, timeout: "60 seconds" })("Azure credentials against Azurite", (it) => {
  describe("authentication is really checked", () => {
    it.effect("a wrong Shared Key is a 403 that is not retried", () =>
      Effect.gen(function* () {
        const { endpoint } = yield* Azurite
        yield* createContainer(endpoint, "auth")
        const wrongKey = Buffer.alloc(64, 7).toString("base64")
        const store = yield* Azure.make(Azure.localOptions(endpoint, { account: Azure.devAccount.account, key: wrongKey }))
        const error = yield* Effect.flip(store.list("auth"))
        expect(expectTerminal(error, 403).message).toContain("az://auth/")
      }).pipe(Effect.scoped)
    )

    it.effect("no credential at all is refused for a private container", () =>
      Effect.gen(function* () {
        const { endpoint } = yield* Azurite
        yield* createContainer(endpoint, "private")
        const store = yield* Azure.make({ ...Azure.localOptions(endpoint), credential: { _tag: "Anonymous" } })
        const error = yield* Effect.flip(store.put({ backend: Backend.Azure, bucket: "private", objectPath: "x" }, new Uint8Array(1)))
        expect(error._tag === "BackendRequestError" || error._tag === "BackendNotFound").toBe(true)
        if (error._tag === "BackendRequestError") expect(error.retryable).toBe(false)
      }).pipe(Effect.scoped)
    )
  })
})
