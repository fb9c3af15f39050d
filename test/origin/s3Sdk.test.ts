/**
 * The official AWS SDK v3 S3 client, unchanged apart from endpoint and dummy
 * credentials, against the origin stub (the shared suite in test/support/sdkSuite.ts,
 * which also runs against the gateway).
 */
import { layer } from "@effect/vitest"
import { Layer } from "effect"
import { originSdkTarget } from "../support/originTarget.js"
import { s3SdkSuite } from "../support/sdkSuite.js"
import { s3WriteSuite } from "../support/sdkWrites.js"
import { TestOrigin } from "./fixtures/testOrigin.js"

layer(originSdkTarget.pipe(Layer.provide(TestOrigin())), { excludeTestServices: true })("S3 SDK against the origin stub", (it) => {
  s3SdkSuite(it)
  s3WriteSuite(it)
})
