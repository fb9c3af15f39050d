/**
 * The contract between the libfuse3 binding (native/fuse.c, loaded by ./native.ts) and the
 * filesystem (src/mount). The binding runs the FUSE session's receive loop on a thread of its
 * own and hands each request to JavaScript through a thread-safe function; JavaScript answers
 * through the request's reply object whenever it is ready (the reply functions may be called
 * from any later tick), so no FUSE request ever blocks the event loop and many are in flight at
 * once. Every reply object must be answered exactly once; a second answer is ignored.
 *
 * Mutating operations (setattr, mknod, mkdir, unlink, rmdir, symlink, rename, link, write,
 * create, setxattr, removexattr, fallocate, copy_file_range) never reach JavaScript: the
 * binding answers them EROFS itself, and `open` with O_WRONLY/O_RDWR/O_TRUNC likewise.
 *
 * Inode numbers are JavaScript numbers (safe integers); 1 is the root (FUSE_ROOT_ID).
 * Errors are positive errno values (`os.constants.errno.ENOENT`, …).
 */

/** What `getattr`/`lookup` report of an inode. */
export interface FuseAttr {
  readonly ino: number
  /** Full st_mode: S_IFDIR | 0o555 or S_IFREG | 0o444, … */
  readonly mode: number
  readonly nlink: number
  readonly size: number
  /** Modification time (also used for ctime/atime), in ms since the epoch. */
  readonly mtimeMs: number
  readonly uid: number
  readonly gid: number
}

export interface ReplyError {
  readonly error: (errno: number) => void
}

export interface ReplyEntry extends ReplyError {
  /** A positive lookup: the kernel keeps the name for `entryTtlSec` and the attributes for `attrTtlSec`. */
  readonly entry: (attr: FuseAttr, attrTtlSec: number, entryTtlSec: number) => void
  /** A negative lookup the kernel may cache for `entryTtlSec` (ENOENT to the caller). */
  readonly negative: (entryTtlSec: number) => void
}

export interface ReplyAttr extends ReplyError {
  readonly attr: (attr: FuseAttr, attrTtlSec: number) => void
}

export interface OpenFlags {
  /** FOPEN_KEEP_CACHE: the kernel keeps this inode's cached pages (the version is unchanged). */
  readonly keepCache: boolean
  /** FOPEN_DIRECT_IO: bypass the page cache for this handle. */
  readonly directIo: boolean
}

export interface ReplyOpen extends ReplyError {
  readonly open: (fh: number, flags: OpenFlags) => void
}

export interface DirEntry {
  readonly name: string
  readonly ino: number
  /** st_mode type bits are what matter (S_IFDIR / S_IFREG). */
  readonly mode: number
  /** The offset of the entry after this one: the kernel's next readdir starts there. */
  readonly nextOffset: number
}

export interface ReplyDir extends ReplyError {
  /** Entries from the asked offset on; the binding packs as many as fit the kernel's buffer and drops the rest (asked for again from their offset). An empty list is the end of the directory. */
  readonly entries: (entries: ReadonlyArray<DirEntry>) => void
}

export interface ReplyData extends ReplyError {
  /** The bytes read (fewer than asked only at end of file). The buffers are copied before `data` returns. */
  readonly data: (chunks: ReadonlyArray<Uint8Array>) => void
}

export interface ReplyNone extends ReplyError {
  readonly ok: () => void
}

export interface StatFs {
  readonly blockSize: number
  readonly blocks: number
  readonly blocksFree: number
  readonly blocksAvailable: number
  readonly files: number
  readonly filesFree: number
  readonly nameMax: number
}

export interface ReplyStatFs extends ReplyError {
  readonly statfs: (s: StatFs) => void
}

export interface ReplyXattr extends ReplyError {
  /** The attribute's value; the binding answers a size probe (size 0) and ERANGE itself. */
  readonly value: (value: Uint8Array) => void
}

export interface ReplyXattrList extends ReplyError {
  readonly names: (names: ReadonlyArray<string>) => void
}

/** What the filesystem implements; the binding calls these on the JavaScript thread. */
export interface FuseHandlers {
  readonly lookup: (parent: number, name: string, reply: ReplyEntry) => void
  readonly forget: (ino: number, nlookup: number) => void
  readonly getattr: (ino: number, reply: ReplyAttr) => void
  readonly open: (ino: number, flags: number, reply: ReplyOpen) => void
  readonly read: (ino: number, fh: number, offset: number, size: number, reply: ReplyData) => void
  readonly release: (ino: number, fh: number, reply: ReplyNone) => void
  readonly opendir: (ino: number, reply: ReplyOpen) => void
  readonly readdir: (ino: number, fh: number, offset: number, reply: ReplyDir) => void
  readonly releasedir: (ino: number, fh: number, reply: ReplyNone) => void
  readonly statfs: (ino: number, reply: ReplyStatFs) => void
  readonly getxattr: (ino: number, name: string, reply: ReplyXattr) => void
  readonly listxattr: (ino: number, reply: ReplyXattrList) => void
}

export interface MountOptions {
  /** Shown as the source in /proc/mounts (e.g. "talon"). */
  readonly fsName: string
  /** Let users other than the mounting one in (needs user_allow_other in /etc/fuse.conf when not root). */
  readonly allowOther: boolean
  /** Largest read the kernel sends (the binding asks for it in init: max_read / max_pages). */
  readonly maxReadBytes: number
  /** Kernel read-ahead asked for in init (conn->max_readahead). */
  readonly maxReadaheadBytes: number
}

/** A mounted session. */
export interface FuseSession {
  /** Resolves when the session ends: unmounted from outside (`umount`/`fusermount3 -u`) or by `unmount`. */
  readonly closed: Promise<void>
  /** Exits the loop and unmounts (lazily if busy); idempotent. Pending requests are answered EINTR-free: the kernel aborts them. */
  readonly unmount: () => Promise<void>
  /** Drops the kernel's cached pages of `[offset, offset+length)` of an inode (length 0 = to the end) and its cached attributes. Queued to a native thread: never blocks the caller. */
  readonly invalidateInode: (ino: number, offset: number, length: number) => void
  /** Drops the kernel's cached name `name` under `parent`. Queued like invalidateInode. */
  readonly invalidateEntry: (parent: number, name: string) => void
}

export interface FuseBinding {
  /** Mounts `mountpoint` (an existing directory) and starts serving; fails with a message that says what to do (e.g. "is /dev/fuse present? install fuse3"). */
  readonly mount: (mountpoint: string, options: MountOptions, handlers: FuseHandlers) => Promise<FuseSession>
}
