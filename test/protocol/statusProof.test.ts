/**
 * The cluster-token proof on a status (label talon.auth = HMAC-SHA256 of the
 * status without it): verifies under the token it was made with and under no
 * other, fails after any single-byte change of the encoded status, and the
 * verifier never throws whatever the labels hold.
 */
import { Either, Redacted } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { decodeControl, encodeControl, type ControlMessage, type NodeStatus } from "../../src/protocol/index.js"
import { MAX_STATUS_LABELS } from "../../src/protocol/status.js"
import { STATUS_PROOF_LABEL, signStatus, verifyStatus, withoutProof } from "../../src/protocol/statusProof.js"
import { nodeStatusArb } from "./arbitraries.js"

const heartbeat = (status: NodeStatus): ControlMessage => ({ _tag: "NodeStatusHeartbeat", status })
/** Statuses with room for the proof label. */
const roomy = nodeStatusArb.map((s) => ({ ...s, labels: s.labels.slice(0, MAX_STATUS_LABELS - 1) }))
const tokenArb = fc.string({ minLength: 16, maxLength: 80 }).map(Redacted.make)
const signed = (s: NodeStatus, token: Redacted.Redacted<string>): NodeStatus => Either.getOrThrow(signStatus(s, token))
const proofOf = (s: NodeStatus) => s.labels.find(([k]) => k === STATUS_PROOF_LABEL)?.[1]
/** Bytes before the status in an encoded NodeStatusHeartbeat: schema u16 and tag u32. */
const ENVELOPE = 6

describe("status proof (talon.auth)", () => {
  it("verifies under the token it was made with, and under no other token (property)", () => {
    fc.assert(
      fc.property(roomy, tokenArb, tokenArb, (status, token, other) => {
        const s = signed(status, token)
        expect(proofOf(s)).toMatch(/^[0-9a-f]{64}$/)
        const ok = verifyStatus(s, token)
        expect(ok.proof).toBe("verified")
        expect(ok.status).toEqual(withoutProof(status))
        expect(proofOf(ok.status)).toBeUndefined()
        if (Redacted.value(other) !== Redacted.value(token)) expect(verifyStatus(s, other).proof).toBe("wrong")
        // Re-signing replaces the proof rather than adding one.
        expect(signed(s, token)).toEqual(s)
      }),
      { numRuns: 300 }
    )
  })

  it("any single-byte change of the encoded status either fails to decode or does not verify (property)", () => {
    fc.assert(
      fc.property(roomy, tokenArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (status, token, at, delta) => {
        const bytes = Uint8Array.from(encodeControl(heartbeat(signed(status, token))))
        const i = ENVELOPE + (at % (bytes.length - ENVELOPE))
        bytes[i] = (bytes[i]! + delta) & 0xff
        const decoded = decodeControl(bytes)
        if (Either.isLeft(decoded) || decoded.right.message._tag !== "NodeStatusHeartbeat") return
        expect(verifyStatus(decoded.right.message.status, token).proof).not.toBe("verified")
      }),
      { numRuns: 2000 }
    )
  })

  it("a status without the label is missing; the verifier never throws on arbitrary labels, valid or not (property)", () => {
    fc.assert(
      fc.property(roomy, tokenArb, (status, token) => {
        expect(verifyStatus(withoutProof(status), token).proof).toBe("missing")
      }),
      { numRuns: 200 }
    )
    const anyLabels = fc.array(
      fc.tuple(fc.oneof(fc.constant(STATUS_PROOF_LABEL), fc.string({ maxLength: 300 })), fc.oneof(
          fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString("hex")),
          fc.string({ unit: fc.constantFrom(..."0123456789abcdefABCDEF"), maxLength: 70 }),
          fc.string({ maxLength: 400 }),
          fc.string({ unit: "binary" })
        )),
      { maxLength: 40 }
    )
    fc.assert(
      fc.property(roomy, tokenArb, anyLabels, (status, token, labels) => {
        const r = verifyStatus({ ...status, labels }, token)
        expect(["missing", "wrong"]).toContain(r.proof)
        expect(r.status.labels.some(([k]) => k === STATUS_PROOF_LABEL)).toBe(false)
      }),
      { numRuns: 500 }
    )
  })

  it("refuses to sign a status with no room left for the label", () => {
    fc.assert(
      fc.property(nodeStatusArb, tokenArb, (status, token) => {
        const full = { ...status, labels: Array.from({ length: MAX_STATUS_LABELS }, (_, i) => [`k${String(i).padStart(2, "0")}`, "v"] as const) }
        const r = signStatus(full, token)
        expect(Either.isLeft(r) && r.left).toMatch(/already has 16 labels/)
      }),
      { numRuns: 20 }
    )
  })
})
