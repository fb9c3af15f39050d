/**
 * docs/configuration.md, rendered from the settings' declarations: the reference cannot
 * drift from what the code reads (`npm run config-docs -- --check` and a test compare).
 */
import { CONFIG_SECTIONS } from "../cli/configFile.js"
import type { Component, Setting } from "./Setting.js"

/** `TALON_WORKER_DATA_ADDR` → `[worker] data_addr`; a variable of no section is a top-level key. */
export const fileKeyOf = (env: string): string => {
  const sections = [...CONFIG_SECTIONS].sort((a, b) => b.length - a.length)
  for (const section of sections) {
    const prefix = `TALON_${section.toUpperCase()}_`
    if (env.startsWith(prefix)) return `[${section}] ${env.slice(prefix.length).toLowerCase()}`
  }
  return env
}

const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/\n/g, " ")
const code = (text: string) => `\`${text.replace(/\|/g, "\\|")}\``

const row = (s: Setting<any>): string => {
  const flag = s.flag === undefined ? "—" : code(`--${s.flag}`)
  const shown = s.shownDefault ?? s.kind.show(s.default)
  return `| ${flag} | ${code(s.env)} | ${code(fileKeyOf(s.env))} | ${cell(s.kind.type)} | ${code(shown)} | ${cell(s.help.replace(/\.$/, ""))}. |`
}

const section = (c: Component<any>): string =>
  [
    `## ${c.name}`,
    "",
    c.summary,
    "",
    "| Flag | Variable | Config file | Type | Default | Meaning |",
    "|---|---|---|---|---|---|",
    ...Object.values(c.settings as Record<string, Setting<any>>).map(row),
    ""
  ].join("\n")

/** Talon's key in its own one-component file (`TALON_WORKER_CAPACITY_BYTES` → `capacity_bytes`). */
const talonFileKey = (env: string): string =>
  env
    .replace(/^TALON_(WORKER|COORDINATOR|GATEWAY)_/, "")
    .toLowerCase()
    .replace(/^(control_tls|etcd)_/, "$1.")

const talonNames = (components: ReadonlyArray<Component<any>>): ReadonlyArray<string> => {
  const rows = components.flatMap((c) => [
    ...Object.values(c.settings as Record<string, Setting<any>>).flatMap((s) =>
      (s.aliases ?? []).map((a) => `| ${code(a)} | ${code(talonFileKey(a))} | same as ${code(s.env)}${s.flag === undefined ? "" : ` (${code(`--${s.flag}`)})`} |`)
    ),
    ...(c.refused ?? []).map(
      (r) => `| ${code(r.env)} | ${code(talonFileKey(r.env))} | ${r.ignored === true ? "accepted and ignored" : "refused"}: ${cell(r.use)} |`
    )
  ])
  return [
    "## Talon's names",
    "",
    "Talon's environment variables, and the keys of its one-component TOML files, are read where the meaning is the same.",
    "A Talon file (keys at the top level, e.g. `listen = \"0.0.0.0:7001\"`) loads as `talon --config FILE worker` (or `coordinator`, `gateway`);",
    "a key no setting reads is refused. Talon's names that match ours already (`TALON_WORKER_BLOCK_SIZE`, `TALON_WORKER_CACHE_DIRS` with",
    "`:`-separated dirs, `TALON_COORDINATOR_LISTEN`, …) need no alias. Where both our name and Talon's are set (in the environment or the",
    "file) they must agree, else the command stops naming both: a half-migrated deployment never runs on the value its operator did not mean.",
    "A flag still overrides both. Talon's names whose meaning differs here stop the command with what to set instead.",
    "",
    "| Talon variable | Talon file key | Here |",
    "|---|---|---|",
    ...rows,
    ""
  ]
}

export const renderConfigurationDocs = (components: ReadonlyArray<Component<any>>): string =>
  [
    "# Configuration",
    "",
    "<!-- Generated from the settings' declarations (src/*/config.ts) by `npm run config-docs`; edit those, not this file. -->",
    "",
    "Every setting resolves in this order: command-line flag > `TALON_*` environment variable > config file > default.",
    "The config file is TOML (or JSON by extension), given as `talon --config FILE <command>` or `TALON_CONFIG=FILE`;",
    "its tables are the sections below, e.g. `TALON_WORKER_CACHE_DIRS=/a,/b` is `[worker] cache_dirs = [\"/a\", \"/b\"]`",
    "(see [talon.example.toml](talon.example.toml)). Sizes take binary K/M/G/T suffixes; booleans take",
    "true/false, on/off, yes/no or 1/0. A bad value stops the command with a message naming the variable and",
    "flag, what was wrong, and an example. Secrets are never flags. Origin endpoints and credentials",
    "(`TALON_S3_*`, `TALON_AZURE_*`) are described in the backend docs.",
    "",
    ...components.map(section),
    ...talonNames(components)
  ].join("\n")
