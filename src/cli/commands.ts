import { selfCheck } from "./selfCheck.js"

/** Every `talon <sub>` command; each component contributes its own from `src/<component>/cli.ts`. */
export const subcommands = [selfCheck] as const
