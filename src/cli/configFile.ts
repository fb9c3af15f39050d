/**
 * The config file: the third source of every setting, after flags and the environment
 * (docs/configuration.md: flag > `TALON_<COMPONENT>_<NAME>` > file > default).
 *
 * A file is TOML (or JSON when it ends in `.json`) with one table per component whose keys
 * are the environment names without their prefix, e.g. `[worker] cache_dirs = ["/a", "/b"]`
 * is `TALON_WORKER_CACHE_DIRS=/a,/b`. Because the file becomes a ConfigProvider behind the
 * environment, every component reads it through the Effect `Config` it already uses; no
 * component knows the file exists.
 */
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { ConfigProvider, Data, Effect, Layer } from "effect"
import { parse as parseToml } from "smol-toml"
import { ALL_COMPONENTS } from "../config/registry.js"
import type { Setting } from "../config/Setting.js"

export class ConfigFileError extends Data.TaggedError("ConfigFileError")<{
  readonly path: string
  readonly detail: string
}> {
  override get message() {
    return `config file ${this.path}: ${this.detail}`
  }
}

/** Tables a file may hold: each maps to the `TALON_<TABLE>_` environment prefix. */
export const CONFIG_SECTIONS = [
  "coordinator",
  "worker",
  "gateway",
  "client",
  "cluster",
  "origin",
  "loadgen",
  "up",
  "state",
  "etcd",
  "s3",
  "azure",
  "admin",
  "otlp"
] as const

/** The environment variable that names a config file (set for child processes too). */
export const CONFIG_ENV = "TALON_CONFIG"

const envName = (...parts: ReadonlyArray<string>) =>
  ["TALON", ...parts].map((p) => p.toUpperCase().replace(/-/g, "_")).join("_")

const scalar = (value: unknown): string | undefined => {
  if (typeof value === "string") return value
  if (typeof value === "number" || typeof value === "bigint") return String(value)
  if (typeof value === "boolean") return value ? "true" : "false"
  return undefined
}

/** Settings whose value is a table (`[worker.rate_limits]`): the file hands them over as JSON, which they parse. */
const TABLE_SETTINGS: ReadonlySet<string> = new Set(
  ALL_COMPONENTS.flatMap((c) => Object.values(c.settings as Record<string, Setting<unknown>>).filter((s) => s.kind.type === "table").map((s) => s.env))
)

/** Every name a setting is read under (ours, Talon's aliases and Talon's refused names): a flat file's key must be one. */
const KNOWN_NAMES: ReadonlySet<string> = new Set(
  ALL_COMPONENTS.flatMap((c) => [
    ...Object.values(c.settings as Record<string, Setting<unknown>>).flatMap((s) => [s.env, ...(s.aliases ?? [])]),
    ...(c.refused ?? []).map((r) => r.env)
  ])
)

const isTable = (value: unknown): boolean => typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date)

/** A setting's value as the environment would spell it: lists comma-joined, like `TALON_WORKER_CACHE_DIRS`. */
const render = (value: unknown): string | undefined => {
  if (Array.isArray(value)) {
    const items = value.map(scalar)
    return items.every((i): i is string => i !== undefined) ? items.join(",") : undefined
  }
  return scalar(value)
}

/** A table in Talon's flat file (`[control_tls]`): its keys join the name (TALON_WORKER_CONTROL_TLS_CA_CERT_PATH), so each is read or refused by name. */
const flattenTalonTable = (settings: Map<string, string>, section: string, table: string, value: object): string | undefined => {
  for (const [name, v] of Object.entries(value)) {
    const rendered = render(v)
    if (rendered === undefined) return `${table}.${name} must be a string, number, boolean or list of them`
    const env = envName(section, table, name)
    if (!KNOWN_NAMES.has(env)) return `unknown key ${table}.${name} for a ${section} (it would be ${env}); see docs/configuration.md for the names read`
    settings.set(env, rendered)
  }
  return undefined
}

/** In Talon's flat file: a setting, or a table of Talon's (`[control_tls]`, `[rate_limits]`); anything else is read as a section. */
const isFlatKey = (flatSection: string, key: string, value: unknown): boolean => {
  if (/^TALON_/.test(key)) return false
  if (!isTable(value)) return true
  const env = envName(flatSection, key)
  return !CONFIG_SECTIONS.includes(key as never) && (TABLE_SETTINGS.has(env) || [...KNOWN_NAMES].some((n) => n.startsWith(`${env}_`)))
}

/**
 * Flattens a parsed document into environment-style names. Errors name the offending key
 * and say how to fix it: a typo in a table name would otherwise be silently ignored.
 *
 * `flatSection` reads Talon's own file shape, one component per file with its keys at the
 * top level (`listen = "0.0.0.0:7001"` in a worker's file), as that section's keys: the
 * command being run names the section.
 */
