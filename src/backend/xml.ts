import { XMLParser } from "fast-xml-parser"
import { type BackendError, BackendNotFound, BackendRequestError } from "./BackendStore.js"
import type { RequestLabel } from "./http.js"
import { isRetryableStatus } from "./policy.js"

const repeated = new Set(["Contents", "CommonPrefixes", "Blob", "BlobPrefix"])

/**
 * Values stay strings (a key "0012" must not become 12) and are not trimmed (keys may
 * start or end with spaces). Made on first use: a worker or coordinator parses XML only for
 * listings and error bodies, and the CLI's bundle loads the parser then (scripts/bundle.mjs).
 */
let parser: XMLParser | undefined
const xmlParser = (): XMLParser =>
  (parser ??= new XMLParser({
    ignoreAttributes: true,
    parseTagValue: false,
    trimValues: false,
    processEntities: true,
    isArray: (name) => repeated.has(name)
  }))

export type XmlNode = Record<string, unknown>

export const parseXml = (text: string): XmlNode => {
  try {
    const parsed: unknown = xmlParser().parse(text)
    return typeof parsed === "object" && parsed !== null ? (parsed as XmlNode) : {}
  } catch {
    return {}
  }
}

/** Text content of an element, whether the parser gave a string or an object with `#text`. */
export const text = (node: unknown): string | undefined => {
  if (typeof node === "string") return node
  if (typeof node === "number" || typeof node === "boolean") return String(node)
  if (typeof node === "object" && node !== null && "#text" in node) return text((node as XmlNode)["#text"])
  if (typeof node === "object" && node !== null) return ""
  return undefined
}

export const child = (node: unknown, name: string): unknown =>
  typeof node === "object" && node !== null ? (node as XmlNode)[name] : undefined

export const children = (node: unknown, name: string): ReadonlyArray<unknown> => {
  const value = child(node, name)
  return Array.isArray(value) ? value : value === undefined ? [] : [value]
}

/** Both providers answer failures with `<Error><Code>…</Code><Message>…</Message></Error>`. */
export const errorDocument = (body: string): { readonly code?: string | undefined; readonly message?: string | undefined } => {
  const error = child(parseXml(body), "Error")
  const code = text(child(error, "Code"))?.trim()
  const message = text(child(error, "Message"))?.trim().split("\n")[0]
  return { code: code || undefined, message: message || undefined }
}

/** Maps a non-success status to the tagged error the callers match on (416 is handled by getRange). */
export const statusError = (
  label: RequestLabel,
  status: number,
  code: string | undefined,
  message: string | undefined
): BackendError => {
  if (status === 404) return new BackendNotFound({ object: label.object })
  const what = code ?? statusMeaning[status] ?? "origin error"
  return new BackendRequestError({
    ...label,
    status,
    retryable: isRetryableStatus(status),
    detail: message === undefined ? what : `${what}: ${message}`
  })
}

const statusMeaning: Record<number, string> = {
  400: "bad request",
  403: "access denied (check the credentials and the clock)",
  409: "conflict",
  412: "precondition failed: the object changed",
  429: "throttled",
  500: "internal error",
  503: "service unavailable"
}
