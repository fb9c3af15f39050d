/**
 * User metadata stored and returned by the origin stub itself (S3 and Azure SDKs; the shared
 * suite in test/support/sdkMetadata.ts, which also runs against the gateway).
 */
import { layer } from "@effect/vitest"
import { Layer } from "effect"
import { originSdkTarget } from "../support/originTarget.js"
import { metadataSuite } from "../support/sdkMetadata.js"
import { TestOrigin } from "./fixtures/testOrigin.js"

layer(originSdkTarget.pipe(Layer.provide(TestOrigin())), { excludeTestServices: true })("user metadata at the origin stub", (it) => {
  metadataSuite(it)
})
