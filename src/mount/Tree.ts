/**
 * The mount's names and attributes: the inode table, what a stat or a listing says about a
 * node (observe / gone / fromListing), finding a child by listing or by stat, and a
 * directory's entries. Changes seen here drop the kernel's caches through the attached session.
 */
import * as fs from "node:fs"
import { Effect } from "effect"
import type { TalonClientError } from "../client/errors.js"
import type { ObjectInfo, TalonClientShape } from "../client/TalonClient.js"
import type { DirEntry, FuseAttr, FuseSession } from "./fuse/types.js"
import { InodeTable, type Node, type NodeKind } from "./InodeTable.js"
import { type Child, type ListedEntry, type Listing, synthesize } from "./listing.js"
import type { MountMetrics } from "./metrics.js"
import { type Exposed, isComponent, listPrefixOf, NAME_MAX, objectPathOf } from "./namespace.js"

export interface TreeOptions {
  readonly exposed: ReadonlyArray<Exposed>
  readonly attrTtlMs: number
  readonly entryTtlMs: number
  readonly maxInodes: number
  readonly uid: number
  readonly gid: number
}

/** What the filesystem needs of a mounted session: dropping what the kernel caches. */
export type Invalidator = Pick<FuseSession, "invalidateInode" | "invalidateEntry">

export interface TreeDeps {
  readonly client: TalonClientShape
  /** Directory listings (the coordinator's admin API, else the Talon wire: ./adminListing.ts). */
  readonly list: (prefix: string) => Effect.Effect<ReadonlyArray<ListedEntry>, TalonClientError>
  readonly metrics: MountMetrics
  readonly now: () => number
  readonly warn: (message: string) => void
  readonly info: (message: string) => void
}

export const DIR_MODE = fs.constants.S_IFDIR | 0o555
export const FILE_MODE = fs.constants.S_IFREG | 0o444

const isDirKind = (kind: NodeKind) => kind !== "file"

