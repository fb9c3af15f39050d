import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as fc from "fast-check"
import { parseSize } from "../../src/core/size.js"

const UNITS = [
  ["", 1],
  ["K", 2 ** 10],
  ["M", 2 ** 20],
  ["G", 2 ** 30],
  ["T", 2 ** 40]
] as const

describe("parseSize", () => {
  it("reads plain counts and binary units in every spelling", () => {
    expect(parseSize("1048576")).toEqual(Either.right(1048576))
    expect(parseSize("64K")).toEqual(Either.right(65536))
    expect(parseSize("64k")).toEqual(Either.right(65536))
    expect(parseSize("64KiB")).toEqual(Either.right(65536))
    expect(parseSize("64KB")).toEqual(Either.right(65536))
    expect(parseSize(" 256 MiB ")).toEqual(Either.right(256 * 2 ** 20))
    expect(parseSize("10G")).toEqual(Either.right(10 * 2 ** 30))
    expect(parseSize("1.5G")).toEqual(Either.right(1.5 * 2 ** 30))
    expect(parseSize("2t")).toEqual(Either.right(2 * 2 ** 40))
    expect(parseSize("512B")).toEqual(Either.right(512))
    expect(parseSize("0")).toEqual(Either.right(0))
  })

  it("refuses what is not a whole, safe number of bytes, saying why and what a size looks like", () => {
    expect(parseSize("12Q")).toEqual(Either.left(expect.stringContaining(`bad size "12Q": want a byte count`)))
    expect(parseSize("0.3K")).toEqual(Either.left(expect.stringContaining("not a whole number of bytes")))
    expect(parseSize("1.5")).toEqual(Either.left(expect.stringContaining("not a whole number of bytes")))
    expect(parseSize("9000000T")).toEqual(Either.left(expect.stringContaining(`more than ${Number.MAX_SAFE_INTEGER} bytes`)))
    for (const bad of ["", "K", "-1", "1e3", "0x10", "1 2", "1KK", "1.K", ".5K", "1Kb2", "Infinity", "NaN"]) {
      expect(Either.isLeft(parseSize(bad)), bad).toBe(true)
    }
  })

  it("reads back every count written with any unit and spelling", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...UNITS),
        fc.constantFrom("", "B", "iB", "b", "ib"),
        fc.integer({ min: 0, max: 2 ** 20 }),
        fc.boolean(),
        ([unit, mult], suffix, n, lower) => {
          const text = `${n}${lower ? unit.toLowerCase() : unit}${unit === "" ? "" : suffix}`
          if (n * mult <= Number.MAX_SAFE_INTEGER) expect(parseSize(text)).toEqual(Either.right(n * mult))
          else expect(parseSize(text)).toEqual(Either.left(expect.stringContaining("more than")))
        }
      )
    )
  })

  it("accepts a fraction exactly when the bytes come out whole", () => {
    fc.assert(
      fc.property(fc.constantFrom(...UNITS.slice(1)), fc.integer({ min: 0, max: 1000 }), fc.integer({ min: 0, max: 999 }), ([unit, mult], whole, milli) => {
        const frac = String(milli).padStart(3, "0")
        const bytesTimes1000 = (whole * 1000 + milli) * mult
        const result = parseSize(`${whole}.${frac}${unit}`)
        if (bytesTimes1000 % 1000 === 0) expect(result).toEqual(Either.right(bytesTimes1000 / 1000))
        else expect(Either.isLeft(result)).toBe(true)
      })
    )
  })

  it("never throws on arbitrary text; a success is always a safe non-negative integer", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.stringMatching(/^[0-9.kKmMgGtTiIbB ]{0,12}$/)), (s) => {
        const r = parseSize(s)
        if (Either.isRight(r)) expect(Number.isSafeInteger(r.right) && r.right >= 0).toBe(true)
        else expect(r.left).toContain(JSON.stringify(s))
      }),
      { numRuns: 2000 }
    )
  })
})
