/**
 * The raw surface of the talon_fuse addon (native/fuse.c, native/fuse_reply.c): what it exports,
 * the op codes its dispatch hands JavaScript, and what init negotiated. ./native.ts turns it into
 * the typed FuseBinding of ./types.ts.
 */
import type { DirEntry } from "./types.js"

/** An opaque request token: answered once through one of the reply functions. */
export type Token = { readonly __token: unique symbol }
/** An opaque mounted session. */
export type Handle = { readonly __session: unique symbol }

/** What init negotiated with the kernel (for logs and tests). */
export interface KernelInfo {
  /** 1 once the kernel's INIT has been answered (always, by the time mount resolves). */
  readonly initialized: number
  readonly protoMinor: number
  /** libfuse derives the largest read (max_pages) from it. */
  readonly maxWrite: number
  readonly maxReadahead: number
  readonly maxBackground: number
  /** FUSE_CAP_* bit sets: what the kernel offers and what was asked for. */
  readonly capable: number
  readonly want: number
  /** Invalidations waiting for the notify thread, and 1 while one is inside the kernel (it may wait there on a read's page locks). */
  readonly invalidationsQueued: number
  readonly invalidationInFlight: number
}

/** The functions exported by the addon (build/Release/talon_fuse.node). */
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

/** Op codes of the addon's dispatch (native/fuse.h). */
export const Op = {
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
