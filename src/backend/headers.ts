import type { IncomingHttpHeaders } from "node:http"
import { header } from "./http.js"

/** Content-Range `bytes a-b/total` or `bytes *\/total`; numbers stay undefined when the origin omitted them. */
export const parseContentRange = (
  value: string | undefined
): { readonly start?: number | undefined; readonly size?: number | undefined } => {
  if (value === undefined) return {}
  const match = /^\s*bytes\s+(?:(\d+)-(\d+)|\*)\/(\d+|\*)\s*$/i.exec(value)
  if (match === null) return {}
  return {
    start: match[1] === undefined ? undefined : Number(match[1]),
    size: match[3] === undefined || match[3] === "*" ? undefined : Number(match[3])
  }
}

export const contentLength = (headers: IncomingHttpHeaders): number | undefined => {
  const value = header(headers, "content-length")
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined
  return Number(value)
}

export const lastModified = (headers: IncomingHttpHeaders): Date | undefined => listedDate(header(headers, "last-modified"))

/** An origin's date (S3 ISO 8601, Azure RFC 1123), or undefined when absent or unreadable. */
export const listedDate = (value: string | undefined): Date | undefined => {
  if (value === undefined) return undefined
  const date = new Date(value.trim())
  return Number.isNaN(date.getTime()) ? undefined : date
}

/** RFC 3986 unreserved-only escaping, as SigV4 canonicalises (encodeURIComponent leaves !'()*). */
export const escapeRfc3986 = (value: string): string =>
  encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

export const escapePath = (key: string, escape: (segment: string) => string): string =>
  key.split("/").map(escape).join("/")

export const queryString = (query: Record<string, string>, escape: (value: string) => string): string => {
  const keys = Object.keys(query).sort()
  return keys.length === 0 ? "" : `?${keys.map((k) => `${escape(k)}=${escape(query[k]!)}`).join("&")}`
}
