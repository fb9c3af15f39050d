/**
 * The `--loops` messages cross the cluster IPC channel as JSON: every message either side can
 * build survives Schema encoding, JSON and decoding unchanged, and whatever arrives that is not
 * a message decodes to a typed error instead of throwing.
 */
import { Arbitrary, Either, Schema } from "effect"
import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { LoopMessage, OwnerMessage } from "../../../src/worker/loops/protocol.js"

/** Built on this package's fast-check (effect bundles its own copy). */
const fromSchema = <A, I>(schema: Schema.Schema<A, I>): fc.Arbitrary<A> =>
  Arbitrary.makeLazy(schema)(fc as unknown as Parameters<Arbitrary.LazyArbitrary<A>>[0]) as unknown as fc.Arbitrary<A>

describe("--loops protocol over JSON IPC", () => {
  for (const [name, schema] of [
    ["loop → owner", OwnerMessage],
    ["owner → loop", LoopMessage]
  ] as const) {
    const s = schema as unknown as Schema.Schema<{ readonly _tag: string }, unknown>
    it(`${name}: every message round-trips through encode, JSON and decode (property)`, () => {
      fc.assert(
        fc.property(fromSchema(s), (msg) => {
          const wire = JSON.parse(JSON.stringify(Schema.encodeSync(s)(msg)))
          const back = Schema.decodeUnknownSync(s)(wire)
          expect(back._tag).toBe(msg._tag)
          expect({ ...back }).toEqual({ ...msg })
        }),
        { numRuns: 300 }
      )
    })

    it(`${name}: arbitrary values decode to an error, never a throw (property)`, () => {
      fc.assert(
        fc.property(fc.anything(), (junk) => {
          const r = Schema.decodeUnknownEither(s)(junk)
          // fc.anything() can build a valid message only by accident; anything else is a Left.
          expect(Either.isLeft(r) || typeof (r.right as { _tag?: unknown })._tag === "string").toBe(true)
        }),
        { numRuns: 500 }
      )
    })
  }
})
