/**
 * Requests the gateway does not answer from the cache (writes, multipart, copies, bucket and
 * container administration) go to the origin as they came, re-signed with the gateway's own
 * origin identity. The body streams through with backpressure (never buffered whole), so an
 * upload of any size costs the gateway a few socket buffers.
 */
import { Sha256 } from "@aws-crypto/sha256-js"
import { SignatureV4 } from "@smithy/signature-v4"
import { Redacted } from "effect"
import * as http from "node:http"
import * as https from "node:https"
import type { Readable } from "node:stream"
import { sharedKeyAuthorization } from "../backend/azureSharedKey.js"
import { escapePath, escapeRfc3986, queryString } from "../backend/headers.js"
import type { RouterOptions } from "../backend/Router.js"
import type { OriginCredentials } from "./originIdentity.js"

export interface ForwardRequest {
  readonly method: string
  readonly bucket: string
  /** Decoded key or blob name; undefined for bucket/container requests, and `bucket` "" for account requests. */
  readonly key: string | undefined
  /** Decoded query parameters, the client's signature parameters already removed. */
  readonly query: ReadonlyArray<readonly [string, string]>
  /** Lower-case header names to send (besides the signature the forwarder adds). */
  readonly headers: Record<string, string>
  readonly body: Readable | undefined
}

export interface Forwarder {
  readonly s3Configured: boolean
  readonly azureConfigured: boolean
  /** Sends the request; resolves with the origin's response head (the body still streaming). */
  readonly s3: (request: ForwardRequest, signal: AbortSignal) => Promise<http.IncomingMessage>
  readonly azure: (request: ForwardRequest, signal: AbortSignal) => Promise<http.IncomingMessage>
  /** The URL of a blob at the Azure origin (a Copy Blob source the origin can read). */
  readonly azureBlobUrl: (container: string, blob: string) => string | undefined
  /** Whether `provider` is signed for with a workload identity's temporary credentials. */
  readonly temporaryCredentials: (provider: "s3" | "azure") => boolean
  /** The origin refused `provider`'s temporary credentials: the next request fetches new ones. */
  readonly credentialsRefused: (provider: "s3" | "azure") => void
  readonly close: () => void
}

export class NotConfigured extends Error {}

const base = (endpoint: string) => {
  const url = new URL(endpoint)
  const protocol = url.protocol === "http:" ? "http:" : "https:"
  const port = url.port === "" ? (protocol === "https:" ? 443 : 80) : Number(url.port)
  return { url, protocol, port, path: url.pathname.replace(/\/+$/, "") } as const
}

const asRecord = (query: ReadonlyArray<readonly [string, string]>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [k, v] of query) out[k] = v
  return out
}

