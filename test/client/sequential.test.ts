/**
 * The sequential-run table and the payload slices read-ahead hands out: properties over
 * arbitrary read series and arbitrary reply layouts.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { SequentialTable } from "../../src/client/sequential.js"
import { Payload, SlabPool } from "../../src/client/SlabPool.js"

describe("SequentialTable", () => {
  it("a run of back-to-back reads of any sizes continues one cursor: streak k at its (k+1)-th read", () =>
    fc.assert(
      fc.property(fc.nat(1 << 30), fc.array(fc.integer({ min: 1, max: 1 << 22 }), { minLength: 1, maxLength: 40 }), (start, sizes) => {
        const t = new SequentialTable()
        let at = start
        sizes.forEach((n, i) => {
          const c = t.observe("k", at, n)
          expect(c.streak).toBe(i)
          at += n
          expect(c.end).toBe(at)
        })
      })
    ))

  it("reading the same bytes again never extends a run; a far jump starts a new cursor", () =>
    fc.assert(
      fc.property(fc.nat(1 << 20), fc.integer({ min: 1, max: 1 << 16 }), fc.integer({ min: 3, max: 10 }), (start, n, reps) => {
        const t = new SequentialTable()
        for (let i = 0; i < reps; i++) expect(t.observe("k", start, n).streak).toBe(0)
        expect(t.observe("k", start + n + 10 * n + 1, n).streak).toBe(0)
      })
    ))

  it("interleaved sequential readers of one object each keep their own run", () =>
    fc.assert(
      fc.property(fc.integer({ min: 2, max: 8 }), fc.integer({ min: 1, max: 1 << 16 }), (readers, n) => {
        const t = new SequentialTable({ objects: 4, cursorsPerObject: 8 })
        const gap = 1 << 30
        for (let step = 0; step < 5; step++) {
          for (let r = 0; r < readers; r++) expect(t.observe("k", r * gap + step * n, n).streak).toBe(step)
        }
      })
    ))

  it("holds at most its limits of objects and cursors, whatever the reads", () =>
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 20 }), fc.nat(1 << 24), fc.integer({ min: 1, max: 1 << 16 })), { maxLength: 300 }),
        (reads) => {
          const t = new SequentialTable({ objects: 5, cursorsPerObject: 3 })
          for (const [k, at, n] of reads) {
            t.observe(`o${k}`, at, n)
            expect(t.size).toBeLessThanOrEqual(5)
          }
        }
      )
    ))
})

describe("Payload.slice", () => {
  it("is exactly the bytes of the range, and holds its own references on the buffers it views", () =>
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 1, max: 64 }), { minLength: 1, maxLength: 8 }),
        fc.nat(),
        fc.nat(),
        (runs, x, y) => {
          const pool = new SlabPool(64, 16)
          const slabs = runs.map(() => pool.take())
          const views = runs.map((n, i) => {
            slabs[i]!.buf.fill(i + 1)
            for (let j = 0; j < n; j++) slabs[i]!.buf[j] = (i * 31 + j) & 0xff
            return slabs[i]!.buf.subarray(0, n)
          })
          const whole = Buffer.concat(views)
          const p = new Payload(views, [...slabs], whole.length)
          const from = x % (whole.length + 1)
          const to = from + (y % (whole.length - from + 1))
          const s = p.slice(from, to)
          expect(Buffer.concat(s.views).equals(whole.subarray(from, to))).toBe(true)
          expect(s.length).toBe(to - from)
          p.release()
          // The slice's buffers are still referenced: none is back in the pool until it is released too.
          const viewed = slabs.filter((sl) => sl.refs > 0)
          expect(pool.freeCount).toBe(slabs.length - viewed.length)
          s.release()
          expect(pool.freeCount).toBe(slabs.length)
        }
      )
    ))
})
