/**
 * The read-only filesystem behind `talon mount`: FUSE requests (src/mount/fuse/types.ts)
 * answered from the cluster through the same TalonClient the library uses.
 *
 * Names: Talon's namespace (namespace.ts), directories synthesised from coordinator listings
 * (listing.ts), inodes in a bounded table (InodeTable.ts).
 *
 * Freshness, past Talon's mount-time snapshot: a file's size and version are trusted for the
 * attribute TTL and asked again after it (getattr) and on every open; a name (and a
 * directory's listing) for the entry TTL. A new version at the origin gives the file a new
 * size and mtime and drops the kernel's cached pages of it. A handle reads only the version
 * it opened (every read is pinned to it, so a worker that no longer has it answers
 * VersionChanged): once the file is seen with another version, that handle's reads fail
 * with EIO instead of filling the shared page cache with bytes of the old version. So no
 * reader ever sees bytes of two versions in one file, and open keeps the kernel's pages
 * (FOPEN_KEEP_CACHE) only while they are of the version being opened.
 *
 * Metadata requests run as Effects on the runtime the filesystem was made in; the read path
 * is plain callbacks over `readRaw` (no fiber per kernel read).
 */
import * as fs from "node:fs"
import { Clock, Effect, Runtime } from "effect"
import type { TalonClientError } from "../client/errors.js"
import { type ObjectInfo, TalonClient } from "../client/TalonClient.js"
import { ENODATA, Errno, errnoOf } from "./errno.js"
import type { DirEntry, FuseAttr, FuseHandlers, FuseSession, ReplyError } from "./fuse/types.js"
import { InodeTable, type Node, type NodeKind, ROOT_INO } from "./InodeTable.js"
import { type Listing, synthesize } from "./listing.js"
import { MountMetrics, type MountGauges } from "./metrics.js"
import { type Exposed, isComponent, listPrefixOf, NAME_MAX, objectPathOf } from "./namespace.js"

export interface FilesystemOptions {
  readonly exposed: ReadonlyArray<Exposed>
  readonly attrTtlMs: number
  readonly entryTtlMs: number
  readonly negativeTtlMs: number
  readonly maxInodes: number
  readonly uid?: number
  readonly gid?: number
}

/** What the filesystem needs of a mounted session: dropping what the kernel caches. */
export type Invalidator = Pick<FuseSession, "invalidateInode" | "invalidateEntry">

export interface Filesystem {
  readonly handlers: FuseHandlers
  /** Connects the kernel session once mounted, so changes seen later drop the kernel's caches. */
  readonly attach: (session: Invalidator) => void
  readonly metrics: MountMetrics
  readonly gauges: () => MountGauges
}

/** The xattrs a file answers: its version (the ETag at the origin). */
export const VERSION_XATTRS = ["user.talon.etag", "user.talon.version"] as const

const DIR_MODE = fs.constants.S_IFDIR | 0o555
const FILE_MODE = fs.constants.S_IFREG | 0o444
/** Entries handed back per readdir reply: the binding packs what fits a kernel buffer, so more would only be copied and dropped. */
const READDIR_BATCH = 256

interface Handle {
  readonly node: Node
  readonly info: ObjectInfo
  /** Logged once: the handle's version was replaced at the origin. */
  staleLogged: boolean
}

interface DirHandle {
  readonly node: Node
  readonly entries: ReadonlyArray<DirEntry>
}

const isDirKind = (kind: NodeKind) => kind !== "file"

