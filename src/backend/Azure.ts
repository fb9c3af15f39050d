import { Config, type ConfigError, Effect, Layer, Option, Redacted, type Scope } from "effect"
import type { ObjectId } from "../core/ids.js"
import { sharedKeyAuthorization } from "./azureSharedKey.js"
import {
  type BackendError,
  BackendRangeError,
  BackendStore,
  type BackendStoreShape,
  type ListOptions,
  type ListPage,
  type ObjectStat
} from "./BackendStore.js"
import { normalizeEtag, quoteEtag } from "./etag.js"
import { contentLength, escapePath, lastModified, parseContentRange } from "./headers.js"
import type { IncomingHttpHeaders } from "node:http"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { defaultPolicy, policyConfig, type RequestPolicy, withRetries } from "./policy.js"
import { type OpenRange, rangeOperations } from "./ranged.js"
import { child, children, errorDocument, parseXml, statusError, text } from "./xml.js"

export type AzureCredential =
  | { readonly _tag: "SharedKey"; readonly key: Redacted.Redacted<string> }
  | { readonly _tag: "Sas"; readonly token: Redacted.Redacted<string> }
  | { readonly _tag: "Anonymous" }

export interface AzureOptions {
  readonly account: string
  /**
   * Blob service root. Default `https://<account>.blob.core.windows.net`; for Azurite or the
   * stub a path-style root such as `http://127.0.0.1:10000/devstoreaccount1`.
   */
  readonly endpoint?: string | undefined
  readonly credential: AzureCredential
  readonly policy: RequestPolicy
  /** Default 2021-12-02. */
  readonly apiVersion?: string | undefined
}

/**
 * `TALON_AZURE_ACCOUNT`, `TALON_AZURE_KEY` (Shared Key, base64), `TALON_AZURE_SAS` (a SAS
 * token, with or without the leading `?`), `TALON_AZURE_ENDPOINT`, plus the request policy
 * under `TALON_AZURE_`. The key wins when both a key and a SAS are set; neither means
 * anonymous (public containers).
 */
export const AzureConfig: Config.Config<AzureOptions> = Config.all({
  account: Config.string("TALON_AZURE_ACCOUNT"),
  key: Config.option(Config.redacted("TALON_AZURE_KEY")),
  sas: Config.option(Config.redacted("TALON_AZURE_SAS")),
  endpoint: Config.option(Config.string("TALON_AZURE_ENDPOINT")),
  policy: policyConfig("TALON_AZURE")
}).pipe(
  Config.map((c) => ({
    account: c.account,
    endpoint: Option.getOrUndefined(c.endpoint),
    credential: Option.match(c.key, {
      onSome: (key): AzureCredential => ({ _tag: "SharedKey", key }),
      onNone: () =>
        Option.match(c.sas, {
          onSome: (token): AzureCredential => ({ _tag: "Sas", token }),
          onNone: (): AzureCredential => ({ _tag: "Anonymous" })
        })
    }),
    policy: c.policy
  }))
)

const defaultApiVersion = "2021-12-02"

/** Blob names are sent with encodeURIComponent per segment, the same string that is signed. */
const escapeSegment = (segment: string) => encodeURIComponent(segment)

