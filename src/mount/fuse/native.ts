import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import type {
  DirEntry,
  FuseAttr,
  FuseBinding,
  FuseHandlers,
  FuseSession,
  MountOptions,
  OpenFlags,
  ReplyAttr,
  ReplyData,
  ReplyDir,
  ReplyEntry,
  ReplyNone,
  ReplyOpen,
  ReplyStatFs,
  ReplyXattr,
  ReplyXattrList,
  StatFs
} from "./types.js"

/** An opaque request token: answered once through one of the reply functions. */
type Token = { readonly __token: unique symbol }
/** An opaque mounted session. */
type Handle = { readonly __session: unique symbol }

/** What init negotiated with the kernel (for logs and tests). */
export interface KernelInfo {
  /** 1 once the kernel's INIT has been answered. */
  readonly initialized: number
  readonly protoMinor: number
  /** libfuse derives the largest read (max_pages) from it. */
  readonly maxWrite: number
  readonly maxReadahead: number
  readonly maxBackground: number
  /** FUSE_CAP_* bit sets: what the kernel offers and what was asked for. */
  readonly capable: number
  readonly want: number
}

/** The functions exported by `native/fuse.c` (build/Release/talon_fuse.node). */
export interface FuseAddon {
  readonly mount: (
    mountpoint: string,
    fsName: string,
    allowOther: boolean,
    maxRead: number,
    maxReadahead: number,
    dispatch: (op: number, token: Token | undefined, ino: number, a: number, b: number, c: number, name: string | undefined) => void
  ) => Handle
  readonly unmount: (session: Handle) => boolean
  readonly invalidateInode: (session: Handle, ino: number, offset: number, length: number) => void
  readonly invalidateEntry: (session: Handle, parent: number, name: string) => void
  readonly info: (session: Handle) => KernelInfo
  readonly replyErr: (t: Token, errno: number) => boolean
  readonly replyEntry: (
    t: Token,
    ino: number,
    mode: number,
    nlink: number,
    size: number,
    mtimeMs: number,
    uid: number,
    gid: number,
    attrTtl: number,
    entryTtl: number
  ) => boolean
  readonly replyNegative: (t: Token, entryTtl: number) => boolean
  readonly replyAttr: (
    t: Token,
    ino: number,
    mode: number,
    nlink: number,
    size: number,
    mtimeMs: number,
    uid: number,
    gid: number,
    attrTtl: number
  ) => boolean
  /** "interrupted" when the open was cancelled before the answer arrived: the handle is the caller's to release. */
  readonly replyOpen: (t: Token, fh: number, keepCache: boolean, directIo: boolean) => boolean | "interrupted"
  readonly replyData: (t: Token, chunks: ReadonlyArray<Uint8Array>) => boolean
  readonly replyNone: (t: Token) => boolean
  /** How many entries fit the kernel's buffer (or false when already answered). */
  readonly replyDir: (t: Token, entries: ReadonlyArray<DirEntry>) => number | false
  readonly replyStatfs: (
    t: Token,
    blockSize: number,
    blocks: number,
    blocksFree: number,
    blocksAvailable: number,
    files: number,
    filesFree: number,
    nameMax: number
  ) => boolean
  readonly replyXattr: (t: Token, value: Uint8Array) => boolean
  readonly replyXattrNames: (t: Token, names: ReadonlyArray<string>) => boolean
}

/** Op codes of native/fuse.c's dispatch. */
const Op = {
  lookup: 1,
  forget: 2,
  getattr: 3,
  open: 4,
  read: 5,
  release: 6,
  opendir: 7,
  readdir: 8,
  releasedir: 9,
  statfs: 10,
  getxattr: 11,
  listxattr: 12,
  ended: 100,
  init: 101
} as const

const EIO = 5

export const defaultFuseAddonPath = fileURLToPath(new URL("../../../build/Release/talon_fuse.node", import.meta.url))

const install = "apt-get install fuse3 libfuse3-dev pkg-config, then npm rebuild"

export type FuseAddonLoad =
  | { readonly _tag: "Loaded"; readonly addon: FuseAddon; readonly binding: NativeFuseBinding; readonly path: string }
  | { readonly _tag: "Unavailable"; readonly reason: string }

const required: ReadonlyArray<keyof FuseAddon> = [
  "mount",
  "unmount",
  "invalidateInode",
  "invalidateEntry",
  "info",
  "replyErr",
  "replyEntry",
  "replyNegative",
  "replyAttr",
  "replyOpen",
  "replyData",
  "replyNone",
  "replyDir",
  "replyStatfs",
  "replyXattr",
  "replyXattrNames"
]