export const makeFilesystem = (options: FilesystemOptions): Effect.Effect<Filesystem, never, TalonClient> =>
  Effect.gen(function* () {
    const client = yield* TalonClient
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const now = (): number => Runtime.runSync(runtime)(Clock.currentTimeMillis)
    const started = now()
    const uid = options.uid ?? process.getuid?.() ?? 0
    const gid = options.gid ?? process.getgid?.() ?? 0
    const attrTtlSec = options.attrTtlMs / 1000
    const entryTtlSec = options.entryTtlMs / 1000
    const negativeTtlSec = options.negativeTtlMs / 1000
    const table = new InodeTable(options.maxInodes, started)
    table.get(ROOT_INO)!.mtimeMs = started
    const metrics = new MountMetrics()
    const handles = new Map<number, Handle>()
    const dirHandles = new Map<number, DirHandle>()
    let nextFh = 1
    let session: Invalidator | undefined

    const log = (message: string) => runFork(Effect.logWarning(message).pipe(Effect.annotateLogs("component", "mount")))
    const info = (message: string) => runFork(Effect.logInfo(message).pipe(Effect.annotateLogs("component", "mount")))
    const errorName = (errno: number) => Object.entries(Errno).find(([, v]) => v === errno)?.[0] ?? String(errno)

    const fail = (reply: ReplyError, errno: number) => {
      metrics.error(errorName(errno))
      reply.error(errno)
    }

    /** Runs one metadata request; a defect still answers the kernel (EIO) so no request hangs. */
    const answer = (what: string, reply: ReplyError, program: Effect.Effect<void, never>) =>
      runFork(
        program.pipe(
          Effect.catchAllDefect((defect) =>
            Effect.sync(() => {
              log(`${what}: internal error, answered EIO: ${String(defect)}`)
              fail(reply, Errno.EIO)
            })
          )
        )
      )

    const attrOf = (node: Node): FuseAttr => ({
      ino: node.ino,
      mode: isDirKind(node.kind) ? DIR_MODE : FILE_MODE,
      nlink: isDirKind(node.kind) ? 2 : 1,
      size: node.kind === "file" ? node.size : 0,
      mtimeMs: node.mtimeMs,
      uid,
      gid
    })

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
        return Effect.map(client.list(prefix), (entries) => {
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
        })
      })

    /** A file named by a listing: its size stands until a stat (which also learns the version) is due. */
    const fromListing = (node: Node, size: number, listedAt: number): void => {
      if (node.validatedAt >= listedAt) return
      if (node.version === undefined) {
        node.size = size
        node.validatedAt = listedAt
      } else if (node.size !== size) {
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
          if (!c.dir) fromListing(node, c.size, parent.listedAt)
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

    /** Answers a client error with its errno; anything but a missing object is logged with why. */
    const failWith = (reply: ReplyError, what: string, e: TalonClientError, errno = errnoOf(e)) => {
      if (errno !== Errno.ENOENT) log(`${what}: ${errorName(errno)}: ${e.message}`)
      fail(reply, errno)
    }

    const handlers: FuseHandlers = {
      lookup: (parentIno, name, reply) =>
        answer(
          "lookup",
          reply,
          Effect.suspend(() => {
            metrics.lookups++
            const parent = table.get(parentIno)
            if (parent === undefined) return Effect.sync(() => fail(reply, Errno.ENOENT))
            if (parent.kind === "file") return Effect.sync(() => fail(reply, Errno.ENOTDIR))
            return child(parent, name).pipe(
              Effect.match({
                onFailure: (e) => failWith(reply, `lookup ${objectPathOf(parent.path)}/${name}`, e),
                onSuccess: (node) => {
                  if (node === undefined) {
                    metrics.error("ENOENT")
                    return reply.negative(negativeTtlSec)
                  }
                  table.lookedUp(node)
                  reply.entry(attrOf(node), attrTtlFor(node, now()), entryTtlSec)
                }
              })
            )
          })
        ),

      forget: (ino, nlookup) => table.forget(ino, nlookup),

      getattr: (ino, reply) =>
        answer(
          "getattr",
          reply,
          Effect.suspend(() => {
            const node = table.get(ino)
            if (node === undefined) return Effect.sync(() => fail(reply, Errno.ENOENT))
            const t = now()
            if (node.kind !== "file" || t - node.validatedAt < options.attrTtlMs) {
              return Effect.sync(() => reply.attr(attrOf(node), attrTtlFor(node, t)))
            }
            return stat(node).pipe(
              Effect.match({
                onFailure: (e) => failWith(reply, `getattr ${objectPathOf(node.path)}`, e),
                onSuccess: () => reply.attr(attrOf(node), attrTtlFor(node, now()))
              })
            )
          })
        ),

      open: (ino, _flags, reply) =>
        answer(
          "open",
          reply,
          Effect.suspend(() => {
            const node = table.get(ino)
            if (node === undefined) return Effect.sync(() => fail(reply, Errno.ENOENT))
            if (node.kind !== "file") return Effect.sync(() => fail(reply, Errno.EISDIR))
            metrics.opens++
            // Every open asks the origin: a handle pins the version it opens.
            return stat(node).pipe(
              Effect.match({
                onFailure: (e) => failWith(reply, `open ${objectPathOf(node.path)}`, e),
                onSuccess: (s) => {
                  const keepCache = node.kernelVersion === s.version
                  node.kernelVersion = s.version
                  const fh = nextFh++
                  handles.set(fh, { node, info: s, staleLogged: false })
                  node.opens++
                  reply.open(fh, { keepCache, directIo: false })
                }
              })
            )
          })
        ),

      read: (_ino, fh, offset, size, reply) => {
        const h = handles.get(fh)
        if (h === undefined) return fail(reply, Errno.EBADF)
        if (h.info.version !== h.node.version) {
          metrics.staleReads++
          metrics.readErrors++
          if (!h.staleLogged) {
            h.staleLogged = true
            log(`read ${objectPathOf(h.node.path)}: EIO: opened at version ${h.info.version}, the origin now has ${h.node.version ?? "another"}; reopen the file to read the new version`)
          }
          return fail(reply, Errno.EIO)
        }
        if (offset >= h.info.size || size === 0) return reply.data([])
        const t0 = performance.now()
        client.readRaw(h.info, offset, size, (r) => {
          if (r.ok) {
            const chunks: Array<Uint8Array> = []
            let n = 0
            for (const p of r.payloads) for (const v of p.views) {
              chunks.push(v)
              n += v.length
            }
            reply.data(chunks)
            for (const p of r.payloads) p.release()
            metrics.reads++
            metrics.readBytes += n
            metrics.readLatency.observe((performance.now() - t0) / 1000)
            return
          }
          metrics.readErrors++
          const e = r.error
          if (e._tag === "VersionChanged") {
            // Learn the new version now, so the kernel's pages and attributes follow without waiting for the TTL.
            runFork(Effect.ignore(stat(h.node)))
          }
          failWith(reply, `read ${objectPathOf(h.node.path)} [${offset}, ${offset + size})`, e, errnoOf(e) === Errno.EACCES ? Errno.EACCES : Errno.EIO)
        })
      },

      release: (_ino, fh, reply) => {
        const h = handles.get(fh)
        if (h !== undefined) {
          handles.delete(fh)
          h.node.opens--
          table.release(h.node)
        }
        reply.ok()
      },

      opendir: (ino, reply) =>
        answer(
          "opendir",
          reply,
          Effect.suspend(() => {
            const node = table.get(ino)
            if (node === undefined) return Effect.sync(() => fail(reply, Errno.ENOENT))
            if (node.kind === "file") return Effect.sync(() => fail(reply, Errno.ENOTDIR))
            return dirEntries(node).pipe(
              Effect.match({
                onFailure: (e) => failWith(reply, `readdir ${objectPathOf(node.path)}`, e, errnoOf(e) === Errno.EACCES ? Errno.EACCES : Errno.EIO),
                onSuccess: (entries) => {
                  const fh = nextFh++
                  dirHandles.set(fh, { node, entries })
                  node.opens++
                  reply.open(fh, { keepCache: false, directIo: false })
                }
              })
            )
          })
        ),

      readdir: (_ino, fh, offset, reply) => {
        const d = dirHandles.get(fh)
        if (d === undefined) return fail(reply, Errno.EBADF)
        reply.entries(d.entries.slice(offset, offset + READDIR_BATCH))
      },

      releasedir: (_ino, fh, reply) => {
        const d = dirHandles.get(fh)
        if (d !== undefined) {
          dirHandles.delete(fh)
          d.node.opens--
          table.release(d.node)
        }
        reply.ok()
      },

      statfs: (_ino, reply) =>
        reply.statfs({ blockSize: 4096, blocks: 0, blocksFree: 0, blocksAvailable: 0, files: table.size, filesFree: 0, nameMax: NAME_MAX }),

      getxattr: (ino, name, reply) =>
        answer(
          "getxattr",
          reply,
          Effect.suspend(() => {
            const node = table.get(ino)
            if (node === undefined) return Effect.sync(() => fail(reply, Errno.ENOENT))
            if (node.kind !== "file" || !(VERSION_XATTRS as ReadonlyArray<string>).includes(name)) return Effect.sync(() => fail(reply, ENODATA))
            const fresh = node.version !== undefined && now() - node.validatedAt < options.attrTtlMs
            return (fresh ? Effect.succeed(node.version!) : Effect.map(stat(node), (s) => s.version)).pipe(
              Effect.match({
                onFailure: (e) => failWith(reply, `getxattr ${objectPathOf(node.path)}`, e),
                onSuccess: (version) => reply.value(Buffer.from(version, "utf8"))
              })
            )
          })
        ),

      listxattr: (ino, reply) => {
        const node = table.get(ino)
        if (node === undefined) return fail(reply, Errno.ENOENT)
        reply.names(node.kind === "file" ? VERSION_XATTRS : [])
      }
    }

    /** A directory's entries as one snapshot, `.` and `..` first; offsets are positions in it. */
    const dirEntries = (node: Node): Effect.Effect<ReadonlyArray<DirEntry>, TalonClientError> =>
      Effect.gen(function* () {
        const t = now()
        const names: Array<{ name: string; kind: NodeKind; size?: number }> = []
        if (node.kind === "root") {
          for (const b of new Set(options.exposed.map((e) => e.backend))) names.push({ name: b, kind: "backend" })
        } else if (node.kind === "backend") {
          for (const e of options.exposed) if (e.backend === node.name) names.push({ name: e.bucket, kind: "bucket" })
        } else {
          const listing = yield* listDir(node)
          for (const [name, c] of listing.children) names.push(c.dir ? { name, kind: "dir" } : { name, kind: "file", size: c.size })
        }
        const entries: Array<DirEntry> = [
          { name: ".", ino: node.ino, mode: DIR_MODE, nextOffset: 1 },
          { name: "..", ino: node.parent, mode: DIR_MODE, nextOffset: 2 }
        ]
        for (const n of names) {
          const c = table.child(node, n.name, n.kind, t)
          if (n.size !== undefined) fromListing(c, n.size, node.listedAt)
          entries.push({ name: n.name, ino: c.ino, mode: n.kind === "file" ? FILE_MODE : DIR_MODE, nextOffset: entries.length + 1 })
        }
        return entries
      })

    return {
      handlers,
      attach: (s) => {
        session = s
      },
      metrics,
      gauges: () => ({ inodes: table.size, openHandles: handles.size, evictedInodes: table.evicted })
    }
  })
