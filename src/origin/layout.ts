/**
 * How buckets and keys map onto the stub's root directory.
 *
 * `<root>/<bucket>/<key>` with each `/`-separated key segment stored under its own
 * name, so a seeded or hand-copied tree is browsable and servable as-is. A segment
 * is escaped only when the filesystem cannot hold it literally: `%` becomes `%25`,
 * the empty segment (keys like `a//b` or `dir/`) becomes a lone `%`, and `.`/`..`
 * become `%2E`/`%2E%2E`. Because every segment is escaped on its own and `/` never
 * survives inside one, no key can name a path outside its bucket directory; the
 * resolved path is still checked against the root as a second line of defence.
 *
 * Entries whose names start with `.` at the root level are not buckets (bucket
 * names must start with a letter or digit): the stub keeps its temp files there.
 */
import { createHash } from "node:crypto"
import * as path from "node:path"

export const TMP_DIR = ".talon-tmp"

/** S3 and Azure both cap names; beyond these a filesystem segment would overflow. */
export const MAX_KEY_BYTES = 1024
const MAX_SEGMENT_BYTES = 255

export type KeyProblem = "empty" | "too-long" | "dot-segment" | "nul" | "segment-too-long"

/**
 * Keys the stub refuses outright. Dot segments are legal S3 keys, but every HTTP
 * client normalises them away, so a request that still carries one is a traversal
 * attempt, not a real object name.
 */
export const keyProblem = (key: string): KeyProblem | undefined => {
  if (key.length === 0) return "empty"
  if (Buffer.byteLength(key, "utf8") > MAX_KEY_BYTES) return "too-long"
  if (key.includes("\0")) return "nul"
  for (const segment of key.split("/")) {
    if (segment === "." || segment === "..") return "dot-segment"
    if (Buffer.byteLength(encodeSegment(segment), "utf8") > MAX_SEGMENT_BYTES) return "segment-too-long"
  }
  return undefined
}

export const encodeSegment = (segment: string): string => {
  if (segment === "") return "%"
  if (segment === ".") return "%2E"
  if (segment === "..") return "%2E%2E"
  return segment.includes("%") ? segment.replace(/%/g, "%25") : segment
}

/** Inverse of `encodeSegment`; `undefined` for names the stub could not have written. */
export const decodeSegment = (name: string): string | undefined => {
  if (name === "%") return ""
  if (!name.includes("%")) return name
  let out = ""
  for (let i = 0; i < name.length; i++) {
    const c = name[i]!
    if (c !== "%") {
      out += c
      continue
    }
    const hex = name.slice(i + 1, i + 3)
    if (hex === "25") out += "%"
    else if (hex === "2E") out += "."
    else return undefined
    i += 2
  }
  return encodeSegment(out) === name ? out : undefined
}

export const bucketDir = (root: string, bucket: string): string => path.join(root, bucket)

/** Absolute file path of an object; throws if (impossibly) it would leave the bucket. */
export const objectPath = (root: string, bucket: string, key: string): string => {
  const base = path.resolve(root, bucket)
  const full = path.resolve(base, ...key.split("/").map(encodeSegment))
  if (!full.startsWith(base + path.sep)) throw new Error(`key ${JSON.stringify(key)} resolves outside its bucket`)
  return full
}

/**
 * The stub derives an object's ETag from the file's identity (inode, size, mtime in
 * nanoseconds) instead of hashing the content: stat is free on every read and hand-
 * copied files get an ETag too. Writes through the stub set a strictly increasing
 * mtime (see `nextMtime`), so every write yields a new ETag even when the kernel
 * reuses an inode within one timestamp tick. 24 hex digits, deliberately not
 * MD5-shaped, so tools do not mistake it for a content digest.
 */
export const etagOf = (stat: { ino: bigint; size: bigint; mtimeNs: bigint }): string =>
  contentEtags.get(`${stat.ino}:${stat.size}:${stat.mtimeNs}`) ??
  `"${createHash("sha256").update(`${stat.ino}:${stat.size}:${stat.mtimeNs}`).digest("hex").slice(0, 24)}"`

/**
 * Objects this process wrote answer with S3's content ETag instead (the MD5 of a single-part
 * upload, `md5-of-part-md5s-N` of a multipart one): real clients compare it with the MD5 of
 * what they sent (s3cmd retries an upload whose ETag differs) or received. Kept in memory,
 * keyed by the file's identity, so a later change to the file (or a restart) falls back to
 * the identity ETag above; bounded, oldest entries dropped first.
 */
const contentEtags = new Map<string, string>()
const MAX_CONTENT_ETAGS = 200_000
export const rememberContentEtag = (stat: { ino: bigint; size: bigint; mtimeNs: bigint }, etag: string): void => {
  if (contentEtags.size >= MAX_CONTENT_ETAGS) contentEtags.delete(contentEtags.keys().next().value!)
  contentEtags.set(`${stat.ino}:${stat.size}:${stat.mtimeNs}`, `"${etag.replace(/"/g, "")}"`)
}

let lastMtimeMs = 0
/** A modification time later than any this process has set (millisecond steps). File mtimes are the OS's wall clock, hence not the Effect Clock. */
export const nextMtime = (): Date => {
  lastMtimeMs = Math.max(Date.now(), lastMtimeMs + 1)
  return new Date(lastMtimeMs)
}

/** UTF-8 binary order, the order S3 and Azure list in (differs from JS string order past U+FFFF). */
export const compareKeys = (a: string, b: string): number =>
  a === b ? 0 : Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))
