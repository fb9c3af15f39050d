/**
 * `ListObjects` prefixes are namespace paths: `/s3/bucket`, `/s3/bucket/`,
 * `/s3/bucket/some/prefix`. Unlike an object path, the key part may be empty or
 * end in `/` (it is a prefix, not a key), but `.`/`..` components are still refused
 * so the listing can never address something outside its bucket.
 */
import { Either } from "effect"
import type { Backend } from "./ids.js"
import { backendFromName } from "./objectId.js"

export interface ListPrefix {
  readonly backend: Backend
  readonly bucket: string
  readonly keyPrefix: string
}

export const parseListPrefix = (prefix: string): Either.Either<ListPrefix, string> => {
  const trimmed = prefix.replace(/^\/+/, "")
  const first = trimmed.indexOf("/")
  if (first <= 0) {
    return Either.left(
      `list prefix ${JSON.stringify(prefix)} must name a backend and a bucket, like /s3/bucket/prefix or /az/container/prefix`
    )
  }
  const backend = backendFromName(trimmed.slice(0, first))
  if (backend === undefined) {
    return Either.left(`list prefix ${JSON.stringify(prefix)} names unknown backend ${JSON.stringify(trimmed.slice(0, first))} (use s3, gcs or az)`)
  }
  const rest = trimmed.slice(first + 1)
  const slash = rest.indexOf("/")
  const bucket = slash < 0 ? rest : rest.slice(0, slash)
  const keyPrefix = slash < 0 ? "" : rest.slice(slash + 1)
  if (bucket.length === 0 || bucket === "." || bucket === "..") {
    return Either.left(`list prefix ${JSON.stringify(prefix)} has no valid bucket`)
  }
  const parts = keyPrefix.split("/")
  // Interior empty components are refused like in object paths; a trailing "/" is a prefix idiom.
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    if (part === "." || part === ".." || (part === "" && i < parts.length - 1)) {
      return Either.left(`list prefix ${JSON.stringify(prefix)} has an empty, "." or ".." component`)
    }
  }
  return Either.right({ backend, bucket, keyPrefix })
}
