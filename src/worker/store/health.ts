/**
 * What the store found wrong on disk and did about it, for the worker's /metrics: units
 * dropped as corrupt (by why), units verified, bytes scrubbed, disk-full episodes.
 */

/** Why a unit was dropped instead of served. */
export type CorruptReason = "checksum" | "short" | "long" | "size" | "unrecorded"

export const CORRUPT_REASONS: ReadonlyArray<CorruptReason> = ["checksum", "short", "long", "size", "unrecorded"]

export class StoreHealth {
  /** Units dropped (file removed, refetched on the next read) because their bytes could not be trusted. */
  readonly corrupt: Record<CorruptReason, number> = { checksum: 0, short: 0, long: 0, size: 0, unrecorded: 0 }
  /** Units whose bytes were hashed and matched their recorded checksum (start-up verify and scrub). */
  verifiedUnits = 0
  /** Bytes hashed by the background scrub of resident units. */
  scrubbedBytes = 0
  /** Seconds the scrub waited for origin fills to finish before re-hashing (at most its defer budget per pass). */
  scrubDeferredSeconds = 0
  /** Writes (fill, meta, index) that failed with ENOSPC. */
  diskFullErrors = 0
  /** Episodes of a full cache dir: the first ENOSPC after the dir last had room. */
  diskFullEpisodes = 0
  /** Bytes evicted to make room after ENOSPC (also counted in the worker's evictions). */
  diskFullEvictedBytes = 0
  /** Fill fsyncs (fdatasync of a finished unit before its rename), and their total seconds. */
  fsyncs = 0
  fsyncSeconds = 0

  get corruptTotal(): number {
    let n = 0
    for (const r of CORRUPT_REASONS) n += this.corrupt[r]
    return n
  }
}

export const isNoSpace = (e: unknown): boolean =>
  typeof e === "object" && e !== null && ((e as { code?: unknown }).code === "ENOSPC" || (e as { code?: unknown }).code === "EDQUOT")
