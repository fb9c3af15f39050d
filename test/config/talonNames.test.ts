/**
 * Talon's config names: each alias reads as our own name does (environment and Talon's
 * flat file), a Talon worker file loads, differing names are refused with what to use,
 * and our name and Talon's must agree when both are set.
 */
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Effect, Either } from "effect"
import fc from "fast-check"
import { flatSectionFrom, flattenConfig, layered, providerOf, readConfigFile } from "../../src/cli/configFile.js"
import { resolveStateStoreSettings } from "../../src/coordinator/state/config.js"
import { ALL_COMPONENTS } from "../../src/config/registry.js"
import { type Component, messagesOf, resolve, type Setting } from "../../src/config/Setting.js"
import { resolveWorkerSettings, WorkerSchema } from "../../src/worker/config.js"
import { CoordinatorSchema } from "../../src/coordinator/config.js"

const FIXTURE = path.join(__dirname, "fixtures/talon-worker.toml")
const COORDINATOR_FIXTURE = path.join(__dirname, "fixtures/talon-coordinator.toml")

const run = <A, E>(effect: Effect.Effect<A, E>, env: Record<string, string>, file: ConfigProvider.ConfigProvider = providerOf(new Map())) =>
  Effect.runSync(Effect.either(Effect.withConfigProvider(effect, layered(ConfigProvider.fromMap(new Map(Object.entries(env))), file))))

const errorText = (e: Either.Either<unknown, unknown>): string =>
  Either.isLeft(e) ? messagesOf(e.left as never).join("\n") : "resolved without error"

/** Text a user would write for a setting of this kind (valid or not: both names must agree either way). */
const rawFor = (s: Setting<unknown>): fc.Arbitrary<string> => {
  switch (s.kind.type) {
    case "integer":
    case "size":
      return fc.oneof(fc.integer({ min: 0, max: 2 ** 40 }).map(String), fc.constantFrom("64M", "1G", "-1", "x"))
    case "host:port":
      return fc.oneof(fc.integer({ min: 0, max: 65535 }).map((p) => `127.0.0.1:${p}`), fc.constant("nonsense"))
    case "list of URLs":
      return fc.array(fc.integer({ min: 1, max: 65535 }), { minLength: 1, maxLength: 3 }).map((ps) => ps.map((p) => `http://10.0.0.1:${p}`).join(","))
    default:
      return s.kind.choices !== undefined
        ? fc.oneof(fc.constantFrom(...s.kind.choices), fc.constant("kubernetes"))
        : fc.stringMatching(/^[a-z0-9/._-]{1,20}$/)
  }
}

const aliased = ALL_COMPONENTS.flatMap((c: Component<any>) =>
  Object.entries(c.settings as Record<string, Setting<unknown>>).flatMap(([key, s]) => (s.aliases ?? []).map((alias) => ({ c, key, s, alias })))
)

/** `TALON_WORKER_LISTEN` → the section and key of Talon's flat worker file. */
const flatKeyOf = (alias: string) => {
  const m = /^TALON_(WORKER|COORDINATOR|GATEWAY)_(.+)$/.exec(alias)!
  return { section: m[1]!.toLowerCase(), key: m[2]!.toLowerCase() }
}

