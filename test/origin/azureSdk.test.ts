/**
 * The official @azure/storage-blob client, unchanged apart from the endpoint and
 * Azurite's well-known credentials, against the origin stub; plus the cross-protocol
 * contract (S3 writes readable through Azure and vice versa). The suite is shared with
 * the gateway's tests (test/support/sdkSuite.ts).
 */
import { layer } from "@effect/vitest"
import { Layer } from "effect"
import { originSdkTarget } from "../support/originTarget.js"
import { azureSdkSuite } from "../support/sdkSuite.js"
import { azureWriteSuite } from "../support/sdkWrites.js"
import { TestOrigin } from "./fixtures/testOrigin.js"

layer(originSdkTarget.pipe(Layer.provide(TestOrigin())), { excludeTestServices: true })(
  "Azure Blob SDK against the origin stub",
  (it) => {
    azureSdkSuite(it)
    azureWriteSuite(it)
  }
)
