/**
 * A directory's children synthesised from a coordinator listing. ListObjects answers every
 * object under a prefix (recursively, as namespace paths); the directory shows each first
 * path component once: a file when the key ends there, a directory when more follows.
 * A name that is both (keys `a` and `a/b`) is shown as the directory: its contents can only
 * be reached that way. Components the kernel cannot show (empty, `.`, `..`, over 255 bytes)
 * are skipped and counted, so the caller can log them.
 */
import { isComponent } from "./namespace.js"

export type Child =
  | { readonly dir: true }
  | { readonly dir: false; readonly size: number; readonly mtimeMs?: number | undefined; readonly version?: string | undefined }

/** A listed object (or, ending in `/`, a common prefix); time and version when the listing carries them. */
export interface ListedEntry {
  readonly path: string
  readonly size: number
  readonly mtimeMs?: number | undefined
  readonly version?: string | undefined
}

export interface Listing {
  /** Children by name, in name order. */
  readonly children: ReadonlyMap<string, Child>
  /** Keys that could not be shown (a bad component on their way). */
  readonly skipped: number
  /** Files hidden by a directory of the same name. */
  readonly shadowed: number
}

const DIR: Child = { dir: true }

/** The children of the directory whose listing prefix is `prefix` (ending in `/`) among `entries`. */
export const synthesize = (prefix: string, entries: ReadonlyArray<ListedEntry>): Listing => {
  const children = new Map<string, Child>()
  let skipped = 0
  let shadowed = 0
  for (const e of entries) {
    if (!e.path.startsWith(prefix)) {
      skipped++
      continue
    }
    const rest = e.path.slice(prefix.length)
    // A key equal to the prefix itself is a directory marker ("a/b/"): the directory exists, nothing to show.
    if (rest.length === 0) continue
    const slash = rest.indexOf("/")
    const name = slash < 0 ? rest : rest.slice(0, slash)
    if (!isComponent(name)) {
      skipped++
      continue
    }
    if (slash >= 0) {
      const had = children.get(name)
      if (had !== undefined && !had.dir) shadowed++
      children.set(name, DIR)
    } else {
      const had = children.get(name)
      if (had === undefined) children.set(name, { dir: false, size: e.size, mtimeMs: e.mtimeMs, version: e.version })
      else if (had.dir) shadowed++
    }
  }
  const sorted = new Map([...children].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  return { children: sorted, skipped, shadowed }
}