export const makeForwarder = (options: RouterOptions, credentials: OriginCredentials = {}): Forwarder => {
  const agentOptions = { keepAlive: true, maxSockets: 256, maxFreeSockets: 32 }
  const httpAgent = new http.Agent(agentOptions)
  const httpsAgent = new https.Agent(agentOptions)

  const send = (
    target: { protocol: "http:" | "https:"; hostname: string; port: number; path: string; headers: Record<string, string> },
    method: string,
    body: Readable | undefined,
    signal: AbortSignal
  ): Promise<http.IncomingMessage> =>
    new Promise((resolve, reject) => {
      const module = target.protocol === "https:" ? https : http
      const req = module.request({
        method,
        hostname: target.hostname,
        port: target.port,
        path: target.path,
        headers: target.headers,
        agent: target.protocol === "https:" ? httpsAgent : httpAgent,
        signal
      })
      req.on("response", resolve)
      req.on("error", reject)
      if (body === undefined) return req.end()
      body.on("error", (e) => req.destroy(e))
      // pipe() keeps the upstream's buffer bounded: the client is read only as fast as the origin takes it.
      body.pipe(req)
    })

  const s3 = options.s3
  const s3Base = s3 === undefined ? undefined : base(s3.endpoint ?? `https://s3.${s3.region}.amazonaws.com`)
  const signer =
    s3 === undefined
      ? undefined
      : new SignatureV4({
          // A workload identity's credentials are asked for at each signature (the cache answers from memory).
          credentials: credentials.s3 ?? {
            accessKeyId: s3.accessKeyId,
            secretAccessKey: Redacted.value(s3.secretAccessKey),
            ...(s3.sessionToken === undefined ? {} : { sessionToken: Redacted.value(s3.sessionToken) })
          },
          region: s3.region,
          service: "s3",
          sha256: Sha256,
          uriEscapePath: false,
          applyChecksum: false
        })

  const azure = options.azure
  const azureBase = azure === undefined ? undefined : base(azure.endpoint ?? `https://${azure.account}.blob.core.windows.net`)
  const azurePath = (container: string, blob: string | undefined) =>
    `${azureBase!.path}${container === "" ? "/" : `/${encodeURIComponent(container)}`}${blob === undefined ? "" : `/${escapePath(blob, encodeURIComponent)}`}`

  return {
    s3Configured: s3 !== undefined,
    azureConfigured: azure !== undefined,
    s3: async (r, signal) => {
      if (s3 === undefined || s3Base === undefined || signer === undefined) throw new NotConfigured("the gateway has no S3 origin configured (set TALON_S3_*)")
      const hostname = s3.forcePathStyle || r.bucket === "" ? s3Base.url.hostname : `${r.bucket}.${s3Base.url.hostname}`
      const objectPart = r.key === undefined ? "" : `/${escapePath(r.key, escapeRfc3986)}`
      const path =
        r.bucket === ""
          ? `${s3Base.path}/`
          : s3.forcePathStyle
            ? `${s3Base.path}/${escapeRfc3986(r.bucket)}${objectPart}`
            : `${s3Base.path}${objectPart === "" ? "/" : objectPart}`
      const query = asRecord(r.query)
      const host = s3Base.url.port === "" ? hostname : `${hostname}:${s3Base.port}`
      const headers = { ...r.headers, host, "x-amz-content-sha256": r.headers["x-amz-content-sha256"] ?? "UNSIGNED-PAYLOAD" }
      const signed = await signer.sign({ method: r.method, protocol: s3Base.protocol, hostname, port: s3Base.port, path, query, headers })
      return send(
        { protocol: s3Base.protocol, hostname, port: s3Base.port, path: path + queryString(query, escapeRfc3986), headers: signed.headers },
        r.method,
        r.body,
        signal
      )
    },
    azure: async (r, signal) => {
      if (azure === undefined || azureBase === undefined) throw new NotConfigured("the gateway has no Azure origin configured (set TALON_AZURE_*)")
      const path = azurePath(r.bucket, r.key)
      const query = asRecord(r.query)
      const headers: Record<string, string> = { ...r.headers, "x-ms-date": new Date().toUTCString() }
      headers["x-ms-version"] ??= "2021-12-02"
      headers.host = azureBase.url.host
      if (azure.credential._tag === "SharedKey") {
        headers.authorization = sharedKeyAuthorization(azure.account, Redacted.value(azure.credential.key), { method: r.method, path, query, headers })
      }
      if (credentials.azureAuthorization !== undefined) headers.authorization = await credentials.azureAuthorization()
      const params = Object.keys(query).map((k) => `${encodeURIComponent(k)}=${encodeURIComponent(query[k]!)}`)
      if (azure.credential._tag === "Sas") params.push(Redacted.value(azure.credential.token).replace(/^\?/, ""))
      return send(
        { protocol: azureBase.protocol, hostname: azureBase.url.hostname, port: azureBase.port, path: params.length === 0 ? path : `${path}?${params.join("&")}`, headers },
        r.method,
        r.body,
        signal
      )
    },
    azureBlobUrl: (container, blob) => {
      if (azure === undefined || azureBase === undefined) return undefined
      const sas = azure.credential._tag === "Sas" ? `?${Redacted.value(azure.credential.token).replace(/^\?/, "")}` : ""
      return `${azureBase.url.protocol}//${azureBase.url.host}${azurePath(container, blob)}${sas}`
    },
    temporaryCredentials: (provider) => (provider === "s3" ? credentials.s3 : credentials.azureAuthorization) !== undefined,
    credentialsRefused: (provider) => credentials.invalidate?.(provider),
    close: () => {
      httpAgent.destroy()
      httpsAgent.destroy()
    }
  }
}
