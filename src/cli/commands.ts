import type { Command } from "@effect/cli"

// The subcommands' types differ (name, environment, errors); the parent only needs them as commands.
export type AnyCommand = Command.Command<any, never, any, any>

/**
 * Every `talon <sub>` command by name, each from its component's `src/<component>/cli.ts`,
 * loaded on demand: `talon gateway` imports the gateway's graph only, which a long-running
 * server then also does not carry through its GCs (docs/decisions/measured-in-code.md).
 */
const loaders: Record<string, () => Promise<AnyCommand>> = {
  up: () => import("../cluster/cli.js").then((m) => m.up),
  coordinator: () => import("../coordinator/cli.js").then((m) => m.coordinator),
  worker: () => import("../worker/cli.js").then((m) => m.worker),
  gateway: () => import("../gateway/cli.js").then((m) => m.gatewayCommand(() => import("../cluster/colocated.js").then((c) => c.colocatedWorker))),
  origin: () => import("../origin/cli.js").then((m) => m.origin),
  read: () => import("../client/cli.js").then((m) => m.read),
  cluster: () => import("../client/cli.js").then((m) => m.cluster),
  prefetch: () => import("../client/prefetchCli.js").then((m) => m.prefetch),
  put: () => import("../client/writeCli.js").then((m) => m.put),
  rm: () => import("../client/writeCli.js").then((m) => m.rm),
  loadgen: () => import("../loadgen/cli.js").then((m) => m.loadgen),
  mount: () => import("../mount/cli.js").then((m) => m.mount),
  umount: () => import("../mount/cli.js").then((m) => m.umount),
  "self-check": () => import("./selfCheck.js").then((m) => m.selfCheck)
}

/** The subcommand named on the command line (the first word after the global options), if any. */
const subcommandName = (args: ReadonlyArray<string>): string | undefined => {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!
    if (a === "--config") i++
    else if (!a.startsWith("-")) return a
  }
  return undefined
}

/** The named subcommand alone when it is one of ours; every subcommand otherwise (help, a typo). */
export const loadSubcommands = async (args: ReadonlyArray<string>): Promise<readonly [AnyCommand, ...Array<AnyCommand>]> => {
  const name = subcommandName(args)
  const one = name === undefined ? undefined : loaders[name]
  if (one !== undefined) return [await one()]
  const [first, ...rest] = await Promise.all(Object.values(loaders).map((load) => load()))
  return [first!, ...rest]
}
