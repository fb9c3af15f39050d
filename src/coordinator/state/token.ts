/**
 * The cluster token rule (TALON_CLUSTER_TOKEN) on the store's put path. The
 * token never reaches the store: a coordinator checks the HMAC proof a status
 * carries (src/protocol/statusProof.ts, compared in constant time) and passes
 * only what it found. Writes a coordinator makes for itself count as verified.
 */
import type { Redacted } from "effect"
import type { StatusProof } from "../../protocol/statusProof.js"
import type { NodeStatus } from "../../protocol/status.js"
import type { TokenCheck } from "./config.js"
import { TakeoverRefused, TokenRejected } from "./errors.js"

/**
 * The put-path rule. Without a configured token everything passes. With one:
 * a wrong proof is always refused; `every-write` refuses a missing proof;
 * `takeover-only` refuses a missing proof only when the write would replace a
 * record held by another incarnation.
 */
export const tokenProblem = (
  expected: Redacted.Redacted<string> | undefined,
  check: TokenCheck,
  proof: StatusProof,
  current: NodeStatus | undefined,
  incoming: NodeStatus
): TokenRejected | TakeoverRefused | null => {
  if (expected === undefined || proof === "verified") return null
  if (proof === "wrong") return new TokenRejected({ nodeId: incoming.node.id, presented: true })
  if (check === "every-write") return new TokenRejected({ nodeId: incoming.node.id, presented: false })
  if (current !== undefined && current.incarnationId !== incoming.incarnationId) {
    return new TakeoverRefused({ nodeId: incoming.node.id, heldBy: current.incarnationId, incoming: incoming.incarnationId })
  }
  return null
}
