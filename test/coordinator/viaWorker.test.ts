/**
 * A coordinator with no origin credentials (Talon's design) answers StatObject and ListObjects
 * through a live worker; with no live worker it refuses, saying so. The worker fills from the
 * origin stub over S3; the coordinator is given no BackendStore at all.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Router from "../../src/backend/Router.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import { Backend } from "../../src/core/ids.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { WorkerConfig } from "../../src/worker/config.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { Worker } from "../../src/worker/Worker.js"
import { scopedTempDir } from "../support/scopedTempDir.js"
import { stubWithObjects } from "../support/stubWithObjects.js"

const object = (key: string) => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

describe("coordinator without origin credentials", () => {
  it.scopedLive("serves stat and list through a live worker, and refuses clearly with none", () =>
    Effect.gen(function* () {
      const dir = yield* scopedTempDir("talon-via-worker-")
      const origin = yield* stubWithObjects(dir, { "bkt/d/a.bin": new Uint8Array(1234), "bkt/d/b.bin": new Uint8Array(10) })
      const coordinator = yield* makeCoordinator({
        listen: "127.0.0.1:0",
        adminListen: "127.0.0.1:0",
        heartbeatIntervalMs: 50,
        missedHeartbeats: 4
      })

      // Nobody to ask yet: a typed refusal naming the cause and the fix, never a hang.
      const none = yield* coordinator.handle({ _tag: "StatObject", object: object("d/a.bin") })
      expect(none._tag === "Ack" && !none.ok && none.detail).toMatch(/no live worker to answer StatObject.*holds no origin credentials/)
      const noneList = yield* coordinator.handle({ _tag: "ListObjects", prefix: "/s3/bkt/d/" })
      expect(noneList._tag === "Ack" && noneList.detail).toMatch(/no live worker to answer ListObjects/)
      // The admin API's origin paging needs credentials: 503, which a mount treats as "list over the wire".
      const page = yield* Effect.promise(() => fetch(`http://${coordinator.adminAddress}/api/v1/objects?prefix=/s3/bkt/`))
      expect(page.status).toBe(503)

      const worker = ManagedRuntime.make(
        Worker.layerWithoutDependencies.pipe(
          Layer.provide(Layer.mergeAll(Sendfile.Portable, ServeMode.Pipelined, Router.layerLocal(origin.url))),
          Layer.provide(
            WorkerConfig.layerSettings({
              id: "w-1",
              dataAddress: "127.0.0.1:0",
              adminAddress: "127.0.0.1:0",
              coordinator: coordinator.controlAddress,
              heartbeatIntervalMs: 50,
              cacheDirs: [`${dir}/cache`]
            })
          )
        )
      )
      yield* Effect.addFinalizer(() => Effect.promise(() => worker.dispose()))
      const w = yield* Effect.promise(() => worker.runPromise(Worker))
      yield* coordinator.members.pipe(
        Effect.filterOrFail((m) => m.some((n) => n.address === w.dataAddress)),
        Effect.delay("25 millis"),
        Effect.retry({ times: 400 })
      )

      const stat = yield* coordinator.handle({ _tag: "StatObject", object: object("d/a.bin") })
      expect(stat).toMatchObject({ _tag: "ObjectStat", size: 1234 })
      const list = yield* coordinator.handle({ _tag: "ListObjects", prefix: "/s3/bkt/d/" })
      expect(list).toEqual({
        _tag: "ObjectList",
        entries: [
          { path: "/s3/bkt/d/a.bin", size: 1234 },
          { path: "/s3/bkt/d/b.bin", size: 10 }
        ]
      })
      // The origin's "no such object" passes through as the answer (a client maps it to ObjectNotFound).
      const missing = yield* coordinator.handle({ _tag: "StatObject", object: object("d/nope.bin") })
      expect(missing._tag === "Ack" && !missing.ok && missing.detail).toMatch(/does not exist|not found/)

      // The worker goes away: once it leaves the membership the refusal is back.
      yield* Effect.promise(() => worker.dispose())
      yield* coordinator.members.pipe(
        Effect.filterOrFail((m) => m.length === 0),
        Effect.delay("25 millis"),
        Effect.retry({ times: 400 })
      )
      const gone = yield* coordinator.handle({ _tag: "StatObject", object: object("d/a.bin") })
      expect(gone._tag === "Ack" && gone.detail).toMatch(/no live worker/)
    })
  )
})
