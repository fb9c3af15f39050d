/**
 * Where a GCS backend gets its OAuth bearer tokens: a service-account key file (the JWT
 * bearer grant, RFC 7523: an RS256 assertion signed with the key, posted to the key's
 * `token_uri`) or the GCE/GKE metadata server (workload identity). Both answer
 * `{access_token, expires_in}`; the cache in bearerTokens.ts keeps and renews the token.
 */
import { sign } from "node:crypto"
import { FileSystem } from "@effect/platform"
import { NodeFileSystem } from "@effect/platform-node"
import { Clock, Effect, Redacted, Schema } from "effect"
import { CredentialError, type Expiring, type TokenSource } from "./bearerTokens.js"
import type { OriginRequest, Transport } from "./http.js"
import { originBase } from "./originCalls.js"

export type GcsCredential =
  | { readonly _tag: "KeyFile"; readonly path: string }
  | { readonly _tag: "Metadata"; readonly host: string }
  | { readonly _tag: "Anonymous" }

/** The scope a cache needs: reads, and writes for `talon put`/`rm`. */
export const GCS_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
export const DEFAULT_METADATA_HOST = "metadata.google.internal"
const METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
const ASSERTION_LIFETIME_S = 3600

/** The fields of a service-account key file the grant uses (the file has more). */
const ServiceAccountKey = Schema.Struct({
  type: Schema.Literal("service_account"),
  client_email: Schema.String,
  private_key: Schema.String,
  private_key_id: Schema.optional(Schema.String),
  token_uri: Schema.String
})
type ServiceAccountKey = typeof ServiceAccountKey.Type

const TokenResponse = Schema.Struct({
  access_token: Schema.String,
  expires_in: Schema.Number,
  token_type: Schema.optional(Schema.String)
})

const b64url = (data: string | Buffer) => Buffer.from(data).toString("base64url")

/** The signed JWT a key file exchanges for a token (exported so its shape can be checked). */
export const jwtAssertion = (key: ServiceAccountKey, nowSeconds: number, scope: string = GCS_SCOPE): string => {
  const header = { alg: "RS256", typ: "JWT", ...(key.private_key_id === undefined ? {} : { kid: key.private_key_id }) }
  const claims = { iss: key.client_email, scope, aud: key.token_uri, iat: nowSeconds, exp: nowSeconds + ASSERTION_LIFETIME_S }
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`
  return `${input}.${b64url(sign("RSA-SHA256", Buffer.from(input), key.private_key))}`
}

/** A token endpoint's JSON answer as an expiring token; anything else is a CredentialError naming the source. */
const tokenFrom = (source: string, status: number, body: Buffer): Effect.Effect<Expiring<Redacted.Redacted<string>>, CredentialError> =>
  Effect.gen(function* () {
    if (status !== 200) {
      // Error bodies carry a reason, never a token; cut to keep logs readable.
      const reason = body.toString("utf8").slice(0, 300).replace(/\s+/g, " ").trim()
      return yield* new CredentialError({
        source,
        retryable: status === 429 || status >= 500,
        detail: `HTTP ${status}${reason === "" ? "" : `: ${reason}`}`
      })
    }
    const parsed = yield* Effect.try(() => JSON.parse(body.toString("utf8")) as unknown).pipe(
      Effect.flatMap(Schema.decodeUnknown(TokenResponse)),
      Effect.mapError(() => new CredentialError({ source, retryable: false, detail: "the answer is not a token response ({access_token, expires_in})" }))
    )
    const now = yield* Clock.currentTimeMillis
    return { value: Redacted.make(parsed.access_token), expiresAtMs: now + parsed.expires_in * 1000 }
  })

const send = (transport: Transport, source: string, request: OriginRequest) =>
  transport
    .fetch(request, { object: source, operation: "token" })
    .pipe(Effect.mapError((e) => new CredentialError({ source, retryable: e.retryable, detail: e.detail })))

/** The key is read at every fetch, so a rotated key file is picked up without a restart. */
const keyFileSource = (transport: Transport, path: string): TokenSource<Redacted.Redacted<string>> => {
  const name = `the service-account key file ${path}`
  const readKey = Effect.gen(function* () {
    const text = yield* FileSystem.FileSystem.pipe(
      Effect.flatMap((fs) => fs.readFileString(path)),
      Effect.provide(NodeFileSystem.layer),
      Effect.mapError((e) => new CredentialError({ source: name, retryable: false, detail: `cannot read it: ${e.message}` }))
    )
    return yield* Effect.try(() => JSON.parse(text) as unknown).pipe(
      Effect.flatMap(Schema.decodeUnknown(ServiceAccountKey)),
      Effect.mapError(
        () =>
          new CredentialError({
            source: name,
            retryable: false,
            detail: 'it is not a service-account key (JSON with type "service_account", client_email, private_key, token_uri)'
          })
      )
    )
  })
  return {
    name,
    fetch: Effect.gen(function* () {
      const key = yield* readKey
      const base = yield* Effect.try({
        try: () => originBase(key.token_uri),
        catch: () => new CredentialError({ source: name, retryable: false, detail: `its token_uri ${JSON.stringify(key.token_uri)} is not a URL` })
      })
      const source = `the token endpoint ${key.token_uri} (service account ${key.client_email})`
      const now = yield* Clock.currentTimeMillis
      const assertion = yield* Effect.try({
        try: () => jwtAssertion(key, Math.floor(now / 1000)),
        catch: () => new CredentialError({ source: name, retryable: false, detail: "its private_key cannot sign (not an RSA PEM key)" })
      })
      const body = Buffer.from(`grant_type=${encodeURIComponent("urn:ietf:params:oauth:grant-type:jwt-bearer")}&assertion=${assertion}`)
      const res = yield* send(transport, source, {
        method: "POST",
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: `${base.url.pathname}${base.url.search}`,
        headers: { "content-type": "application/x-www-form-urlencoded", "content-length": String(body.length) },
        body
      })
      return yield* tokenFrom(source, res.status, res.body)
    })
  }
}

const metadataSource = (transport: Transport, host: string): TokenSource<Redacted.Redacted<string>> => {
  const base = originBase(/^[a-z]+:\/\//i.test(host) ? host : `http://${host}`)
  const source = `the GCE metadata server at ${base.url.host}`
  return {
    name: source,
    fetch: Effect.gen(function* () {
      const res = yield* send(transport, source, {
        method: "GET",
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        path: METADATA_TOKEN_PATH,
        headers: { "metadata-flavor": "Google" }
      })
      return yield* tokenFrom(source, res.status, res.body)
    })
  }
}

/** The token source for `credential`, or undefined for anonymous access (public buckets, emulators). */
export const gcsTokenSource = (
  transport: Transport,
  credential: GcsCredential
): TokenSource<Redacted.Redacted<string>> | undefined => {
  switch (credential._tag) {
    case "KeyFile":
      return keyFileSource(transport, credential.path)
    case "Metadata":
      return metadataSource(transport, credential.host)
    case "Anonymous":
      return undefined
  }
}
