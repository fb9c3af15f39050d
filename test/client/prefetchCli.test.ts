/**
 * `talon prefetch` run in-process (the Command handler with real argument parsing) against a
 * local cluster: the summary on stdout, plain progress lines on a non-terminal stderr, the
 * capacity check through the coordinator's admin API, and clear refusals.
 */
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { vi } from "vitest"
import { prefetch } from "../../src/client/prefetchCli.js"
import { BLOCK, originGets, startCluster, TOTAL } from "./fixtures/prefetchCluster.js"

const run = (args: ReadonlyArray<string>) =>
  Command.run(prefetch, { name: "talon", version: "test" })(["node", "talon", ...args]).pipe(Effect.provide(NodeContext.layer))

/** Runs the command with console.log and stderr captured. */
const captured = (args: ReadonlyArray<string>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const out: Array<string> = []
      const err: Array<string> = []
      const log = vi.spyOn(console, "log").mockImplementation((...a: Array<unknown>) => void out.push(a.join(" ")))
      const error = vi.spyOn(console, "error").mockImplementation((...a: Array<unknown>) => void err.push(a.join(" ")))
      return { out, err, restore: () => (log.mockRestore(), error.mockRestore()) }
    }),
    ({ out, err }) => Effect.map(Effect.either(run(args)), (result) => ({ result, out: out.join("\n"), err: err.join("\n") })),
    ({ restore }) => Effect.sync(restore)
  )

const failure = (r: Either.Either<unknown, unknown>): string =>
  Either.isRight(r) ? "" : r.left instanceof Error ? r.left.message : JSON.stringify(r.left)

describe("talon prefetch", () => {
  it.scopedLive(
    "warms the prefix and prints a summary; a second run fetches nothing; over capacity and bad prefixes are refused",
    () =>
      Effect.gen(function* () {
        const cluster = yield* startCluster
        const base = ["--coordinator", cluster.coordinator.controlAddress, "--block-size", String(BLOCK), "--admin", cluster.coordinator.adminAddress]

        const first = yield* captured([...base, "--concurrency", "3", "s3://data/set/"])
        expect(failure(first.result) + first.err).toBe("")
        expect(first.out).toMatch(/^prefetched s3:\/\/data\/set\/: 5\/5 objects, .* on 2 worker\(s\) in \d+s \(.* MB\/s\)$/m)
        expect(first.out).toContain(`already resident 0 B, fetched from the origin ${(TOTAL / 1024 / 1024).toFixed(1)} MiB, no failures`)

        const gets = yield* originGets(cluster)
        const second = yield* captured([...base, "s3://data/set/"])
        expect(second.out).toContain("fetched from the origin 0 B, no failures")
        expect(yield* originGets(cluster)).toBe(gets)

        const big = yield* captured([...base, "s3://data/big/"])
        expect(big.result._tag).toBe("Left")
        expect(failure(big.result)).toMatch(/more than the cluster's cache capacity .* pass --force/)
        expect(yield* originGets(cluster)).toBe(gets)

        const bad = yield* captured([...base, "ftp://data/set/"])
        expect(failure(bad.result)).toContain('cannot prefetch "ftp://data/set/": unknown scheme "ftp"')
      }),
    180_000
  )
})
