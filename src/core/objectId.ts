/**
 * ObjectId <-> namespace path (`/s3/bucket/key`) and URI (`s3://bucket/key`).
 *
 * Rules follow Talon's `ObjectId::from_path`: leading slashes are optional, the
 * path splits into at most three parts (backend, bucket, object path), `az`
 * and `azure` both mean Azure, and empty / `.` / `..` components are rejected
 * anywhere so an object name can never traverse out of its namespace when it
 * is interpolated into a backend URL or a cache directory. Keys are taken
 * verbatim (no percent-decoding); multi-byte UTF-8 is just string content.
 *
 * Parsing is indexOf-based (no regex, no split) because it sits on the
 * gateway's per-request path.
 */
import { Data, Either } from "effect"
import { Backend, type BlockId, type ObjectId } from "./ids.js"

export class InvalidObjectPath extends Data.TaggedError("InvalidObjectPath")<{
  readonly input: string
  readonly reason: string
}> {
  override get message(): string {
    return `invalid object path ${JSON.stringify(this.input)}: ${this.reason}`
  }
}

const PATH_PREFIX: Record<Backend, string> = { [Backend.S3]: "s3", [Backend.Gcs]: "gcs", [Backend.Azure]: "az" }
const URI_SCHEME: Record<Backend, string> = { [Backend.S3]: "s3", [Backend.Gcs]: "gs", [Backend.Azure]: "az" }

/** Backend from a path prefix or URI scheme; `undefined` when unknown. */
export const backendFromName = (name: string): Backend | undefined => {
  switch (name) {
    case "s3":
      return Backend.S3
    case "gcs":
    case "gs":
      return Backend.Gcs
    case "az":
    case "azure":
      return Backend.Azure
    default:
      return undefined
  }
}

export const backendPrefix = (backend: Backend): string => PATH_PREFIX[backend]

const SLASH = 47
const BAD_COMPONENT = "empty, '.' or '..' component in object path"
const DOT = 46

/** True when `s[from, to)` is "", "." or "..". */
const isBadComponent = (s: string, from: number, to: number): boolean => {
  const n = to - from
  if (n === 0) return true
  if (n === 1) return s.charCodeAt(from) === DOT
  if (n === 2) return s.charCodeAt(from) === DOT && s.charCodeAt(from + 1) === DOT
  return false
}

/**
 * Checks every `/`-separated component of `s[from, s.length)`; returns a reason or undefined.
 * Jumps from slash to slash with indexOf: only component ends need looking at, and the
 * builtin scan is cheaper than a charCodeAt per character for anything but tiny keys.
 */
const checkObjectPath = (s: string, from: number): string | undefined => {
  const end = s.length
  if (from >= end) return "missing object path"
  let start = from
  for (;;) {
    const slash = s.indexOf("/", start)
    if (slash < 0) return isBadComponent(s, start, end) ? BAD_COMPONENT : undefined
    if (isBadComponent(s, start, slash)) return BAD_COMPONENT
    start = slash + 1
  }
}

/** Parses `bucket/objectPath` starting at `from`, common to path and URI forms. */
const parseRest = (input: string, backend: Backend, from: number): Either.Either<ObjectId, InvalidObjectPath> => {
  const slash = input.indexOf("/", from)
  if (slash < 0) {
    return Either.left(
      new InvalidObjectPath({ input, reason: from >= input.length ? "missing bucket" : "missing object path" })
    )
  }
  if (isBadComponent(input, from, slash)) {
    return Either.left(new InvalidObjectPath({ input, reason: "empty, '.' or '..' bucket" }))
  }
  const reason = checkObjectPath(input, slash + 1)
  if (reason !== undefined) return Either.left(new InvalidObjectPath({ input, reason }))
  return Either.right({ backend, bucket: input.slice(from, slash), objectPath: input.slice(slash + 1) })
}

/**
 * The backend named at `s[i]` when `backendFromName` knows the name and a `/` follows it,
 * packed as `length × 4 + backend`; 0 otherwise. Compared in place: no indexOf or slice on
 * the gateway's per-request path.
 */
