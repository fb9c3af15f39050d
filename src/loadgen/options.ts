/** Parsers for loadgen's flag values; each returns a value or a message a user can act on. */
import { Either } from "effect"
import type { ObjectId } from "../core/ids.js"
import { objectIdFromUri } from "../core/objectId.js"
import { decodeHostPort, type HostPort } from "../transport/address.js"

/** `1,64,256,1024` → [1, 64, 256, 1024]. */
export const parseIntList = (flag: string, s: string): Either.Either<ReadonlyArray<number>, string> => {
  const parts = s.split(",").map((p) => p.trim()).filter((p) => p !== "")
  const values = parts.map(Number)
  if (parts.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    return Either.left(`${flag}: want a comma-separated list of positive integers, got ${JSON.stringify(s)}`)
  }
  return Either.right(values)
}

/** An address flag (transport/address.ts rules; port 1-65535), its error naming the flag. */
export const parseAddr = (flag: string, s: string): Either.Either<HostPort, string> =>
  Either.mapLeft(decodeHostPort(s), (why) => `${flag}: ${why}`)

/**
 * The object to read: a URI (`s3://bucket/key`, `az://container/key`), or a
 * bare key combined with `--backend` and `--container`.
 */
export const parseObject = (
  flag: string,
  object: string,
  backend: "s3" | "az",
  container: string | undefined
): Either.Either<ObjectId, string> => {
  if (object.includes("://")) return Either.mapLeft(objectIdFromUri(object), (e) => `${flag}: ${e.message}`)
  if (container === undefined || container === "") {
    return Either.left(`${flag} ${JSON.stringify(object)} is not a URI: give s3://bucket/key or az://container/key, or --container`)
  }
  const scheme = backend === "az" ? "az" : "s3"
  return Either.mapLeft(objectIdFromUri(`${scheme}://${container}/${object.replace(/^\/+/, "")}`), (e) => `${flag}: ${e.message}`)
}
