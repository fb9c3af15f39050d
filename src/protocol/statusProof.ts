/**
 * Proof of the cluster token on a NodeStatusHeartbeat. Talon's tag 9 has no
 * token field and its layout must not change, so the proof rides in a
 * reserved label: `talon.auth` = hex HMAC-SHA256(token, the bincode encoding
 * of the status without that label). The token itself never goes on the wire;
 * a captured status cannot be altered without the token, and replaying it
 * unaltered is stopped by the store's ordering rule (same incarnation needs a
 * higher sequence). It authenticates, it does not encrypt: the status stays
 * readable to anyone on the path.
 */
import { Either, Redacted } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"
import { BincodeWriter } from "./bincode.js"
import { MAX_STATUS_LABELS, canonicalLabels, writeNodeStatus, type NodeStatus } from "./status.js"

/** The reserved label key; a coordinator strips it before storing the status. */
export const STATUS_PROOF_LABEL = "talon.auth"

/** What a coordinator found: a valid proof, none at all, or one that does not match its token. */
export type StatusProof = "verified" | "missing" | "wrong"

const DIGEST_BYTES = 32

/** The status as it is stored and signed: every label but the proof. */
export const withoutProof = (status: NodeStatus): NodeStatus =>
  status.labels.some(([k]) => k === STATUS_PROOF_LABEL) ? { ...status, labels: status.labels.filter(([k]) => k !== STATUS_PROOF_LABEL) } : status

const mac = (token: Redacted.Redacted<string>, unsigned: NodeStatus): Buffer => {
  const w = new BincodeWriter(512)
  writeNodeStatus(w, unsigned)
  return createHmac("sha256", Redacted.value(token)).update(w.finish()).digest()
}

/**
 * The status with its proof label (any previous proof replaced). Left when it
 * has no room for one more label or is not a valid status (a caller bug: the
 * worker builds its own status).
 */
export const signStatus = (status: NodeStatus, token: Redacted.Redacted<string>): Either.Either<NodeStatus, string> => {
  const unsigned = withoutProof(status)
  if (unsigned.labels.length >= MAX_STATUS_LABELS) {
    return Either.left(`the status already has ${unsigned.labels.length} labels; the cluster-token proof needs one of the ${MAX_STATUS_LABELS}`)
  }
  return Either.try({
    try: () => ({ ...unsigned, labels: canonicalLabels([...unsigned.labels, [STATUS_PROOF_LABEL, mac(token, unsigned).toString("hex")]]) }),
    catch: (e) => `cannot sign the status: ${e instanceof Error ? e.message : String(e)}`
  })
}

/**
 * Checks a received status's proof against `token`, in constant time over
 * equal-length digests (a label of any other length or content is simply
 * wrong). Never throws. `status` is what to store: the proof label removed.
 */
export const verifyStatus = (
  received: NodeStatus,
  token: Redacted.Redacted<string>
): { readonly proof: StatusProof; readonly status: NodeStatus } => {
  const status = withoutProof(received)
  const presented = received.labels.find(([k]) => k === STATUS_PROOF_LABEL)?.[1]
  if (presented === undefined) return { proof: "missing", status }
  try {
    const expected = mac(token, status)
    const got = /^[0-9a-f]*$/.test(presented) ? Buffer.from(presented, "hex") : Buffer.alloc(0)
    const same = got.length === DIGEST_BYTES && timingSafeEqual(got, expected)
    return { proof: same ? "verified" : "wrong", status }
  } catch {
    return { proof: "wrong", status }
  }
}
