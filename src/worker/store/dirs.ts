/**
 * What the block store keeps per cache dir (its capacity, resident bytes and LRU of units),
 * and the store's option and report types.
 */
import * as path from "node:path"
import type { BlockId } from "../../core/ids.js"
import type { Unit } from "./entry.js"
import { TMP_DIR } from "./layout.js"

export interface DiskStoreOptions {
  /** Cache directories; each gets its own capacity and LRU. */
  readonly dirs: ReadonlyArray<string>
  /** Capacity in bytes of each cache dir. */
  readonly capacity: number
  /** 0 = whole blocks (one file each); otherwise pages of this size. */
  readonly pageSize: number
  /** Cap on fds kept open for serving (unpinned ones beyond it are closed, least recently used first). */
  readonly maxOpenFiles?: number
  /** Called for every unit evicted (metrics). */
  readonly onEvict?: (bytes: number) => void
  /** Non-fatal background failures (unlink, bitmap write) and what the store dropped or evicted on its own. */
  readonly onWarning?: (message: string) => void
  /** fdatasync each filled unit before its rename (default true; off only to measure what it costs). */
  readonly fsync?: boolean
}

export interface DirState {
  readonly root: string
  readonly tmp: string
  /** The configured capacity, lowered to what actually fitted when the filesystem ran out of space. */
  capacity: number
  /** In a disk-full episode: ENOSPC seen, no fill committed since (the warning is logged once per episode). */
  full: boolean
  resident: number
  /** Committed units, least recently used first (Set keeps insertion order; touch = delete + add). */
  readonly lru: Set<Unit>
  /** Moves to the back of `lru` so far (see Unit.lruStamp). */
  moves: number
  /** Block directories being removed, so a new fill of the same block waits for the rm. */
  readonly removing: Map<string, Promise<void>>
}

export const makeDirState = (root: string, capacity: number): DirState => ({
  root: path.resolve(root),
  tmp: path.join(path.resolve(root), TMP_DIR),
  capacity,
  full: false,
  resident: 0,
  lru: new Set<Unit>(),
  moves: 0,
  removing: new Map()
})

/** Moves a unit to the back of its dir's LRU, unless it is among the most recently moved quarter (see Unit.lruStamp). */
export const touchLru = (dir: DirState, u: Unit): void => {
  if (dir.moves - u.lruStamp > dir.lru.size >> 2) {
    dir.lru.delete(u)
    dir.lru.add(u)
    u.lruStamp = ++dir.moves
  }
}

/** A file written to a temp name, ready to be renamed into place as unit `index` of a block. */
export interface FilledUnit {
  readonly tmpPath: string
  /** Read/write fd of the temp file; after the rename it becomes the serving fd. */
  readonly fd: number
  readonly index: number
  /** XXH64 of the bytes written (checksum.ts). */
  readonly sum: bigint
}

/** The newest object version found on disk at start-up, per object. */
export interface KnownVersion {
  readonly object: BlockId["object"]
  readonly version: string
  readonly size: number
}

export interface StoreStats {
  readonly blocks: number
  readonly units: number
  readonly residentBytes: number
  readonly perDir: ReadonlyArray<{ readonly root: string; readonly residentBytes: number; readonly capacity: number }>
  readonly openFiles: number
}
