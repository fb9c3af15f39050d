import { createHash } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import type { Readable } from "node:stream"
import { Sha256 } from "@aws-crypto/sha256-js"
import { SignatureV4 } from "@smithy/signature-v4"
import { Cause, Config, ConfigError, Effect, Either, Layer, Option, Redacted, Runtime, type Scope } from "effect"
import { type AwsIdentity, awsCredentialSource, DEFAULT_IMDS_ENDPOINT } from "./awsIdentity.js"
import { cachedTokens, CredentialError } from "./bearerTokens.js"
import type { ObjectId } from "../core/ids.js"
import type { BackendError, BackendStoreShape, ListOptions, ListPage, ObjectStat } from "./BackendStore.js"
import { BackendRequestError, BackendStore } from "./BackendStore.js"
import { normalizeEtag, quoteEtag } from "./etag.js"
import { escapePath, escapeRfc3986, listedDate, parseContentRange, queryString } from "./headers.js"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { listQuery, originBase, originCalls, type RequestOf } from "./originCalls.js"
import { defaultPolicy, policyConfig, type RequestPolicy } from "./policy.js"
import { child, children, errorDocument, parseXml, statusError, text } from "./xml.js"

export interface S3Options {
  /** e.g. `http://127.0.0.1:9100`; unset means AWS (`https://s3.<region>.amazonaws.com`). */
  readonly endpoint?: string | undefined
  readonly region: string
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted<string>
  readonly sessionToken?: Redacted.Redacted<string> | undefined
  /** `/<bucket>/<key>` instead of `<bucket>.<host>/<key>`. */
  readonly forcePathStyle: boolean
  readonly policy: RequestPolicy
  /**
   * Temporary credentials from a workload identity (awsIdentity.ts) instead of the static
   * key pair above, which is then unused.
   */
  readonly identity?: AwsIdentity | undefined
}

const withAwsFallback = <A>(talon: Config.Config<A>, aws: Config.Config<A>) => talon.pipe(Config.orElse(() => aws))

/**
 * `TALON_S3_ENDPOINT`, `TALON_S3_REGION` (us-east-1), `TALON_S3_ACCESS_KEY_ID`,
 * `TALON_S3_SECRET_ACCESS_KEY`, `TALON_S3_SESSION_TOKEN` (the AWS_* names are accepted as
 * fallbacks), `TALON_S3_PATH_STYLE` (default: true when an endpoint is set), plus the
 * request policy under `TALON_S3_` (see policy.ts).
 */