export const flattenConfig = (doc: unknown, flatSection?: string): { readonly settings: Map<string, string> } | { readonly error: string } => {
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) return { error: "expected a table of sections at the top level" }
  const settings = new Map<string, string>()
  const sections: ReadonlyArray<string> = CONFIG_SECTIONS
  for (const [key, value] of Object.entries(doc)) {
    if (flatSection !== undefined && isFlatKey(flatSection, key, value)) {
      const env = envName(flatSection, key)
      if (isTable(value) && !TABLE_SETTINGS.has(env)) {
        const problem = flattenTalonTable(settings, flatSection, key, value as object)
        if (problem !== undefined) return { error: problem }
        continue
      }
      if (!KNOWN_NAMES.has(env)) return { error: `unknown key ${key} for a ${flatSection} (it would be ${env}); see docs/configuration.md for the names read` }
      const rendered = isTable(value) ? JSON.stringify(value) : render(value)
      if (rendered === undefined) return { error: `${key} must be a string, number, boolean or list of them` }
      settings.set(env, rendered)
      continue
    }
    if (/^TALON_[A-Z0-9_]+$/.test(key)) {
      const v = render(value)
      if (v === undefined) return { error: `${key} must be a string, number, boolean or list of them` }
      settings.set(key, v)
      continue
    }
    if (!sections.includes(key)) {
      return {
        error: `unknown section [${key}]; sections are ${CONFIG_SECTIONS.map((s) => `[${s}]`).join(", ")} (a Talon worker or coordinator file, keys at the top level, loads as \`talon --config FILE worker\` or \`... coordinator\`)`
      }
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return { error: `[${key}] must be a table of settings, e.g. [${key}] followed by name = value lines` }
    }
    for (const [name, v] of Object.entries(value)) {
      const env = envName(key, name)
      const rendered = isTable(v) && TABLE_SETTINGS.has(env) ? JSON.stringify(v) : render(v)
      if (rendered === undefined) {
        return { error: `${key}.${name} must be a string, number, boolean or list of them (nested tables are not settings)` }
      }
      settings.set(env, rendered)
    }
  }
  return { settings }
}

const parseDocument = (file: string, text: string): unknown =>
  file.endsWith(".json") ? JSON.parse(text) : parseToml(text)

/** Reads and validates a config file into a provider answering the `TALON_*` names it sets; `flatSection` as in flattenConfig. */
export const readConfigFile = (file: string, flatSection?: string): Effect.Effect<ConfigProvider.ConfigProvider, ConfigFileError> =>
  Effect.gen(function* () {
    const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
      Effect.provide(NodeFileSystem.layer),
      Effect.mapError(
        (e) =>
          new ConfigFileError({
            path: file,
            detail: `cannot read it (${e._tag === "SystemError" ? e.reason : e.message}); check the path given to --config or ${CONFIG_ENV}`
          })
      )
    )
    const doc = yield* Effect.try({
      try: () => parseDocument(file, text),
      catch: (e) => new ConfigFileError({ path: file, detail: `not valid ${file.endsWith(".json") ? "JSON" : "TOML"}: ${(e as Error).message}` })
    })
    const flat = flattenConfig(doc, flatSection)
    if ("error" in flat) return yield* Effect.fail(new ConfigFileError({ path: file, detail: flat.error }))
    return providerOf(flat.settings)
  })

/** A provider answering the flattened `TALON_*` names of a file. */
export const providerOf = (settings: ReadonlyMap<string, string>): ConfigProvider.ConfigProvider =>
  // "_" joins nested Config paths (Config.nested("TALON_ORIGIN")) the way the environment provider does.
  ConfigProvider.fromMap(new Map(settings), { pathDelim: "_" })

/** What every component reads: `env` first, then the file. */
export const layered = (env: ConfigProvider.ConfigProvider, file: ConfigProvider.ConfigProvider): ConfigProvider.ConfigProvider =>
  env.pipe(ConfigProvider.orElse(() => file))

/** Environment first, then the file: what every component's Config reads. */
export const layer = (file: string, flatSection?: string): Layer.Layer<never, ConfigFileError> =>
  Layer.unwrapEffect(
    Effect.map(readConfigFile(file, flatSection), (fromFile) =>
      Layer.setConfigProvider(layered(ConfigProvider.fromEnv(), fromFile))
    )
  )

/**
 * The file named by `--config FILE` / `--config=FILE` before the subcommand, else by
 * `TALON_CONFIG`. Read ahead of @effect/cli because the provider must be in place
 * before any option falls back to Config.
 */
export const configPathFrom = (args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--config") return args[i + 1]
    if (a.startsWith("--config=")) return a.slice("--config=".length)
    if (!a.startsWith("-")) break
  }
  const fromEnv = env[CONFIG_ENV]
  return fromEnv === undefined || fromEnv === "" ? undefined : fromEnv
}

/** Components whose Talon config file is one flat table: running one reads such a file's top-level keys as its own. */
const FLAT_FILE_COMMANDS: ReadonlySet<string> = new Set(["worker", "coordinator", "gateway"])

/** The subcommand after any leading options (`talon --config F worker ...` → worker), when it reads a flat file. */
export const flatSectionFrom = (args: ReadonlyArray<string>): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--config") {
      i++
      continue
    }
    if (a.startsWith("-")) continue
    return FLAT_FILE_COMMANDS.has(a) ? a : undefined
  }
  return undefined
}
