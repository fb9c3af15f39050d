/**
 * Start-up scan of one cache dir: which block directories and unit files can be indexed again.
 * A unit is kept only when its file has the geometry's exact size and its block's `sums` file
 * records a checksum for it (every completed fill records one); its bytes are hashed later
 * (DiskStore verifies before first serving it). Everything else is removed and counted.
 */
import * as fs from "node:fs/promises"
import * as path from "node:path"
import { decodeSums, type Sums } from "./checksum.js"
import { Entry, Unit } from "./entry.js"
import type { KnownVersion } from "./dirs.js"
import type { CorruptReason } from "./health.js"
import {
  BITMAP_FILE,
  BLOCK_FILE,
  blockDirName,
  blockKey,
  decodeMeta,
  LAYOUT_VERSION,
  META_FILE,
  parsePageFileName,
  SUMS_FILE
} from "./layout.js"

export interface Found {
  readonly unit: Unit
  readonly mtimeMs: number
}

export interface ScanResult {
  readonly entries: Array<Entry>
  readonly found: Array<Found>
}

export interface ScanHooks {
  /** A unit file dropped at start-up (removed from disk). */
  readonly dropped: (file: string, reason: CorruptReason, detail: string) => void
  /** Whether a block key is already indexed (from an earlier cache dir). */
  readonly has: (key: string) => boolean
}

export const scanCacheDir = async (root: string, dirIndex: number, pageSize: number, hooks: ScanHooks): Promise<ScanResult> => {
  const top = path.join(root, LAYOUT_VERSION)
  await fs.mkdir(top, { recursive: true })
  const result: ScanResult = { entries: [], found: [] }
  const seen = new Set<string>()
  for (const shard of await fs.readdir(top)) {
    const shardPath = path.join(top, shard)
    let names: Array<string>
    try {
      names = await fs.readdir(shardPath)
    } catch {
      continue
    }
    for (const name of names) {
      const entry = await scanBlock(path.join(shardPath, name), name, dirIndex, pageSize, hooks, seen, result.found)
      if (entry !== undefined) {
        seen.add(entry.key)
        result.entries.push(entry)
      }
    }
  }
  return result
}

const scanBlock = async (
  blockPath: string,
  name: string,
  dirIndex: number,
  pageSize: number,
  hooks: ScanHooks,
  seen: Set<string>,
  found: Array<Found>
): Promise<Entry | undefined> => {
  const discard = async () => {
    await fs.rm(blockPath, { recursive: true, force: true })
    return undefined
  }
  const metaText = await fs.readFile(path.join(blockPath, META_FILE), "utf8").catch(() => undefined)
  const meta = metaText === undefined ? undefined : decodeMeta(metaText)
  if (meta === undefined || meta.pageSize !== pageSize) return discard()
  const key = blockKey(meta.id)
  if (blockDirName(key, meta.pageSize) !== name || hooks.has(key) || seen.has(key)) return discard()
  const entry = new Entry(key, meta, blockPath, dirIndex)
  entry.ready = Promise.resolve()
  const sumsBytes = await fs.readFile(path.join(blockPath, SUMS_FILE)).catch(() => undefined)
  const decoded = sumsBytes === undefined ? "no sums file" : decodeSums(sumsBytes, entry.units.length)
  const sums: Sums | undefined = typeof decoded === "string" ? undefined : decoded
  const files = await fs.readdir(blockPath)
  const candidates: Array<[file: string, index: number]> = []
  for (const f of files) {
    if (f === META_FILE || f === BITMAP_FILE || f === SUMS_FILE) continue
    const index = meta.pageSize > 0 ? parsePageFileName(f) : f === BLOCK_FILE ? 0 : undefined
    if (index === undefined || index >= entry.units.length) {
      await fs.rm(path.join(blockPath, f), { recursive: true, force: true })
      continue
    }
    candidates.push([f, index])
  }
  const stats = await Promise.all(candidates.map(([f]) => fs.stat(path.join(blockPath, f)).catch(() => undefined)))
  let kept = 0
  for (let i = 0; i < candidates.length; i++) {
    const [f, index] = candidates[i]!
    const file = path.join(blockPath, f)
    const st = stats[i]
    const bytes = entry.unitBytes(index)
    const sum = sums?.[index]
    let drop: [CorruptReason, string] | undefined
    if (st === undefined || !st.isFile()) drop = ["size", "not a regular file"]
    // A unit of the wrong size cannot have come from a completed rename of this geometry.
    else if (st.size !== bytes) drop = ["size", `${st.size} bytes on disk, ${bytes} expected`]
    // Renamed into place but its checksum never recorded (stopped in between): not provably whole.
    else if (sum === undefined) drop = ["unrecorded", typeof decoded === "string" ? decoded : "no checksum recorded for it"]
    if (drop !== undefined) {
      await fs.rm(file, { force: true })
      hooks.dropped(file, drop[0], drop[1])
      continue
    }
    const unit = new Unit(entry, index, bytes, sum!)
    unit.verified = false
    found.push({ unit, mtimeMs: st!.mtimeMs })
    kept++
  }
  if (kept === 0) return discard()
  return entry
}

/**
 * Per object, the version of its most recently written blocks found at start-up (what
 * DiskStore.knownVersions reports).
 */
export class KnownVersions {
  readonly #known = new Map<string, KnownVersion & { mtimeMs: number }>()

  /** Notes a block found on disk whose newest unit was written at `newest` (ms). */
  note(entry: Entry, newest: number): void {
    const o = entry.meta.id.object
    const objectKey = `${o.backend}\0${o.bucket}\0${o.objectPath}`
    const prior = this.#known.get(objectKey)
    if (prior === undefined || prior.mtimeMs < newest) {
      this.#known.set(objectKey, { object: o, version: entry.meta.id.version, size: entry.meta.objectSize, mtimeMs: newest })
    }
  }

  list(): ReadonlyArray<KnownVersion> {
    return [...this.#known.values()].map(({ object, version, size }) => ({ object, version, size }))
  }
}
