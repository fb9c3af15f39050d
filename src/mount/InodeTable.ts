/**
 * The mount's inodes: one per name the kernel was told about, keyed both by number and by
 * (parent, name) so a name keeps its number while anything refers to it. The kernel's
 * references (lookup counts, dropped by `forget`) and open handles pin a node; unpinned
 * nodes (names handed out by readdir, forgotten names) are dropped oldest first once the
 * table holds more than its bound, so a walk over millions of keys cannot grow it forever.
 * Plain synchronous state behind the filesystem: every FUSE request touches it.
 */
import { childPath } from "./namespace.js"
import type { Listing } from "./listing.js"

export const ROOT_INO = 1

/** root → backend (`s3`) → bucket → directories and files inside it. */
export type NodeKind = "root" | "backend" | "bucket" | "dir" | "file"

export interface Node {
  readonly ino: number
  readonly parent: number
  readonly name: string
  /** Namespace path without the leading slash: `s3/bucket/a/b.bin` ("" for the root). */
  readonly path: string
  kind: NodeKind
  /** The kernel's references (lookups not yet forgotten). */
  lookups: number
  /** Open file and directory handles. */
  opens: number
  /** Files: size and version last seen; `version` is unknown for a file known only from a listing. */
  size: number
  version: string | undefined
  /** When the size/version (or, for a directory, its existence) was last confirmed, ms. */
  validatedAt: number
  /** The file's mtime, ms: the origin's last-modified time once a listing said it, else when this version was first seen. */
  mtimeMs: number
  /** The version whose bytes the kernel may hold in its page cache for this inode. */
  kernelVersion: string | undefined
  /** The size the kernel was last told (lookup/getattr replies): it clamps page-cache reads at it. */
  kernelSize: number | undefined
  /** Directories inside a bucket: the last listing and when it was taken. */
  listing: Listing | undefined
  listedAt: number
}

export class InodeTable {
  private readonly byIno = new Map<number, Node>()
  private readonly byName = new Map<string, number>()
  private nextIno = ROOT_INO + 1
  /** Nodes dropped to stay within the bound, for metrics. */
  evicted = 0

  constructor(
    private readonly maxUnpinned: number,
    now: number
  ) {
    this.byIno.set(ROOT_INO, this.make(ROOT_INO, ROOT_INO, "", "", "root", now))
  }

  get size(): number {
    return this.byIno.size
  }

  get(ino: number): Node | undefined {
    return this.byIno.get(ino)
  }

  /** The node named `name` under `parent`, made (unpinned) when new; `kind` updates an existing one (a file that became a directory). */
  child(parent: Node, name: string, kind: NodeKind, now: number): Node {
    const key = `${parent.ino}/${name}`
    const ino = this.byName.get(key)
    const had = ino === undefined ? undefined : this.byIno.get(ino)
    if (had !== undefined) {
      if (had.kind !== kind) {
        had.kind = kind
        had.version = undefined
        had.kernelVersion = undefined
        had.listing = undefined
      }
      return had
    }
    const node = this.make(this.nextIno++, parent.ino, name, childPath(parent.path, name), kind, now)
    this.byIno.set(node.ino, node)
    this.byName.set(key, node.ino)
    this.trim()
    return node
  }

  /** The node under `parent` if the table still has it. */
  find(parent: number, name: string): Node | undefined {
    const ino = this.byName.get(`${parent}/${name}`)
    return ino === undefined ? undefined : this.byIno.get(ino)
  }

  /** The kernel learned this node's name (a positive lookup). */
  lookedUp(node: Node): void {
    node.lookups++
  }

  /** The kernel dropped `n` references; an unreferenced, closed node leaves the table. */
  forget(ino: number, n: number): void {
    const node = this.byIno.get(ino)
    if (node === undefined || ino === ROOT_INO) return
    node.lookups = Math.max(0, node.lookups - n)
    if (node.lookups === 0 && node.opens === 0) this.remove(node)
  }

  /** Drops a node unless something still pins it (a handle closing after the kernel forgot it). */
  release(node: Node): void {
    if (!this.pinned(node) && this.byIno.get(node.ino) === node) this.remove(node)
  }

  private pinned(node: Node): boolean {
    return node.ino === ROOT_INO || node.lookups > 0 || node.opens > 0
  }

  private remove(node: Node): void {
    this.byIno.delete(node.ino)
    const key = `${node.parent}/${node.name}`
    if (this.byName.get(key) === node.ino) this.byName.delete(key)
  }

  /** Past the bound, drops unpinned nodes oldest first down to 90% of it (amortised: one sweep per tenth of the bound). */
  private trim(): void {
    if (this.byIno.size <= this.maxUnpinned) return
    const target = Math.floor(this.maxUnpinned * 0.9)
    for (const node of this.byIno.values()) {
      if (this.byIno.size <= target) break
      if (this.pinned(node)) continue
      this.remove(node)
      this.evicted++
    }
  }

  private make(ino: number, parent: number, name: string, path: string, kind: NodeKind, now: number): Node {
    return {
      ino,
      parent,
      name,
      path,
      kind,
      lookups: 0,
      opens: 0,
      size: 0,
      version: undefined,
      validatedAt: Number.NEGATIVE_INFINITY,
      mtimeMs: now,
      kernelVersion: undefined,
      kernelSize: undefined,
      listing: undefined,
      listedAt: Number.NEGATIVE_INFINITY
    }
  }
}
