/**
 * The membership epoch is derived from content, Talon's way (ADR 0001 §7.1,
 * `Epoch::for_nodes`): xxh3-64 over the id-sorted placement nodes, each as
 * length-prefixed id, length-prefixed address and a role byte. Every
 * coordinator (and a restarted one) that sees the same members reports the
 * same epoch; clients compare it for equality only.
 */
import { Effect } from "effect"
import type { IHasher } from "hash-wasm"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"
import type { NodeInfo } from "../../core/ids.js"
import { BincodeWriter } from "../../protocol/bincode.js"
import { compareUtf8 } from "../../protocol/status.js"

/** The epoch of an empty membership; never the epoch of a non-empty one. */
export const EMPTY_EPOCH = 0n

/** Talon's canonical encoding of a node set (what the epoch hashes). */
export const canonicalMembership = (nodes: ReadonlyArray<NodeInfo>): Uint8Array => {
  const sorted = [...nodes].sort((a, b) => compareUtf8(a.id, b.id))
  const w = new BincodeWriter(64 * Math.max(1, sorted.length))
  for (const n of sorted) w.string(n.id).string(n.address).u8(n.role)
  return w.finish()
}

/** The addon's XXH3-64 (native/xxh3.c), or undefined when the addon is missing, stale or not for this platform. */
export const nativeXxh3 = (): ((bytes: Uint8Array) => bigint) | undefined => {
  try {
    const path = fileURLToPath(new URL("../../../build/Release/talon_sendfile.node", import.meta.url))
    const addon = createRequire(import.meta.url)(path) as { readonly xxh3?: (bytes: Uint8Array) => bigint }
    return typeof addon.xxh3 === "function" ? addon.xxh3 : undefined
  } catch {
    return undefined
  }
}

/** hash-wasm's XXH3-64, compiled on first call: the fallback, and the reference the addon is tested against. */
export const wasmXxh3 = (): Promise<IHasher> => import("./xxh3Wasm.js").then((m) => m.createXXHash3())

// The addon when it loads: hash-wasm would bring WebAssembly's engine into an otherwise idle
// coordinator for one small hash per membership change (~1 MiB of RSS).
let native: ((bytes: Uint8Array) => bigint) | undefined | null
let hasher: Promise<IHasher> | undefined

/** xxh3-64 (seed 0) of `bytes`, as an unsigned 64-bit bigint. */
export const xxh3_64 = (bytes: Uint8Array): Effect.Effect<bigint> =>
  Effect.suspend(() => {
    if (native === undefined) native = nativeXxh3() ?? null
    const hash = native
    if (hash !== null) return Effect.sync(() => hash(bytes))
    return Effect.promise(async () => {
      hasher ??= wasmXxh3()
      const h = await hasher
      // init/update/digest run without yielding, so concurrent callers never interleave.
      return BigInt(`0x${h.init().update(bytes).digest("hex")}`)
    })
  })

/** Talon's `Epoch::for_nodes`: 0 for no nodes, otherwise the hash (0 remapped to 1). */
export const membershipEpoch = (nodes: ReadonlyArray<NodeInfo>): Effect.Effect<bigint> =>
  nodes.length === 0
    ? Effect.succeed(EMPTY_EPOCH)
    : Effect.map(xxh3_64(canonicalMembership(nodes)), (raw) => (raw === EMPTY_EPOCH ? 1n : raw))

const SAFE_MASK = (1n << 53n) - 1n

/**
 * The epoch as this build's u64 wire fields carry it today (safe integers
 * only): the low 53 bits, still 0 only for the empty membership. Equal
 * memberships still give equal values; a Talon coordinator sharing the
 * cluster reports the full 64 bits, which clients treat as just another
 * change (an extra refresh, never a stale placement).
 */
export const epochForWire = (epoch: bigint): number => {
  const low = Number(epoch & SAFE_MASK)
  return low === 0 && epoch !== EMPTY_EPOCH ? 1 : low
}
