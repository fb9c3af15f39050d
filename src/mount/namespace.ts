/**
 * Talon's mount namespace: the root holds one directory per backend (`s3`, `az`, `gcs`), each
 * holding the exposed buckets/containers, under which key paths are directories and files:
 * `/s3/<bucket>/<key path>`. Which buckets appear is a setting (the control protocol lists
 * objects within a bucket, not buckets). A name the kernel can show must be a valid path
 * component: not empty, not `.`/`..`, at most 255 bytes.
 */
import { Either } from "effect"
import { backendFromName, backendPrefix } from "../core/objectId.js"

export interface Exposed {
  /** Path prefix of the backend: `s3`, `az` or `gcs`. */
  readonly backend: string
  readonly bucket: string
}

/** `s3/bucket`, `az/container` and `gs/bucket` (or `gcs/bucket`) entries → what the root shows; a message for a malformed one. */
export const parseExposed = (entries: ReadonlyArray<string>): Either.Either<ReadonlyArray<Exposed>, string> => {
  const out: Array<Exposed> = []
  for (const raw of entries) {
    const entry = raw.replace(/^\/+|\/+$/g, "")
    const slash = entry.indexOf("/")
    const backend = slash < 0 ? undefined : backendFromName(entry.slice(0, slash))
    const bucket = slash < 0 ? "" : entry.slice(slash + 1)
    if (backend === undefined || !isComponent(bucket) || bucket.includes("/")) {
      return Either.left(`expose entry ${JSON.stringify(raw)} must be s3/<bucket>, az/<container> or gs/<bucket>, e.g. s3/talon`)
    }
    const exposed = { backend: backendPrefix(backend), bucket }
    if (!out.some((e) => e.backend === exposed.backend && e.bucket === exposed.bucket)) out.push(exposed)
  }
  if (out.length === 0) return Either.left("nothing to expose: give at least one s3/<bucket>, az/<container> or gs/<bucket>")
  return Either.right(out)
}

/** The kernel's NAME_MAX. */
export const NAME_MAX = 255

/** True when `name` can be one path component the kernel shows and Talon's object paths accept. */
export const isComponent = (name: string): boolean =>
  name.length > 0 && name !== "." && name !== ".." && !name.includes("/") && !name.includes("\0") && Buffer.byteLength(name) <= NAME_MAX

/** A node's namespace path (`s3/bucket/a/b`) joined with a child name. */
export const childPath = (parent: string, name: string): string => (parent === "" ? name : `${parent}/${name}`)

/** The object path a file node reads (`/s3/bucket/a/b.bin`). */
export const objectPathOf = (path: string): string => `/${path}`

/** The ListObjects prefix of a directory node inside a bucket (`/s3/bucket/a/`). */
export const listPrefixOf = (path: string): string => `/${path}/`