const cache = new Map<string, FuseAddonLoad>()

/** Loads the libfuse3 binding once per path; never throws: an unusable addon is a reason, not an exception. */
export const loadFuseBinding = (path: string = defaultFuseAddonPath): FuseAddonLoad => {
  const hit = cache.get(path)
  if (hit !== undefined) return hit
  const result = attempt(path)
  cache.set(path, result)
  return result
}

const attempt = (path: string): FuseAddonLoad => {
  if (process.platform !== "linux") {
    return { _tag: "Unavailable", reason: `talon mount needs Linux and libfuse3 (this is ${process.platform})` }
  }
  let addon: FuseAddon
  try {
    addon = createRequire(import.meta.url)(path) as FuseAddon
  } catch (error) {
    const message = (error as Error).message?.split("\n")[0] ?? String(error)
    return {
      _tag: "Unavailable",
      reason: `the FUSE binding failed to load from ${path} (${message}); ${install}`
    }
  }
  const missing = required.filter((name) => typeof (addon as unknown as Record<string, unknown>)[name] !== "function")
  if (missing.length > 0) {
    return { _tag: "Unavailable", reason: `the FUSE binding at ${path} is stale (missing ${missing.join(", ")}); npm rebuild` }
  }
  return { _tag: "Loaded", addon, binding: new NativeFuseBinding(addon), path }
}

/** A mounted session, with what the kernel granted. */
export interface NativeFuseSession extends FuseSession {
  readonly mountpoint: string
  /** What init negotiated; `initialized` is 0 until the kernel's first request has been answered. */
  readonly kernel: () => KernelInfo
}

/** Where a handler's throw goes: it is answered EIO (the caller is not left waiting) and reported here. */
export type HandlerErrorSink = (error: unknown, op: string) => void

const warn: HandlerErrorSink = (error, op) => {
  process.emitWarning(`FUSE ${op} handler threw (answered EIO): ${error instanceof Error ? error.stack ?? error.message : String(error)}`)
}

const opName = (op: number): string => Object.entries(Op).find(([, code]) => code === op)?.[0] ?? `op ${op}`

/** FuseBinding over the addon: turns the raw dispatch into typed reply objects. */
export class NativeFuseBinding implements FuseBinding {
  constructor(
    readonly addon: FuseAddon,
    private readonly onHandlerError: HandlerErrorSink = warn
  ) {}

  /** The same binding, reporting handler throws to `sink` instead of process warnings. */
  withHandlerErrors(sink: HandlerErrorSink): NativeFuseBinding {
    return new NativeFuseBinding(this.addon, sink)
  }

