import { createHash } from "node:crypto"
import { Sha256 } from "@aws-crypto/sha256-js"
import { SignatureV4 } from "@smithy/signature-v4"
import { Config, type ConfigError, Effect, Layer, Option, Redacted, type Scope } from "effect"
import type { ObjectId } from "../core/ids.js"
import {
  type BackendError,
  BackendRangeError,
  BackendRequestError,
  BackendStore,
  type BackendStoreShape,
  type ListOptions,
  type ListPage,
  type ObjectStat
} from "./BackendStore.js"
import { normalizeEtag, quoteEtag } from "./etag.js"
import {
  contentLength,
  escapePath,
  escapeRfc3986,
  lastModified,
  parseContentRange,
  queryString
} from "./headers.js"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { defaultPolicy, policyConfig, type RequestPolicy, withRetries } from "./policy.js"
import { type OpenRange, rangeOperations } from "./ranged.js"
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
  accessKeyId: withAwsFallback(Config.string("TALON_S3_ACCESS_KEY_ID"), Config.string("AWS_ACCESS_KEY_ID")),
  secretAccessKey: withAwsFallback(
    Config.redacted("TALON_S3_SECRET_ACCESS_KEY"),
    Config.redacted("AWS_SECRET_ACCESS_KEY")
  ),
  sessionToken: Config.option(
    withAwsFallback(Config.redacted("TALON_S3_SESSION_TOKEN"), Config.redacted("AWS_SESSION_TOKEN"))
  ),
  pathStyle: Config.option(Config.boolean("TALON_S3_PATH_STYLE")),
  policy: policyConfig("TALON_S3")
}).pipe(
  Config.map((c) => ({
    endpoint: Option.getOrUndefined(c.endpoint),
    region: c.region,
    accessKeyId: c.accessKeyId,
    secretAccessKey: c.secretAccessKey,
    sessionToken: Option.getOrUndefined(c.sessionToken),
    forcePathStyle: Option.getOrElse(c.pathStyle, () => Option.isSome(c.endpoint)),
    policy: c.policy
  }))
)

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
}

/**
 * Builds and SigV4-signs one S3 request (exported so the signature can be checked against
 * AWS's published examples). The path is encoded once, as S3 expects, and the exact string
 * signed is the string sent.
 */
