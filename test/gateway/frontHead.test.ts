/**
 * The raw front's request-head reader: complete heads read the same whatever the reads they
 * arrived in, anything it does not accept is "unusual" (node:http's to answer), and no input
 * makes it throw.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { scanHead } from "../../src/gateway/front/requestHead.js"

const LIMIT = 16 * 1024
const bytes = (s: string) => Buffer.from(s, "latin1")

const GET =
  "GET /bucket/some%20key.bin?x-id=GetObject HTTP/1.1\r\nHost: 127.0.0.1:9000\r\nRange: bytes=0-65535\r\nX-Amz-Date:  20261205T064000Z \r\nAccept: */*\r\n\r\n"

describe("raw front request heads", () => {
  it("reads method, target, version and headers (names lower-cased, values trimmed)", () => {
    const h = scanHead(bytes(GET), GET.length, LIMIT)
    expect(h).toMatchObject({
      method: "GET",
      target: "/bucket/some%20key.bin?x-id=GetObject",
      minor: 1,
      length: GET.length,
      headers: { host: "127.0.0.1:9000", range: "bytes=0-65535", "x-amz-date": "20261205T064000Z", accept: "*/*" }
    })
  })

  it("every proper prefix of a head is partial, the whole head reads the same at every split", () => {
    const whole = scanHead(bytes(GET), GET.length, LIMIT)
    for (let n = 0; n < GET.length; n++) expect(scanHead(bytes(GET.slice(0, n)), n, LIMIT)).toBe("partial")
    // Pipelined: the first head ends where it says, whatever follows.
    const two = bytes(GET + "HEAD /b/k HTTP/1.1\r\nHost: x\r\n\r\n")
    expect(scanHead(two, two.length, LIMIT)).toEqual(whole)
    const second = scanHead(two.subarray(GET.length), two.length - GET.length, LIMIT)
    expect(second).toMatchObject({ method: "HEAD", target: "/b/k", headers: { host: "x" } })
  })

  it("calls unusual what node:http should answer", () => {
    const unusual = [
      "GET /a HTTP/1.1\nHost: x\n\n", // bare LF
      "GET /a HTTP/1.1\r\nHost: x\r\n  folded\r\n\r\n",
      "GET /a HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", // repeated header
      "GET /a HTTP/2.0\r\n\r\n",
      "get /a HTTP/1.1\r\n\r\n",
      "GET  /a HTTP/1.1\r\n\r\n",
      "GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n",
      "GET /a HTTP/1.1\r\n: x\r\n\r\n",
      "GET /a HTTP/1.1\r\nX: \u00e9\r\n\r\n",
      "GET /a HTTP/1.1\r\nX: a\u0000b\r\n\r\n",
      "\r\nGET /a HTTP/1.1\r\n\r\n"
    ]
    for (const s of unusual) expect(scanHead(bytes(s), s.length, LIMIT), JSON.stringify(s)).toBe("unusual")
    // Too long, complete or not.
    const long = `GET /a HTTP/1.1\r\nX: ${"a".repeat(LIMIT)}\r\n\r\n`
    expect(scanHead(bytes(long), long.length, LIMIT)).toBe("unusual")
    expect(scanHead(bytes(long.slice(0, LIMIT + 5)), LIMIT + 5, LIMIT)).toBe("unusual")
    // A header named like an Object property is an ordinary header.
    const proto = "GET /a HTTP/1.1\r\n__proto__: x\r\nconstructor: y\r\n\r\n"
    expect(scanHead(bytes(proto), proto.length, LIMIT)).toMatchObject({ headers: { ["__proto__"]: "x", constructor: "y" } })
  })

  it("never throws on arbitrary bytes, and a result other than partial does not change as bytes are appended", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 50 }), (a, more) => {
        const r = scanHead(a, a.length, 256)
        const both = Buffer.concat([a, more])
        const r2 = scanHead(both, both.length, 256)
        if (r !== "partial") expect(r2).toEqual(r)
      }),
      { numRuns: 2000 }
    )
    // Heads built from header-ish pieces reach the complete branch often.
    const piece = fc.constantFrom("GET /b/k HTTP/1.1", "\r\n", "Host: h", "Range: bytes=1-2", ":", " ", "\n", "\r", "x", "HEAD ", "\u00ff")
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
        const s = bytes(parts.join(""))
        scanHead(s, s.length, 64)
      }),
      { numRuns: 2000 }
    )
  })
})
