/**
 * Reads deploy/docker-compose.yml into the launches a multi-host run starts: each service of a
 * profile becomes one host (its own namespace, named like the service, so the names the file
 * uses resolve), running the service's `command` with its `environment`. The image's entrypoint
 * is `talon`, so a command naming a talon subcommand runs bin/talon.mjs; any other command
 * (etcd) runs that program from PATH. A named volume `vol:/path` becomes a directory of the run,
 * and `/path` is rewritten to it wherever an argument or variable starts with it.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { parse } from "yaml"
import type { Launch } from "./procs.js"

export interface ComposeService {
  readonly name: string
  readonly profiles: ReadonlyArray<string>
  readonly command: ReadonlyArray<string>
  readonly environment: Readonly<Record<string, string>>
  /** `[volume name, mount path]`. */
  readonly volumes: ReadonlyArray<readonly [string, string]>
  readonly dependsOn: ReadonlyArray<string>
}

const TALON_SUBCOMMANDS = new Set(["origin", "coordinator", "worker", "gateway", "loadgen", "up", "read", "cluster"])

const fail = (file: string, what: string): never => {
  throw new Error(`${file}: ${what}`)
}

const asStringList = (file: string, where: string, v: unknown): ReadonlyArray<string> => {
  if (v === undefined || v === null) return []
  if (typeof v === "string") return v.split(/\s+/).filter((s) => s !== "")
  if (!Array.isArray(v)) return fail(file, `${where} must be a list of strings`)
  return v.map((x) => (typeof x === "string" || typeof x === "number" ? String(x) : fail(file, `${where} holds a ${typeof x}, expected strings`)))
}

const asEnv = (file: string, where: string, v: unknown): Record<string, string> => {
  if (v === undefined || v === null) return {}
  if (Array.isArray(v)) {
    return Object.fromEntries(v.map((e) => {
      const s = String(e)
      const eq = s.indexOf("=")
      return eq < 0 ? fail(file, `${where}: entry ${JSON.stringify(s)} is not NAME=value`) : [s.slice(0, eq), s.slice(eq + 1)]
    }))
  }
  if (typeof v !== "object") return fail(file, `${where} must be a map or a list of NAME=value`)
  return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, x === null || x === undefined ? "" : String(x)]))
}

/** Parses a compose file (YAML merge keys `<<:` honoured). Throws with the file and field on a malformed entry. */
export const readCompose = (file: string, text = readFileSync(file, "utf8")): ReadonlyArray<ComposeService> => {
  const doc = parse(text, { merge: true }) as { services?: Record<string, Record<string, unknown>> } | null
  const services = doc?.services
  if (services === undefined || typeof services !== "object") return fail(file, "has no `services` map")
  return Object.entries(services).map(([name, s]) => ({
    name,
    profiles: asStringList(file, `services.${name}.profiles`, s["profiles"]),
    command: asStringList(file, `services.${name}.command`, s["command"]),
    environment: asEnv(file, `services.${name}.environment`, s["environment"]),
    volumes: asStringList(file, `services.${name}.volumes`, s["volumes"]).map((v) => {
      const [vol, path] = v.split(":")
      return vol === undefined || path === undefined ? fail(file, `services.${name}.volumes: ${JSON.stringify(v)} is not NAME:/path`) : ([vol, path] as const)
    }),
    dependsOn: Array.isArray(s["depends_on"])
      ? asStringList(file, `services.${name}.depends_on`, s["depends_on"])
      : Object.keys((s["depends_on"] as Record<string, unknown> | undefined) ?? {})
  }))
}

export const profile = (services: ReadonlyArray<ComposeService>, name: string): ReadonlyArray<ComposeService> => {
  const out = services.filter((s) => s.profiles.includes(name))
  if (out.length === 0) throw new Error(`the compose file has no services in profile ${JSON.stringify(name)}`)
  return out
}

/**
 * The launch of one service: `talonArgv` is how this machine runs the talon CLI; volumes land
 * under `runDir/<service>/<volume>`; `overrides` replaces or adds environment variables.
 */
export const launchOf = (
  service: ComposeService,
  talonArgv: ReadonlyArray<string>,
  runDir: string,
  overrides: Readonly<Record<string, string>> = {}
): Launch & { readonly dirs: ReadonlyArray<string> } => {
  const mounts = service.volumes.map(([vol, path]) => [path, join(runDir, service.name, vol)] as const)
  const rewrite = (s: string): string => {
    for (const [path, dir] of mounts) if (s === path || s.startsWith(`${path}/`)) return dir + s.slice(path.length)
    return s
  }
  const [program, ...rest] = service.command
  if (program === undefined) throw new Error(`service ${service.name} has no command`)
  const argv = TALON_SUBCOMMANDS.has(program) ? [...talonArgv, program, ...rest.map(rewrite)] : [program, ...rest.map(rewrite)]
  const env = Object.fromEntries(Object.entries({ ...service.environment, ...overrides }).map(([k, v]) => [k, rewrite(v)]))
  return { name: service.name, argv, env, dirs: mounts.map(([, dir]) => dir) }
}

/** The services in an order that starts each after what it depends on. */
export const startOrder = (services: ReadonlyArray<ComposeService>): ReadonlyArray<ComposeService> => {
  const byName = new Map(services.map((s) => [s.name, s]))
  const out: Array<ComposeService> = []
  const seen = new Set<string>()
  const visit = (s: ComposeService, path: ReadonlyArray<string>) => {
    if (seen.has(s.name)) return
    if (path.includes(s.name)) throw new Error(`depends_on cycle: ${[...path, s.name].join(" -> ")}`)
    for (const d of s.dependsOn) {
      const dep = byName.get(d)
      if (dep !== undefined) visit(dep, [...path, s.name])
    }
    seen.add(s.name)
    out.push(s)
  }
  for (const s of services) visit(s, [])
  return out
}
