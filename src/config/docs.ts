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
    ...components.map(section)
  ].join("\n")
