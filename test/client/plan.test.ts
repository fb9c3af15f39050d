/**
 * Properties of the client's read planning and of its coordinator list setting.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import * as fc from "fast-check"
import { Backend } from "../../src/core/ids.js"
import { coordinatorList } from "../../src/client/Coordinators.js"
import { planPieces } from "../../src/client/plan.js"

const object = { backend: Backend.S3, bucket: "b", objectPath: "k" }

describe("planPieces", () => {
  it("tiles exactly the clamped range, each piece inside one block and under the request cap", () =>
    fc.assert(
      fc.property(
        // At most a few thousand pieces per case.
        fc.integer({ min: 1 << 10, max: 1 << 20 }),
        fc.integer({ min: 1 << 10, max: 1 << 20 }),
        fc.integer({ min: 0, max: 1 << 24 }),
        fc.integer({ min: 0, max: 1 << 24 }),
        fc.integer({ min: 0, max: 1 << 22 }),
        (blockSize, maxRequestBytes, size, offset, length) => {
          const pieces = planPieces({ object, size, version: "v" }, offset, length, blockSize, maxRequestBytes)
          const end = Math.min(offset + length, size)
          let at = offset
          for (const p of pieces) {
            const problem =
              p.offset !== at ? `starts at ${p.offset}, not ${at}`
              : p.resultOffset !== at - offset ? `lands at ${p.resultOffset}`
              : p.length <= 0 || p.length > maxRequestBytes ? `length ${p.length}`
              : p.block.offset !== Math.floor(p.offset / blockSize) * blockSize ? `block ${p.block.offset}`
              : p.offset + p.length > p.block.offset + blockSize ? "crosses its block's end"
              : p.block.blockSize !== blockSize || p.block.version !== "v" || p.block.object !== object ? "wrong block id"
              : undefined
            if (problem !== undefined) expect.fail(`piece ${JSON.stringify(p)}: ${problem}`)
            at += p.length
          }
          expect(at).toBe(Math.max(offset, end))
        }
      ),
      { numRuns: 300 }
    ))
})

const hostPort = fc.tuple(
  fc.oneof(fc.ipV4(), fc.domain(), fc.ipV6().map((h) => `[${h}]`)),
  fc.integer({ min: 1, max: 65535 })
)

describe("coordinatorList", () => {
  it("accepts any comma-separated list of host:port (spaces around entries allowed), in order", () =>
    fc.assert(
      fc.property(fc.array(hostPort, { minLength: 1, maxLength: 5 }), fc.constantFrom(",", ", ", " ,"), (entries, sep) => {
        const text = entries.map(([h, p]) => `${h}:${p}`).join(sep)
        const parsed = Effect.runSync(coordinatorList(text))
        expect(parsed.map((a) => Number(a.slice(a.lastIndexOf(":") + 1)))).toEqual(entries.map(([, p]) => p))
        expect(parsed).toHaveLength(entries.length)
      })
    ))

  it("refuses, never throws on, arbitrary text that is not such a list", () =>
    fc.assert(
      fc.property(fc.string(), (text) => {
        const exit = Effect.runSyncExit(coordinatorList(text))
        if (Exit.isFailure(exit)) expect(String(exit.cause)).toContain("TALON_CLIENT_COORDINATOR")
      })
    ))
})
