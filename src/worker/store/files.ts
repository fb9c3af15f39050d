/**
 * The files of a block directory besides its units: `meta` (written once, when the directory
 * is made), `sums` and, paged, `bitmap` (rewritten as units come and go), each replaced
 * through a temp name; and the background removal of unit files and whole directories.
 * Every write of one block is chained on its `Entry.io`, so they land in order.
 */
import { randomBytes } from "node:crypto"
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { PresentBitmap } from "../../core/bitmap.js"
import { encodeSums } from "./checksum.js"
import type { DirState } from "./dirs.js"
import type { Entry, Unit } from "./entry.js"
import { isNoSpace, type StoreHealth } from "./health.js"
import { BITMAP_FILE, encodeMeta, META_FILE, SUMS_FILE } from "./layout.js"

/** Writes a small file through a temp name; a failed write (ENOSPC) leaves no partial temp file behind. */
export const replaceFile = async (dir: DirState, target: string, data: string | Uint8Array, stillWanted?: () => boolean): Promise<void> => {
  const tmp = path.join(dir.tmp, randomBytes(12).toString("hex"))
  try {
    await fs.writeFile(tmp, data)
    if (stillWanted !== undefined && !stillWanted()) {
      await fs.rm(tmp, { force: true })
      return
    }
    await fs.rename(tmp, target)
  } catch (e) {
    await fs.rm(tmp, { force: true }).catch(() => {})
    throw e
  }
}

/** mkdir + meta (temp + rename), after any pending removal of the same directory. */
export const prepareBlockDir = async (dir: DirState, entry: Entry): Promise<void> => {
  const prior = dir.removing.get(entry.path)
  if (prior !== undefined) await prior
  await fs.mkdir(entry.path, { recursive: true })
  await replaceFile(dir, path.join(entry.path, META_FILE), encodeMeta(entry.meta))
}

/**
 * Coalescing write of a block's checksums (and bitmap, paged): at most one in flight per
 * block, the last state always lands. A unit renamed before its checksum landed is dropped
 * at the next start-up (refetched), never trusted.
 */
export const persistIndex = (dir: DirState, entry: Entry, health: StoreHealth, warn: (message: string) => void): Promise<void> => {
  if (entry.removed) return Promise.resolve()
  // A write queued and not yet started reads the state when it starts: it covers this call too.
  if (entry.bitmapDirty) return entry.io
  entry.bitmapDirty = true
  entry.io = entry.io
    .then(async () => {
      entry.bitmapDirty = false
      if (entry.removed) return
      const alive = () => !entry.removed
      const sums = entry.units.map((u, i) => u?.sum ?? entry.pendingSums.get(i))
      await replaceFile(dir, path.join(entry.path, SUMS_FILE), encodeSums(sums), alive)
      if (entry.bitmap !== undefined) await replaceFile(dir, path.join(entry.path, BITMAP_FILE), entry.bitmap.toBytes(), alive)
    })
    .catch((e) => {
      if (isNoSpace(e)) health.diskFullErrors++
      warn(`cannot write the checksums of ${entry.path}: ${String(e)}`)
    })
  return entry.io
}

/** Unlinks an unindexed unit's file after the block's queued writes; a new fill of that unit waits for it. */
export const unlinkUnit = (entry: Entry, u: Unit, warn: (message: string) => void): void => {
  const file = u.path
  const index = u.index
  const removal = entry.io.then(() => fs.rm(file, { force: true })).catch((e) => warn(`cannot remove ${file}: ${String(e)}`))
  entry.io = removal
  entry.unlinking.set(index, removal)
  void removal.then(() => {
    if (entry.unlinking.get(index) === removal) entry.unlinking.delete(index)
  })
}

/** Removes a block directory after its queued writes; a new fill of the block waits for it (prepareBlockDir). */
export const removeBlockDir = (dir: DirState, entry: Entry, warn: (message: string) => void): void => {
  const p = entry.path
  const removal = entry.io
    .then(() => fs.rm(p, { recursive: true, force: true }))
    .catch((e) => warn(`cannot remove ${p}: ${String(e)}`))
    .finally(() => {
      if (dir.removing.get(p) === removal) dir.removing.delete(p)
    })
  entry.io = removal
  dir.removing.set(p, removal)
}

/** Reads the persisted bitmap of a paged block directory (diagnostics and tests). */
export const readBitmap = async (blockPath: string): Promise<PresentBitmap | undefined> => {
  const bytes = await fs.readFile(path.join(blockPath, BITMAP_FILE)).catch(() => undefined)
  return bytes === undefined ? undefined : PresentBitmap.fromBytes(bytes)
}
