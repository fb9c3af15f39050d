/**
 * Zone affinity (Talon's ADR 0006, read side). Workers report their zone in their status and
 * coordinators list it (MembershipListV2). A client with a `zone` tries a block's owners in
 * that zone first and the others after, in placement order within each group; placement
 * itself (Maglev over every worker) is untouched, so every client still agrees on a block's
 * owners and a zone with no live owner of a block falls back across zones at once.
 *
 * Talon builds a per-zone placement table instead; reordering the owners keeps one placement
 * for every reader (admissions, prefetch, the stat fallback) at the price of an in-zone read
 * only where some owner of the block is in the zone: with `replicas` at least the zone count
 * every block has one.
 *
 * Every successful worker read is counted as same-zone, cross-zone or unknown (no zone on
 * one side), so the cross-zone traffic an operator pays for is visible.
 */
import { Effect } from "effect"
import { ClientConfig } from "./ClientConfig.js"

export interface ZoneStats {
  /** The client's zone; empty when it has none (every read then counts as unknown). */
  readonly zone: string
  readonly sameZoneReads: number
  readonly crossZoneReads: number
  readonly crossZoneBytes: number
  /** Reads where the client or the worker has no zone. */
  readonly unknownZoneReads: number
}

/** `ranked` with the owners in `zone` first, each group in its original order; the same array when nothing moves. */
export const preferZone = (
  ranked: ReadonlyArray<string>,
  zoneOf: (id: string) => string | null | undefined,
  zone: string
): ReadonlyArray<string> => {
  if (zone === "" || ranked.length < 2) return ranked
  const near: Array<string> = []
  const far: Array<string> = []
  for (const id of ranked) (zoneOf(id) === zone ? near : far).push(id)
  return near.length === 0 || far.length === 0 ? ranked : [...near, ...far]
}

export class ZoneAffinity extends Effect.Service<ZoneAffinity>()("talon/client/ZoneAffinity", {
  effect: Effect.map(ClientConfig, (options) => {
    const zone = options.zone
    let sameZoneReads = 0
    let crossZoneReads = 0
    let crossZoneBytes = 0
    let unknownZoneReads = 0
    return {
      zone,
      order: (ranked: ReadonlyArray<string>, zoneOf: (id: string) => string | null | undefined) => preferZone(ranked, zoneOf, zone),
      /** Counts one successful read of `bytes` from a worker in `workerZone`; plain arithmetic, on the read path. */
      served: (workerZone: string | null | undefined, bytes: number): void => {
        if (zone === "" || workerZone == null || workerZone === "") unknownZoneReads++
        else if (workerZone === zone) sameZoneReads++
        else {
          crossZoneReads++
          crossZoneBytes += bytes
        }
      },
      stats: (): ZoneStats => ({ zone, sameZoneReads, crossZoneReads, crossZoneBytes, unknownZoneReads })
    }
  })
}) {}