export const S3Config: Config.Config<S3Options> = Config.all({
  endpoint: Config.option(Config.string("TALON_S3_ENDPOINT")),
  region: withAwsFallback(Config.string("TALON_S3_REGION"), Config.string("AWS_REGION")).pipe(
    Config.withDefault("us-east-1")
  ),
  keys: Config.option(
    Config.all({
      accessKeyId: withAwsFallback(Config.string("TALON_S3_ACCESS_KEY_ID"), Config.string("AWS_ACCESS_KEY_ID")),
      secretAccessKey: withAwsFallback(Config.redacted("TALON_S3_SECRET_ACCESS_KEY"), Config.redacted("AWS_SECRET_ACCESS_KEY"))
    })
  ),
  sessionToken: Config.option(
    withAwsFallback(Config.redacted("TALON_S3_SESSION_TOKEN"), Config.redacted("AWS_SESSION_TOKEN"))
  ),
  pathStyle: Config.option(Config.boolean("TALON_S3_PATH_STYLE")),
  policy: policyConfig("TALON_S3"),
  auth: Config.option(Config.literal("static", "web-identity", "imds")("TALON_S3_AUTH")),
  roleArn: Config.option(Config.string("AWS_ROLE_ARN")),
  tokenFile: Config.option(Config.string("AWS_WEB_IDENTITY_TOKEN_FILE")),
  sessionName: Config.string("AWS_ROLE_SESSION_NAME").pipe(Config.withDefault("talon")),
  sts: Config.option(withAwsFallback(Config.string("TALON_S3_STS_ENDPOINT"), Config.string("AWS_ENDPOINT_URL_STS"))),
  imds: Config.string("AWS_EC2_METADATA_SERVICE_ENDPOINT").pipe(Config.withDefault(DEFAULT_IMDS_ENDPOINT))
}).pipe(
  Config.mapOrFail((c) => {
    // AWS's own order: static keys, then a web identity, then instance metadata (only when asked for).
    const webIdentity = Option.isSome(c.roleArn) && Option.isSome(c.tokenFile)
    const mode = Option.getOrElse(c.auth, () => (Option.isSome(c.keys) ? "static" : webIdentity ? "web-identity" : undefined))
    if (mode === undefined) return Either.left(ConfigError.MissingData(["TALON_S3_ACCESS_KEY_ID"], "S3 is not configured"))
    if (mode === "static" && Option.isNone(c.keys)) {
      return Either.left(ConfigError.MissingData(["TALON_S3_ACCESS_KEY_ID"], "TALON_S3_AUTH=static needs TALON_S3_ACCESS_KEY_ID and TALON_S3_SECRET_ACCESS_KEY"))
    }
    if (mode === "web-identity" && !webIdentity) {
      return Either.left(ConfigError.InvalidData(["TALON_S3_AUTH"], "TALON_S3_AUTH=web-identity needs AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE"))
    }
    const identity: AwsIdentity | undefined =
      mode === "web-identity"
        ? {
            _tag: "WebIdentity",
            roleArn: Option.getOrThrow(c.roleArn),
            tokenFile: Option.getOrThrow(c.tokenFile),
            sessionName: c.sessionName,
            stsEndpoint: Option.getOrElse(c.sts, () => `https://sts.${c.region}.amazonaws.com`)
          }
        : mode === "imds"
          ? { _tag: "Imds", endpoint: c.imds }
          : undefined
    return Either.right({
      endpoint: Option.getOrUndefined(c.endpoint),
      region: c.region,
      accessKeyId: Option.match(c.keys, { onNone: () => "", onSome: (k) => k.accessKeyId }),
      secretAccessKey: Option.match(c.keys, { onNone: () => Redacted.make(""), onSome: (k) => k.secretAccessKey }),
      sessionToken: identity === undefined ? Option.getOrUndefined(c.sessionToken) : undefined,
      forcePathStyle: Option.getOrElse(c.pathStyle, () => Option.isSome(c.endpoint)),
      policy: c.policy,
      identity
    })
  })
)

/** S3's answers to session credentials that no longer hold. */
const expiredCodes = new Set(["ExpiredToken", "TokenRefreshRequired", "InvalidToken"])

const emptySha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

export const objectUri = (scheme: string, bucket: string, key: string) => `${scheme}://${bucket}/${key}`

export interface S3RequestParts {
  readonly method: OriginRequest["method"]
  readonly bucket: string
  /** Undefined for bucket-level requests (listing). */
  readonly key?: string | undefined
  readonly query: Record<string, string>
  readonly headers: Record<string, string>
  readonly body?: Uint8Array | undefined
  /** A streamed body of this many bytes (sent as UNSIGNED-PAYLOAD: its hash is not known up front). */
  readonly stream?: { readonly source: Readable; readonly length: number } | undefined
}

/**
 * Builds and SigV4-signs one S3 request (exported so the signature can be checked against
 * AWS's published examples). The path is encoded once, as S3 expects, and the exact string
 * signed is the string sent.
 */
/** What the signer takes from a workload identity at each signature. */
type SigningCredentials = () => Promise<{ readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken?: string }>

