/**
 * Verification of incoming request signatures against the gateway's configured
 * credentials: AWS SigV4 (header form and presigned URLs) for the S3 front end and
 * Azure Shared Key for the Azure one. The client's credentials stop here: origin
 * requests are signed anew with the gateway's own origin identity.
 *
 * SigV4 is recomputed from the request exactly as received (S3 rules: the path is
 * canonicalised by decoding and re-encoding each segment once, never normalised);
 * Shared Key reuses the backend's string-to-sign, the one checked against the Azure
 * SDK's own signer.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import type { IncomingHttpHeaders } from "node:http"
import { Redacted } from "effect"
import { stringToSign as azureStringToSign } from "../backend/azureSharedKey.js"
import { escapeRfc3986 } from "../backend/headers.js"
import type { GatewayCredentials } from "./config.js"

export type AuthResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly status: number; readonly code: string; readonly message: string }

const OK: AuthResult = { ok: true }
const deny = (status: number, code: string, message: string): AuthResult => ({ ok: false, status, code, message })

export interface ReceivedRequest {
  readonly method: string
  /** Path exactly as received, still percent-encoded, without the query. */
  readonly rawPath: string
  /** Query exactly as received, without the `?`. */
  readonly rawQuery: string
  readonly headers: IncomingHttpHeaders
}

const headerValue = (headers: IncomingHttpHeaders, name: string): string | undefined => {
  const v = headers[name]
  return Array.isArray(v) ? v.join(",") : v
}

const safeDecode = (s: string): string | undefined => {
  try {
    return decodeURIComponent(s)
  } catch {
    return undefined
  }
}

/** `[name, value]` pairs of a raw query, percent-decoded (a `+` stays a plus, as both providers sign it). */
export const rawQueryPairs = (rawQuery: string): Array<[string, string]> | undefined => {
  const out: Array<[string, string]> = []
  if (rawQuery === "") return out
  for (const part of rawQuery.split("&")) {
    if (part === "") continue
    const eq = part.indexOf("=")
    const k = safeDecode(eq < 0 ? part : part.slice(0, eq))
    const v = safeDecode(eq < 0 ? "" : part.slice(eq + 1))
    if (k === undefined || v === undefined) return undefined
    out.push([k, v])
  }
  return out
}

const sameText = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** A hex signature against a computed digest: one decode, no hex string of the digest. */
const sameDigest = (digest: Buffer, hex: string): boolean => {
  if (hex.length !== digest.length * 2) return false
  const given = Buffer.from(hex, "hex")
  return given.length === digest.length && timingSafeEqual(given, digest)
}

const hmac = (key: Buffer | string, data: string): Buffer => createHmac("sha256", key).update(data, "utf8").digest()

/**
 * SigV4 signing keys depend only on the secret, the day, the region and the service, so
 * they are derived once a day rather than with four HMACs per request.
 */
const signingKeys = new Map<string, Buffer>()
const signingKey = (secret: string, date: string, region: string, service: string): Buffer => {
  const id = `${date}/${region}/${service}\0${secret}`
  let key = signingKeys.get(id)
  if (key === undefined) {
    if (signingKeys.size >= 64) signingKeys.clear()
    key = hmac(hmac(hmac(hmac(`AWS4${secret}`, date), region), service), "aws4_request")
    signingKeys.set(id, key)
  }
  return key
}

const decodedKeys = new Map<string, Buffer>()
const decodedKey = (base64: string): Buffer => {
  let key = decodedKeys.get(base64)
  if (key === undefined) {
    if (decodedKeys.size >= 64) decodedKeys.clear()
    key = Buffer.from(base64, "base64")
    decodedKeys.set(base64, key)
  }
  return key
}
const sha256Hex = (data: string): string => createHash("sha256").update(data, "utf8").digest("hex")

let lastAmzDate = ""
let lastAmzMs = 0
/** `20240101T000000Z` → epoch ms. */
const parseAmzDate = (s: string | undefined): number | undefined => {
  if (s === undefined) return undefined
  if (s === lastAmzDate) return lastAmzMs
  const ms = parseAmzDateOnce(s)
  if (ms !== undefined) {
    lastAmzDate = s
    lastAmzMs = ms
  }
  return ms
}
const parseAmzDateOnce = (s: string): number | undefined => {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s)
  if (m === null) return undefined
  return Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6]))
}

/** A path of unreserved characters only is its own canonical form (nothing to decode or escape). */
const PLAIN_PATH = /^[A-Za-z0-9\-._~/]*$/

const canonicalUri = (rawPath: string): string | undefined => {
  if (rawPath !== "" && PLAIN_PATH.test(rawPath)) return rawPath
  const segments: Array<string> = []
  for (const segment of rawPath.split("/")) {
    const decoded = safeDecode(segment)
    if (decoded === undefined) return undefined
    segments.push(escapeRfc3986(decoded))
  }
  const path = segments.join("/")
  return path === "" ? "/" : path
}

const canonicalQuery = (pairs: ReadonlyArray<readonly [string, string]>): string =>
  pairs
    .map(([k, v]) => [escapeRfc3986(k), escapeRfc3986(v)] as const)
    .sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")

