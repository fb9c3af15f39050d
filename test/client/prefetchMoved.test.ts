/**
 * A Load whose worker cannot be reached (it left the cluster after the client took its
 * membership) goes to the worker that now holds that block's place, found with a fresh
 * membership, as a read would; the prefix is still warmed and then served with no origin.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { BackendStore } from "../../src/backend/BackendStore.js"
import * as Router from "../../src/backend/Router.js"
import { Prefetch } from "../../src/client/prefetch.js"
import { TalonClient } from "../../src/client/TalonClient.js"
import { Coordinator } from "../../src/coordinator/Coordinator.js"
import { OriginStub } from "../../src/origin/OriginStub.js"
import { Worker } from "../../src/worker/Worker.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { eventually } from "../support/eventually.js"

const MiB = 1024 * 1024
const BLOCK = MiB
const OBJECTS = 6

const bytesOf = (n: number, seed: number) => {
  const out = Buffer.alloc(n)
  for (let i = 0; i < n; i++) out[i] = (Math.imul(i + 1, 2654435761 ^ seed) >>> 13) & 0xff
  return out
}

describe("Prefetch when a worker leaves", () => {
  it.scopedLive(
    "sends the Load to the block's new owner and warms everything",
    () =>
      Effect.gen(function* () {
        const dir = yield* Effect.acquireRelease(
          Effect.sync(() => mkdtempSync(join(tmpdir(), "talon-prefetch-moved-"))),
          (d) => Effect.sync(() => rmSync(d, { recursive: true, force: true }))
        )
        const data = Array.from({ length: OBJECTS }, (_, i) => bytesOf(3 * BLOCK + 1000 * i, i + 1))
        data.forEach((bytes, i) => {
          mkdirSync(join(dir, "origin", "data"), { recursive: true })
          writeFileSync(join(dir, "origin", "data", `o${i}.bin`), bytes)
        })
        const origin = yield* OriginStub.make({ root: join(dir, "origin"), host: "127.0.0.1", port: 0 })
        const backend = Layer.succeed(BackendStore, yield* Router.make(Router.localOptions(origin.url)))
        const coordinator = Context.get(
          yield* Layer.build(
            Coordinator.layer({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", heartbeatIntervalMs: 100 }).pipe(Layer.provide(backend))
          ),
          Coordinator
        )
        const worker = (i: number, scope: Scope.Scope) =>
          Layer.buildWithScope(
            Worker.layer.pipe(
              Layer.provide(
                WorkerConfig.layer({
                  id: `w${i}`,
                  dataAddress: "127.0.0.1:0",
                  adminAddress: "127.0.0.1:0",
                  coordinator: coordinator.controlAddress,
                  cacheDirs: [join(dir, `cache-${i}`)],
                  heartbeatIntervalMs: 100,
                  blockSize: BLOCK,
                  pageSize: 256 * 1024
                })
              ),
              Layer.provide(backend)
            ),
            scope
          )
        const scopes = yield* Effect.all([Scope.make(), Scope.make(), Scope.make()])
        for (const [i, s] of scopes.entries()) yield* worker(i, s)
        yield* Effect.addFinalizer(() => Effect.forEach(scopes, (s) => Scope.close(s, Exit.void), { discard: true }))
        yield* eventually(Effect.flatMap(coordinator.members, (m) => Effect.sync(() => expect(m.length).toBe(3))), { what: "three workers registered" })

        // The client takes the three-worker membership and keeps it (a long TTL)...
        const ctx = yield* Layer.build(
          Prefetch.layer({ coordinator: coordinator.controlAddress, blockSize: BLOCK, membershipTtlMs: 600_000, statTtlMs: 600_000, connectTimeoutMs: 500 })
        )
        const client = Context.get(ctx, TalonClient)
        expect((yield* client.members()).length).toBe(3)
        // ...then one worker stops, and the coordinator drops it.
        yield* Scope.close(scopes[2]!, Exit.void)
        yield* eventually(Effect.flatMap(coordinator.members, (m) => Effect.sync(() => expect(m.length).toBe(2))), { what: "the stopped worker dropped" })

        const summary = yield* Context.get(ctx, Prefetch).prefetch("s3://data/")
        const total = data.reduce((n, b) => n + b.length, 0)
        expect(summary).toMatchObject({ objects: OBJECTS, failed: 0, fetched: total, resident: 0 })

        // Everything the new membership places is resident: with the origin refusing, reads still match.
        yield* origin.setFaults({ failureRate: 1, failureMode: "reset" })
        for (const [i, want] of data.entries()) {
          const got = yield* client.read(`s3://data/o${i}.bin`, 0, want.length)
          expect(Buffer.compare(Buffer.from(got), want)).toBe(0)
        }
      }),
    120_000
  )
})