export const makeS3Signer = (options: S3Options) => {
  const base = new URL(options.endpoint ?? `https://s3.${options.region}.amazonaws.com`)
  const protocol = base.protocol === "http:" ? "http:" : "https:"
  const port = base.port === "" ? (protocol === "https:" ? 443 : 80) : Number(base.port)
  const basePath = base.pathname.replace(/\/+$/, "")
  const signer = new SignatureV4({
    credentials: {
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
      body === undefined || body.length === 0 ? emptySha256 : createHash("sha256").update(body).digest("hex")
    const headers: Record<string, string> = { ...parts.headers, host: hostHeader, "x-amz-content-sha256": payloadHash }
    const signed = await signer.sign(
      { method, protocol, hostname, port, path, query, headers },
      signingDate === undefined ? {} : { signingDate }
    )
    // Content-Length is left unsigned, as AWS's own examples do; the payload hash covers the body.
    const sent = body === undefined ? signed.headers : { ...signed.headers, "content-length": String(body.length) }
    return {
      method,
      protocol,
      hostname,
      port,
      path: path + queryString(query, escapeRfc3986),
      headers: sent,
      body
    }
  }
}

export const make = (options: S3Options): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const policy = options.policy
    const transport = yield* makeTransport(policy)
    const sign = makeS3Signer(options)
    const request = (
      method: OriginRequest["method"],
      bucket: string,
      key: string | undefined,
      query: Record<string, string>,
      headers: Record<string, string>,
      label: RequestLabel,
      body?: Uint8Array
    ): Effect.Effect<OriginRequest, BackendRequestError> =>
      Effect.tryPromise({
        try: () => sign({ method, bucket, key, query, headers, body }),
        catch: (error) =>
          new BackendRequestError({ ...label, retryable: false, detail: `could not sign the request: ${String(error)}` })
      })

    const labelOf = (object: ObjectId, operation: string): RequestLabel => ({
      object: objectUri("s3", object.bucket, object.objectPath),
      operation
    })

    const failure = (label: RequestLabel, status: number, body: Buffer) => {
      const doc = errorDocument(body.toString("utf8"))
      return statusError(label, status, doc.code, doc.message)
    }

    const stat = (object: ObjectId): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "HeadObject")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const req = yield* request("HEAD", object.bucket, object.objectPath, {}, {}, label)
          const res = yield* transport.fetch(req, label)
          if (res.status !== 200) return yield* Effect.fail(failure(label, res.status, res.body))
          return {
            size: contentLength(res.headers) ?? 0,
            version: normalizeEtag(header(res.headers, "etag")),
            lastModified: lastModified(res.headers)
          }
        })
      )
    }

    /** One attempt of a range read: the request for `[from, to]` (pinned by If-Match), its response head. */
    const opener =
      (object: ObjectId, offset: number, length: number, label: RequestLabel): OpenRange =>
      (from, to, ifMatch) =>
        Effect.gen(function* () {
          const headers: Record<string, string> = { range: `bytes=${from}-${to}` }
          if (ifMatch !== undefined) headers["if-match"] = quoteEtag(ifMatch)
          const req = yield* request("GET", object.bucket, object.objectPath, {}, headers, label)
          const res = yield* transport.open(req, label)
          if (res.status === 206 || res.status === 200) {
            const range = parseContentRange(header(res.headers, "content-range"))
            return {
              start: res.status === 206 ? (range.start ?? from) : 0,
              size: res.status === 206 ? range.size : contentLength(res.headers),
              version: normalizeEtag(header(res.headers, "etag")) || undefined,
              body: res.body
            }
          }
          const body = yield* Effect.scoped(transport.readBody(res, label))
          if (res.status === 416) {
            const actual = text(child(child(parseXml(body.toString("utf8")), "Error"), "ActualObjectSize"))
            const size = parseContentRange(header(res.headers, "content-range")).size ?? (actual ? Number(actual) : undefined)
            return yield* Effect.fail(new BackendRangeError({ object: label.object, offset, length, size }))
          }
          return yield* Effect.fail(failure(label, res.status, body))
        })

    const { getRange, openRange } = rangeOperations({
      operation: "GetObject",
      labelOf,
      opener,
      stat,
      policy,
      runtime: yield* Effect.runtime<never>()
    })

    const list = (bucket: string, listOptions?: ListOptions): Effect.Effect<ListPage, BackendError> => {
      const label: RequestLabel = { object: `s3://${bucket}/${listOptions?.prefix ?? ""}`, operation: "ListObjectsV2" }
      const query: Record<string, string> = { "list-type": "2" }
      if (listOptions?.prefix) query.prefix = listOptions.prefix
      if (listOptions?.delimiter) query.delimiter = listOptions.delimiter
      if (listOptions?.token) query["continuation-token"] = listOptions.token
      if (listOptions?.maxKeys !== undefined) query["max-keys"] = String(listOptions.maxKeys)
      return withRetries(
        policy,
        Effect.gen(function* () {
          const req = yield* request("GET", bucket, undefined, query, {}, label)
          const res = yield* transport.fetch(req, label)
          if (res.status !== 200) return yield* Effect.fail(failure(label, res.status, res.body))
          const result = child(parseXml(res.body.toString("utf8")), "ListBucketResult")
          const truncated = text(child(result, "IsTruncated"))?.trim() === "true"
          const next = text(child(result, "NextContinuationToken"))
          return {
            objects: children(result, "Contents").map((entry) => ({
              key: text(child(entry, "Key")) ?? "",
              size: Number(text(child(entry, "Size")) ?? 0),
              version: normalizeEtag(text(child(entry, "ETag")))
            })),
            commonPrefixes: children(result, "CommonPrefixes").map((p) => text(child(p, "Prefix")) ?? ""),
            nextToken: truncated && next ? next : undefined
          }
        })
      )
    }

    const put = (object: ObjectId, body: Uint8Array): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "PutObject")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const req = yield* request(
            "PUT",
            object.bucket,
            object.objectPath,
            {},
            { "content-type": "application/octet-stream" },
            label,
            body
          )
          const res = yield* transport.fetch(req, label)
          if (res.status !== 200 && res.status !== 201) return yield* Effect.fail(failure(label, res.status, res.body))
          const etag = header(res.headers, "etag")
          return { size: body.length, version: normalizeEtag(etag) }
        })
      ).pipe(Effect.flatMap((s) => (s.version === "" ? stat(object) : Effect.succeed(s))))
    }

    const del = (object: ObjectId): Effect.Effect<void, BackendError> => {
      const label = labelOf(object, "DeleteObject")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const req = yield* request("DELETE", object.bucket, object.objectPath, {}, {}, label)
          const res = yield* transport.fetch(req, label)
          // Deleting what is already gone is success, as S3 itself answers.
          if (res.status === 404 || (res.status >= 200 && res.status < 300)) return
          return yield* Effect.fail(failure(label, res.status, res.body))
        })
      )
    }

    return { stat, getRange, openRange, list, put, delete: del } satisfies BackendStoreShape
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
