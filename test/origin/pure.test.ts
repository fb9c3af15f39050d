/** Property tests for the stub's pure pieces: ranges, key layout, aws-chunked framing, conditions. */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import * as path from "node:path"
import { Readable } from "node:stream"
import { AwsChunkedDecoder } from "../../src/http/awsChunked.js"
import { evaluateConditions, ifRangeHolds } from "../../src/http/conditions.js"
import { seededRandom, sampleLatencyMs } from "../../src/origin/faults.js"
import { decodeSegment, encodeSegment, keyProblem, objectPath } from "../../src/origin/layout.js"
import { parseRange } from "../../src/http/ranges.js"
import { sampleBytes } from "../../src/origin/seed.js"

describe("parseRange", () => {
  it("always yields an in-bounds, non-empty range or a clear verdict", () => {
    fc.assert(
      fc.property(fc.nat(10_000), fc.option(fc.nat(20_000)), fc.option(fc.nat(20_000)), (size, a, b) => {
        if (a === null && b === null) return
        const r = parseRange(`bytes=${a ?? ""}-${b ?? ""}`, size)
        if (r._tag === "Partial") {
          expect(r.start).toBeGreaterThanOrEqual(0)
          expect(r.start).toBeLessThanOrEqual(r.end)
          expect(r.end).toBeLessThan(size)
        }
        if (a === null) {
          // suffix: the last b bytes, unsatisfiable only for b = 0 or an empty object
          if (b === 0 || size === 0) expect(r._tag).toBe("Unsatisfiable")
          else expect(r).toEqual({ _tag: "Partial", start: Math.max(0, size - b!), end: size - 1 })
        } else if (b !== null && b < a) {
          expect(r._tag).toBe("Full")
        } else if (a >= size) {
          expect(r._tag).toBe("Unsatisfiable")
        } else {
          expect(r).toEqual({ _tag: "Partial", start: a, end: b === null ? size - 1 : Math.min(b, size - 1) })
        }
      })
    )
  })

  it("ignores malformed specs and flags several ranges", () => {
    expect(parseRange(undefined, 10)._tag).toBe("Full")
    expect(parseRange("items=0-1", 10)._tag).toBe("Full")
    expect(parseRange("bytes=-", 10)._tag).toBe("Full")
    expect(parseRange("bytes=0-1,3-4", 10)._tag).toBe("Multiple")
    expect(parseRange("bytes=a-b", 10)._tag).toBe("Full")
  })
})

describe("key layout", () => {
  it("round-trips every segment and never produces a path separator or dot name", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary" }).filter((s) => !s.includes("/")), (seg) => {
        const enc = encodeSegment(seg)
        expect(enc).not.toContain("/")
        expect(enc).not.toBe("")
        expect(enc).not.toBe(".")
        expect(enc).not.toBe("..")
        expect(decodeSegment(enc)).toBe(seg)
      })
    )
  })

  it("keeps every accepted key inside its bucket directory", () => {
    const root = "/srv/origin"
    const bucket = path.join(root, "b")
    const pieces = fc.constantFrom("..", ".", "", "a", "%2e", "%", "日本", " ", "+", "\\", "...")
    fc.assert(
      fc.property(fc.array(fc.oneof(pieces, fc.string().filter((s) => !s.includes("/"))), { minLength: 1, maxLength: 8 }), (segs) => {
        const key = segs.join("/")
        if (keyProblem(key) !== undefined) return
        const p = objectPath(root, "b", key)
        expect(p.startsWith(bucket + path.sep)).toBe(true)
        expect(path.relative(bucket, p).split(path.sep).length).toBe(segs.length)
      })
    )
  })

  it("rejects dot segments, NUL and over-long keys", () => {
    expect(keyProblem("a/../b")).toBe("dot-segment")
    expect(keyProblem("./x")).toBe("dot-segment")
    expect(keyProblem("a\0b")).toBe("nul")
    expect(keyProblem("x".repeat(1025))).toBe("too-long")
    expect(keyProblem("a/" + "y".repeat(300))).toBe("segment-too-long")
    expect(keyProblem("a b/ü+%/c")).toBeUndefined()
  })
})

const frame = (data: Buffer, chunkSize: number, trailer: string): Buffer => {
  const parts: Buffer[] = []
  for (let off = 0; off < data.length; off += chunkSize) {
    const piece = data.subarray(off, off + chunkSize)
    parts.push(Buffer.from(`${piece.length.toString(16)};chunk-signature=abc\r\n`), piece, Buffer.from("\r\n"))
  }
  return Buffer.concat([...parts, Buffer.from(`0\r\n${trailer}\r\n`)])
}

const decode = async (body: Buffer, cuts: number[]) => {
  const pieces: Buffer[] = []
  let last = 0
  for (const c of [...new Set(cuts.map((c) => c % (body.length + 1)))].sort((a, b) => a - b)) {
    pieces.push(body.subarray(last, c))
    last = c
  }
  pieces.push(body.subarray(last))
  const decoder = new AwsChunkedDecoder()
  const out: Buffer[] = []
  await new Promise<void>((resolve, reject) => {
    Readable.from(pieces).pipe(decoder).on("data", (c: Buffer) => out.push(c)).on("end", resolve).on("error", reject)
  })
  return { data: Buffer.concat(out), trailers: decoder.trailers }
}

