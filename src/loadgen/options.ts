/** Parsers for loadgen's flag values; each returns a value or a message a user can act on. */
import { Either } from "effect"
import type { ObjectId } from "../core/ids.js"
import { objectIdFromUri } from "../core/objectId.js"

/** `65536`, `64K`, `64KiB`, `1M`, `2G` (binary suffixes, as pound takes them). */
export const parseSize = (flag: string, s: string): Either.Either<number, string> => {
  const m = /^(\d+)\s*([kKmMgGtT]?)(i?[bB])?$/.exec(s.trim())
  if (!m) return Either.left(`${flag}: bad size ${JSON.stringify(s)} (bytes, optionally with K/M/G/T)`)
  const mult = { "": 1, k: 2 ** 10, m: 2 ** 20, g: 2 ** 30, t: 2 ** 40 }[m[2]!.toLowerCase() as "" | "k" | "m" | "g" | "t"]
  const v = Number(m[1]) * mult
  return Number.isSafeInteger(v) ? Either.right(v) : Either.left(`${flag}: ${s} is too large`)
}

/** `1,64,256,1024` → [1, 64, 256, 1024]. */
export const parseIntList = (flag: string, s: string): Either.Either<ReadonlyArray<number>, string> => {
  const parts = s.split(",").map((p) => p.trim()).filter((p) => p !== "")
  const values = parts.map(Number)
  if (parts.length === 0 || values.some((v) => !Number.isSafeInteger(v) || v < 1)) {
    return Either.left(`${flag}: want a comma-separated list of positive integers, got ${JSON.stringify(s)}`)
  }
  return Either.right(values)
}

/** `host:port` (IPv4 or a name; port 1–65535). */
export const parseAddr = (flag: string, s: string): Either.Either<{ host: string; port: number }, string> => {
  const colon = s.lastIndexOf(":")
  const port = Number(s.slice(colon + 1))
  if (colon <= 0 || !Number.isInteger(port) || port < 1 || port > 65535) {
    return Either.left(`${flag}: want HOST:PORT, got ${JSON.stringify(s)}`)
  }
  return Either.right({ host: s.slice(0, colon), port })
}

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
