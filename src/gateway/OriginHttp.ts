/**
 * The few origin calls `BackendStore` does not model, made with the gateway's own
 * origin identity: S3 HeadBucket and ListObjects (V1/V2, passed through so markers,
 * start-after and owners keep the origin's exact semantics), Azure container
 * existence and List Blobs. Bodies are small (one bounded page) and read whole.
 */
import type { IncomingHttpHeaders } from "node:http"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import { sharedKeyAuthorization } from "../backend/azureSharedKey.js"
import { type BackendError, BackendRequestError } from "../backend/BackendStore.js"
import { makeTransport, type OriginRequest, type RequestLabel } from "../backend/http.js"
import { defaultPolicy, withRetries } from "../backend/policy.js"
import type { RouterOptions } from "../backend/Router.js"
import * as S3Backend from "../backend/S3.js"
import { type Forwarder, makeForwarder } from "./forward.js"
import { credentialFailure, makeOriginCredentials } from "./originIdentity.js"

export interface OriginAnswer {
  readonly status: number
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

export interface OriginHttpShape {
  readonly s3Configured: boolean
  readonly azureConfigured: boolean
  /** HEAD `/bucket` at the S3 origin. */
  readonly headBucket: (bucket: string) => Effect.Effect<OriginAnswer, BackendError>
  /** GET `/bucket?<query>` at the S3 origin (a listing). */
  readonly listS3: (bucket: string, query: Record<string, string>) => Effect.Effect<OriginAnswer, BackendError>
  /** Get Container Properties at the Azure origin. */
  readonly headContainer: (container: string) => Effect.Effect<OriginAnswer, BackendError>
  /** List Blobs (`restype=container&comp=list` plus `query`) at the Azure origin. */
  readonly listAzure: (container: string, query: Record<string, string>) => Effect.Effect<OriginAnswer, BackendError>
  /** Streaming pass-through of any request, re-signed with the same identity. */
  readonly forward: Forwarder
}

export class OriginHttp extends Context.Tag("talon/gateway/OriginHttp")<OriginHttp, OriginHttpShape>() {}

const notConfigured = (provider: string, env: string) =>
  Effect.dieMessage(`the gateway has no ${provider} origin configured (set ${env})`)

const AZURE_API_VERSION = "2021-12-02"

export const makeOriginHttp = (options: RouterOptions): Effect.Effect<OriginHttpShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const policy = options.s3?.policy ?? options.azure?.policy ?? defaultPolicy
    const transport = yield* makeTransport(policy)
    // A workload identity (not static keys) signs with tokens the gateway fetches and renews itself.
    const credentials = yield* makeOriginCredentials(options, transport)
    const forward = makeForwarder(options, credentials)
    yield* Effect.addFinalizer(() => Effect.sync(() => forward.close()))

    const s3 = options.s3
    const sign = s3 === undefined ? undefined : S3Backend.makeS3Signer(s3, credentials.s3)
    const s3Call = (method: "GET" | "HEAD", bucket: string, query: Record<string, string>, operation: string) => {
      if (sign === undefined) return notConfigured("S3", "TALON_S3_*")
      const label: RequestLabel = { object: `s3://${bucket}/`, operation }
      return withRetries(
        policy,
        Effect.tryPromise({
          try: () => sign({ method, bucket, key: undefined, query, headers: {} }),
          catch: (e) => {
            const refused = credentialFailure(e)
            if (refused === undefined) return new Error(`cannot sign a request for s3://${bucket}/: ${String(e)}`)
            return new BackendRequestError({ ...label, retryable: refused.retryable, detail: refused.message })
          }
        }).pipe(
          Effect.catchIf((e): e is Error => !(e instanceof BackendRequestError), (e) => Effect.die(e)),
          Effect.flatMap((req) => transport.fetch(req, label))
        )
      )
    }

    const azure = options.azure
    const azureCall = (container: string, query: Record<string, string>, method: "GET" | "HEAD", operation: string) => {
      if (azure === undefined) return notConfigured("Azure", "TALON_AZURE_*")
      const base = new URL(azure.endpoint ?? `https://${azure.account}.blob.core.windows.net`)
      const protocol = base.protocol === "http:" ? "http:" : "https:"
      const port = base.port === "" ? (protocol === "https:" ? 443 : 80) : Number(base.port)
      const path = `${base.pathname.replace(/\/+$/, "")}/${encodeURIComponent(container)}`
      const headers: Record<string, string> = { "x-ms-date": new Date().toUTCString(), "x-ms-version": AZURE_API_VERSION }
      if (azure.credential._tag === "SharedKey") {
        headers.authorization = sharedKeyAuthorization(azure.account, Redacted.value(azure.credential.key), {
          method,
          path,
          query,
          headers
        })
      }
      const params = Object.keys(query).map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(query[k]!)}`)
      if (azure.credential._tag === "Sas") params.push(Redacted.value(azure.credential.token).replace(/^\?/, ""))
      const req: OriginRequest = {
        method,
        protocol,
        hostname: base.hostname,
        port,
        path: params.length === 0 ? path : `${path}?${params.join("&")}`,
        headers
      }
      const label: RequestLabel = { object: `az://${container}/`, operation }
      const authorize = credentials.azureAuthorization
      if (authorize === undefined) return withRetries(policy, transport.fetch(req, label))
      const authorized = Effect.tryPromise({
        try: authorize,
        catch: (e) => {
          const refused = credentialFailure(e)
          return new BackendRequestError({ ...label, retryable: refused?.retryable ?? false, detail: refused?.message ?? String(e) })
        }
      })
      return withRetries(
        policy,
        Effect.flatMap(authorized, (authorization) => transport.fetch({ ...req, headers: { ...headers, authorization } }, label))
      )
    }

    return {
      s3Configured: s3 !== undefined,
      azureConfigured: azure !== undefined,
      headBucket: (bucket) => s3Call("HEAD", bucket, {}, "HeadBucket"),
      listS3: (bucket, query) => s3Call("GET", bucket, query, "ListObjects"),
      headContainer: (container) => azureCall(container, { restype: "container" }, "HEAD", "GetContainerProperties"),
      listAzure: (container, query) =>
        azureCall(container, { ...query, restype: "container", comp: "list" }, "GET", "ListBlobs"),
      forward
    } satisfies OriginHttpShape
  })

export const layer = (options: RouterOptions): Layer.Layer<OriginHttp> => Layer.scoped(OriginHttp, makeOriginHttp(options))
