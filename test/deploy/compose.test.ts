/**
 * deploy/docker-compose.yml as the multi-host harness reads it: both profiles hold the services
 * they promise, every talon subcommand, flag and TALON_* variable in it is one the real CLI
 * accepts (asked of its --help and of the sources that read settings), and a service's launch
 * maps its volumes into the run's directory.
 */
import { describe, expect, it } from "vitest"
import * as path from "node:path"
import { launchOf, profile, readCompose, startOrder } from "../../bench/kit/multihost/compose.js"
import { cliSurface } from "./cliSurface.js"

const root = path.resolve(import.meta.dirname, "../..")
const file = path.join(root, "deploy", "docker-compose.yml")
const services = readCompose(file)

describe("deploy/docker-compose.yml", () => {
  it("has a local profile (one coordinator, workers, origin stub, gateway) and an ha profile (3 etcd, 2 coordinators, 3 workers)", () => {
    const kinds = (p: string) => profile(services, p).map((s) => s.command[0]).sort()
    expect(kinds("local")).toEqual(["coordinator", "gateway", "origin", "worker", "worker"])
    expect(kinds("ha")).toEqual(["coordinator", "coordinator", "etcd", "etcd", "etcd", "gateway", "origin", "worker", "worker", "worker"])
    for (const s of services) expect(s.profiles.length, `${s.name} belongs to no profile`).toBeGreaterThan(0)
  })

  it("uses only subcommands, flags and TALON_* variables the CLI accepts", () => {
    const surface = cliSurface()
    const problems: Array<string> = []
    for (const s of services) {
      const [program, ...args] = s.command
      for (const name of Object.keys(s.environment)) if (name.startsWith("TALON_") && !surface.env.has(name)) problems.push(`${s.name}: unknown variable ${name}`)
      if (program === "etcd") {
        // Flags and values alternate; a bare comma in a YAML flow list would have split a value.
        args.forEach((a, i) => expect(a.startsWith("--"), `${s.name}: argument ${i} ${a}`).toBe(i % 2 === 0))
        expect(args[args.indexOf("--initial-cluster") + 1]!.split(",")).toHaveLength(3)
        continue
      }
      const known = surface.flags.get(program!)
      if (known === undefined) problems.push(`${s.name}: unknown subcommand ${program}`)
      else for (const a of args) if (a.startsWith("--") && !known.has(a.split("=")[0]!)) problems.push(`${s.name}: ${program}: unknown flag ${a}`)
    }
    expect(problems).toEqual([])
  }, 120_000)

  it("gives every worker and client in a profile the same block size", () => {
    for (const p of ["local", "ha"]) {
      const sizes = new Set(profile(services, p).flatMap((s) => {
        const i = s.command.indexOf("--block-size")
        const v = i >= 0 ? s.command[i + 1] : s.environment["TALON_WORKER_BLOCK_SIZE"]
        return v === undefined ? [] : [v.replace(/^8M$/, String(8 * 1024 * 1024))]
      }))
      expect([...sizes], p).toEqual([String(8 * 1024 * 1024)])
    }
  })

  it("gives every coordinator and worker in a profile the same cluster token (workers sign their status with it)", () => {
    for (const p of ["local", "ha"]) {
      const nodes = profile(services, p).filter((s) => s.command[0] === "coordinator" || s.command[0] === "worker")
      const tokens = new Set(nodes.map((s) => s.environment["TALON_CLUSTER_TOKEN"] ?? "(none)"))
      expect([...tokens], `${p}: ${nodes.map((s) => s.name).join(", ")}`).toHaveLength(1)
    }
    expect(profile(services, "ha").find((s) => s.command[0] === "worker")!.environment["TALON_CLUSTER_TOKEN"]).toBeDefined()
  })

  it("starts etcd before coordinators before workers, and maps volumes into the run directory", () => {
    const order = startOrder(profile(services, "ha")).map((s) => s.name)
    expect(order.indexOf("etcd-3")).toBeLessThan(order.indexOf("coordinator-1"))
    expect(order.indexOf("coordinator-2")).toBeLessThan(order.indexOf("worker-1"))
    const worker = services.find((s) => s.name === "worker-1")!
    const l = launchOf(worker, ["talon"], "/run/x", { TALON_WORKER_CAPACITY: "1G" })
    expect(l.argv.slice(0, 2)).toEqual(["talon", "worker"])
    expect(l.env!["TALON_WORKER_CACHE_DIRS"]).toBe("/run/x/worker-1/cache-1")
    expect(l.env!["TALON_WORKER_CAPACITY"]).toBe("1G")
    expect(l.dirs).toEqual(["/run/x/worker-1/cache-1"])
    const etcd = launchOf(services.find((s) => s.name === "etcd-2")!, ["talon"], "/run/x")
    expect(etcd.argv[0]).toBe("etcd")
    expect(etcd.argv[etcd.argv.indexOf("--data-dir") + 1]).toBe("/run/x/etcd-2/etcd-2")
  })

  it("names the file and field of a malformed entry", () => {
    expect(() => readCompose("bad.yml", "services:\n  w:\n    command: {a: 1}\n")).toThrow("bad.yml: services.w.command must be a list of strings")
    expect(() => readCompose("bad.yml", "version: '3'\n")).toThrow("bad.yml: has no `services` map")
    expect(() => readCompose("bad.yml", "services:\n  w:\n    command: [x]\n    volumes: [nocolon]\n")).toThrow('services.w.volumes: "nocolon" is not NAME:/path')
  })
})