export const make = (options: AzureOptions): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const policy = options.policy
    const transport = yield* makeTransport(policy)
    const base = new URL(options.endpoint ?? `https://${options.account}.blob.core.windows.net`)
    const protocol = base.protocol === "http:" ? "http:" : "https:"
    const port = base.port === "" ? (protocol === "https:" ? 443 : 80) : Number(base.port)
    const basePath = base.pathname.replace(/\/+$/, "")
    const apiVersion = options.apiVersion ?? defaultApiVersion
    const sas =
      options.credential._tag === "Sas" ? Redacted.value(options.credential.token).replace(/^\?/, "") : undefined

    const request = (
      method: OriginRequest["method"],
      container: string,
      blob: string | undefined,
      query: Record<string, string>,
      headers: Record<string, string>,
      body?: Uint8Array
    ): OriginRequest => {
      const path = `${basePath}/${escapeSegment(container)}${blob === undefined ? "" : `/${escapePath(blob, escapeSegment)}`}`
      const all: Record<string, string> = {
        ...headers,
        "x-ms-date": new Date().toUTCString(),
        "x-ms-version": apiVersion
      }
      if (body !== undefined) all["content-length"] = String(body.length)
      if (options.credential._tag === "SharedKey") {
        all.authorization = sharedKeyAuthorization(options.account, Redacted.value(options.credential.key), {
          method,
          path,
          query,
          headers: all
        })
      }
      const params = Object.keys(query).map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(query[k]!)}`)
      if (sas !== undefined && sas !== "") params.push(sas)
      return {
        method,
        protocol,
        hostname: base.hostname,
        port,
        path: params.length === 0 ? path : `${path}?${params.join("&")}`,
        headers: all,
        body
      }
    }

    const labelOf = (object: ObjectId, operation: string): RequestLabel => ({
      object: `az://${object.bucket}/${object.objectPath}`,
      operation
    })

    const failure = (label: RequestLabel, status: number, headers: IncomingHttpHeaders, body: Buffer) => {
      const doc = errorDocument(body.toString("utf8"))
      return statusError(label, status, doc.code ?? header(headers, "x-ms-error-code"), doc.message)
    }

    const stat = (object: ObjectId): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "GetBlobProperties")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const res = yield* transport.fetch(request("HEAD", object.bucket, object.objectPath, {}, {}), label)
          if (res.status !== 200) return yield* Effect.fail(failure(label, res.status, res.headers, res.body))
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
          const headers: Record<string, string> = { "x-ms-range": `bytes=${from}-${to}` }
          if (ifMatch !== undefined) headers["if-match"] = quoteEtag(ifMatch)
          const res = yield* transport.open(request("GET", object.bucket, object.objectPath, {}, headers), label)
          if (res.status === 206 || res.status === 200) {
            const range = parseContentRange(header(res.headers, "content-range"))
            return {
              start: res.status === 206 ? (range.start ?? from) : 0,
              size: res.status === 206 ? range.size : contentLength(res.headers),
              version: normalizeEtag(header(res.headers, "etag")) || undefined,
              body: res.body
            }
          }
          const body = yield* transport.readBody(res, label)
          if (res.status === 416) {
            const size = parseContentRange(header(res.headers, "content-range")).size
            return yield* Effect.fail(new BackendRangeError({ object: label.object, offset, length, size }))
          }
          return yield* Effect.fail(failure(label, res.status, res.headers, body))
        })

    const { getRange, openRange } = rangeOperations({
      operation: "GetBlob",
      labelOf,
      opener,
      stat,
      policy,
      runtime: yield* Effect.runtime<never>()
    })

    const list = (container: string, listOptions?: ListOptions): Effect.Effect<ListPage, BackendError> => {
      const label: RequestLabel = { object: `az://${container}/${listOptions?.prefix ?? ""}`, operation: "ListBlobs" }
      const query: Record<string, string> = { restype: "container", comp: "list" }
      if (listOptions?.prefix) query.prefix = listOptions.prefix
      if (listOptions?.delimiter) query.delimiter = listOptions.delimiter
      if (listOptions?.token) query.marker = listOptions.token
      if (listOptions?.maxKeys !== undefined) query.maxresults = String(listOptions.maxKeys)
      return withRetries(
        policy,
        Effect.gen(function* () {
          const res = yield* transport.fetch(request("GET", container, undefined, query, {}), label)
          if (res.status !== 200) return yield* Effect.fail(failure(label, res.status, res.headers, res.body))
          const result = child(parseXml(res.body.toString("utf8")), "EnumerationResults")
          const blobs = child(result, "Blobs")
          const next = text(child(result, "NextMarker"))?.trim()
          return {
            objects: children(blobs, "Blob").map((blob) => {
              const properties = child(blob, "Properties")
              return {
                key: text(child(blob, "Name")) ?? "",
                size: Number(text(child(properties, "Content-Length")) ?? 0),
                version: normalizeEtag(text(child(properties, "Etag")))
              }
            }),
            commonPrefixes: children(blobs, "BlobPrefix").map((p) => text(child(p, "Name")) ?? ""),
            nextToken: next ? next : undefined
          }
        })
      )
    }

    const put = (object: ObjectId, body: Uint8Array): Effect.Effect<ObjectStat, BackendError> => {
      const label = labelOf(object, "PutBlob")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const res = yield* transport.fetch(
            request(
              "PUT",
              object.bucket,
              object.objectPath,
              {},
              { "x-ms-blob-type": "BlockBlob", "content-type": "application/octet-stream" },
              body
            ),
            label
          )
          if (res.status !== 201 && res.status !== 200) return yield* Effect.fail(failure(label, res.status, res.headers, res.body))
          return { size: body.length, version: normalizeEtag(header(res.headers, "etag")) }
        })
      ).pipe(Effect.flatMap((s) => (s.version === "" ? stat(object) : Effect.succeed(s))))
    }

    const del = (object: ObjectId): Effect.Effect<void, BackendError> => {
      const label = labelOf(object, "DeleteBlob")
      return withRetries(
        policy,
        Effect.gen(function* () {
          const res = yield* transport.fetch(request("DELETE", object.bucket, object.objectPath, {}, {}), label)
          // Idempotent like S3: deleting what is already gone succeeds.
          if (res.status === 404 || (res.status >= 200 && res.status < 300)) return
          return yield* Effect.fail(failure(label, res.status, res.headers, res.body))
        })
      )
    }

    return { stat, getRange, openRange, list, put, delete: del } satisfies BackendStoreShape
  })

export const layer = (options: AzureOptions): Layer.Layer<BackendStore> => Layer.scoped(BackendStore, make(options))

export const layerConfig: Layer.Layer<BackendStore, ConfigError.ConfigError> = Layer.scoped(
  BackendStore,
  Effect.flatMap(AzureConfig, make)
)

/** Azurite's (and the emulator's) published development account. Not a secret. */
export const devAccount = {
  account: "devstoreaccount1",
  key: "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
} as const

/** Options for a local origin (Azurite, the stub): path-style root `<endpoint>/<account>`, Shared Key. */
export const localOptions = (endpoint: string, account: { account: string; key: string } = devAccount): AzureOptions => ({
  account: account.account,
  endpoint: `${endpoint.replace(/\/+$/, "")}/${account.account}`,
  credential: { _tag: "SharedKey", key: Redacted.make(account.key) },
  policy: defaultPolicy
})
