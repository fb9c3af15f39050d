import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import * as S3 from "../../src/backend/S3.js"
import { Backend } from "../../src/core/ids.js"
import { backendContract, ContractTarget, expectTerminal } from "./contract.js"
import { S3rver, s3rverLayer } from "./servers.js"

const keys = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" }
const bucket = "talon-contract"

const target = Layer.scoped(
  ContractTarget,
  Effect.gen(function* () {
    const { endpoint } = yield* S3rver
    const store = yield* S3.make(S3.localOptions(endpoint, keys))
    // s3rver ignores If-Match on GET.
    return { store, backend: Backend.S3, bucket, lacks: ["conditionalReads"] as const }
  })
).pipe(Layer.provide(s3rverLayer(bucket)))

backendContract("S3 backend against s3rver", target)

layer(s3rverLayer(bucket), { excludeTestServices: true, timeout: "60 seconds" })("S3 credentials against s3rver", (it) => {
  describe("access keys are checked", () => {
    it.effect("an unknown access key id is a 403 (InvalidAccessKeyId) that is not retried", () =>
      Effect.gen(function* () {
        const { endpoint } = yield* S3rver
        const store = yield* S3.make(S3.localOptions(endpoint, { accessKeyId: "NOPE", secretAccessKey: "x" }))
        const error = yield* Effect.flip(store.list(bucket))
        expect(expectTerminal(error, 403).detail).toContain("InvalidAccessKeyId")
      }).pipe(Effect.scoped)
    )
  })
})
