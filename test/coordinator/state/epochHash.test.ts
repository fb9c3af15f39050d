/**
 * The epoch's XXH3-64 from the native addon (native/xxh3.c) must be hash-wasm's (and so Talon's)
 * bit for bit: the epoch is on the wire. Every size class of XXH3 is covered: 0, 1–3, 4–8, 9–16,
 * 17–128, 129–240, and the long path with its 1 KiB blocks, partial last block and last stripe.
 */
import fc from "fast-check"
import { beforeAll, describe, expect, it } from "vitest"
import type { IHasher } from "hash-wasm"
import { nativeXxh3, wasmXxh3 } from "../../../src/coordinator/state/epoch.js"

let wasm: IHasher
const reference = (bytes: Uint8Array): bigint => BigInt(`0x${wasm.init().update(bytes).digest("hex")}`)

beforeAll(async () => {
  wasm = await wasmXxh3()
})

/** Deterministic bytes (xorshift), so a failure names a reproducible length. */
const bytesOf = (length: number, seed: number): Uint8Array => {
  const out = new Uint8Array(length)
  let x = seed | 1
  for (let i = 0; i < length; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

describe("epoch hash", () => {
  it("the coordinator hashes with the native addon when it loads", () => {
    expect(nativeXxh3()).toBeDefined()
  })

  it("the addon's XXH3-64 equals hash-wasm's at every length to 600 and around each block edge", () => {
    const native = nativeXxh3()!
    expect(native(new Uint8Array(0))).toBe(0x2d06800538d394c2n)
    const lengths = [...Array.from({ length: 601 }, (_, i) => i)]
    for (const edge of [1024, 2048, 3072, 4096]) for (let d = -65; d <= 65; d++) lengths.push(edge + d)
    lengths.push(10_000, 65_536 + 17)
    for (const length of lengths) {
      const data = bytesOf(length, length + 1)
      expect([length, native(data)]).toEqual([length, reference(data)])
    }
  })

  it("the addon's XXH3-64 equals hash-wasm's on arbitrary bytes at any alignment", () => {
    const native = nativeXxh3()!
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.nat(7), (data, shift) => {
        // Views at every alignment: the addon reads unaligned words.
        const buf = new Uint8Array(data.length + shift)
        buf.set(data, shift)
        expect(native(buf.subarray(shift))).toBe(reference(data))
      })
    )
  })
})
