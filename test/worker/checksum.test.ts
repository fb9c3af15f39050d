/** Unit checksums and the `sums` file codec: round trips, and a decoder that never throws. */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import fc from "fast-check"
import { beforeAll, describe, expect, it } from "vitest"
import { checkFile, decodeSums, encodeSums, hasher, loadHasher, nativeXxh64, newUnitHash, wasmXxh64 } from "../../src/worker/store/checksum.js"

beforeAll(() => loadHasher().then(() => undefined))

const sumsArb = fc.array(fc.option(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), { nil: undefined }), { maxLength: 300 })

describe("sums file", () => {
  it("round-trips every recorded checksum and every gap", () => {
    fc.assert(
      fc.property(sumsArb, (sums) => {
        expect(decodeSums(encodeSums(sums), sums.length)).toEqual(sums)
      })
    )
  })

  it("never throws on arbitrary bytes: sums or a reason", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), fc.nat(400), (bytes, count) => {
        const r = decodeSums(bytes, count)
        if (typeof r !== "string") expect(r.length).toBe(count)
      })
    )
  })

  it("a cut or a wrong unit count is refused with a reason", () => {
    fc.assert(
      fc.property(sumsArb, fc.nat(), (sums, cut) => {
        const bytes = encodeSums(sums)
        expect(typeof decodeSums(bytes.subarray(0, cut % bytes.length), sums.length)).toBe("string")
        expect(decodeSums(bytes, sums.length + 1)).toMatch(/for \d+ units, the block has/)
      })
    )
  })
})

describe("hashers", () => {
  it("the worker hashes with the native addon when it loads", () => {
    expect(nativeXxh64()).toBeDefined()
  })

  it("the addon's XXH64 equals xxhash-wasm's, one-shot and streamed in arbitrary pieces", async () => {
    const native = nativeXxh64()!
    const wasm = await wasmXxh64()
    // Known answers of XXH64 (seed 0), from its specification's test vectors.
    expect(native.h64Raw(new Uint8Array(0))).toBe(0xef46db3751d8e999n)
    expect(native.h64Raw(new TextEncoder().encode("abc"))).toBe(0x44bc2cf5ad770999n)
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 2000 }), fc.array(fc.nat(300), { maxLength: 10 }), fc.nat(7), (data, cuts, shift) => {
        // Views at every alignment: the addon reads unaligned words.
        const buf = new Uint8Array(data.length + shift)
        buf.set(data, shift)
        const view = buf.subarray(shift)
        const want = wasm.h64Raw(data)
        expect(native.h64Raw(view)).toBe(want)
        const h = native.create64()
        let at = 0
        for (const c of cuts) {
          h.update(view.subarray(at, at + c))
          at = Math.min(view.length, at + c)
        }
        h.update(view.subarray(at))
        expect(h.digest()).toBe(want)
      })
    )
  })
})

describe("checkFile", () => {
  it("a streamed hash equals the one-shot hash; the file checks out, and a flipped byte, a cut or an extra byte is caught", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 1, maxLength: 3000 }), fc.array(fc.integer({ min: 1, max: 700 }), { maxLength: 8 }), async (data, cuts) => {
    const h = newUnitHash()
    let at = 0
    for (const c of cuts) {
      h.update(data.subarray(at, at + c))
      at = Math.min(data.length, at + c)
    }
    h.update(data.subarray(at))
    const sum = h.digest()
    expect(sum).toBe(hasher().h64Raw(data))

    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "talon-sum-")), "p0")
    try {
      fs.writeFileSync(file, data)
      // Through a small scratch (streamed, several reads) and a default one (the unit in one read):
      // both must give the same verdict.
      const check = async () => {
        const fd = fs.openSync(file, "r")
        try {
          const streamed = await checkFile(fd, data.length, sum, new Uint8Array(256))
          const oneRead = await checkFile(fd, data.length, sum)
          expect(oneRead.ok).toBe(streamed.ok)
          if (!oneRead.ok && !streamed.ok) expect(oneRead.reason).toBe(streamed.reason)
          return streamed
        } finally {
          fs.closeSync(fd)
        }
      }
      expect(await check()).toEqual({ ok: true })
      const flipped = Buffer.from(data)
      flipped[data.length >> 1]! ^= 1
      fs.writeFileSync(file, flipped)
      expect(await check()).toMatchObject({ ok: false, reason: "checksum" })
      fs.writeFileSync(file, data.subarray(0, data.length - 1))
      expect(await check()).toMatchObject({ ok: false, reason: "short" })
      fs.writeFileSync(file, Buffer.concat([data, Buffer.from([0])]))
      expect(await check()).toMatchObject({ ok: false, reason: "long" })
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true })
    }
      }),
      { numRuns: 40 }
    )
  })
})
