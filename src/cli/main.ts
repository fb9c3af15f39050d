import { loadSubcommands } from "./commands.js"
import { runCli } from "./run.js"

runCli(await loadSubcommands(process.argv.slice(2)))
