/**
 * The official @azure/storage-blob client runs the origin issue's SDK suite against the
 * gateway, auth on (its Shared Key verified), on both routes; every body is checked by
 * SHA-256 against the origin behind the gateway.
 */
import { azureSdkSuite } from "../support/sdkSuite.js"
import { azureWriteSuite } from "../support/sdkWrites.js"
import { sdkOnBothRoutes } from "./fixtures/sdkRoutes.js"

sdkOnBothRoutes("azure", "Azure Blob SDK", (it) => {
  azureSdkSuite(it)
  azureWriteSuite(it)
})
