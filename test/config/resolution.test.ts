/**
 * One resolution order for every component: explicit (flag) > TALON_* environment >
 * config file > default, checked as properties over each component's own schema, with
 * the file provider built the way `talon --config` builds it.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import fc from "fast-check"
import { flattenConfig, layered, providerOf } from "../../src/cli/configFile.js"
import { renderConfigurationDocs } from "../../src/config/docs.js"
import * as K from "../../src/config/kinds.js"
import { ALL_COMPONENTS } from "../../src/config/registry.js"
import { component, type Component, defaultsOf, resolve, setting, type Setting, validate } from "../../src/config/Setting.js"
import { resolveStateStoreSettings } from "../../src/coordinator/state/config.js"
import { resolveWorkerSettings } from "../../src/worker/config.js"

const repo = path.resolve(__dirname, "../..")

/** Resolves under an environment and a config-file document, composed as the CLI composes them. */
const resolveWith = <T>(c: Component<T>, explicit: Partial<T>, env: Record<string, string>, file: Record<string, unknown>) => {
  const flat = flattenConfig(file)
  if ("error" in flat) throw new Error(flat.error)
  const provider = layered(ConfigProvider.fromMap(new Map(Object.entries(env))), providerOf(flat.settings))
  return Effect.runSync(Effect.either(Effect.withConfigProvider(resolve(c, explicit), provider)))
}

/** `TALON_WORKER_CAPACITY` → `{ worker: { capacity: v } }`, the table a user would write. */
const fileDoc = (env: string, value: unknown): Record<string, unknown> => {
  const m = /^TALON_([A-Z]+)_(.+)$/.exec(env)!
  const section = m[1]!.toLowerCase()
  return ["worker", "coordinator", "gateway", "client", "cluster", "origin", "loadgen", "up", "state", "etcd"].includes(section)
    ? { [section]: { [m[2]!.toLowerCase()]: value } }
    : { [env]: value }
}

const numericKinds = new Set(["integer", "size", "number"])
const numericSettings = ALL_COMPONENTS.flatMap((c) =>
  Object.entries(c.settings as Record<string, Setting<unknown>>)
    .filter(([, s]) => numericKinds.has(s.kind.type))
    .map(([key, s]) => ({ c, key, s: s as Setting<number> }))
)