  mount(mountpoint: string, options: MountOptions, handlers: FuseHandlers): Promise<NativeFuseSession> {
    const addon = this.addon
    const onHandlerError = this.onHandlerError
    let resolveClosed!: () => void
    const closed = new Promise<void>((resolve) => {
      resolveClosed = resolve
    })
    let initialized = false
    let resolveReady!: () => void
    let rejectReady!: (error: Error) => void
    const ready = new Promise<void>((resolve, reject) => {
      resolveReady = resolve
      rejectReady = reject
    })
    const dispatch = (op: number, token: Token | undefined, ino: number, a: number, b: number, c: number, name: string | undefined): void => {
      if (op === Op.init) {
        initialized = true
        resolveReady()
        return
      }
      if (op === Op.ended) {
        if (!initialized) {
          rejectReady(
            new Error(
              `the kernel ended the FUSE session at ${mountpoint} before it started (libfuse's reason is on stderr); check the mount options and that nothing else serves this mountpoint`
            )
          )
        }
        resolveClosed()
        return
      }
      try {
        if (token === undefined) {
          if (op === Op.forget) handlers.forget(ino, a)
          return
        }
        route(addon, handlers, op, token, ino, a, b, c, name)
      } catch (error) {
        if (token !== undefined) addon.replyErr(token, EIO)
        onHandlerError(error, opName(op))
      }
    }
    let handle: Handle
    try {
      handle = addon.mount(mountpoint, options.fsName, options.allowOther, options.maxReadBytes, options.maxReadaheadBytes, dispatch)
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
    let unmounting: Promise<void> | undefined
    const session: NativeFuseSession = {
      mountpoint,
      closed,
      unmount: () => {
        if (unmounting === undefined) {
          addon.unmount(handle)
          unmounting = closed
        }
        return unmounting
      },
      invalidateInode: (ino, offset, length) => addon.invalidateInode(handle, ino, offset, length),
      invalidateEntry: (parent, name) => addon.invalidateEntry(handle, parent, name),
      kernel: () => addon.info(handle)
    }
    // Resolved once the kernel's INIT is answered: the mount is live and `kernel()` is what it granted.
    return ready.then(() => session)
  }
}

const replyError = (addon: FuseAddon, t: Token) => (errno: number) => {
  addon.replyErr(t, errno)
}

const route = (
  addon: FuseAddon,
  handlers: FuseHandlers,
  op: number,
  t: Token,
  ino: number,
  a: number,
  b: number,
  c: number,
  name: string | undefined
): void => {
  const error = replyError(addon, t)
  switch (op) {
    case Op.lookup: {
      const reply: ReplyEntry = {
        error,
        entry: (attr: FuseAttr, attrTtlSec: number, entryTtlSec: number) => {
          addon.replyEntry(t, attr.ino, attr.mode, attr.nlink, attr.size, attr.mtimeMs, attr.uid, attr.gid, attrTtlSec, entryTtlSec)
        },
        negative: (entryTtlSec: number) => {
          addon.replyNegative(t, entryTtlSec)
        }
      }
      return handlers.lookup(ino, name ?? "", reply)
    }
    case Op.getattr: {
      const reply: ReplyAttr = {
        error,
        attr: (attr: FuseAttr, attrTtlSec: number) => {
          addon.replyAttr(t, attr.ino, attr.mode, attr.nlink, attr.size, attr.mtimeMs, attr.uid, attr.gid, attrTtlSec)
        }
      }
      return handlers.getattr(ino, reply)
    }
    case Op.open: {
      const reply: ReplyOpen = {
        error,
        open: (fh: number, flags: OpenFlags) => {
          if (addon.replyOpen(t, fh, flags.keepCache, flags.directIo) === "interrupted") {
            // The opener is gone: the kernel will never release this handle, so it is released here.
            handlers.release(ino, fh, ignored)
          }
        }
      }
      return handlers.open(ino, a, reply)
    }
    case Op.read: {
      const reply: ReplyData = {
        error,
        data: (chunks: ReadonlyArray<Uint8Array>) => {
          addon.replyData(t, chunks)
        }
      }
      return handlers.read(ino, a, b, c, reply)
    }
    case Op.release:
      return handlers.release(ino, a, none(addon, t, error))
    case Op.opendir: {
      const reply: ReplyOpen = {
        error,
        open: (fh: number, flags: OpenFlags) => {
          if (addon.replyOpen(t, fh, flags.keepCache, flags.directIo) === "interrupted") {
            handlers.releasedir(ino, fh, ignored)
          }
        }
      }
      return handlers.opendir(ino, reply)
    }
    case Op.readdir: {
      const reply: ReplyDir = {
        error,
        entries: (entries: ReadonlyArray<DirEntry>) => {
          addon.replyDir(t, entries)
        }
      }
      return handlers.readdir(ino, a, b, reply)
    }
    case Op.releasedir:
      return handlers.releasedir(ino, a, none(addon, t, error))
    case Op.statfs: {
      const reply: ReplyStatFs = {
        error,
        statfs: (s: StatFs) => {
          addon.replyStatfs(t, s.blockSize, s.blocks, s.blocksFree, s.blocksAvailable, s.files, s.filesFree, s.nameMax)
        }
      }
      return handlers.statfs(ino, reply)
    }
    case Op.getxattr: {
      const reply: ReplyXattr = {
        error,
        value: (value: Uint8Array) => {
          addon.replyXattr(t, value)
        }
      }
      return handlers.getxattr(ino, name ?? "", reply)
    }
    case Op.listxattr: {
      const reply: ReplyXattrList = {
        error,
        names: (names: ReadonlyArray<string>) => {
          addon.replyXattrNames(t, names)
        }
      }
      return handlers.listxattr(ino, reply)
    }
    default:
      addon.replyErr(t, 38 /* ENOSYS */)
  }
}

const none = (addon: FuseAddon, t: Token, error: (errno: number) => void): ReplyNone => ({
  error,
  ok: () => {
    addon.replyNone(t)
  }
})

const ignored: ReplyNone = { error: () => {}, ok: () => {} }

/** The binding, or an Error whose message says what to install (for callers that want a throw, not a reason). */
export const loadBinding = (path: string = defaultFuseAddonPath): NativeFuseBinding => {
  const load = loadFuseBinding(path)
  if (load._tag === "Unavailable") throw new Error(load.reason)
  return load.binding
}
