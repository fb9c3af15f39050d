/**
 * ENOSPC is the real capacity: a write that finds the filesystem full lowers its dir's
 * capacity to what fitted, evicts least recently used units down to it and tries again.
 */
import type { DirState } from "./dirs.js"
import { isNoSpace, type StoreHealth } from "./health.js"

/** ENOSPC retries of one write, each after evicting: more only when other fills race for the freed room. */
const NOSPACE_ATTEMPTS = 8

export interface Space {
  readonly pageSize: number
  readonly health: StoreHealth
  readonly warn: (message: string) => void
  readonly closed: () => boolean
  /** Evicts unpinned units of `dir`, least recently used first, down to its capacity. */
  readonly makeRoom: (dir: DirState) => void
  /** Waits for queued unlinks. */
  readonly flush: () => Promise<void>
}

/**
 * Runs a filesystem write, evicting and retrying on ENOSPC: the dir's capacity drops to what
 * is resident less `need` (what the write still wants), so the LRU makes the room.
 */
export const withRoom = async <A>(s: Space, dir: DirState, need: number, write: () => Promise<A>): Promise<A> => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await write()
    } catch (e) {
      if (!isNoSpace(e) || s.closed()) throw e
      s.health.diskFullErrors++
      const freed = await reclaim(s, dir, Math.max(need, s.pageSize, 4096))
      if (freed === 0 || attempt >= NOSPACE_ATTEMPTS) {
        throw new Error(
          `cache dir ${dir.root} is out of space (ENOSPC) with ${dir.resident} bytes resident and nothing more to evict ` +
            `(${attempt} attempts); free space on that filesystem or lower --capacity`,
          { cause: e }
        )
      }
    }
  }
}

/** After ENOSPC: lowers the dir's capacity to what fits, evicts to it, waits for the unlinks. Returns bytes freed. */
const reclaim = async (s: Space, dir: DirState, need: number): Promise<number> => {
  const capacity = Math.max(0, Math.min(dir.capacity, dir.resident - need))
  if (!dir.full) {
    dir.full = true
    s.health.diskFullEpisodes++
    s.warn(
      `cache dir ${dir.root} is full (ENOSPC) at ${dir.resident} resident bytes: capacity lowered from ${dir.capacity} ` +
        `to ${capacity} bytes until restart, evicting least recently used units to make room`
    )
  }
  dir.capacity = capacity
  const before = dir.resident
  s.makeRoom(dir)
  const freed = before - dir.resident
  s.health.diskFullEvictedBytes += freed
  await s.flush()
  return freed
}
