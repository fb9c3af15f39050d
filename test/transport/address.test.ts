import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as fc from "fast-check"
import { decodeHostPort, formatHostPort, parseHostPort, parseHostPortList } from "../../src/transport/address.js"

const hostName = fc.stringMatching(/^[A-Za-z0-9._-]{1,40}$/)
const port = fc.integer({ min: 1, max: 65535 })

describe("parseHostPort", () => {
  it("reads names, IPv4 and bracketed IPv6", () => {
    expect(parseHostPort("127.0.0.1:7000")).toEqual({ host: "127.0.0.1", port: 7000 })
    expect(parseHostPort("worker-0.talon.svc:7001")).toEqual({ host: "worker-0.talon.svc", port: 7001 })
    expect(parseHostPort("[::1]:7000")).toEqual({ host: "::1", port: 7000 })
    expect(parseHostPort("[fe80::1%eth0]:7000")).toEqual({ host: "fe80::1%eth0", port: 7000 })
    expect(parseHostPort("0.0.0.0:0", { allowPortZero: true })).toEqual({ host: "0.0.0.0", port: 0 })
  })

  it("refuses bad addresses with a reason and an example", () => {
    const why = (a: string, o = {}) => Either.getLeft(decodeHostPort(a, o)).pipe((x) => (x._tag === "Some" ? x.value : "accepted"))
    expect(why("127.0.0.1")).toBe(`bad address "127.0.0.1": want HOST:PORT, e.g. 127.0.0.1:7000 or [::1]:7000`)
    expect(why(":7000")).toContain("the host is missing")
    expect(why("::1:7000")).toBe(`bad address "::1:7000": an IPv6 host goes in brackets: [::1]:7000`)
    expect(why("[abc]:7000")).toContain("brackets hold an IPv6 address")
    expect(why("a b:7000")).toContain("a host is a name or IP address")
    expect(why("host:0")).toBe(`bad address "host:0": the port must be a number from 1 to 65535 (no sign, no leading zeros)`)
    expect(why("host:080")).toContain("no leading zeros")
    expect(why("host:0", { allowPortZero: true })).toBe("accepted")
    expect(why("host:65536")).toContain("from 1 to 65535")
    expect(why("host:+80")).toContain("the port must be a number")
    expect(why("host:")).toContain("the port must be a number")
    expect(why("http://host:80")).toContain("an address has no scheme")
    expect(why("a:b:7000")).toContain("a host is a name or IP address")
  })

  it("reads back what formatHostPort writes, IPv4, names and IPv6 alike", () => {
    fc.assert(
      fc.property(fc.oneof(hostName, fc.ipV4(), fc.ipV6()), port, (host, p) => {
        expect(parseHostPort(formatHostPort(host, p))).toEqual({ host, port: p })
      })
    )
  })

  it("never throws on arbitrary text; anything accepted formats back to itself", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.stringMatching(/^[\[\]:0-9a-f.]{0,16}$/)), fc.boolean(), (s, zero) => {
        const r = decodeHostPort(s, { allowPortZero: zero })
        if (Either.isRight(r)) {
          expect(formatHostPort(r.right.host, r.right.port)).toBe(s)
          expect(r.right.port).toBeGreaterThanOrEqual(zero ? 0 : 1)
        } else expect(r.left).toContain(JSON.stringify(s))
      }),
      { numRuns: 2000 }
    )
  })
})

describe("parseHostPortList", () => {
  it("reads every entry of a comma-separated list, and refuses the list if any entry is bad", () => {
    expect(parseHostPortList("a:7000, b:7000,[::1]:7002")).toEqual([
      { host: "a", port: 7000 },
      { host: "b", port: 7000 },
      { host: "::1", port: 7002 }
    ])
    expect(parseHostPortList(" , ")).toBeUndefined()
    expect(parseHostPortList("a:7000,b")).toBeUndefined()
    expect(parseHostPortList("a:0")).toBeUndefined()
  })

  it("reads back any list of formatted addresses", () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.oneof(hostName, fc.ipV6()), port), { minLength: 1, maxLength: 5 }), (entries) => {
        const text = entries.map(([h, p]) => formatHostPort(h, p)).join(",")
        expect(parseHostPortList(text)).toEqual(entries.map(([host, p]) => ({ host, port: p })))
      })
    )
  })
})