export const makeS3Signer = (options: S3Options, credentials?: SigningCredentials) => {
  const { url: base, protocol, port, basePath } = originBase(options.endpoint ?? `https://s3.${options.region}.amazonaws.com`)
  const signer = new SignatureV4({
    credentials: credentials ?? {
      accessKeyId: options.accessKeyId,
      secretAccessKey: Redacted.value(options.secretAccessKey),
      ...(options.sessionToken === undefined ? {} : { sessionToken: Redacted.value(options.sessionToken) })
    },
    region: options.region,
    service: "s3",
    sha256: Sha256,
    // S3 signs the path as sent, not double-encoded.
    uriEscapePath: false,
    applyChecksum: true
  })
  return async (parts: S3RequestParts, signingDate?: Date): Promise<OriginRequest> => {
    const { method, bucket, key, query, body } = parts
    const hostname = options.forcePathStyle ? base.hostname : `${bucket}.${base.hostname}`
    const hostHeader = base.port === "" ? hostname : `${hostname}:${port}`
    const objectPart = key === undefined ? "" : `/${escapePath(key, escapeRfc3986)}`
    const path = options.forcePathStyle
      ? `${basePath}/${escapeRfc3986(bucket)}${objectPart}`
      : `${basePath}${objectPart === "" ? "/" : objectPart}`
    const payloadHash =
      parts.stream !== undefined
        ? "UNSIGNED-PAYLOAD"
        : body === undefined || body.length === 0
          ? emptySha256
          : createHash("sha256").update(body).digest("hex")
    const headers: Record<string, string> = { ...parts.headers, host: hostHeader, "x-amz-content-sha256": payloadHash }
    const signed = await signer.sign(
      { method, protocol, hostname, port, path, query, headers },
      signingDate === undefined ? {} : { signingDate }
    )
    // Content-Length is left unsigned, as AWS's own examples do; the payload hash covers the body.
    const length = parts.stream?.length ?? body?.length
    const sent = length === undefined ? signed.headers : { ...signed.headers, "content-length": String(length) }
    return {
      method,
      protocol,
      hostname,
      port,
      path: path + queryString(query, escapeRfc3986),
      headers: sent,
      body,
      stream: parts.stream?.source
    }
  }
}

