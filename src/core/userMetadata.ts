/**
 * User metadata of an object: the `x-amz-meta-<name>` (S3) and `x-ms-meta-<name>` (Azure)
 * headers, held provider-neutral as lower-case name → value, so an object written through
 * one protocol reads back through the other with the same pairs.
 */

export type UserMetadata = Readonly<Record<string, string>>

export const S3_META_PREFIX = "x-amz-meta-"
export const AZURE_META_PREFIX = "x-ms-meta-"

/** S3's ceiling: the UTF-8 bytes of every name (without its prefix) and value, summed. */
export const MAX_S3_METADATA_BYTES = 2048

/**
 * The pairs of a header map whose (lower-case, as Node gives them) names start with `prefix`;
 * `undefined` when there are none, so an object without metadata costs nothing to carry.
 */
export const metadataFromHeaders = (
  headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>,
  prefix: string
): UserMetadata | undefined => {
  let out: Record<string, string> | undefined
  for (const name in headers) {
    if (name.length <= prefix.length || !name.startsWith(prefix)) continue
    const v = headers[name]
    if (v === undefined) continue
    out ??= {}
    out[name.slice(prefix.length).toLowerCase()] = typeof v === "string" ? v : v.join(",")
  }
  return out
}

const utf8Length = (s: string): number => {
  let n = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) n += 1
    else if (c < 0x800) n += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4
      i++
    } else n += 3
  }
  return n
}

export const metadataBytes = (m: UserMetadata | undefined): number => {
  let n = 0
  if (m !== undefined) for (const k in m) n += utf8Length(k) + utf8Length(m[k]!)
  return n
}

/** S3's MetadataTooLarge message, or undefined when the metadata fits. */
export const s3MetadataProblem = (m: UserMetadata | undefined): string | undefined => {
  const n = metadataBytes(m)
  return n > MAX_S3_METADATA_BYTES
    ? `Your metadata headers exceed the maximum allowed metadata size: ${n} bytes of x-amz-meta-* names and values, at most ${MAX_S3_METADATA_BYTES}.`
    : undefined
}

/** The response headers that carry `m` under `prefix`. */
export const metadataHeaders = (m: UserMetadata | undefined, prefix: string): Record<string, string> => {
  const out: Record<string, string> = {}
  if (m !== undefined) for (const k in m) out[prefix + k] = m[k]!
  return out
}
