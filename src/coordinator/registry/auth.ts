/**
 * The cluster token at the registry's door: what a received status proves
 * (its `talon.auth` HMAC checked against this coordinator's token, the label
 * stripped so no stored record or API answer carries it), the refusal of
 * legacy Register/Heartbeat where every write must prove the token, and the
 * bookkeeping of refusals: counted by reason, logged once per node id.
 */
import { Effect } from "effect"
import type { NodeInfo } from "../../core/ids.js"
import type { NodeStatus } from "../../protocol/status.js"
import { verifyStatus, withoutProof, type StatusProof } from "../../protocol/statusProof.js"
import type { StateStoreSettings } from "../state/config.js"
import type { StateStoreError } from "../state/errors.js"

export type TokenRefusal = "missing" | "wrong" | "takeover" | "legacy" | "stale"
export const TOKEN_REFUSALS: ReadonlyArray<TokenRefusal> = ["missing", "wrong", "takeover", "legacy", "stale"]

/** The status to store and what it proved; without a configured token nothing is checked. */
export const admit = (settings: StateStoreSettings, received: NodeStatus): { readonly proof: StatusProof; readonly status: NodeStatus } =>
  settings.clusterToken === undefined ? { proof: "missing", status: withoutProof(received) } : verifyStatus(received, settings.clusterToken)

/**
 * Why a proven status is too old (or too far ahead) to apply, or undefined. The ordering rule stops
 * a captured status from being replayed over its own incarnation's record, but not over a newer
 * incarnation's, nor after the record expired; its signed report time bounds that window to one
 * lease TTL of this coordinator's clock.
 */
export const staleProof = (settings: StateStoreSettings, status: NodeStatus, nowMs: number): string | undefined => {
  const skew = nowMs - status.reportedAtUnixMs
  if (Math.abs(skew) <= settings.leaseTtlMs) return undefined
  const when = skew > 0 ? `${skew} ms ago` : `${-skew} ms in the future`
  return `status of node ${JSON.stringify(status.node.id.slice(0, 256))} was reported ${when} by this coordinator's clock, more than the lease TTL (${settings.leaseTtlMs} ms): a replayed status, or the node's clock is off (keep nodes' clocks in sync, e.g. NTP)`
}

/** Why a legacy Register/Heartbeat (which has no labels, so no proof) is refused here, or undefined. */
export const legacyRefusal = (settings: StateStoreSettings, what: "Register" | "Heartbeat"): string | undefined =>
  settings.clusterToken !== undefined && settings.tokenCheck === "every-write"
    ? `this cluster requires TALON_CLUSTER_TOKEN; legacy ${what} cannot carry it — use a worker that sends NodeStatusHeartbeat (with TALON_CLUSTER_TOKEN set)`
    : undefined

/**
 * With a token (takeover-only), a legacy Register may create a node id or refresh its own
 * registration, but not move a registered id to another address: it cannot prove the token.
 */
export const legacyMove = (settings: StateStoreSettings, known: NodeStatus, node: NodeInfo): string | undefined =>
  settings.clusterToken !== undefined && known.node.address !== node.address
    ? `Register refused: node id ${node.id} is registered at ${known.node.address}; moving it to ${node.address} needs the cluster token, which legacy Register cannot carry — use a worker that sends NodeStatusHeartbeat with TALON_CLUSTER_TOKEN, or wait for the record's lease to expire`
    : undefined

/** The refusal reason of a store error, or undefined when the store refused for another reason. */
export const refusalOf = (e: StateStoreError): TokenRefusal | undefined =>
  e._tag === "TakeoverRefused" ? "takeover" : e._tag === "TokenRejected" ? (e.presented ? "wrong" : "missing") : undefined

/** Node ids remembered as already logged, at most; past it the memory starts over (a log line may repeat). */
const MAX_LOGGED = 10_000

/** Counts token refusals by reason and logs the first for each node id until that node is accepted again. */
export class TokenRefusals {
  readonly counts: Record<TokenRefusal, number> = { missing: 0, wrong: 0, takeover: 0, legacy: 0, stale: 0 }
  readonly #logged = new Set<string>()

  refused(nodeId: string, reason: TokenRefusal, detail: string): Effect.Effect<void> {
    this.counts[reason]++
    if (this.#logged.has(nodeId)) return Effect.void
    if (this.#logged.size >= MAX_LOGGED) this.#logged.clear()
    this.#logged.add(nodeId)
    return Effect.logWarning(`refused node ${JSON.stringify(nodeId.slice(0, 256))} (${reason}): ${detail}; further refusals of this node are counted, not logged`)
  }

  accepted(nodeId: string): void {
    if (this.#logged.size > 0) this.#logged.delete(nodeId)
  }
}
