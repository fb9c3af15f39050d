/**
 * S3 and Azure both send ETags as quoted strings, sometimes weak (`W/"…"`). The cache keys
 * blocks by version, so both providers must yield the same bare token for the same header.
 */
export const normalizeEtag = (raw: string | undefined | null): string => {
  if (raw === undefined || raw === null) return ""
  let etag = raw.trim()
  if (etag.startsWith("W/") || etag.startsWith("w/")) etag = etag.slice(2)
  if (etag.length >= 2 && etag.startsWith('"') && etag.endsWith('"')) etag = etag.slice(1, -1)
  return etag
}

/** The header form for conditional requests (`If-Match`): strong, quoted. */
export const quoteEtag = (version: string): string => `"${version}"`
