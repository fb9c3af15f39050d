import { Effect, Layer } from "effect"
import { AZURITE_ACCOUNT, AZURITE_KEY, OriginStub } from "../../src/origin/OriginStub.js"
import { type Endpoint, SdkTarget } from "./sdkSuite.js"

/** The stub's S3 and Azure endpoints (it accepts any credentials). */
export const stubEndpoint = (stub: { readonly url: string; readonly azureUrl: string }): Endpoint => ({
  s3Url: stub.url,
  s3Credentials: { accessKeyId: "test", secretAccessKey: "test" },
  azureUrl: stub.azureUrl,
  azureCredentials: { account: AZURITE_ACCOUNT, key: AZURITE_KEY }
})

/** The SDK suite's target when the origin stub itself is under test. */
export const originSdkTarget: Layer.Layer<SdkTarget, never, OriginStub> = Layer.effect(
  SdkTarget,
  Effect.map(OriginStub, (stub) => ({ name: "origin stub", endpoint: stubEndpoint(stub), origin: stubEndpoint(stub), full: true }))
)