describe("AwsChunkedDecoder", () => {
  it("recovers the payload and trailers however the body is split", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 3000 }),
        fc.integer({ min: 1, max: 700 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        async (bytes, chunkSize, cuts) => {
          const data = Buffer.from(bytes)
          const r = await decode(frame(data, chunkSize, "x-amz-checksum-crc32:AAAA\r\n"), cuts)
          expect(r.data.equals(data)).toBe(true)
          expect(r.trailers.get("x-amz-checksum-crc32")).toBe("AAAA")
        }
      ),
      { numRuns: 200 }
    )
  })

  it("fails (never throws) on arbitrary bytes", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 400 }), async (bytes) => {
        await decode(Buffer.from(bytes), []).then(
          () => undefined,
          (e: unknown) => expect(e).toBeInstanceOf(Error)
        )
      }),
      { numRuns: 300 }
    )
  })

  it("rejects a chunk longer than declared and a missing final chunk", async () => {
    await expect(decode(Buffer.from("3\r\nabcd\r\n0\r\n\r\n"), [])).rejects.toThrow(/longer than its declared size/)
    await expect(decode(Buffer.from("3\r\nabc\r\n"), [])).rejects.toThrow(/before its final zero-length chunk/)
  })
})

describe("conditions", () => {
  const etag = '"abc"'
  const lm = Date.parse("Wed, 01 Jan 2025 00:00:10 GMT")
  it("follows RFC 9110 precedence", () => {
    expect(evaluateConditions({ ifMatch: '"x", "abc"' }, etag, lm, true)).toBe("proceed")
    expect(evaluateConditions({ ifMatch: "abc" }, etag, lm, true)).toBe("proceed")
    expect(evaluateConditions({ ifMatch: '"x"' }, etag, lm, true)).toBe("precondition-failed")
    expect(evaluateConditions({ ifMatch: "*" }, undefined, undefined, false)).toBe("precondition-failed")
    expect(evaluateConditions({ ifNoneMatch: "*" }, undefined, undefined, false)).toBe("proceed")
    expect(evaluateConditions({ ifNoneMatch: "*" }, etag, lm, false)).toBe("precondition-failed")
    expect(evaluateConditions({ ifNoneMatch: 'W/"abc"' }, etag, lm, true)).toBe("not-modified")
    // If-Match that holds overrides a failing If-Unmodified-Since.
    expect(evaluateConditions({ ifMatch: etag, ifUnmodifiedSince: "Wed, 01 Jan 2025 00:00:00 GMT" }, etag, lm, true)).toBe("proceed")
    expect(evaluateConditions({ ifUnmodifiedSince: "Wed, 01 Jan 2025 00:00:00 GMT" }, etag, lm, true)).toBe("precondition-failed")
    // If-None-Match that fails to match overrides If-Modified-Since.
    expect(evaluateConditions({ ifNoneMatch: '"x"', ifModifiedSince: "Wed, 01 Jan 2025 00:01:00 GMT" }, etag, lm, true)).toBe("proceed")
    expect(evaluateConditions({ ifModifiedSince: "Wed, 01 Jan 2025 00:00:10 GMT" }, etag, lm + 500, true)).toBe("not-modified")
    expect(evaluateConditions({ ifModifiedSince: "garbage" }, etag, lm, true)).toBe("proceed")
  })
  it("evaluates If-Range against strong ETags and dates", () => {
    expect(ifRangeHolds(undefined, etag, lm)).toBe(true)
    expect(ifRangeHolds(etag, etag, lm)).toBe(true)
    expect(ifRangeHolds('W/"abc"', etag, lm)).toBe(false)
    expect(ifRangeHolds('"x"', etag, lm)).toBe(false)
    expect(ifRangeHolds("Wed, 01 Jan 2025 00:00:10 GMT", etag, lm)).toBe(true)
    expect(ifRangeHolds("Wed, 01 Jan 2025 00:00:09 GMT", etag, lm)).toBe(false)
  })
})

describe("sample data and fault draws", () => {
  it("sampleBytes is a pure function of position", () => {
    const whole = sampleBytes(0, 4096)
    fc.assert(
      fc.property(fc.nat(4000), fc.nat(96), (off, len) => {
        expect(sampleBytes(off, len).equals(whole.subarray(off, off + len))).toBe(true)
      })
    )
  })
  it("draws reproducible, bounded latencies from a seed", () => {
    const model = { kind: "pareto", minMs: 5, alpha: 1.1, maxMs: 1000 } as const
    const a = seededRandom(42)
    const b = seededRandom(42)
    const xs = Array.from({ length: 2000 }, () => sampleLatencyMs(model, a))
    expect(xs).toEqual(Array.from({ length: 2000 }, () => sampleLatencyMs(model, b)))
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(5)
    expect(Math.max(...xs)).toBeLessThanOrEqual(1000)
    // Heavy tail: the 99th percentile is far above the median.
    const sorted = [...xs].sort((x, y) => x - y)
    expect(sorted[1980]! / sorted[1000]!).toBeGreaterThan(10)
    const ln = Array.from({ length: 2000 }, () => sampleLatencyMs({ kind: "lognormal", medianMs: 10, sigma: 1 }, a)).sort((x, y) => x - y)
    expect(ln[1000]!).toBeGreaterThan(7)
    expect(ln[1000]!).toBeLessThan(14)
  })
})
