/**
 * The repo's wire-vector fixture against Talon's own conformance_vectors.json, when
 * that file is beside the repo (../shared/talon/) or named by TALON_CONFORMANCE_VECTORS:
 * same schema range, same vector names, same bytes. A difference means Talon's wire
 * format moved (or the fixture was edited) and the fixture must be brought back in line
 * deliberately. Without Talon's file there is nothing to compare, and the skip says so.
 */
import { existsSync, readFileSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"
import { wireVectors } from "../support/wireVectors.js"

const talonPath =
  process.env.TALON_CONFORMANCE_VECTORS ?? fileURLToPath(new URL("../../../shared/talon/conformance_vectors.json", import.meta.url))

interface TalonVectorFile {
  readonly control_schema_version: number
  readonly min_control_schema_version: number
  readonly vectors: ReadonlyArray<{ readonly name: string; readonly note: string; readonly hex: string }>
}

if (!existsSync(talonPath)) {
  console.warn(
    `Talon wire-vector drift check SKIPPED: ${talonPath} is absent, so test/fixtures/talon-wire-vectors.json ` +
      `was not compared with Talon's file (crates/talon-transport/tests/conformance_vectors.json in milvus-io/talon). ` +
      `Set TALON_CONFORMANCE_VECTORS to its path to run the comparison.`
  )
  describe.skip(`Talon wire-vector drift (skipped: ${talonPath} absent)`, () => {
    it("needs Talon's conformance_vectors.json", () => {})
  })
} else {
  const talon = JSON.parse(readFileSync(talonPath, "utf8")) as TalonVectorFile

  describe(`Talon wire-vector drift (fixture vs ${talonPath})`, () => {
    it("same control schema range", () => {
      expect(wireVectors.controlSchema).toEqual({ current: talon.control_schema_version, oldest: talon.min_control_schema_version })
    })

    it("same vector names in the same order", () => {
      expect(wireVectors.frames.map((v) => v.name)).toEqual(talon.vectors.map((v) => v.name))
    })

    it("same bytes and notes for every vector", () => {
      const ours = new Map(wireVectors.frames.map((v) => [v.name, v]))
      const drifted = talon.vectors.filter((v) => ours.get(v.name)?.hex !== v.hex).map((v) => v.name)
      expect(drifted, "vectors whose bytes differ from Talon's: update the fixture and the codec together").toEqual([])
      for (const v of talon.vectors) expect(ours.get(v.name)?.about).toBe(v.note)
    })
  })
}
