import { cluster, read } from "../client/cli.js"
import { up } from "../cluster/cli.js"
import { coordinator } from "../coordinator/cli.js"
import { loadgen } from "../loadgen/cli.js"
import { origin } from "../origin/cli.js"
import { worker } from "../worker/cli.js"
import { gateway } from "../gateway/cli.js"
import { selfCheck } from "./selfCheck.js"

/** Every `talon <sub>` command; each component contributes its own from `src/<component>/cli.ts`. */
export const subcommands = [up, coordinator, worker, gateway, origin, read, cluster, loadgen, selfCheck] as const
