/**
 * Writes docs/configuration.md from the settings' declarations; `--check` only compares
 * and exits 1 when the committed file is stale.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { renderConfigurationDocs } from "../src/config/docs.js"
import { ALL_COMPONENTS } from "../src/config/registry.js"

const file = path.resolve(import.meta.dirname, "../docs/configuration.md")
const rendered = renderConfigurationDocs(ALL_COMPONENTS)
if (process.argv.includes("--check")) {
  const current = fs.existsSync(file) ? fs.readFileSync(file, "utf8") : ""
  if (current !== rendered) {
    console.error("docs/configuration.md is stale: run `npm run config-docs` (or `just config-docs`) and commit the result.")
    process.exit(1)
  }
  console.log("docs/configuration.md is up to date.")
} else {
  fs.writeFileSync(file, rendered)
  console.log(`wrote ${path.relative(process.cwd(), file)}`)
}
