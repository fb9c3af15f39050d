import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { decodeControl, encodeControl, formatLoadAck, parseLoadAck } from "../../src/protocol/index.js"

describe("Load Ack detail", () => {
  it("round-trips every pair of safe byte counts, inside a real Ack", () => {
    fc.assert(
      fc.property(fc.nat({ max: Number.MAX_SAFE_INTEGER }), fc.nat({ max: Number.MAX_SAFE_INTEGER }), (fetched, resident) => {
        const detail = formatLoadAck({ fetched, resident })
        const decoded = decodeControl(encodeControl({ _tag: "Ack", ok: true, detail }))
        expect(decoded._tag === "Right" && decoded.right.message._tag === "Ack" && parseLoadAck(decoded.right.message.detail)).toEqual({
          fetched,
          resident
        })
      })
    )
  })

  it("never throws on arbitrary details and rejects what is not the format", () => {
    fc.assert(fc.property(fc.option(fc.string(), { nil: null }), (s) => void parseLoadAck(s)))
    expect(parseLoadAck(null)).toBeUndefined()
    expect(parseLoadAck("fetched=1 resident=")).toBeUndefined()
    expect(parseLoadAck("fetched=99999999999999999 resident=0")).toBeUndefined()
    expect(parseLoadAck(" fetched=1 resident=2")).toBeUndefined()
  })
})
