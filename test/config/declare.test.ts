/**
 * The one-line declaration form: what `component` fills in from a key and the component's
 * prefix, and what a declaration's own names, example and rule override.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import fc from "fast-check"
import { flaggedKeys } from "../../src/config/cli.js"
import { positive, range } from "../../src/config/checks.js"
import * as S from "../../src/config/declare.js"
import * as K from "../../src/config/kinds.js"
import { component, messagesOf, resolveOnly, setting } from "../../src/config/Setting.js"

const word = fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/)
const capital = (w: string) => w[0]!.toUpperCase() + w.slice(1)

describe("names from the key", () => {
  it("a camelCase key gives --its-words and TALON_<PREFIX>_ITS_WORDS (property)", () => {
    fc.assert(
      fc.property(fc.array(word, { minLength: 1, maxLength: 5 }), (words) => {
        const key = words[0]! + words.slice(1).map(capital).join("")
        const c = component<Record<string, number>>({ name: "t", summary: "", prefix: "TALON_T", settings: { [key]: S.integer(1, "h") } })
        const s = c.settings[key]!
        expect(s.flag).toBe(words.join("-"))
        expect(s.env).toBe(`TALON_T_${words.join("_").toUpperCase()}`)
      }),
      { numRuns: 300 }
    )
  })

  const c = component<{ dataAddress: string; cacheDirs: ReadonlyArray<string>; secretKey: string | undefined; plain: number }>({
    name: "t",
    summary: "",
    prefix: "TALON_WORKER",
    settings: {
      dataAddress: S.listen("127.0.0.1:1", "h", { name: "data-addr" }),
      cacheDirs: S.of(K.list("directories"), ["/a"], "h", { flag: "cache-dir" }),
      secretKey: S.unset(K.text, "h", { flag: false, example: "k" }),
      plain: S.integer(7, "h", { env: "TALON_ELSEWHERE" })
    }
  })

  it("`name` renames both, `flag` only the flag, `flag: false` leaves it out; a variable of its own comes without a flag", () => {
    expect([c.settings.dataAddress.flag, c.settings.dataAddress.env]).toEqual(["data-addr", "TALON_WORKER_DATA_ADDR"])
    expect([c.settings.cacheDirs.flag, c.settings.cacheDirs.env]).toEqual(["cache-dir", "TALON_WORKER_CACHE_DIRS"])
    expect([c.settings.plain.flag, c.settings.plain.env]).toEqual([undefined, "TALON_ELSEWHERE"])
    expect(c.settings.secretKey.env).toBe("TALON_WORKER_SECRET_KEY")
    expect("flag" in c.settings.secretKey).toBe(false)
    expect(flaggedKeys(c)).toEqual(["dataAddress", "cacheDirs"])
  })

  it("the example is the default as shown unless given", () => {
    expect(c.settings.dataAddress.example).toBe("127.0.0.1:1")
    expect(c.settings.cacheDirs.example).toBe("/a")
    expect(c.settings.plain.example).toBe("7")
    expect(c.settings.secretKey.example).toBe("k")
    const sized = component<{ n: number }>({ name: "t", summary: "", prefix: "TALON_T", settings: { n: S.size(8 * 1024 ** 2, "h") } })
    expect(sized.settings.n.example).toBe("8M")
  })

  it("a declaration without a variable under a component without a prefix is refused at once, naming the key", () => {
    expect(() => component<{ lost: number }>({ name: "t", summary: "", settings: { lost: S.integer(1, "h") } })).toThrow(/lost needs an env name/)
  })

  it("full settings (shared ones, a secret without a flag) pass through unchanged, with or without a prefix", () => {
    const full = setting(K.integer, { env: "TALON_STATE_X", default: 1, help: "h", example: "2" })
    const flagged = setting(K.integer, { env: "TALON_STATE_Y", flag: "why", default: 1, help: "h", example: "2" })
    for (const prefix of [undefined, "TALON_WORKER"]) {
      const c2 = component<{ x: number; y: number }>({ name: "t", summary: "", ...(prefix ? { prefix } : {}), settings: { x: full, y: flagged } })
      expect(c2.settings.x).toBe(full)
      expect(c2.settings.y).toBe(flagged)
    }
  })
})

describe("rules and shorthands", () => {
  const c = component<{ n: number; r: number; on: boolean; pick: "a" | "b"; opt: number | undefined; shown: string | undefined }>({
    name: "t",
    summary: "",
    prefix: "TALON_T",
    settings: {
      n: S.integer(1, "h", positive),
      r: S.integer(2, "h", { example: "3", check: range(1, 64) }),
      on: S.toggle("h"),
      pick: S.oneOf(["a", "b"], "h"),
      opt: S.unset(K.integer, "h", { example: "4" }),
      shown: S.unset(K.text, "h", { shownDefault: "the other one", example: "x" })
    }
  })

  it("a rule alone is the setting's check, and its message names the setting", () => {
    const bad = resolveOnly(c, { n: 0 })
    expect(Either.isLeft(bad)).toBe(true)
    if (Either.isLeft(bad)) expect(messagesOf(bad.left)).toEqual(["TALON_T_N (--n): must be positive, got 0; e.g. TALON_T_N=1 or --n 1"])
    const out = resolveOnly(c, { r: 65 })
    expect(Either.isLeft(out) && messagesOf(out.left)[0]).toBe("TALON_T_R (--r): must be in 1..64, got 65; e.g. TALON_T_R=3 or --r 3")
    expect(Either.isRight(resolveOnly(c, { n: 5, r: 64 }))).toBe(true)
  })

  it("range says its bounds, or the reason given", () => {
    fc.assert(
      fc.property(fc.integer({ min: -100, max: 100 }), (n) => {
        expect(range(-10, 10)(n)).toBe(n >= -10 && n <= 10 ? undefined : "must be in -10..10")
        expect(range(0, 1, "must be a fraction")(n)).toBe(n === 0 || n === 1 ? undefined : "must be a fraction")
      })
    )
  })

  it("toggle is a value-less flag, off by default; oneOf defaults to its first word; unset shows as none unless told", () => {
    expect([c.settings.on.presence, c.settings.on.default, c.settings.on.example]).toEqual([true, false, "true"])
    expect([c.settings.pick.default, c.settings.pick.kind.choices, c.settings.pick.example]).toEqual(["a", ["a", "b"], "a"])
    expect([c.settings.opt.default, c.settings.opt.shownDefault]).toEqual([undefined, "none"])
    expect(c.settings.shown.shownDefault).toBe("the other one")
  })
})