export const make = (options: S3Options): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const identity =
      options.identity === undefined ? undefined : yield* cachedTokens(awsCredentialSource(yield* makeTransport(options.policy), options.identity))
    // The signer asks for credentials at every signature; the cache answers from memory.
    const sign = makeS3Signer(
      options,
      identity === undefined
        ? undefined
        : () =>
            Runtime.runPromise(runtime)(
              Effect.map(identity.get, (c) => ({
                accessKeyId: c.accessKeyId,
                secretAccessKey: Redacted.value(c.secretAccessKey),
                sessionToken: Redacted.value(c.sessionToken)
              }))
            )
    )
    const request = (
      label: RequestLabel,
      parts: Omit<S3RequestParts, "headers" | "query"> & Partial<Pick<S3RequestParts, "headers" | "query">>
    ): RequestOf =>
      Effect.tryPromise({
        try: () => sign({ query: {}, headers: {}, ...parts }),
        catch: (error) => {
          const cause = Runtime.isFiberFailure(error) ? Cause.squash(error[Runtime.FiberFailureCauseId]) : error
          return cause instanceof CredentialError
            ? new BackendRequestError({ ...label, retryable: cause.retryable, detail: cause.message })
            : new BackendRequestError({ ...label, retryable: false, detail: `could not sign the request: ${String(error)}` })
        }
      })
    const calls = yield* originCalls(options.policy, (label, res) => {
      const doc = errorDocument(res.body.toString("utf8"))
      // A HEAD's refusal has no body to name the reason: with temporary credentials, a bare 400/403 may be an expired token.
      const maybeExpired = doc.code === undefined ? res.body.length === 0 && (res.status === 400 || res.status === 403) : expiredCodes.has(doc.code)
      if (identity !== undefined && maybeExpired) {
        // Refused before its expiry (revoked, or the clocks disagree): fetch new credentials for the retry.
        identity.invalidate()
        return new BackendRequestError({
          ...label,
          status: res.status,
          retryable: true,
          detail: `S3 refused the temporary credentials from ${identity.source} (${doc.code ?? `HTTP ${res.status} without a reason: expired, or not allowed`}); new ones are fetched for the next attempt`
        })
      }
      return statusError(label, res.status, doc.code, doc.message)
    })

    const labelOf = (object: ObjectId, operation: string): RequestLabel => ({
      object: objectUri("s3", object.bucket, object.objectPath),
      operation
    })
    const at = (object: ObjectId) => ({ bucket: object.bucket, key: object.objectPath })

    const stat = (object: ObjectId): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "HeadObject")
      return calls.stat(label, request(label, { method: "HEAD", ...at(object) }))
    }

    const rangeRequest = (object: ObjectId, label: RequestLabel, from: number, to: number, ifMatch: string | undefined) => {
      const headers: Record<string, string> = { range: `bytes=${from}-${to}` }
      if (ifMatch !== undefined) headers["if-match"] = quoteEtag(ifMatch)
      return request(label, { method: "GET", ...at(object), headers })
    }
    const sizeOf416 = (res: { readonly headers: IncomingHttpHeaders; readonly body: Buffer }) => {
      const actual = text(child(child(parseXml(res.body.toString("utf8")), "Error"), "ActualObjectSize"))
      return parseContentRange(header(res.headers, "content-range")).size ?? (actual ? Number(actual) : undefined)
    }

    const { getRange, openRange, pushRange } = calls.ranges("GetObject", labelOf, rangeRequest, sizeOf416, stat)

    const list = (bucket: string, listOptions?: ListOptions): Effect.Effect<ListPage, BackendError> => {
      const label: RequestLabel = { object: `s3://${bucket}/${listOptions?.prefix ?? ""}`, operation: "ListObjectsV2" }
      const query = listQuery({ "list-type": "2" }, listOptions, { token: "continuation-token", maxKeys: "max-keys" })
      return calls.call(label, request(label, { method: "GET", bucket, query }), (status) => status === 200, (res) => {
        const result = child(parseXml(res.body.toString("utf8")), "ListBucketResult")
        const truncated = text(child(result, "IsTruncated"))?.trim() === "true"
        const next = text(child(result, "NextContinuationToken"))
        return {
          objects: children(result, "Contents").map((entry) => ({
            key: text(child(entry, "Key")) ?? "",
            size: Number(text(child(entry, "Size")) ?? 0),
            version: normalizeEtag(text(child(entry, "ETag"))),
            lastModified: listedDate(text(child(entry, "LastModified")))
          })),
          commonPrefixes: children(result, "CommonPrefixes").map((p) => text(child(p, "Prefix")) ?? ""),
          nextToken: truncated && next ? next : undefined
        }
      })
    }

    const put = (object: ObjectId, body: Uint8Array): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "PutObject")
      const headers = { "content-type": "application/octet-stream" }
      return calls.put(label, request(label, { method: "PUT", ...at(object), headers, body }), body.length, stat(object))
    }

    const putStream = (object: ObjectId, length: number, source: Readable): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "PutObject")
      const headers = { "content-type": "application/octet-stream" }
      const req = request(label, { method: "PUT", ...at(object), headers, stream: { source, length } })
      return calls.putOnce(label, req, length, stat(object))
    }

    const del = (object: ObjectId): Effect.Effect<void, BackendError> => {
      const label = labelOf(object, "DeleteObject")
      return calls.remove(label, request(label, { method: "DELETE", ...at(object) }))
    }

    return { stat, getRange, openRange, pushRange, list, put, putStream, delete: del } satisfies BackendStoreShape
  })

export const layer = (options: S3Options): Layer.Layer<BackendStore> => Layer.scoped(BackendStore, make(options))

export const layerConfig: Layer.Layer<BackendStore, ConfigError.ConfigError> = Layer.scoped(
  BackendStore,
  Effect.flatMap(S3Config, make)
)

/** Options for a local origin (the stub, s3rver): any static key pair, path-style. */
export const localOptions = (endpoint: string, credentials?: { accessKeyId: string; secretAccessKey: string }): S3Options => ({
  endpoint,
  region: "us-east-1",
  accessKeyId: credentials?.accessKeyId ?? "talon",
  secretAccessKey: Redacted.make(credentials?.secretAccessKey ?? "talon-secret"),
  forcePathStyle: true,
  policy: defaultPolicy
})