export const makeTree = (options: TreeOptions, deps: TreeDeps) => {
  const { client, metrics, now, info } = deps
  const log = deps.warn
  const { uid, gid } = options
  const attrTtlSec = options.attrTtlMs / 1000
  const table = new InodeTable(options.maxInodes, now())
  let session: Invalidator | undefined

  /** A node's attributes for a reply to the kernel; the size the kernel will clamp cached reads at is remembered. */
  const attrOf = (node: Node): FuseAttr => {
    if (node.kind === "file") node.kernelSize = node.size
    return {
      ino: node.ino,
      mode: isDirKind(node.kind) ? DIR_MODE : FILE_MODE,
      nlink: isDirKind(node.kind) ? 2 : 1,
      size: node.kind === "file" ? node.size : 0,
      mtimeMs: node.mtimeMs,
      uid,
      gid
    }
  }

  /** Seconds the kernel may keep a file's attributes: what is left of our own trust in them. */
  const attrTtlFor = (node: Node, t: number): number =>
    node.kind === "file" ? Math.max(0, options.attrTtlMs - (t - node.validatedAt)) / 1000 : attrTtlSec

  /** A stat's answer applied to a file: a new version changes size and mtime and drops the kernel's pages. */
  const observe = (node: Node, stat: ObjectInfo, t: number): void => {
    if (node.version !== undefined && node.version !== stat.version) {
      metrics.versionChanges++
      node.mtimeMs = t
      node.kernelVersion = undefined
      session?.invalidateInode(node.ino, 0, 0)
      info(`${objectPathOf(node.path)} changed at the origin (version ${node.version} → ${stat.version}, ${stat.size} bytes): cached pages dropped, handles open on the old version now fail with EIO`)
    }
    node.version = stat.version
    node.size = stat.size
    node.validatedAt = t
  }

  /** The object is gone at the origin: the kernel forgets the name, the parent's listing is asked again. */
  const gone = (node: Node): void => {
    const parent = table.get(node.parent)
    if (parent !== undefined) parent.listedAt = Number.NEGATIVE_INFINITY
    node.validatedAt = Number.NEGATIVE_INFINITY
    session?.invalidateEntry(node.parent, node.name)
  }

  const stat = (node: Node): Effect.Effect<ObjectInfo, TalonClientError> =>
    Effect.suspend(() => {
      metrics.stats++
      return client.stat(objectPathOf(node.path))
    }).pipe(
      Effect.tap((s) => Effect.sync(() => observe(node, s, now()))),
      // Only a name the kernel or a handle knows needs forgetting; a lookup of a name that never existed does not.
      Effect.tapError((e) => Effect.sync(() => (e._tag === "ObjectNotFound" && (node.lookups > 0 || node.version !== undefined) ? gone(node) : undefined)))
    )

  /** A directory's listing: kept for the entry TTL; names that disappeared are dropped from the kernel's cache. */
  const listDir = (node: Node): Effect.Effect<Listing, TalonClientError> =>
    Effect.suspend(() => {
      const t = now()
      if (node.listing !== undefined && t - node.listedAt < options.entryTtlMs) return Effect.succeed(node.listing)
      metrics.listings++
      const prefix = listPrefixOf(node.path)
      return Effect.map(deps.list(prefix), (entries) => {
        const listing = synthesize(prefix, entries)
        if (listing.skipped + listing.shadowed > 0) {
          log(`${prefix}: ${listing.skipped} key(s) not shown (an empty, "." or ".." component, or a name over ${NAME_MAX} bytes), ${listing.shadowed} file(s) hidden by a directory of the same name`)
        }
        const before = node.listing
        if (before !== undefined && session !== undefined) {
          for (const name of before.children.keys()) if (!listing.children.has(name)) session.invalidateEntry(node.ino, name)
        }
        node.listing = listing
        node.listedAt = now()
        return listing
      }).pipe(
        // No coordinator answers: the last listing stands (open files read on from the workers meanwhile).
        Effect.catchTag("CoordinatorUnavailable", (e) => {
          const last = node.listing
          if (last === undefined) return Effect.fail(e)
          log(`${prefix}: no coordinator answers (${e.message}); the listing from ${Math.round((now() - node.listedAt) / 1000)} s ago stands`)
          return Effect.succeed(last)
        })
      )
    })

  /** A file named by a listing: its size stands until a stat (which also learns the version) is due; its mtime is the origin's when the listing says it. */
  const fromListing = (node: Node, c: Child & { dir: false }, listedAt: number): void => {
    const sameVersion = node.version === undefined || c.version === undefined || c.version === node.version
    if (c.mtimeMs !== undefined && sameVersion) node.mtimeMs = c.mtimeMs
    if (node.validatedAt >= listedAt) return
    if (node.version === undefined) {
      node.size = c.size
      node.validatedAt = listedAt
    } else if (node.size !== c.size || !sameVersion) {
      // Another version than the one we know: the next getattr or open asks the origin for it.
      node.validatedAt = Number.NEGATIVE_INFINITY
    }
  }

  /** The child `name` of `parent`, or undefined when there is none. */
  const child = (parent: Node, name: string): Effect.Effect<Node | undefined, TalonClientError> =>
    Effect.suspend((): Effect.Effect<Node | undefined, TalonClientError> => {
      const t = now()
      switch (parent.kind) {
        case "root":
          return Effect.succeed(options.exposed.some((e) => e.backend === name) ? table.child(parent, name, "backend", t) : undefined)
        case "backend":
          return Effect.succeed(
            options.exposed.some((e) => e.backend === parent.name && e.bucket === name) ? table.child(parent, name, "bucket", t) : undefined
          )
        case "file":
          return Effect.succeed(undefined)
      }
      if (!isComponent(name)) return Effect.succeed(undefined)
      if (parent.listing !== undefined && t - parent.listedAt < options.entryTtlMs) {
        const c = parent.listing.children.get(name)
        if (c === undefined) return Effect.succeed(undefined)
        const node = table.child(parent, name, c.dir ? "dir" : "file", t)
        if (!c.dir) fromListing(node, c, parent.listedAt)
        return Effect.succeed(node)
      }
      // No fresh listing of the parent: the name is a file if the origin has that object, else a directory if any key is under it.
      const candidate = table.find(parent.ino, name) ?? table.child(parent, name, "file", t)
      if (candidate.kind === "file" && t - candidate.validatedAt < options.attrTtlMs) return Effect.succeed(candidate)
      if (candidate.kind === "file") {
        return stat(candidate).pipe(
          Effect.as(candidate),
          Effect.catchTag("ObjectNotFound", () => probeDir(parent, name)),
          Effect.catchTag("InvalidRequest", () => Effect.succeed(undefined))
        )
      }
      return probeDir(parent, name)
    })

  const probeDir = (parent: Node, name: string): Effect.Effect<Node | undefined, TalonClientError> => {
    const node = table.child(parent, name, "dir", now())
    return listDir(node).pipe(
      Effect.map((listing) => (listing.children.size > 0 ? node : undefined)),
      // Refused as too large: there are keys under the name, so it is a directory (listing it will say the rest).
      Effect.catchTag("InvalidRequest", (e) => Effect.succeed(/more than \d+ objects|does not fit/.test(e.detail) ? node : undefined)),
      Effect.tap((found) => Effect.sync(() => (found === undefined ? table.release(node) : undefined)))
    )
  }

  /** A directory's entries as one snapshot, `.` and `..` first; offsets are positions in it. */
  const dirEntries = (node: Node): Effect.Effect<ReadonlyArray<DirEntry>, TalonClientError> =>
    Effect.gen(function* () {
      const t = now()
      const names: Array<{ name: string; kind: NodeKind; file?: Child & { dir: false } }> = []
      if (node.kind === "root") {
        for (const b of new Set(options.exposed.map((e) => e.backend))) names.push({ name: b, kind: "backend" })
      } else if (node.kind === "backend") {
        for (const e of options.exposed) if (e.backend === node.name) names.push({ name: e.bucket, kind: "bucket" })
      } else {
        const listing = yield* listDir(node)
        for (const [name, c] of listing.children) names.push(c.dir ? { name, kind: "dir" } : { name, kind: "file", file: c })
      }
      const entries: Array<DirEntry> = [
        { name: ".", ino: node.ino, mode: DIR_MODE, nextOffset: 1 },
        { name: "..", ino: node.parent, mode: DIR_MODE, nextOffset: 2 }
      ]
      for (const n of names) {
        const c = table.child(node, n.name, n.kind, t)
        if (n.file !== undefined) fromListing(c, n.file, node.listedAt)
        entries.push({ name: n.name, ino: c.ino, mode: n.kind === "file" ? FILE_MODE : DIR_MODE, nextOffset: entries.length + 1 })
      }
      return entries
    })

  return {
    table,
    attrOf,
    attrTtlFor,
    stat,
    listDir,
    child,
    dirEntries,
    attach: (s: Invalidator) => {
      session = s
    }
  }
}

export type Tree = ReturnType<typeof makeTree>
