/**
 * The official AWS SDK v3 S3 client runs the origin issue's SDK suite against the
 * gateway, auth on (its SigV4 verified), on both routes; every body is checked by
 * SHA-256 against the origin behind the gateway.
 */
import { s3SdkSuite } from "../support/sdkSuite.js"
import { s3WriteSuite } from "../support/sdkWrites.js"
import { sdkOnBothRoutes } from "./fixtures/sdkRoutes.js"

sdkOnBothRoutes("s3", "S3 SDK", (it) => {
  s3SdkSuite(it)
  s3WriteSuite(it)
})
