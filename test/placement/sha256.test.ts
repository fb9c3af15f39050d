import { describe, expect, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import fc from "fast-check"
import { paddedLength, prefixState, sha256Into, sha256Words, sha256WordsAfterPrefix } from "../../src/placement/sha256.js"

const hex = (words: Int32Array): string => Array.from(words, (w) => (w >>> 0).toString(16).padStart(8, "0")).join("")

/**
 * `bytes` laid out as the word functions expect (byte i at `i ^ 3`), in a scratch that
 * starts full of garbage: stale words from a longer earlier key must not matter.
 */
const asWords = (bytes: Uint8Array): Int32Array => {
  const words = new Int32Array(paddedLength(bytes.length) / 4).fill(0x5a5a5a5a)
  const view = new Uint8Array(words.buffer)
  bytes.forEach((b, i) => (view[i ^ 3] = b))
  return words
}

const oracle = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

const ours = (bytes: Uint8Array): string => {
  // Garbage after the message must not matter.
  const scratch = new Uint8Array(paddedLength(bytes.length)).fill(0xa5)
  scratch.set(bytes)
  const out = new Int32Array(8)
  sha256Into(scratch, bytes.length, out)
  return hex(out)
}

describe("sha256Into", () => {
  it("FIPS 180-4 examples", () => {
    expect(ours(new Uint8Array(0))).toBe("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    expect(ours(Buffer.from("abc"))).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    expect(ours(Buffer.from("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))).toBe(
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    )
  })

  it("agrees with node:crypto on every length across the padding boundaries", () => {
    for (let len = 0; len <= 200; len++) {
      const bytes = Uint8Array.from({ length: len }, (_, i) => (i * 131 + len) & 0xff)
      expect(ours(bytes), `length ${len}`).toBe(createHash("sha256").update(bytes).digest("hex"))
    }
  })

  it("agrees with node:crypto on arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1000 }), (bytes) => {
        expect(ours(bytes)).toBe(createHash("sha256").update(bytes).digest("hex"))
      }),
      { numRuns: 300 }
    )
  })
})

describe("sha256Words", () => {
  it("agrees with node:crypto on every length across the padding boundaries", () => {
    for (let len = 0; len <= 200; len++) {
      const bytes = Uint8Array.from({ length: len }, (_, i) => (i * 131 + len) & 0xff)
      const out = new Int32Array(8)
      sha256Words(asWords(bytes), len, out)
      expect(hex(out), `length ${len}`).toBe(oracle(bytes))
    }
  })

  it("agrees with node:crypto on arbitrary bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 1000 }), (bytes) => {
        const out = new Int32Array(8)
        sha256Words(asWords(bytes), bytes.length, out)
        expect(hex(out)).toBe(oracle(bytes))
      }),
      { numRuns: 300 }
    )
  })
})

describe("sha256WordsAfterPrefix", () => {
  it("resumes after the constant 28-byte prefix and agrees with node:crypto", () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 28, maxLength: 28 }), fc.uint8Array({ maxLength: 300 }), (prefix, rest) => {
        const mid = prefixState(prefix)
        const msg = new Uint8Array(28 + rest.length)
        msg.set(prefix)
        msg.set(rest, 28)
        const out = new Int32Array(8)
        sha256WordsAfterPrefix(asWords(msg), msg.length, out, mid)
        expect(hex(out)).toBe(oracle(msg))
      }),
      { numRuns: 300 }
    )
  })

  it("agrees with node:crypto on every placement-sized length (one to three blocks)", () => {
    const prefix = Buffer.from("talon-cache-maglev-block-v1\0", "latin1")
    const mid = prefixState(prefix)
    for (let len = 28; len <= 200; len++) {
      const msg = Uint8Array.from({ length: len }, (_, i) => (i < 28 ? prefix[i]! : (i * 37 + len) & 0xff))
      const out = new Int32Array(8)
      sha256WordsAfterPrefix(asWords(msg), len, out, mid)
      expect(hex(out), `length ${len}`).toBe(oracle(msg))
    }
  })

  it("refuses a prefix shorter than 28 bytes", () => {
    expect(() => prefixState(new Uint8Array(27))).toThrow(RangeError)
  })
})
