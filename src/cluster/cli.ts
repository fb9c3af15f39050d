import { Command, Options } from "@effect/cli"
import { Console, Effect, Option } from "effect"
import { SAMPLE_KEY, SEED_BUCKET } from "../origin/seed.js"
import { LocalCluster } from "./LocalCluster.js"

const dir = Options.directory("dir").pipe(
  Options.optional,
  Options.withDescription("Where origin data and cache dirs live (kept). Default: a temp dir removed on exit.")
)
const keep = Options.boolean("keep").pipe(Options.withDescription("Keep the temp dir after exit."))
const workers = Options.integer("workers").pipe(
  Options.withDefault(2),
  Options.withDescription("How many workers to start.")
)
const ephemeral = Options.boolean("ephemeral").pipe(
  Options.withDescription("Bind every listener on a free port instead of the defaults (9100, 7000/8000, 7001+/8001+).")
)
const pageSize = Options.integer("page-size").pipe(
  Options.optional,
  Options.withDescription("Worker page size in bytes (0 = whole blocks; default 1 MiB).")
)

export const up = Command.make("up", { dir, keep, workers, ephemeral, pageSize }, (o) =>
  Effect.scoped(
    Effect.gen(function* () {
      const cluster = yield* LocalCluster.make({
        dir: Option.getOrUndefined(o.dir),
        keep: o.keep,
        workers: o.workers,
        ephemeral: o.ephemeral,
        worker: Option.match(o.pageSize, { onNone: () => ({}), onSome: (pageSize) => ({ pageSize }) })
      })
      const coord = cluster.coordinator.controlAddress
      const lines = [
        "talon up: a local cache cluster is running (Ctrl-C stops it)",
        `  origin stub   ${cluster.origin.url}  (S3 path-style; Azure at ${cluster.origin.azureUrl})`,
        `  coordinator   control ${coord}, admin http://${cluster.coordinator.adminAddress}`,
        ...cluster.workers.map(
          (w) => `  ${w.node.id.padEnd(13)} data ${w.dataAddress}, admin http://${w.adminAddress} (${w.dataPlane} plane, ${w.serveMode})`
        ),
        `  data dir      ${cluster.dir}${o.dir._tag === "Some" || o.keep ? " (kept)" : " (removed on exit)"}`,
        "",
        "Read through the cache:",
        `  npx talon read s3://${SEED_BUCKET}/${SAMPLE_KEY} --offset 0 --length 64 --coordinator ${coord} | xxd | head`,
        `  npx talon cluster --coordinator ${coord}`,
        `  npx talon loadgen --addr ${cluster.workers[0]?.dataAddress ?? "127.0.0.1:7001"} --object s3://${SEED_BUCKET}/${SAMPLE_KEY} --size 64M --conns 64 --seconds 5`
      ]
      yield* Console.log(lines.join("\n"))
      return yield* Effect.never
    })
  )
).pipe(
  Command.withDescription(
    "Start a whole local cluster in one process: an origin stub seeded with sample data, a coordinator and N workers with their own cache dirs."
  )
)
