/**
 * `talon put FILE URI` and `talon rm URI` run in-process (the Command handlers with real
 * argument parsing) against a local cluster of two workers: the file's bytes reach the origin
 * and read back through the cache; after rm the origin has nothing and a read is NotFound.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Command } from "@effect/cli"
import { NodeContext } from "@effect/platform-node"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either } from "effect"
import { makeTalonClient } from "../../src/client/TalonClient.js"
import { put, rm } from "../../src/client/writeCli.js"
import { BLOCK, connect, startCluster } from "./fixtures/prefetchCluster.js"

const run = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>, args: ReadonlyArray<string>) =>
  Command.run(command, { name: "talon", version: "test" })(["node", "talon", ...args]).pipe(Effect.provide(NodeContext.layer))

describe("talon put and talon rm", () => {
  it.scopedLive("put writes the file through a worker, rm deletes it: read back, then NotFound", () =>
    Effect.gen(function* () {
      const cluster = yield* startCluster
      const { client } = yield* connect(cluster)
      const dir = yield* Effect.acquireRelease(
        Effect.sync(() => mkdtempSync(join(tmpdir(), "talon-put-cli-"))),
        (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
      )
      const file = join(dir, "up.bin")
      const want = Buffer.alloc(BLOCK + 4321)
      for (let i = 0; i < want.length; i++) want[i] = (i * 13 + (i >>> 9)) & 0xff
      writeFileSync(file, want)
      const flags = ["--coordinator", cluster.coordinator.controlAddress, "--block-size", String(BLOCK)]
      const uri = "s3://data/cli/up.bin"
      const originFile = join(cluster.origin.root, "data", "cli", "up.bin")

      yield* run(put, [...flags, file, uri])
      expect(Buffer.compare(readFileSync(originFile), want)).toBe(0)
      expect(Buffer.compare(Buffer.from(yield* client.read(uri, 0, want.length)), want)).toBe(0)

      yield* run(rm, [...flags, uri])
      expect(existsSync(originFile)).toBe(false)
      // A reader that did not see the object before (the one above trusts its stat for minutes).
      const fresh = yield* makeTalonClient({ coordinator: cluster.coordinator.controlAddress, blockSize: BLOCK })
      const gone = yield* Effect.either(fresh.read(uri, 0, 10))
      expect(Either.isLeft(gone) && gone.left._tag).toBe("ObjectNotFound")
      // A missing file is refused by the argument parser before any write.
      const missing = yield* Effect.either(run(put, [...flags, join(dir, "nope.bin"), uri]))
      expect(Either.isLeft(missing)).toBe(true)
      expect(existsSync(originFile)).toBe(false)
    })
  )
})
