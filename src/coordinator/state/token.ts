/**
 * The cluster token (TALON_CLUSTER_TOKEN): a shared secret a node presents
 * with its registration/status. Compared in constant time so a peer cannot
 * learn it byte by byte from response timing.
 */
import { Redacted } from "effect"
import { timingSafeEqual, createHash } from "node:crypto"
import type { TokenCheck } from "./config.js"
import { TakeoverRefused, TokenRejected } from "./errors.js"
import type { NodeStatus } from "../../protocol/status.js"

/**
 * True when `presented` equals `expected`. Both sides are hashed first so the
 * comparison runs over equal-length digests and takes the same time whatever
 * the presented token's length or content.
 */
export const clusterTokenMatches = (expected: Redacted.Redacted<string>, presented: string | Redacted.Redacted<string> | undefined): boolean => {
  if (presented === undefined) return false
  const digest = (s: string) => createHash("sha256").update(s, "utf8").digest()
  const p = typeof presented === "string" ? presented : Redacted.value(presented)
  return timingSafeEqual(digest(Redacted.value(expected)), digest(p))
}

/**
 * The put-path rule. Without a configured token everything passes. With one:
 * a wrong token is always refused; `every-write` refuses a missing token;
 * `takeover-only` refuses a missing token only when the write would replace a
 * record held by another incarnation.
 */
export const tokenProblem = (
  expected: Redacted.Redacted<string> | undefined,
  check: TokenCheck,
  presented: string | Redacted.Redacted<string> | undefined,
  current: NodeStatus | undefined,
  incoming: NodeStatus
): TokenRejected | TakeoverRefused | null => {
  if (expected === undefined) return null
  if (presented !== undefined) return clusterTokenMatches(expected, presented) ? null : new TokenRejected({ nodeId: incoming.node.id, presented: true })
  if (check === "every-write") return new TokenRejected({ nodeId: incoming.node.id, presented: false })
  if (current !== undefined && current.incarnationId !== incoming.incarnationId) {
    return new TakeoverRefused({ nodeId: incoming.node.id, heldBy: current.incarnationId, incoming: incoming.incarnationId })
  }
  return null
}