const FOLDABLE = /[\t\n\v\f\r]| {2}/
const canonicalHeaderValue = (v: string | undefined) => {
  const t = (v ?? "").trim()
  return FOLDABLE.test(t) ? t.replace(/\s+/g, " ") : t
}

interface SigV4Parts {
  readonly accessKeyId: string
  readonly date: string
  readonly region: string
  readonly service: string
  readonly signedHeaders: ReadonlyArray<string>
  readonly signature: string
  readonly amzDate: string
  readonly payloadHash: string
  readonly presignedExpires?: number | undefined
}

const parseCredential = (credential: string) => {
  const parts = credential.split("/")
  if (parts.length !== 5 || parts[4] !== "aws4_request") return undefined
  return { accessKeyId: parts[0]!, date: parts[1]!, region: parts[2]!, service: parts[3]! }
}

const SIGV4 = "AWS4-HMAC-SHA256 "

/** The value of `name=` among the Authorization header's comma-separated fields, trimmed. */
const authField = (authorization: string, name: string): string | undefined => {
  let at = SIGV4.length
  while (at < authorization.length) {
    let end = authorization.indexOf(",", at)
    if (end < 0) end = authorization.length
    const eq = authorization.indexOf("=", at)
    if (eq > at && eq < end && authorization.slice(at, eq).trim() === name) return authorization.slice(eq + 1, end).trim()
    at = end + 1
  }
  return undefined
}

