/**
 * Conditional request evaluation in RFC 9110 §13.2.2 order, shared by both providers:
 * If-Match, then If-Unmodified-Since (only without If-Match), then If-None-Match, then
 * If-Modified-Since (GET/HEAD, only without If-None-Match). If-Range is separate: it
 * only decides whether a Range header applies.
 */
export type ConditionOutcome = "proceed" | "not-modified" | "precondition-failed"

export interface ConditionHeaders {
  readonly ifMatch?: string | undefined
  readonly ifNoneMatch?: string | undefined
  readonly ifModifiedSince?: string | undefined
  readonly ifUnmodifiedSince?: string | undefined
}

/** The four conditional headers as `get` reads them, under `prefix` ("" for the object itself, "x-amz-copy-source-" for a copy's source). */
export const conditionHeaders = (get: (name: string) => string | undefined, prefix = ""): ConditionHeaders => ({
  ifMatch: get(`${prefix}if-match`),
  ifNoneMatch: get(`${prefix}if-none-match`),
  ifModifiedSince: get(`${prefix}if-modified-since`),
  ifUnmodifiedSince: get(`${prefix}if-unmodified-since`)
})

const stripWeak = (tag: string): string => (tag.startsWith("W/") ? tag.slice(2) : tag)

/** Tags are compared with or without quotes: SDKs pass ETags back in both forms. */
const unquote = (tag: string): string => {
  const t = stripWeak(tag.trim())
  return t.length >= 2 && t.startsWith('"') && t.endsWith('"') ? t.slice(1, -1) : t
}

export const etagListMatches = (header: string, etag: string | undefined): boolean => {
  if (etag === undefined) return false
  if (header.trim() === "*") return true
  const mine = unquote(etag)
  return header.split(",").some((candidate) => unquote(candidate) === mine)
}

const parseDate = (value: string | undefined): number | undefined => {
  if (value === undefined) return undefined
  const t = Date.parse(value)
  return Number.isNaN(t) ? undefined : t
}

/** HTTP dates have one-second resolution; compare on whole seconds. */
const seconds = (ms: number): number => Math.floor(ms / 1000)

/**
 * `etag`/`lastModifiedMs` are `undefined` when the object does not exist (for writes:
 * `If-None-Match: *` succeeds, `If-Match` fails).
 */
export const evaluateConditions = (
  headers: ConditionHeaders,
  etag: string | undefined,
  lastModifiedMs: number | undefined,
  isRead: boolean
): ConditionOutcome => {
  if (headers.ifMatch !== undefined) {
    if (!etagListMatches(headers.ifMatch, etag)) return "precondition-failed"
  } else {
    const ius = parseDate(headers.ifUnmodifiedSince)
    if (ius !== undefined && lastModifiedMs !== undefined && seconds(lastModifiedMs) > seconds(ius)) {
      return "precondition-failed"
    }
  }
  if (headers.ifNoneMatch !== undefined) {
    if (etagListMatches(headers.ifNoneMatch, etag)) return isRead ? "not-modified" : "precondition-failed"
  } else if (isRead) {
    const ims = parseDate(headers.ifModifiedSince)
    if (ims !== undefined && lastModifiedMs !== undefined && seconds(lastModifiedMs) <= seconds(ims)) {
      return "not-modified"
    }
  }
  return "proceed"
}

/** Whether a Range applies under `If-Range` (an ETag, strong match only, or an HTTP date). */
export const ifRangeHolds = (ifRange: string | undefined, etag: string, lastModifiedMs: number): boolean => {
  if (ifRange === undefined) return true
  const v = ifRange.trim()
  if (v.startsWith('"') || v.startsWith("W/")) return !v.startsWith("W/") && unquote(v) === unquote(etag)
  const t = parseDate(v)
  if (t === undefined) return unquote(v) === unquote(etag)
  return seconds(lastModifiedMs) <= seconds(t)
}
