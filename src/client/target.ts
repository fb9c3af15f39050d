/** How callers name objects and listing prefixes. */
import { Either } from "effect"
import type { ObjectId } from "../core/ids.js"
import { objectIdFromPath, objectIdFromUri } from "../core/objectId.js"
import { InvalidRequest } from "./errors.js"

/** An object given as a URI (`s3://bucket/key`), a path (`/s3/bucket/key`) or an ObjectId. */
export type ObjectTarget = string | ObjectId

export const parseTarget = (target: ObjectTarget): Either.Either<ObjectId, InvalidRequest> => {
  if (typeof target !== "string") return Either.right(target)
  const parsed = target.includes("://") ? objectIdFromUri(target) : objectIdFromPath(target)
  return Either.mapLeft(parsed, (e) => new InvalidRequest({ detail: e.message }))
}

/** `s3://bucket/prefix` → `/s3/bucket/prefix`; path forms pass through. */
export const toListPrefix = (prefix: string): string => {
  const sep = prefix.indexOf("://")
  if (sep <= 0) return prefix
  const scheme = prefix.slice(0, sep)
  const name = scheme === "gs" ? "gcs" : scheme === "azure" ? "az" : scheme
  return `/${name}/${prefix.slice(sep + 3)}`
}
