/**
 * Google Cloud Storage over its JSON API: object metadata (`GET …/o/<name>`), media
 * download with a Range (`?alt=media`), listing with `pageToken`, media upload and delete.
 * An object's version is its **generation** (a number GCS bumps on every overwrite, as
 * Talon does), and a pinned read sends `ifGenerationMatch`, so a replaced object answers 412
 * like an S3 If-Match does and the worker gives the same VersionMismatch.
 */
import type { IncomingHttpHeaders } from "node:http"
import type { Readable } from "node:stream"
import { Config, ConfigError, type ConfigError as ConfigErrorT, Effect, Either, Layer, Option, type Redacted, type Scope } from "effect"
import type { ObjectId } from "../core/ids.js"
import type { UserMetadata } from "../core/userMetadata.js"
import { bearer, cachedTokens, type CachedTokens } from "./bearerTokens.js"
import type { BackendError, BackendStoreShape, ListOptions, ListPage, ObjectStat } from "./BackendStore.js"
import { BackendNotFound, BackendRequestError, BackendStore } from "./BackendStore.js"
import { DEFAULT_METADATA_HOST, type GcsCredential, gcsTokenSource } from "./gcsAuth.js"
import { listedDate, parseContentRange } from "./headers.js"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { type BufferedResponse, listQuery, originBase, originCalls, type RequestOf } from "./originCalls.js"
import { defaultPolicy, policyConfig, type RequestPolicy } from "./policy.js"
import { statusError } from "./xml.js"

export type { GcsCredential } from "./gcsAuth.js"

export interface GcsOptions {
  /** JSON API root; default `https://storage.googleapis.com`. */
  readonly endpoint?: string | undefined
  readonly credential: GcsCredential
  readonly policy: RequestPolicy
}

export const DEFAULT_GCS_ENDPOINT = "https://storage.googleapis.com"

/** `STORAGE_EMULATOR_HOST` may be `host:port` or a URL, as Google's SDKs accept it. */
const asUrl = (hostOrUrl: string) => (/^[a-z]+:\/\//i.test(hostOrUrl) ? hostOrUrl : `http://${hostOrUrl}`)

const authModes = ["key-file", "metadata", "none"] as const

/**
 * `TALON_GCS_ENDPOINT` (else `STORAGE_EMULATOR_HOST`), `TALON_GCS_CREDENTIALS_FILE` (else
 * `GOOGLE_APPLICATION_CREDENTIALS`: a service-account key), `TALON_GCS_AUTH`
 * (key-file | metadata | none), `TALON_GCS_METADATA_HOST` (else `GCE_METADATA_HOST`), plus the
 * request policy under `TALON_GCS_`. Without an explicit mode: a key file if one is named,
 * anonymous against an emulator, else the metadata server (GKE workload identity). GCS is
 * configured when any of the endpoint, key file or mode is set; otherwise it is absent.
 */
export const GcsConfig: Config.Config<GcsOptions> = Config.all({
  endpoint: Config.option(Config.string("TALON_GCS_ENDPOINT")),
  emulator: Config.option(Config.string("STORAGE_EMULATOR_HOST")),
  keyFile: Config.option(Config.string("TALON_GCS_CREDENTIALS_FILE").pipe(Config.orElse(() => Config.string("GOOGLE_APPLICATION_CREDENTIALS")))),
  auth: Config.option(Config.literal(...authModes)("TALON_GCS_AUTH")),
  metadataHost: Config.string("TALON_GCS_METADATA_HOST").pipe(
    Config.orElse(() => Config.string("GCE_METADATA_HOST")),
    Config.withDefault(DEFAULT_METADATA_HOST)
  ),
  policy: policyConfig("TALON_GCS")
}).pipe(
  Config.mapOrFail((c) => {
    if (Option.isNone(c.endpoint) && Option.isNone(c.emulator) && Option.isNone(c.keyFile) && Option.isNone(c.auth)) {
      return Either.left(ConfigError.MissingData(["TALON_GCS_AUTH"], "GCS is not configured"))
    }
    const mode = Option.getOrElse(c.auth, () =>
      Option.isSome(c.keyFile) ? "key-file" : Option.isNone(c.endpoint) && Option.isSome(c.emulator) ? "none" : "metadata"
    )
    if (mode === "key-file" && Option.isNone(c.keyFile)) {
      return Either.left(
        ConfigError.InvalidData(["TALON_GCS_AUTH"], "TALON_GCS_AUTH=key-file needs TALON_GCS_CREDENTIALS_FILE (or GOOGLE_APPLICATION_CREDENTIALS)")
      )
    }
    const credential: GcsCredential =
      mode === "key-file"
        ? { _tag: "KeyFile", path: Option.getOrThrow(c.keyFile) }
        : mode === "metadata"
          ? { _tag: "Metadata", host: c.metadataHost }
          : { _tag: "Anonymous" }
    const endpoint = Option.orElse(c.endpoint, () => Option.map(c.emulator, asUrl))
    return Either.right({ endpoint: Option.getOrUndefined(endpoint), credential, policy: c.policy })
  })
)

/** GCS's error document: `{"error": {"code", "message", "errors": [{"reason"}]}}`. */
const errorOf = (body: Buffer): { readonly reason?: string | undefined; readonly message?: string | undefined } => {
  try {
    const doc = JSON.parse(body.toString("utf8")) as { error?: { message?: unknown; errors?: Array<{ reason?: unknown }> } }
    const reason = doc.error?.errors?.[0]?.reason
    const message = doc.error?.message
    return { reason: typeof reason === "string" ? reason : undefined, message: typeof message === "string" ? message : undefined }
  } catch {
    return {}
  }
}

const generationOf = (headers: IncomingHttpHeaders): string => header(headers, "x-goog-generation") ?? ""

interface ObjectResource {
  readonly name?: string
  readonly size?: string
  readonly generation?: string
  readonly updated?: string
  readonly metadata?: Record<string, unknown>
}

const parseJson = <A>(res: BufferedResponse): A => {
  try {
    return JSON.parse(res.body.toString("utf8")) as A
  } catch {
    return {} as A
  }
}

const metadataOf = (resource: ObjectResource): UserMetadata | undefined => {
  if (resource.metadata === undefined || resource.metadata === null) return undefined
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(resource.metadata)) if (typeof value === "string") out[name.toLowerCase()] = value
  return Object.keys(out).length === 0 ? undefined : out
}

