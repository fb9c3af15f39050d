import { describe, expect, it } from "@effect/vitest"
import { readFileSync } from "node:fs"
import { generate, IV, K, MARKER, TARGET } from "../../scripts/gen-sha256.js"

const hex32 = (x: number): string => (x >>> 0).toString(16).padStart(8, "0")

describe("scripts/gen-sha256.ts", () => {
  it("src/placement/sha256.ts is exactly what the generator writes (no hand edits below the marker)", () => {
    const onDisk = readFileSync(TARGET, "utf8")
    expect(onDisk).toContain(`\n${MARKER}\n`)
    // A plain equality keeps the failure readable: vitest diffs the two texts.
    expect(onDisk, "run: npx tsx scripts/gen-sha256.ts").toBe(generate(onDisk))
  })

  it("derives the FIPS 180-4 constants from the primes", () => {
    expect(K).toHaveLength(64)
    expect(hex32(K[0]!)).toBe("428a2f98")
    expect(hex32(K[63]!)).toBe("c67178f2")
    expect(IV.map(hex32)).toEqual(["6a09e667", "bb67ae85", "3c6ef372", "a54ff53a", "510e527f", "9b05688c", "1f83d9ab", "5be0cd19"])
  })

  it("regenerates only the section below the marker", () => {
    const onDisk = readFileSync(TARGET, "utf8")
    const head = onDisk.slice(0, onDisk.indexOf(MARKER))
    const tampered = onDisk.replace("+ 0x428a2f98 + w0)", "+ 0x428a2f99 + w0)")
    expect(tampered).not.toBe(onDisk)
    expect(generate(tampered)).toBe(onDisk)
    expect(generate(`${head}// changed head\n${onDisk.slice(head.length)}`)).toBe(`${head}// changed head\n${onDisk.slice(head.length)}`)
    expect(() => generate(head)).toThrow(/marker/)
  })
})
