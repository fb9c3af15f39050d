import type { Readable } from "node:stream"
import type { IncomingHttpHeaders } from "node:http"
import { Config, type ConfigError, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { type AzureIdentity, azureTokenSource, DEFAULT_AUTHORITY_HOST, DEFAULT_AZURE_IMDS_ENDPOINT } from "./azureIdentity.js"
import { bearer, cachedTokens } from "./bearerTokens.js"
import { BackendRequestError } from "./BackendStore.js"
import type { ObjectId } from "../core/ids.js"
import { sharedKeyAuthorization } from "./azureSharedKey.js"
import type { BackendError, BackendStoreShape, ListOptions, ListPage, ObjectStat } from "./BackendStore.js"
import { BackendStore } from "./BackendStore.js"
import { normalizeEtag, quoteEtag } from "./etag.js"
import { escapePath, listedDate, parseContentRange } from "./headers.js"
import { header, makeTransport, type OriginRequest, type RequestLabel } from "./http.js"
import { listQuery, originBase, originCalls, type RequestOf } from "./originCalls.js"
import { defaultPolicy, policyConfig, type RequestPolicy } from "./policy.js"
import { child, children, errorDocument, parseXml, statusError, text } from "./xml.js"

export type AzureCredential =
  | { readonly _tag: "SharedKey"; readonly key: Redacted.Redacted<string> }
  | { readonly _tag: "Sas"; readonly token: Redacted.Redacted<string> }
  | { readonly _tag: "Anonymous" }
  /** Entra ID bearer tokens from a workload or managed identity (azureIdentity.ts). */
  | { readonly _tag: "Identity"; readonly identity: AzureIdentity }

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
  policy: policyConfig("TALON_AZURE"),
  auth: Config.option(Config.literal("shared-key", "sas", "workload-identity", "managed-identity", "anonymous")("TALON_AZURE_AUTH")),
  tokenFile: Config.option(Config.string("AZURE_FEDERATED_TOKEN_FILE")),
  clientId: Config.option(Config.string("AZURE_CLIENT_ID")),
  tenantId: Config.option(Config.string("AZURE_TENANT_ID")),
  authorityHost: Config.string("AZURE_AUTHORITY_HOST").pipe(Config.withDefault(DEFAULT_AUTHORITY_HOST)),
  imds: Config.string("TALON_AZURE_IMDS_ENDPOINT").pipe(Config.withDefault(DEFAULT_AZURE_IMDS_ENDPOINT))
}).pipe(
  Config.map((c) => ({
    account: c.account,
    endpoint: Option.getOrUndefined(c.endpoint),
    credential: identityOf(c) ?? Option.match(c.key, {
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

/**
 * A workload identity when asked for (`TALON_AZURE_AUTH=workload-identity`) or when AKS injected
 * its variables (`AZURE_FEDERATED_TOKEN_FILE`, `AZURE_CLIENT_ID`, `AZURE_TENANT_ID`) and no key or
 * SAS is set; a managed identity only when asked for.
 */
function identityOf(c: {
  readonly auth: Option.Option<string>
  readonly key: Option.Option<unknown>
  readonly sas: Option.Option<unknown>
  readonly tokenFile: Option.Option<string>
  readonly clientId: Option.Option<string>
  readonly tenantId: Option.Option<string>
  readonly authorityHost: string
  readonly imds: string
}): AzureCredential | undefined {
  const auth = Option.getOrUndefined(c.auth)
  if (auth === "managed-identity") {
    return { _tag: "Identity", identity: { _tag: "ManagedIdentity", endpoint: c.imds, clientId: Option.getOrUndefined(c.clientId) } }
  }
  const federated = Option.isSome(c.tokenFile) && Option.isSome(c.clientId) && Option.isSome(c.tenantId)
  if (auth === "workload-identity" || (auth === undefined && federated && Option.isNone(c.key) && Option.isNone(c.sas))) {
    return {
      _tag: "Identity",
      identity: {
        _tag: "WorkloadIdentity",
        tenantId: Option.getOrElse(c.tenantId, () => ""),
        clientId: Option.getOrElse(c.clientId, () => ""),
        tokenFile: Option.getOrElse(c.tokenFile, () => ""),
        authorityHost: c.authorityHost
      }
    }
  }
  if (auth === "anonymous") return { _tag: "Anonymous" }
  return undefined
}

const defaultApiVersion = "2021-12-02"

/** Blob names are sent with encodeURIComponent per segment, the same string that is signed. */
const escapeSegment = (segment: string) => encodeURIComponent(segment)

export const make = (options: AzureOptions): Effect.Effect<BackendStoreShape, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { hostname, protocol, port, basePath } = originBase(
      options.endpoint ?? `https://${options.account}.blob.core.windows.net`
    )
    const apiVersion = options.apiVersion ?? defaultApiVersion
    const sas =
      options.credential._tag === "Sas" ? Redacted.value(options.credential.token).replace(/^\?/, "") : undefined
    const tokens =
      options.credential._tag === "Identity"
        ? yield* cachedTokens(azureTokenSource(yield* makeTransport(options.policy), options.credential.identity))
        : undefined

    /** Built when an attempt starts, so each retry carries its own x-ms-date (and signature). */
    const request = (
      method: OriginRequest["method"],
      container: string,
      blob: string | undefined,
      query: Record<string, string>,
      headers: Record<string, string>,
      body?: Uint8Array,
      stream?: { readonly source: Readable; readonly length: number }
    ): RequestOf =>
      Effect.gen(function* () {
        const token =
          tokens === undefined
            ? undefined
            : yield* Effect.mapError(
                tokens.get,
                (e) => new BackendRequestError({ object: `az://${container}/${blob ?? ""}`, operation: method, retryable: e.retryable, detail: e.message })
              )
        const path = `${basePath}/${escapeSegment(container)}${blob === undefined ? "" : `/${escapePath(blob, escapeSegment)}`}`
        const all: Record<string, string> = {
          ...headers,
          "x-ms-date": new Date().toUTCString(),
          "x-ms-version": apiVersion
        }
        const length = stream?.length ?? body?.length
        if (length !== undefined) all["content-length"] = String(length)
        if (token !== undefined) all.authorization = bearer(token)
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
          hostname,
          port,
          path: params.length === 0 ? path : `${path}?${params.join("&")}`,
          headers: all,
          body,
          stream: stream?.source
        }
      })
    const calls = yield* originCalls(options.policy, (label, res) => {
      const doc = errorDocument(res.body.toString("utf8"))
      const code = doc.code ?? header(res.headers, "x-ms-error-code")
      if (tokens !== undefined && res.status === 401) {
        // Expired early or revoked: drop it, so the retry carries a fresh token.
        tokens.invalidate()
        return new BackendRequestError({
          ...label,
          status: 401,
          retryable: true,
          detail: `Azure refused the bearer token from ${tokens.source} (${code ?? "unauthorized"}); a fresh token is fetched for the next attempt — if this persists, check the identity's role assignment (Storage Blob Data Reader) and the clock`
        })
      }
      return statusError(label, res.status, code, doc.message)
    })

    const labelOf = (object: ObjectId, operation: string): RequestLabel => ({
      object: `az://${object.bucket}/${object.objectPath}`,
      operation
    })

    const stat = (object: ObjectId): Effect.Effect<ObjectStat, BackendError> =>
      calls.stat(labelOf(object, "GetBlobProperties"), request("HEAD", object.bucket, object.objectPath, {}, {}))

    const rangeRequest = (object: ObjectId, _label: RequestLabel, from: number, to: number, ifMatch: string | undefined) => {
      const headers: Record<string, string> = { "x-ms-range": `bytes=${from}-${to}` }
      if (ifMatch !== undefined) headers["if-match"] = quoteEtag(ifMatch)
      return request("GET", object.bucket, object.objectPath, {}, headers)
    }
    const sizeOf416 = (res: { readonly headers: IncomingHttpHeaders }) => parseContentRange(header(res.headers, "content-range")).size

    const { getRange, openRange, pushRange } = calls.ranges("GetBlob", labelOf, rangeRequest, sizeOf416, stat)

    const list = (container: string, listOptions?: ListOptions): Effect.Effect<ListPage, BackendError> => {
      const label: RequestLabel = { object: `az://${container}/${listOptions?.prefix ?? ""}`, operation: "ListBlobs" }
      const query = listQuery({ restype: "container", comp: "list" }, listOptions, { token: "marker", maxKeys: "maxresults" })
      return calls.call(label, request("GET", container, undefined, query, {}), (status) => status === 200, (res) => {
        const result = child(parseXml(res.body.toString("utf8")), "EnumerationResults")
        const blobs = child(result, "Blobs")
        const next = text(child(result, "NextMarker"))?.trim()
        return {
          objects: children(blobs, "Blob").map((blob) => {
            const properties = child(blob, "Properties")
            return {
              key: text(child(blob, "Name")) ?? "",
              size: Number(text(child(properties, "Content-Length")) ?? 0),
              version: normalizeEtag(text(child(properties, "Etag"))),
              lastModified: listedDate(text(child(properties, "Last-Modified")))
            }
          }),
          commonPrefixes: children(blobs, "BlobPrefix").map((p) => text(child(p, "Name")) ?? ""),
          nextToken: next ? next : undefined
        }
      })
    }

    const put = (object: ObjectId, body: Uint8Array): Effect.Effect<ObjectStat, BackendError> => {
      const headers = { "x-ms-blob-type": "BlockBlob", "content-type": "application/octet-stream" }
      const req = request("PUT", object.bucket, object.objectPath, {}, headers, body)
      return calls.put(labelOf(object, "PutBlob"), req, body.length, stat(object))
    }

    const putStream = (object: ObjectId, length: number, source: Readable): Effect.Effect<ObjectStat, BackendError> => {
      const headers = { "x-ms-blob-type": "BlockBlob", "content-type": "application/octet-stream" }
      const req = request("PUT", object.bucket, object.objectPath, {}, headers, undefined, { source, length })
      return calls.putOnce(labelOf(object, "PutBlob"), req, length, stat(object))
    }

    const del = (object: ObjectId): Effect.Effect<void, BackendError> =>
      calls.remove(labelOf(object, "DeleteBlob"), request("DELETE", object.bucket, object.objectPath, {}, {}))

    return { stat, getRange, openRange, pushRange, list, put, putStream, delete: del } satisfies BackendStoreShape
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
