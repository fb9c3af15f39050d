/**
 * Entra ID bearer tokens for the Azure backend, in place of a Shared Key or SAS:
 *  - workload identity (AKS): the federated token file `AZURE_FEDERATED_TOKEN_FILE` is sent as
 *    a client assertion to `<AZURE_AUTHORITY_HOST>/<AZURE_TENANT_ID>/oauth2/v2.0/token` for the
 *    app `AZURE_CLIENT_ID` (client-credentials grant); the file is re-read at every exchange;
 *  - managed identity: the instance metadata endpoint's `/metadata/identity/oauth2/token` with
 *    `Metadata: true` (optionally a user-assigned identity's client id).
 * Tokens are for the `https://storage.azure.com` resource and sent as `Authorization: Bearer`.
 */
import { FileSystem } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Clock, Effect, Redacted, Schema } from "effect"
import { CredentialError, type TokenSource } from "./bearerTokens.js"
import type { OriginRequest, Transport } from "./http.js"
import { originRequest } from "./originCalls.js"

export type AzureIdentity =
  | {
      readonly _tag: "WorkloadIdentity"
      readonly tenantId: string
      readonly clientId: string
      readonly tokenFile: string
      /** e.g. `https://login.microsoftonline.com`. */
      readonly authorityHost: string
    }
  | {
      readonly _tag: "ManagedIdentity"
      /** e.g. `http://169.254.169.254`. */
      readonly endpoint: string
      /** A user-assigned identity; unset for the system-assigned one. */
      readonly clientId?: string | undefined
    }

export const DEFAULT_AUTHORITY_HOST = "https://login.microsoftonline.com"
export const DEFAULT_AZURE_IMDS_ENDPOINT = "http://169.254.169.254"
const STORAGE_RESOURCE = "https://storage.azure.com"

/** Entra answers `expires_in` as a number, IMDS as a string. */
const TokenAnswer = Schema.Struct({
  access_token: Schema.String,
  expires_in: Schema.Union(Schema.Number, Schema.NumberFromString)
})

const send = (transport: Transport, source: string, root: string, method: OriginRequest["method"], path: string, headers: Record<string, string>, body?: Buffer) => {
  return transport
    .fetch(
      originRequest(root, method, path, headers, body),
      { object: source, operation: "token" }
    )
    .pipe(Effect.mapError((e) => new CredentialError({ source, retryable: e.retryable, detail: e.detail })))
}

const tokenOf = (source: string, res: { readonly status: number; readonly body: Buffer }) =>
  Effect.gen(function* () {
    if (res.status !== 200) {
      let reason = res.body.toString("utf8").slice(0, 300).replace(/\s+/g, " ").trim()
      try {
        const doc = JSON.parse(res.body.toString("utf8")) as { error?: unknown; error_description?: unknown }
        if (typeof doc.error === "string") reason = `${doc.error}${typeof doc.error_description === "string" ? `: ${doc.error_description}` : ""}`
      } catch {
        // not JSON: keep the text
      }
      return yield* new CredentialError({ source, retryable: res.status === 429 || res.status >= 500, detail: `HTTP ${res.status}${reason ? ` (${reason})` : ""}` })
    }
    const answer = yield* Effect.try(() => JSON.parse(res.body.toString("utf8")) as unknown).pipe(
      Effect.flatMap(Schema.decodeUnknown(TokenAnswer)),
      Effect.mapError(() => new CredentialError({ source, retryable: false, detail: "the answer is not a token response ({access_token, expires_in})" }))
    )
    const now = yield* Clock.currentTimeMillis
    return { value: Redacted.make(answer.access_token), expiresAtMs: now + answer.expires_in * 1000 }
  })

const workload = (transport: Transport, id: Extract<AzureIdentity, { _tag: "WorkloadIdentity" }>): TokenSource<Redacted.Redacted<string>> => {
  const source = `Entra ID at ${id.authorityHost} (tenant ${id.tenantId}, client ${id.clientId}, federated token file ${id.tokenFile})`
  return {
    name: source,
    fetch: Effect.gen(function* () {
      const assertion = yield* FileSystem.FileSystem.pipe(
        Effect.flatMap((fs) => fs.readFileString(id.tokenFile)),
        Effect.provide(NodeFileSystem.layer),
        Effect.mapError((e) => new CredentialError({ source, retryable: false, detail: `cannot read the federated token file: ${e.message}` }))
      )
      const form = new URLSearchParams({
        client_id: id.clientId,
        scope: `${STORAGE_RESOURCE}/.default`,
        client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        client_assertion: assertion.trim(),
        grant_type: "client_credentials"
      })
      const res = yield* send(transport, source, id.authorityHost, "POST", `/${encodeURIComponent(id.tenantId)}/oauth2/v2.0/token`, {
        "content-type": "application/x-www-form-urlencoded"
      }, Buffer.from(form.toString()))
      return yield* tokenOf(source, res)
    })
  }
}

const managed = (transport: Transport, id: Extract<AzureIdentity, { _tag: "ManagedIdentity" }>): TokenSource<Redacted.Redacted<string>> => {
  const source = `the Azure managed identity endpoint at ${id.endpoint}${id.clientId === undefined ? "" : ` (client ${id.clientId})`}`
  const query = new URLSearchParams({ "api-version": "2018-02-01", resource: `${STORAGE_RESOURCE}/` })
  if (id.clientId !== undefined) query.set("client_id", id.clientId)
  return {
    name: source,
    fetch: Effect.flatMap(
      send(transport, source, id.endpoint, "GET", `/metadata/identity/oauth2/token?${query.toString()}`, { metadata: "true" }),
      (res) => tokenOf(source, res)
    )
  }
}

export const azureTokenSource = (transport: Transport, identity: AzureIdentity): TokenSource<Redacted.Redacted<string>> =>
  identity._tag === "WorkloadIdentity" ? workload(transport, identity) : managed(transport, identity)
