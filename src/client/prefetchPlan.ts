/**
 * What a prefetch asks for, worked out without I/O: the listing prefix a user's URI names,
 * and the Loads that cover one object (each inside one block, so it goes to that block's
 * owners, and at most `loadBytes` long, so progress moves and no Load holds a worker long).
 */
import { Either } from "effect"
import { InvalidRequest } from "./errors.js"

const SCHEMES: Readonly<Record<string, string>> = { s3: "s3", az: "az", azure: "az", gs: "gcs", gcs: "gcs" }

/**
 * `s3://bucket/prefix`, `az://container/prefix` (or the path forms `/s3/bucket/prefix`,
 * `/az/container/prefix`) → the namespace path the coordinator lists; a clear refusal otherwise.
 */
export const parsePrefix = (prefix: string): Either.Either<string, InvalidRequest> => {
  const refuse = (why: string) =>
    Either.left(new InvalidRequest({ detail: `cannot prefetch ${JSON.stringify(prefix)}: ${why}; expected s3://bucket/prefix or az://container/prefix` }))
  const uri = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/]*)(\/.*)?$/.exec(prefix)
  if (uri !== null) {
    const scheme = SCHEMES[uri[1]!.toLowerCase()]
    if (scheme === undefined) return refuse(`unknown scheme ${JSON.stringify(uri[1])}`)
    if (uri[2] === "") return refuse("the bucket (or container) is missing")
    return Either.right(`/${scheme}/${uri[2]}${uri[3] ?? ""}`)
  }
  const path = /^\/+([^/]+)\/([^/]+)(\/.*)?$/.exec(prefix)
  if (path !== null) {
    const scheme = SCHEMES[path[1]!.toLowerCase()]
    if (scheme === undefined) return refuse(`unknown backend ${JSON.stringify(path[1])} in the path`)
    return Either.right(`/${scheme}/${path[2]}${path[3] ?? ""}`)
  }
  return refuse(prefix.includes("://") ? "the bucket (or container) is missing" : "not a URI or a /backend/bucket path")
}

/** One Load: `[offset, offset+length)` of an object, inside the block starting at `blockOffset`. */
export interface LoadPiece {
  readonly blockOffset: number
  readonly offset: number
  readonly length: number
}

/** The Loads covering `[0, size)`: block by block, each block in pieces of at most `loadBytes`. */
export const planLoads = (size: number, blockSize: number, loadBytes: number): ReadonlyArray<LoadPiece> => {
  const pieces: Array<LoadPiece> = []
  if (size <= 0 || blockSize <= 0 || loadBytes <= 0) return pieces
  for (let blockOffset = 0; blockOffset < size; blockOffset += blockSize) {
    const blockEnd = Math.min(size, blockOffset + blockSize)
    for (let offset = blockOffset; offset < blockEnd; offset += loadBytes) {
      pieces.push({ blockOffset, offset, length: Math.min(loadBytes, blockEnd - offset) })
    }
  }
  return pieces
}