const statFrom = (resource: ObjectResource): ObjectStat => {
  const metadata = metadataOf(resource)
  return {
    size: Number(resource.size ?? 0),
    version: resource.generation ?? "",
    lastModified: listedDate(resource.updated),
    ...(metadata === undefined ? {} : { metadata })
  }
}

const enc = encodeURIComponent

export const make = (options: GcsOptions): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { hostname, protocol, port, basePath } = originBase(options.endpoint ?? DEFAULT_GCS_ENDPOINT)
    const source = gcsTokenSource(yield* makeTransport(options.policy), options.credential)
    const tokens: CachedTokens<Redacted.Redacted<string>> | undefined =
      source === undefined ? undefined : yield* cachedTokens(source)

    const request = (
      label: RequestLabel,
      method: OriginRequest["method"],
      path: string,
      query: Record<string, string>,
      headers: Record<string, string>,
      body?: Uint8Array,
      stream?: { readonly source: Readable; readonly length: number }
    ): RequestOf =>
      Effect.gen(function* () {
        const all: Record<string, string> = { ...headers }
        if (tokens !== undefined) {
          const token = yield* Effect.mapError(
            tokens.get,
            (e) => new BackendRequestError({ ...label, retryable: e.retryable, detail: e.message })
          )
          all.authorization = bearer(token)
        }
        const length = stream?.length ?? body?.length
        if (length !== undefined) all["content-length"] = String(length)
        const params = Object.keys(query).map((k) => `${enc(k)}=${enc(query[k]!)}`)
        return {
          method,
          protocol,
          hostname,
          port,
          path: params.length === 0 ? `${basePath}${path}` : `${basePath}${path}?${params.join("&")}`,
          headers: all,
          body,
          stream: stream?.source
        }
      })

    const calls = yield* originCalls(
      options.policy,
      (label, res) => {
        const doc = errorOf(res.body)
        if (res.status === 404) return new BackendNotFound({ object: label.object })
        if (res.status === 401 && tokens !== undefined) {
          // The token expired early or was revoked: drop it, so the retry carries a fresh one.
          tokens.invalidate()
          return new BackendRequestError({
            ...label,
            status: 401,
            retryable: true,
            detail: `GCS refused the bearer token from ${tokens.source} (${doc.message ?? "invalid credentials"}); a fresh token is fetched for the next attempt — if this persists, check that the service account may read the bucket and that the clock is right`
          })
        }
        return statusError(label, res.status, doc.reason, doc.message)
      },
      generationOf
    )

    const objectPath = (object: ObjectId) => `/storage/v1/b/${enc(object.bucket)}/o/${enc(object.objectPath)}`
    const labelOf = (object: ObjectId, operation: string): RequestLabel => ({
      object: `gs://${object.bucket}/${object.objectPath}`,
      operation
    })

    const stat = (object: ObjectId): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "objects.get")
      return calls.call(label, request(label, "GET", objectPath(object), {}, {}), (s) => s === 200, (res) =>
        statFrom(parseJson<ObjectResource>(res))
      )
    }

    const rangeRequest = (object: ObjectId, label: RequestLabel, from: number, to: number, ifMatch: string | undefined) => {
      const query: Record<string, string> = { alt: "media" }
      if (ifMatch !== undefined) query.ifGenerationMatch = ifMatch
      return request(label, "GET", objectPath(object), query, { range: `bytes=${from}-${to}` })
    }
    const sizeOf416 = (res: { readonly headers: IncomingHttpHeaders }) => parseContentRange(header(res.headers, "content-range")).size

    const { getRange, openRange, pushRange } = calls.ranges("objects.get(media)", labelOf, rangeRequest, sizeOf416, stat)

    const list = (bucket: string, listOptions?: ListOptions): Effect.Effect<ListPage, BackendError> => {
      const label: RequestLabel = { object: `gs://${bucket}/${listOptions?.prefix ?? ""}`, operation: "objects.list" }
      const query = listQuery({}, listOptions, { token: "pageToken", maxKeys: "maxResults" })
      return calls.call(label, request(label, "GET", `/storage/v1/b/${enc(bucket)}/o`, query, {}), (s) => s === 200, (res) => {
        const page = parseJson<{ items?: Array<ObjectResource>; prefixes?: Array<string>; nextPageToken?: string }>(res)
        return {
          objects: (page.items ?? []).map((item) => ({
            key: item.name ?? "",
            size: Number(item.size ?? 0),
            version: item.generation ?? "",
            lastModified: listedDate(item.updated)
          })),
          commonPrefixes: page.prefixes ?? [],
          nextToken: page.nextPageToken ? page.nextPageToken : undefined
        }
      })
    }

    const uploadPath = (object: ObjectId) => `/upload/storage/v1/b/${enc(object.bucket)}/o`
    const uploadQuery = (object: ObjectId) => ({ uploadType: "media", name: object.objectPath })
    const uploadHeaders = { "content-type": "application/octet-stream" }

    const put = (object: ObjectId, body: Uint8Array): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "objects.insert")
      const req = request(label, "POST", uploadPath(object), uploadQuery(object), uploadHeaders, body)
      return calls
        .call(label, req, (s) => s === 200 || s === 201, (res) => ({ ...statFrom(parseJson<ObjectResource>(res)), size: body.length }))
        .pipe(Effect.flatMap((s) => (s.version === "" ? stat(object) : Effect.succeed(s))))
    }

    const putStream = (object: ObjectId, length: number, source: Readable): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "objects.insert")
      const req = request(label, "POST", uploadPath(object), uploadQuery(object), uploadHeaders, undefined, { source, length })
      return calls.putOnce(label, req, length, stat(object))
    }

    const del = (object: ObjectId): Effect.Effect<void, BackendError> => {
      const label = labelOf(object, "objects.delete")
      return calls.remove(label, request(label, "DELETE", objectPath(object), {}, {}))
    }

    return { stat, getRange, openRange, pushRange, list, put, putStream, delete: del } satisfies BackendStoreShape
  })

export const layer = (options: GcsOptions): Layer.Layer<BackendStore> => Layer.scoped(BackendStore, make(options))

export const layerConfig: Layer.Layer<BackendStore, ConfigErrorT.ConfigError> = Layer.scoped(
  BackendStore,
  Effect.flatMap(GcsConfig, make)
)

/**
 * Options for the origin stub at `url`: its JSON API front end, with tokens from the stub's
 * own metadata-server emulation (the stub refuses requests without a token it issued).
 */
export const localOptions = (url: string): GcsOptions => ({
  endpoint: url,
  credential: { _tag: "Metadata", host: url },
  policy: defaultPolicy
})
