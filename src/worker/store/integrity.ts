/**
 * Whether a unit's bytes can still be trusted: its XXH64 against the recorded checksum
 * (verify, and the first open of a unit found at start-up) and its file's size against the
 * unit's (checkSizes, the cheap check for truncation). A unit that fails is dropped.
 */
import { fstatSync } from "node:fs"
import { checkFile } from "./checksum.js"
import type { Unit } from "./entry.js"
import { closeQuietly, isNotFound, openFd } from "./fsx.js"
import type { CorruptReason, StoreHealth } from "./health.js"

export interface Integrity {
  readonly health: StoreHealth
  /** Takes a unit whose bytes cannot be trusted out of service for good. */
  readonly drop: (u: Unit, reason: CorruptReason, detail: string) => void
}

/** Hashes a unit's bytes through `fd`; drops it when they do not match. */
export const checkUnit = async (s: Integrity, u: Unit, fd: number, scratch?: Uint8Array): Promise<boolean> => {
  let result
  try {
    result = await checkFile(fd, u.bytes, u.sum, scratch)
  } catch (e) {
    result = { ok: false as const, reason: "short" as const, detail: `cannot read it: ${String(e)}` }
  }
  if (u.gone) return false
  if (!result.ok) {
    s.drop(u, result.reason, result.detail)
    return false
  }
  u.verified = true
  s.health.verifiedUnits++
  return true
}

/** checkUnit through a fd of its own; a unit whose file cannot be opened is dropped too. */
export const verifyUnit = async (s: Integrity, u: Unit, scratch?: Uint8Array): Promise<boolean> => {
  if (u.gone) return false
  let fd: number
  try {
    fd = await openFd(u.path, "r")
  } catch (e) {
    if (!u.gone) s.drop(u, "short", isNotFound(e) ? "its file is gone" : `cannot open it: ${String(e)}`)
    return false
  }
  try {
    return await checkUnit(s, u, fd, scratch)
  } finally {
    closeQuietly(fd)
  }
}

/**
 * Drops every unit of `open` whose file no longer has its size, yielding every `batch` units;
 * returns how many it dropped.
 */
export const checkSizes = async (s: Integrity, open: ReadonlyArray<Unit>, batch: number): Promise<number> => {
  let dropped = 0
  for (let i = 0; i < open.length; i++) {
    if (i > 0 && i % batch === 0) await new Promise<void>((r) => setImmediate(r))
    const u = open[i]!
    if (u.gone || u.fd < 0) continue
    let size: number
    try {
      size = fstatSync(u.fd).size
    } catch {
      continue
    }
    if (size === u.bytes) continue
    s.drop(u, size < u.bytes ? "short" : "long", `${size} of ${u.bytes} bytes on disk`)
    dropped++
  }
  return dropped
}
