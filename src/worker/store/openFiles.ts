/**
 * The serving fds the block store keeps open, least recently used first, capped: past the
 * cap, unpinned units' fds are closed (reopened on their next hit). A pinned unit's fd is
 * never closed here. Opening a unit's file for serving (openUnit) checks it first when needed.
 */
import type { Unit } from "./entry.js"
import { closeQuietly, isNotFound, openFd } from "./fsx.js"
import { checkUnit, type Integrity } from "./integrity.js"

export class OpenFiles {
  /** Units with an open fd, least recently used first. */
  readonly #open = new Set<Unit>()
  /** Moves to the back of `#open` so far (see Unit.fdStamp). */
  #moves = 0

  constructor(private readonly max: number) {}

  get size(): number {
    return this.#open.size
  }

  units(): Array<Unit> {
    return [...this.#open]
  }

  /** Marks a unit's open fd recently used, unless it is among the most recently moved quarter. */
  touch(u: Unit): void {
    const open = this.#open
    if (u.fd >= 0 && this.#moves - u.fdStamp > open.size >> 2) {
      open.delete(u)
      open.add(u)
      u.fdStamp = ++this.#moves
    }
  }

  /** A unit's fd was just opened: tracked, and unpinned others closed while over the cap. */
  track(unit: Unit): void {
    this.#open.add(unit)
    unit.fdStamp = ++this.#moves
    if (this.#open.size <= this.max) return
    for (const u of this.#open) {
      if (this.#open.size <= this.max) break
      if (u.refs === 0 && u !== unit) this.close(u)
    }
  }

  close(u: Unit): void {
    if (u.fd >= 0) {
      closeQuietly(u.fd)
      u.fd = -1
    }
    this.#open.delete(u)
  }

  closeAll(): void {
    for (const u of this.#open) closeQuietly(u.fd)
    this.#open.clear()
  }
}

export interface Opener {
  readonly integrity: Integrity
  readonly closed: () => boolean
  readonly warn: (message: string) => void
  /** A fd was opened for the unit (OpenFiles.track). */
  readonly track: (u: Unit) => void
  /** The unit's file is gone: out of the index, nothing to unlink. */
  readonly unindex: (u: Unit) => void
}

/**
 * Opens a pinned unit's file for serving. A unit found on disk at start-up is hashed against
 * its checksum first (and dropped when it does not match); one whose file vanished is
 * unindexed. Resolves whether the unit may be served.
 */
export const openUnit = async (u: Unit, o: Opener): Promise<boolean> => {
  try {
    const fd = await openFd(u.path, "r")
    // Found on disk at start-up: hashed before its first byte is served.
    if (!u.verified && !(await checkUnit(o.integrity, u, fd))) {
      u.opening = undefined
      closeQuietly(fd)
      return false
    }
    u.opening = undefined
    if (o.closed() || u.gone) {
      closeQuietly(fd)
      return false
    }
    u.fd = fd
    o.track(u)
    return true
  } catch (e) {
    u.opening = undefined
    if (!isNotFound(e)) o.warn(`cannot open ${u.path}: ${String(e)}`)
    if (!u.gone) o.unindex(u)
    return false
  }
}