describe("resolution order", () => {
  it("a synthetic schema: every setting takes the highest source present (property)", () => {
    const schema = component<{ a: number; b: number; c: number }>({
      name: "t",
      summary: "",
      settings: {
        a: setting(K.integer, { env: "TALON_WORKER_A", flag: "a", default: -1, help: "", example: "1" }),
        b: setting(K.integer, { env: "TALON_WORKER_B", flag: "b", default: -2, help: "", example: "1" }),
        c: setting(K.integer, { env: "TALON_WORKER_C", flag: "c", default: -3, help: "", example: "1" })
      }
    })
    const source = fc.record({ flag: fc.option(fc.nat()), env: fc.option(fc.nat()), file: fc.option(fc.nat()) })
    fc.assert(
      fc.property(fc.record({ a: source, b: source, c: source }), (sources) => {
        const explicit: Partial<{ a: number; b: number; c: number }> = {}
        const env: Record<string, string> = {}
        const file: Record<string, Record<string, number>> = { worker: {} }
        for (const key of ["a", "b", "c"] as const) {
          const s = sources[key]
          if (s.flag !== null) explicit[key] = s.flag
          if (s.env !== null) env[`TALON_WORKER_${key.toUpperCase()}`] = String(s.env)
          if (s.file !== null) file.worker![key] = s.file
        }
        const resolved = resolveWith(schema, explicit, env, file)
        expect(Either.isRight(resolved)).toBe(true)
        for (const key of ["a", "b", "c"] as const) {
          const s = sources[key]
          const want = s.flag ?? s.env ?? s.file ?? schema.settings[key].default
          expect(Either.getOrThrow(resolved)[key]).toBe(want)
        }
      }),
      { numRuns: 300 }
    )
  })

  it(`every component's numeric settings: flag > env > file > default, or the component's own error (${numericSettings.length} settings, property)`, () => {
    const value = fc.integer({ min: 0, max: 1 << 20 })
    fc.assert(
      fc.property(
        fc.constantFrom(...numericSettings),
        fc.record({ flag: fc.option(value), env: fc.option(value), file: fc.option(value) }),
        ({ c, key, s }, src) => {
          const explicit = src.flag === null ? {} : { [key]: src.flag }
          const env: Record<string, string> = { TALON_GATEWAY_AUTH: "off" }
          if (src.env !== null) env[s.env] = String(src.env)
          const file = src.file === null ? {} : fileDoc(s.env, src.file)
          const want = src.flag ?? src.env ?? src.file ?? s.default
          const expected = validate(c, { ...defaultsOf(c), auth: false, [key]: want })
          const resolved = resolveWith(c, explicit, env, file)
          if (Either.isLeft(expected)) {
            expect(Either.isLeft(resolved)).toBe(true)
          } else {
            expect(resolved).toEqual(Either.right(expect.objectContaining({ [key]: want })))
          }
        }
      ),
      { numRuns: 500 }
    )
  })

  it("every declared example parses and passes its own rule, from the environment and from a file", () => {
    for (const c of ALL_COMPONENTS) {
      for (const [key, s] of Object.entries(c.settings as Record<string, Setting<unknown>>)) {
        const parsed = s.kind.parse(s.example)
        expect(Either.isRight(parsed), `${s.env} example ${s.example}`).toBe(true)
        const value = Either.getOrThrow(parsed)
        expect(s.check?.(value), s.env).toBeUndefined()
        const fromEnv = resolveWith(c, {}, { [s.env]: s.example, TALON_GATEWAY_AUTH: "off" }, {})
        const fromFile = resolveWith(c, {}, { TALON_GATEWAY_AUTH: "off" }, fileDoc(s.env, s.example))
        // Some settings need a partner (a TLS key for a certificate); then both sources refuse alike, naming a setting.
        if (Either.isRight(fromEnv)) expect((fromEnv.right as Record<string, unknown>)[key]).toEqual(value)
        else expect(String(fromEnv.left)).toMatch(/TALON_[A-Z_]+/)
        expect(Either.isRight(fromFile)).toBe(Either.isRight(fromEnv))
        if (Either.isRight(fromFile)) expect((fromFile.right as Record<string, unknown>)[key]).toEqual(value)
      }
    }
  })

  it("every variable and flag name is declared once across all components", () => {
    // A setting several components read (TALON_CLUSTER_TOKEN) is one declaration they share.
    const declared = new Set(ALL_COMPONENTS.flatMap((c) => Object.values(c.settings as Record<string, Setting<unknown>>)))
    const envs = [...declared].map((s) => s.env)
    expect(new Set(envs).size).toBe(envs.length)
    for (const c of ALL_COMPONENTS) {
      const flags = Object.values(c.settings as Record<string, Setting<unknown>>).flatMap((s) => (s.flag === undefined ? [] : [s.flag]))
      expect(new Set(flags).size, c.name).toBe(flags.length)
    }
  })
})