const fromHeader = (req: ReceivedRequest, authorization: string): SigV4Parts | AuthResult => {
  if (!authorization.startsWith(SIGV4)) {
    return deny(400, "InvalidRequest", "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
  }
  const credential = parseCredential(authField(authorization, "Credential") ?? "")
  const signedHeaders = authField(authorization, "SignedHeaders")
  const signature = authField(authorization, "Signature")
  if (credential === undefined || signedHeaders === undefined || signature === undefined) {
    return deny(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; expected Credential, SignedHeaders and Signature.")
  }
  const amzDate = headerValue(req.headers, "x-amz-date")
  if (amzDate === undefined) return deny(403, "AccessDenied", "AWS authentication requires a valid x-amz-date header")
  const payloadHash = headerValue(req.headers, "x-amz-content-sha256")
  if (payloadHash === undefined) return deny(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
  return {
    accessKeyId: credential.accessKeyId,
    date: credential.date,
    region: credential.region,
    service: credential.service,
    signedHeaders: signedHeaders.split(";"),
    signature,
    amzDate,
    payloadHash
  }
}

const fromQuery = (req: ReceivedRequest, pairs: ReadonlyArray<readonly [string, string]>): SigV4Parts | AuthResult => {
  const q = new Map(pairs)
  if (q.get("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256") {
    return deny(400, "AuthorizationQueryParametersError", "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
  }
  const credential = parseCredential(q.get("X-Amz-Credential") ?? "")
  const amzDate = q.get("X-Amz-Date")
  const expires = Number(q.get("X-Amz-Expires"))
  const signedHeaders = q.get("X-Amz-SignedHeaders")
  const signature = q.get("X-Amz-Signature")
  if (credential === undefined || amzDate === undefined || !Number.isInteger(expires) || signedHeaders === undefined || signature === undefined) {
    return deny(400, "AuthorizationQueryParametersError", "Query-string authentication requires X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature.")
  }
  return {
    ...credential,
    signedHeaders: signedHeaders.split(";"),
    signature,
    amzDate,
    payloadHash: headerValue(req.headers, "x-amz-content-sha256") ?? "UNSIGNED-PAYLOAD",
    presignedExpires: expires
  }
}

/** S3's limit on a presigned URL's lifetime. */
export const MAX_PRESIGN_SECONDS = 7 * 24 * 3600

export interface SigV4Expectation {
  readonly accessKeyId: string
  readonly secretAccessKey: Redacted.Redacted<string>
  readonly region: string
  readonly nowMs: number
  readonly clockSkewMs: number
}

/** Verifies an S3 request signed with SigV4 (Authorization header or presigned query). */
export const verifySigV4 = (req: ReceivedRequest, expect: SigV4Expectation): AuthResult => {
  const pairs = rawQueryPairs(req.rawQuery)
  if (pairs === undefined) return deny(400, "InvalidArgument", "The query string is not validly percent-encoded.")
  const authorization = headerValue(req.headers, "authorization")
  const presigned = pairs.some(([k]) => k === "X-Amz-Signature")
  if (authorization === undefined && !presigned) {
    return deny(403, "AccessDenied", "Anonymous requests are not allowed: sign requests with the gateway's credentials.")
  }
  const parsed = authorization !== undefined ? fromHeader(req, authorization) : fromQuery(req, pairs)
  if ("ok" in parsed) return parsed
  if (parsed.accessKeyId !== expect.accessKeyId) {
    return deny(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.")
  }
  const signedAt = parseAmzDate(parsed.amzDate)
  if (signedAt === undefined || parsed.amzDate.slice(0, 8) !== parsed.date) {
    return deny(403, "AccessDenied", "x-amz-date is malformed or does not match the credential scope date")
  }
  if (parsed.service !== "s3") return deny(400, "AuthorizationHeaderMalformed", `The service '${parsed.service}' is wrong; expecting 's3'`)
  if (parsed.region !== expect.region) {
    return deny(400, "AuthorizationHeaderMalformed", `The authorization header is malformed; the region '${parsed.region}' is wrong; expecting '${expect.region}'`)
  }
  if (parsed.presignedExpires !== undefined) {
    if (parsed.presignedExpires < 1 || parsed.presignedExpires > MAX_PRESIGN_SECONDS) {
      return deny(400, "AuthorizationQueryParametersError", `X-Amz-Expires must be between 1 and ${MAX_PRESIGN_SECONDS} seconds (7 days); presign the URL again with a shorter lifetime.`)
    }
    if (expect.nowMs > signedAt + parsed.presignedExpires * 1000) return deny(403, "AccessDenied", "Request has expired")
    if (signedAt - expect.nowMs > expect.clockSkewMs) return deny(403, "RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.")
  } else if (Math.abs(expect.nowMs - signedAt) > expect.clockSkewMs) {
    return deny(403, "RequestTimeTooSkewed", "The difference between the request time and the server's time is too large.")
  }
  const uri = canonicalUri(req.rawPath)
  if (uri === undefined) return deny(400, "InvalidURI", "Couldn't parse the specified URI.")
  // One pass over the signed names: lower-cased, the canonical header block and the list built as strings.
  let names = ""
  let block = ""
  let signsHost = false
  for (const signed of parsed.signedHeaders) {
    const name = signed.toLowerCase()
    if (name === "host") signsHost = true
    names = names === "" ? name : `${names};${name}`
    block += `${name}:${canonicalHeaderValue(headerValue(req.headers, name))}\n`
  }
  // Without `host` in the signature a captured request could be replayed against any other endpoint.
  if (!signsHost) {
    return deny(403, "AccessDenied", "The request signature must sign the 'host' header (SignedHeaders lacks host).")
  }
  const query = pairs.length === 0 ? "" : canonicalQuery(presigned ? pairs.filter(([k]) => k !== "X-Amz-Signature") : pairs)
  const canonicalRequest = `${req.method.toUpperCase()}\n${uri}\n${query}\n${block}\n${names}\n${parsed.payloadHash}`
  const toSign = `AWS4-HMAC-SHA256\n${parsed.amzDate}\n${parsed.date}/${parsed.region}/${parsed.service}/aws4_request\n${sha256Hex(canonicalRequest)}`
  const kSigning = signingKey(Redacted.value(expect.secretAccessKey), parsed.date, parsed.region, parsed.service)
  if (!sameDigest(createHmac("sha256", kSigning).update(toSign, "utf8").digest(), parsed.signature)) {
    return deny(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.")
  }
  return OK
}

export interface SharedKeyExpectation {
  readonly account: string
  readonly key: Redacted.Redacted<string>
  readonly nowMs: number
  readonly clockSkewMs: number
}

const authFailed = (message: string) => deny(403, "AuthenticationFailed", `Server failed to authenticate the request. ${message}`)

/** Verifies an Azure Blob request signed with Shared Key (path-style: `/account/container/blob`). */
export const verifySharedKey = (req: ReceivedRequest, expect: SharedKeyExpectation): AuthResult => {
  const authorization = headerValue(req.headers, "authorization")
  if (authorization === undefined) return authFailed("No Authorization header: sign requests with the gateway's account key.")
  const m = /^SharedKey ([^:\s]+):(\S+)$/.exec(authorization.trim())
  if (m === null) return authFailed("Only SharedKey authorization is supported.")
  if (m[1] !== expect.account) return authFailed(`Unknown account '${m[1]}'.`)
  const dated = headerValue(req.headers, "x-ms-date") ?? headerValue(req.headers, "date")
  const at = dated === undefined ? NaN : Date.parse(dated)
  if (Number.isNaN(at)) return authFailed("The request has no valid x-ms-date or Date header.")
  if (Math.abs(expect.nowMs - at) > expect.clockSkewMs) return authFailed("Request date header too old or too far in the future.")
  const pairs = rawQueryPairs(req.rawQuery)
  if (pairs === undefined) return authFailed("The query string is not validly percent-encoded.")
  const query: Record<string, string> = {}
  for (const [k, v] of pairs) query[k] = v
  const headers: Record<string, string> = {}
  for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(",") : v
  const expected = createHmac("sha256", decodedKey(Redacted.value(expect.key)))
    .update(azureStringToSign(expect.account, { method: req.method, path: req.rawPath, query, headers }), "utf8")
    .digest("base64")
  if (!sameText(expected, m[2]!)) {
    return authFailed("Make sure the value of Authorization header is formed correctly including the signature.")
  }
  return OK
}

/** Which provider front ends require a signature, and with what. */
export interface AuthPolicy {
  readonly enabled: boolean
  readonly credentials: GatewayCredentials
}
