/**
 * Talon's wire vectors as this repo carries them (test/fixtures/talon-wire-vectors.json):
 * the contract every codec and socket conformance test checks against. Where the byte
 * strings come from is the fixture's `source` field.
 */
import { readFileSync } from "node:fs"

export interface WireVector {
  readonly name: string
  readonly about: string
  readonly hex: string
}

export interface WireVectorFixture {
  readonly source: string
  readonly controlSchema: { readonly current: number; readonly oldest: number }
  readonly frames: ReadonlyArray<WireVector>
}

export const wireVectorsPath = new URL("../fixtures/talon-wire-vectors.json", import.meta.url)

export const wireVectors: WireVectorFixture = JSON.parse(readFileSync(wireVectorsPath, "utf8"))

const byName = new Map(wireVectors.frames.map((v) => [v.name, v]))

/** The bytes of one named vector; a name the fixture lacks is a test bug, said loudly. */
export const wireVector = (name: string): Buffer => {
  const v = byName.get(name)
  if (v === undefined) throw new Error(`no Talon wire vector named ${name} in test/fixtures/talon-wire-vectors.json`)
  return Buffer.from(v.hex, "hex")
}