const knownBackendAt = (s: string, i: number): number => {
  const c0 = s.charCodeAt(i)
  const c1 = s.charCodeAt(i + 1)
  const c2 = s.charCodeAt(i + 2)
  if (c2 === SLASH) {
    if (c0 === 0x73 && c1 === 0x33) return 2 * 4 + Backend.S3 // s3
    if (c0 === 0x61 && c1 === 0x7a) return 2 * 4 + Backend.Azure // az
    if (c0 === 0x67 && c1 === 0x73) return 2 * 4 + Backend.Gcs // gs
    return 0
  }
  if (c0 === 0x67 && c1 === 0x63 && c2 === 0x73) return s.charCodeAt(i + 3) === SLASH ? 3 * 4 + Backend.Gcs : 0 // gcs
  return c0 === 0x61 && s.startsWith("azure/", i) ? 5 * 4 + Backend.Azure : 0
}

/** `/{s3|gcs|az|azure}/{bucket}/{objectPath}` → ObjectId. */
export const objectIdFromPath = (path: string): Either.Either<ObjectId, InvalidObjectPath> => {
  let i = 0
  while (path.charCodeAt(i) === SLASH) i++
  const known = knownBackendAt(path, i)
  if (known !== 0) return parseRest(path, (known & 3) as Backend, i + (known >>> 2) + 1)
  // Not a known backend followed by '/': only the error reason is left to work out.
  const slash = path.indexOf("/", i)
  if (slash < 0 || slash === i) {
    return Either.left(new InvalidObjectPath({ input: path, reason: i >= path.length ? "missing backend" : "missing bucket" }))
  }
  return Either.left(
    new InvalidObjectPath({ input: path, reason: `unknown backend ${JSON.stringify(path.slice(i, slash))} (expected s3, gcs, az or azure)` })
  )
}

export const objectIdToPath = (id: ObjectId): string => `/${PATH_PREFIX[id.backend]}/${id.bucket}/${id.objectPath}`

/** `s3://bucket/key`, `gs://bucket/key` (or `gcs://`), `az://container/key` (or `azure://`) → ObjectId. */
export const objectIdFromUri = (uri: string): Either.Either<ObjectId, InvalidObjectPath> => {
  const sep = uri.indexOf("://")
  if (sep <= 0) {
    return Either.left(new InvalidObjectPath({ input: uri, reason: "not a URI (expected scheme://bucket/key)" }))
  }
  const backend = backendFromName(uri.slice(0, sep))
  if (backend === undefined) {
    return Either.left(
      new InvalidObjectPath({ input: uri, reason: `unknown scheme ${JSON.stringify(uri.slice(0, sep))} (expected s3, gs, az)` })
    )
  }
  return parseRest(uri, backend, sep + 3)
}

export const objectIdToUri = (id: ObjectId): string => `${URI_SCHEME[id.backend]}://${id.bucket}/${id.objectPath}`

/** Checks a programmatically built ObjectId against the same rules as the parsers. */
export const validateObjectId = (id: ObjectId): Either.Either<ObjectId, InvalidObjectPath> => {
  const input = objectIdToPath(id)
  if (PATH_PREFIX[id.backend] === undefined) {
    return Either.left(new InvalidObjectPath({ input, reason: `unknown backend tag ${id.backend}` }))
  }
  if (id.bucket.includes("/") || isBadComponent(id.bucket, 0, id.bucket.length)) {
    return Either.left(new InvalidObjectPath({ input, reason: "bucket must be a single non-empty component other than '.' or '..'" }))
  }
  const reason = checkObjectPath(id.objectPath, 0)
  return reason === undefined ? Either.right(id) : Either.left(new InvalidObjectPath({ input, reason }))
}

export const objectIdEquals = (a: ObjectId, b: ObjectId): boolean =>
  a === b || (a.backend === b.backend && a.bucket === b.bucket && a.objectPath === b.objectPath)

/** Equal only when object, offset, block size and version all match (a new version is a new key). */
export const blockIdEquals = (a: BlockId, b: BlockId): boolean =>
  a === b ||
  (a.offset === b.offset && a.blockSize === b.blockSize && a.version === b.version && objectIdEquals(a.object, b.object))

/** Display form `<path>@<version>#<offset>+<blockSize>`, as Talon prints it. */
export const blockIdToString = (b: BlockId): string =>
  `${objectIdToPath(b.object)}@${b.version}#${b.offset}+${b.blockSize}`
