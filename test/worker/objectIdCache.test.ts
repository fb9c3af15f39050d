/**
 * The serve loop's ObjectId cache must answer exactly what the full decoder
 * answers, or nothing: same object fields, same offset and len, and no match
 * for a body that differs anywhere in its ObjectId bytes or length.
 */
import fc from "fast-check"
import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { decodeRangeRequest, encodeRangeRequest } from "../../src/protocol/index.js"
import { ObjectIdCache } from "../../src/worker/server/ObjectIdCache.js"

const objectArb: fc.Arbitrary<ObjectId> = fc.record({
  backend: fc.constantFrom(Backend.S3, Backend.Gcs, Backend.Azure),
  bucket: fc.string({ minLength: 0, maxLength: 12 }),
  objectPath: fc.string({ unit: "grapheme", minLength: 0, maxLength: 40 })
})
const u53 = fc.maxSafeNat()

describe("ObjectIdCache", () => {
  it("a remembered object matches later bodies with any offset/len, decoding them as the full decoder does", () => {
    fc.assert(
      fc.property(objectArb, u53, u53, u53, u53, (object, o1, l1, o2, l2) => {
        const cache = new ObjectIdCache()
        const first = encodeRangeRequest({ object, offset: o1, len: l1 })
        expect(cache.match(first)).toBeUndefined()
        cache.remember(first, object, "key", undefined)
        const second = encodeRangeRequest({ object, offset: o2, len: l2 })
        const hit = cache.match(second)
        expect(hit?.object).toBe(object)
        expect(hit?.key).toBe("key")
        const full = decodeRangeRequest(second)
        expect(Either.isRight(full)).toBe(true)
        expect([cache.offset, cache.len]).toEqual([Either.getOrThrow(full).offset, Either.getOrThrow(full).len])
      })
    )
  })

  it("never matches a body whose ObjectId bytes or length differ", () => {
    fc.assert(
      fc.property(objectArb, objectArb, u53, u53, (a, b, offset, len) => {
        const cache = new ObjectIdCache()
        cache.remember(encodeRangeRequest({ object: a, offset: 0, len: 0 }), a, "a", undefined)
        const other = encodeRangeRequest({ object: b, offset, len })
        const same = a.backend === b.backend && a.bucket === b.bucket && a.objectPath === b.objectPath
        expect(cache.match(other) !== undefined).toBe(same)
        // Trailing garbage or a missing byte changes the length: never a match.
        expect(cache.match(Buffer.concat([other, Buffer.from([0])]))).toBeUndefined()
        expect(cache.match(other.subarray(0, other.length - 1))).toBeUndefined()
      })
    )
  })

  it("leaves u64 values beyond 2^53 to the full decoder", () => {
    const object: ObjectId = { backend: Backend.S3, bucket: "b", objectPath: "k" }
    const cache = new ObjectIdCache()
    const body = encodeRangeRequest({ object, offset: 0, len: 1 })
    cache.remember(body, object, "k", undefined)
    const huge = Buffer.from(body)
    huge.writeUInt32LE(0x00200000, huge.length - 12) // offset hi word: 2^53
    expect(cache.match(huge)).toBeUndefined()
    expect(cache.match(body)).toBeDefined()
  })
})
