import { createHmac } from "node:crypto"

/**
 * Azure Storage Shared Key (Blob service, x-ms-version 2015-02-21 and later): the
 * string-to-sign is the verb, eleven standard headers in a fixed order (Content-Length
 * empty when zero, Date empty because x-ms-date is sent), the canonicalised x-ms-* headers
 * and the canonicalised resource.
 */
const standardHeaders = [
  "content-encoding",
  "content-language",
  "content-length",
  "content-md5",
  "content-type",
  "date",
  "if-modified-since",
  "if-match",
  "if-none-match",
  "if-unmodified-since",
  "range"
] as const

export interface SignableRequest {
  readonly method: string
  /** Percent-encoded path exactly as sent, including the account segment in path-style URLs. */
  readonly path: string
  /** Decoded query parameters. */
  readonly query: Readonly<Record<string, string>>
  /** Header names in lower case. */
  readonly headers: Readonly<Record<string, string>>
}

const unfold = (value: string) => value.replace(/\s+/g, " ").trim()

export const canonicalizedHeaders = (headers: Readonly<Record<string, string>>): string =>
  Object.keys(headers)
    .filter((name) => name.toLowerCase().startsWith("x-ms-"))
    .map((name) => [name.toLowerCase(), unfold(headers[name]!)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `${name}:${value}\n`)
    .join("")

export const canonicalizedResource = (account: string, path: string, query: Readonly<Record<string, string>>): string => {
  const params = Object.keys(query)
    .map((name) => [name.toLowerCase(), query[name]!] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, value]) => `\n${name}:${value}`)
    .join("")
  return `/${account}${path === "" ? "/" : path}${params}`
}

export const stringToSign = (account: string, request: SignableRequest): string => {
  const headers = request.headers
  const lines = standardHeaders.map((name) => {
    const value = headers[name] ?? ""
    return name === "content-length" && value === "0" ? "" : value
  })
  return [request.method.toUpperCase(), ...lines].join("\n") + "\n" +
    canonicalizedHeaders(headers) +
    canonicalizedResource(account, request.path, request.query)
}

/** The `Authorization` header value: `SharedKey <account>:<base64 HMAC-SHA256>`. */
export const sharedKeyAuthorization = (account: string, base64Key: string, request: SignableRequest): string => {
  const signature = createHmac("sha256", Buffer.from(base64Key, "base64"))
    .update(stringToSign(account, request), "utf8")
    .digest("base64")
  return `SharedKey ${account}:${signature}`
}
