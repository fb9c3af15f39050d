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
 * (FOPEN_KEEP_CACHE) only while they are of the version being opened. A handle opened while
 * the kernel still believes another size (its attributes are dropped asynchronously) reads
 * with direct I/O, so the stale size cannot cut the new version short.
 *
 * Metadata requests run as Effects on the runtime the filesystem was made in; the read path
 * is plain callbacks over `readRaw` (no fiber per kernel read).
 */
import { Clock, Effect, type Redacted, Runtime } from "effect"
import type { TalonClientError } from "../client/errors.js"
import { type ObjectInfo, TalonClient } from "../client/TalonClient.js"
import { ENODATA, Errno, errnoOf } from "./errno.js"
import type { DirEntry, FuseHandlers, ReplyError } from "./fuse/types.js"
import type { Node } from "./InodeTable.js"
import { MountMetrics, type MountGauges } from "./metrics.js"
import type { Exposed } from "./namespace.js"
import { NAME_MAX, objectPathOf } from "./namespace.js"
import { type Invalidator, makeTree } from "./Tree.js"
import { makeDirLister } from "./adminListing.js"

export type { Invalidator } from "./Tree.js"

export interface FilesystemOptions {
  readonly exposed: ReadonlyArray<Exposed>
  readonly attrTtlMs: number
  readonly entryTtlMs: number
  readonly negativeTtlMs: number
  readonly maxInodes: number
  /** Coordinator admin HTTP addresses whose JSON listing (pages, origin mtimes) is preferred; none = the Talon-wire ListObjects. */
  readonly coordinatorAdmin?: ReadonlyArray<string>
  /** Set when coordinatorAdmin was guessed from the control list: pages must come from one of these control ports. */
  readonly coordinatorControlPorts?: ReadonlyArray<number>
  /** Sent as the bearer token to the admin listing. */
  readonly adminToken?: Redacted.Redacted<string> | undefined
  readonly uid?: number
  readonly gid?: number
}

export interface Filesystem {
  readonly handlers: FuseHandlers
  /** Connects the kernel session once mounted, so changes seen later drop the kernel's caches. */
  readonly attach: (session: Invalidator) => void
  readonly metrics: MountMetrics
  readonly gauges: () => MountGauges
}

/** The xattrs a file answers: its version (the ETag at the origin). */
export const VERSION_XATTRS = ["user.talon.etag", "user.talon.version"] as const

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

export const makeFilesystem = (options: FilesystemOptions): Effect.Effect<Filesystem, never, TalonClient> =>
  Effect.gen(function* () {
    const client = yield* TalonClient
    const runtime = yield* Effect.runtime<never>()
    const runFork = Runtime.runFork(runtime)
    const now = (): number => Runtime.runSync(runtime)(Clock.currentTimeMillis)
    const uid = options.uid ?? process.getuid?.() ?? 0
    const gid = options.gid ?? process.getgid?.() ?? 0
    const entryTtlSec = options.entryTtlMs / 1000
    const negativeTtlSec = options.negativeTtlMs / 1000
    const metrics = new MountMetrics()
    const handles = new Map<number, Handle>()
    const dirHandles = new Map<number, DirHandle>()
    let nextFh = 1

    const log = (message: string) => runFork(Effect.logWarning(message).pipe(Effect.annotateLogs("component", "mount")))
    const info = (message: string) => runFork(Effect.logInfo(message).pipe(Effect.annotateLogs("component", "mount")))
    const tree = makeTree(
      { exposed: options.exposed, attrTtlMs: options.attrTtlMs, entryTtlMs: options.entryTtlMs, maxInodes: options.maxInodes, uid, gid },
      { client, metrics, now, warn: log, info, list: makeDirLister(client, { admins: options.coordinatorAdmin ?? [], controlPorts: options.coordinatorControlPorts ?? [], adminToken: options.adminToken, maxEntries: options.maxInodes, now, warn: log }).list }
    )
    const { table, attrOf, attrTtlFor, stat, child, dirEntries } = tree
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
                  // The kernel still holds another size (its attributes are dropped asynchronously): its page cache
                  // would clamp reads at that size, so this handle reads around the page cache, bounded by its own version.
                  const directIo = node.kernelSize !== s.size
                  const keepCache = !directIo && node.kernelVersion === s.version
                  node.kernelVersion = directIo ? undefined : s.version
                  const fh = nextFh++
                  handles.set(fh, { node, info: s, staleLogged: false })
                  node.opens++
                  reply.open(fh, { keepCache, directIo })
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

    return {
      handlers,
      attach: tree.attach,
      metrics,
      gauges: () => ({ inodes: table.size, openHandles: handles.size, evictedInodes: table.evicted })
    }
  })