describe("Talon's names", () => {
  it("aliases cover the names the issue lists", () => {
    const all = new Set(aliased.map((a) => a.alias))
    for (const name of [
      "TALON_WORKER_LISTEN",
      "TALON_WORKER_ADMIN_LISTEN",
      "TALON_WORKER_NODE_ID",
      "TALON_WORKER_CAPACITY_BYTES",
      "TALON_WORKER_L2_PAGE_SIZE_BYTES",
      "TALON_COORDINATOR_STATE_BACKEND",
      "TALON_COORDINATOR_ETCD_ENDPOINTS",
      "TALON_GATEWAY_BIND"
    ]) {
      expect(all, name).toContain(name)
    }
  })

  it("each alias resolves to the same setting value as our own name, from the environment and from Talon's file (property)", () => {
    expect(aliased.length).toBeGreaterThan(10)
    for (const { c, key, s, alias } of aliased) {
      fc.assert(
        fc.property(rawFor(s), (raw) => {
          const ours = run(resolve(c, {}), { [s.env]: raw })
          const talons = run(resolve(c, {}), { [alias]: raw })
          expect(Either.isRight(talons), `${alias}=${raw}: ${errorText(talons)}`).toBe(Either.isRight(ours))
          if (Either.isRight(ours) && Either.isRight(talons)) expect(talons.right[key]).toEqual(ours.right[key])
          const { section, key: fileKey } = flatKeyOf(alias)
          const flat = flattenConfig({ [fileKey]: raw }, section)
          if ("error" in flat) throw new Error(flat.error)
          const fromFile = run(resolve(c, {}), {}, providerOf(flat.settings))
          expect(Either.isRight(fromFile)).toBe(Either.isRight(ours))
          if (Either.isRight(ours) && Either.isRight(fromFile)) expect(fromFile.right[key]).toEqual(ours.right[key])
        }),
        { numRuns: 6 }
      )
    }
  })

  it("Talon's total capacity is split equally among the cache dirs (ours is per dir)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2 ** 44 }), fc.integer({ min: 1, max: 4 }), (total, dirs) => {
        const cacheDirs = Array.from({ length: dirs }, (_, i) => `/d${i}`).join(":")
        const r = run(resolveWorkerSettings(), { TALON_WORKER_CAPACITY_BYTES: String(total), TALON_WORKER_CACHE_DIRS: cacheDirs })
        if (Either.isLeft(r)) {
          expect(Math.floor(total / dirs)).toBe(0)
          return
        }
        expect(r.right.cacheDirs).toHaveLength(dirs)
        expect(r.right.capacity).toBe(Math.floor(total / dirs))
      }),
      { numRuns: 30 }
    )
  })

  it.effect("a Talon worker TOML file loads as `talon --config FILE worker` reads it", () =>
    Effect.gen(function* () {
      const file = yield* readConfigFile(FIXTURE, "worker")
      const r = run(resolveWorkerSettings(), {}, file)
      if (Either.isLeft(r)) throw new Error(errorText(r))
      const s = r.right
      expect(s.dataAddress).toBe("0.0.0.0:9000")
      expect(s.adminAddress).toBe("0.0.0.0:9001")
      expect(s.advertiseAddress).toBe("worker-1.talon:9000")
      expect(s.coordinator).toBe("10.0.0.1:7000")
      expect(s.clusterId).toBe("prod")
      expect(s.id).toBe("worker-1")
      expect(s.heartbeatIntervalMs).toBe(2500)
      expect(s.blockSize).toBe(8 * 1024 ** 2)
      expect(s.cacheDirs).toEqual(["/a", "/b"])
      expect(s.capacity).toBe(64 * 1024 ** 3)
      expect(s.pageSize).toBe(1024 ** 2)
      expect(s.rateLimits.enabled).toBe(true)
    })
  )

  it.effect("Talon's runbook coordinator file loads as `talon --config FILE coordinator` reads it", () =>
    Effect.gen(function* () {
      const file = yield* readConfigFile(COORDINATOR_FIXTURE, "coordinator")
      expect(errorText(run(resolve(CoordinatorSchema, {}), {}, file))).toBe("resolved without error")
      const state = run(resolveStateStoreSettings(), {}, file)
      if (Either.isLeft(state)) throw new Error(errorText(state))
      expect(state.right).toMatchObject({ backend: "etcd", etcdEndpoints: ["https://etcd-0:2379", "https://etcd-1:2379"], etcdPrefix: "/talon" })
    })
  )

  it("the command after the leading options names the component a flat file is read as", () => {
    expect(flatSectionFrom(["--config", "w.toml", "worker", "--loops", "2"])).toBe("worker")
    expect(flatSectionFrom(["--config=c.toml", "coordinator"])).toBe("coordinator")
    expect(flatSectionFrom(["--config", "u.toml", "up"])).toBeUndefined()
  })

  it.effect("the same file without a component to read it as names the way to load it", () =>
    Effect.gen(function* () {
      const failed = yield* Effect.flip(readConfigFile(FIXTURE))
      expect(failed.message).toContain("talon --config FILE worker")
    })
  )

  it("a key no setting reads is refused in Talon's flat file, as Talon refuses it", () => {
    const flat = flattenConfig({ listen: "0.0.0.0:1", bogus_key: 1 }, "worker")
    expect("error" in flat && flat.error).toContain("unknown key bogus_key for a worker (it would be TALON_WORKER_BOGUS_KEY)")
  })

  it("a Talon name whose meaning differs is refused with what to use instead", () => {
    const rings = run(resolveWorkerSettings(), { TALON_WORKER_DATA_PLANE_RINGS: "4" })
    expect(errorText(rings)).toContain("TALON_WORKER_DATA_PLANE_RINGS (Talon's name) is not read here")
    expect(errorText(rings)).toContain("TALON_WORKER_LOOPS")
    const region = run(resolveWorkerSettings(), { TALON_WORKER_S3_REGION: "us-east-1" })
    expect(errorText(region)).toContain("set TALON_S3_REGION instead")
    const k8s = run(resolve(CoordinatorSchema, {}), { TALON_COORDINATOR_K8S_NAMESPACE: "talon" })
    expect(errorText(k8s)).toContain("TALON_STATE_BACKEND=etcd")
    // Also from Talon's file, nested tables included.
    const flat = flattenConfig({ control_tls: { ca_cert_path: "/ca.pem" } }, "worker")
    if ("error" in flat) throw new Error(flat.error)
    expect(errorText(run(resolveWorkerSettings(), {}, providerOf(flat.settings)))).toContain("TALON_WORKER_CONTROL_TLS_CA_CERT_PATH (Talon's name) is not read here")
  })

  it("Talon's tuning knobs with no counterpart are accepted and change nothing", () => {
    const plain = run(resolveWorkerSettings(), {})
    const r = run(resolveWorkerSettings(), { TALON_WORKER_L1_CAPACITY_BYTES: "67108864", TALON_WORKER_BACKEND_MAX_RETRIES: "7" })
    expect(errorText(r)).toBe("resolved without error")
    expect(r).toEqual(plain)
  })

  it("both names set: they must agree (any source), and a flag overrides both", () => {
    const differ = run(resolveWorkerSettings(), { TALON_WORKER_DATA_ADDR: "127.0.0.1:1", TALON_WORKER_LISTEN: "127.0.0.1:2" })
    expect(errorText(differ)).toContain("set twice with different values, TALON_WORKER_DATA_ADDR=\"127.0.0.1:1\" and TALON_WORKER_LISTEN=\"127.0.0.1:2\"")
    const flat = flattenConfig({ listen: "127.0.0.1:2" }, "worker")
    if ("error" in flat) throw new Error(flat.error)
    expect(errorText(run(resolveWorkerSettings(), { TALON_WORKER_DATA_ADDR: "127.0.0.1:1" }, providerOf(flat.settings)))).toContain("set twice")
    const agree = run(resolveWorkerSettings(), { TALON_WORKER_DATA_ADDR: "127.0.0.1:2", TALON_WORKER_LISTEN: "127.0.0.1:2" })
    expect(Either.isRight(agree) && agree.right.dataAddress).toBe("127.0.0.1:2")
    const flag = run(resolve(WorkerSchema, { dataAddress: "127.0.0.1:3" }), { TALON_WORKER_DATA_ADDR: "127.0.0.1:1", TALON_WORKER_LISTEN: "127.0.0.1:2" })
    expect(Either.isRight(flag) && flag.right.dataAddress).toBe("127.0.0.1:3")
  })
})