describe("kinds", () => {
  it("never throw on arbitrary text, and a value they accept shows as text they accept again (property)", () => {
    const kinds = [K.text, K.integer, K.number, K.size, K.boolean, K.onOff, K.oneOf("a", "b"), K.listenAddress, K.dialAddress,
      K.coordinatorList(), K.coordinatorList({ standalone: true }), K.list("x"), K.integerList] as ReadonlyArray<K.Kind<unknown>>
    fc.assert(
      fc.property(fc.constantFrom(...kinds), fc.oneof(fc.string(), fc.stringMatching(/^[0-9a-z.:,\[\] ]{0,24}$/)), (kind, text) => {
        const parsed = kind.parse(text)
        if (Either.isRight(parsed)) {
          expect(Either.isRight(kind.parse(kind.show(parsed.right).replace(/^""$/, "")))).toBe(true)
        } else {
          // A message a user can act on, not an exception.
          expect(typeof parsed.left).toBe("string")
          expect(parsed.left.length).toBeGreaterThan(10)
        }
      }),
      { numRuns: 2000 }
    )
  })

  it("sizes take binary suffixes; coordinator lists are validated entry by entry", () => {
    expect(K.size.parse("64K")).toEqual(Either.right(65536))
    expect(K.size.parse("256MiB")).toEqual(Either.right(256 * 1024 ** 2))
    expect(K.showSize(8 * 1024 ** 3)).toBe("8G")
    expect(K.coordinatorList().parse(" a:1 , b:2 ")).toEqual(Either.right("a:1,b:2"))
    expect(Either.isLeft(K.coordinatorList().parse("a:1,b"))).toBe(true)
    expect(Either.isLeft(K.coordinatorList().parse(""))).toBe(true)
    expect(K.coordinatorList({ standalone: true }).parse("")).toEqual(Either.right(""))
    expect(K.optional(K.size).parse("")).toEqual(Either.right(undefined))
    expect(Either.isLeft(K.optional(K.size).parse("x"))).toBe(true)
  })
})

describe("errors name the setting, what was wrong, and an example", () => {
  it.effect("a bad environment value, a broken cross rule, a bad explicit value", () =>
    Effect.gen(function* () {
      const bad = yield* Effect.flip(
        resolveWorkerSettings().pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TALON_WORKER_CAPACITY", "12Q"]]))))
      )
      expect(String(bad)).toMatch(/TALON_WORKER_CAPACITY \(--capacity\): bad size "12Q": want a byte count.*; e\.g\. TALON_WORKER_CAPACITY=100G or --capacity 100G/)
      const cross = yield* Effect.flip(
        resolveWorkerSettings({ blockSize: 1024 * 1024, pageSize: 4 * 1024 * 1024 }).pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map())))
      )
      expect(String(cross)).toMatch(/TALON_WORKER_PAGE_SIZE \(--page-size\): must be 0 \(whole blocks\) or at most the block size 1048576/)
      const coordinator = yield* Effect.flip(
        resolveWorkerSettings().pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TALON_WORKER_COORDINATOR", "10.0.0.1:7000,nope"]]))))
      )
      expect(String(coordinator)).toMatch(/TALON_WORKER_COORDINATOR .*comma-separated host:port.*e\.g\. TALON_WORKER_COORDINATOR=10\.0\.0\.1:7000,10\.0\.0\.2:7000/)
      const state = yield* Effect.flip(
        resolveStateStoreSettings().pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["TALON_STATE_BACKEND", "consul"]]))))
      )
      expect(String(state)).toMatch(/TALON_STATE_BACKEND( \(--state\))?: expected one of memory, etcd, got "consul"; e\.g\. TALON_STATE_BACKEND=etcd/)
    })
  )
})

describe("docs/configuration.md", () => {
  it("is what the generator renders from the schemas (run `npm run config-docs` after changing a setting)", () => {
    const committed = fs.readFileSync(path.join(repo, "docs/configuration.md"), "utf8")
    expect(committed).toBe(renderConfigurationDocs(ALL_COMPONENTS))
  })

  it("lists every setting of every component with its variable and flag", () => {
    const doc = renderConfigurationDocs(ALL_COMPONENTS)
    for (const c of ALL_COMPONENTS) {
      for (const s of Object.values(c.settings as Record<string, Setting<unknown>>)) {
        expect(doc).toContain(`\`${s.env}\``)
        if (s.flag !== undefined) expect(doc).toContain(`\`--${s.flag}\``)
      }
    }
  })
})
