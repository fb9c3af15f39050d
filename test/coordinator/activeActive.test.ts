/**
 * Active-active coordinators on a real etcd: `talon coordinator` processes
 * sharing one keyspace serve the same members and epoch, whichever of them a
 * worker heartbeats to; a killed worker leaves both (placement first, then
 * its record at lease expiry); a worker fails over when
 * its coordinator is killed -9; /readyz follows etcd; a restarted coordinator
 * reports the same epoch. Where etcd is not installed the suite is skipped
 * with a loud message (a failure under CI=true).
 */
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { describe, expect, it } from "@effect/vitest"
import type { ClusterStatus } from "../../src/protocol/clusterStatus.js"
import type { NodeStatus } from "../../src/protocol/status.js"
import { freshWorkerStatus } from "../../bench/kit/nodeStatus.js"
import { ControlChannel } from "../../src/transport/ControlChannel.js"
import { EtcdCluster, etcdAvailable } from "./state/etcdHarness.js"
import {
  coordinatorOn,
  kill9,
  originWith,
  outputs,
  pollUntil,
  startWorker,
  tempDir,
  type CoordinatorProcess
} from "../faults/fixtures/talon.js"
import type { Child } from "../cluster/fixtures/processes.js"

const T = 480_000
/** First answers wait for processes that may still be compiling from source on a loaded machine. */
const START_MS = 180_000
const HEARTBEAT_MS = 200

const etcdScoped = Effect.acquireRelease(
  Effect.promise(() => EtcdCluster.start(1)),
  (etcd) => Effect.promise(() => etcd.stop())
)

const status = (c: CoordinatorProcess) =>
  Effect.tryPromise(async () => {
    const res = await fetch(`http://${c.adminAddress}/api/v1/cluster`, { signal: AbortSignal.timeout(5000) })
    return (await res.json()) as ClusterStatus
  })

const readyz = (c: CoordinatorProcess) =>
  Effect.tryPromise(async () => (await fetch(`http://${c.adminAddress}/readyz`, { signal: AbortSignal.timeout(5000) })).status)

/** A gauge's value from the coordinator's /metrics. */
const gauge = (c: CoordinatorProcess, name: string) =>
  Effect.tryPromise(async () => {
    const body = await (await fetch(`http://${c.adminAddress}/metrics`, { signal: AbortSignal.timeout(5000) })).text()
    const line = body.split("\n").find((l) => l.startsWith(`${name} `))
    return line === undefined ? Number.NaN : Number(line.slice(name.length + 1))
  })

const statusOf = (id: string): NodeStatus => freshWorkerStatus(id, { clusterId: "aa" })

const ids = (s: ClusterStatus) => s.members.map((m) => m.id).join(",")

/** Two coordinators of one cluster on one etcd keyspace (its own prefix, so tests do not share records). */
const twoCoordinators = (etcd: EtcdCluster, dir: string) =>
  Effect.gen(function* () {
    const origin = yield* originWith(dir, { "a.bin": 1024 })
    const prefix = `/talon-aa-${randomUUID().slice(0, 8)}`
    const flags = ["--state", "etcd", "--etcd-endpoints", etcd.endpoints.join(","), "--etcd-prefix", prefix, "--cluster-id", "aa"]
    const a = yield* coordinatorOn(origin, HEARTBEAT_MS, flags)
    const b = yield* coordinatorOn(origin, HEARTBEAT_MS, flags)
    return { origin, a, b }
  })

/** etcd, then both coordinators started (a first), with the children every failure message lists. */
const startedPair = Effect.gen(function* () {
  const etcd = yield* etcdScoped
  const dir = yield* tempDir
  const { origin, a, b } = yield* twoCoordinators(etcd, dir)
  const children: Array<readonly [string, Child]> = []
  const why = () => outputs(children)
  const ca = yield* a.start
  children.push(["coordinator a", ca], ["coordinator b", yield* b.start])
  return { etcd, dir, origin, a, b, ca, children, why }
})

describe.runIf(etcdAvailable())("active-active coordinators on etcd", () => {
  it.live(
    "both serve the members and epoch a worker reported to one; a killed worker leaves both; a restarted coordinator reports the same epoch",
    () =>
      Effect.scoped(
        Effect.gen(function* () {
          const { dir, origin, a, b, children, why } = yield* startedPair
          const env = { TALON_WORKER_CLUSTER_ID: "aa" }
          const w1 = yield* startWorker(dir, origin, { id: "w1", coordinator: a.address, blockSize: 4096, heartbeatMs: HEARTBEAT_MS, env })
          const w2 = yield* startWorker(dir, origin, { id: "w2", coordinator: b.address, blockSize: 4096, heartbeatMs: HEARTBEAT_MS, env })
          children.push(["w1", w1.child], ["w2", w2.child])

          // w1 talks only to a, w2 only to b: both coordinators list both, with one epoch.
          const both = (s: ClusterStatus) => ids(s) === "w1,w2"
          const sa = yield* pollUntil(status(a), both, START_MS, () => `a never listed w1,w2\n${why()}`)
          const sb = yield* pollUntil(status(b), (s) => both(s) && s.epoch === sa.epoch, 60_000, () => `b disagrees with a\n${why()}`)
          expect(sa.epochHex).toBe(sb.epochHex)
          expect(sa.epoch).not.toBe(0)
          expect(sa.stateBackend).toBe("etcd")
          expect(sb.members.find((m) => m.id === "w1")?.address).toBe(w1.address)
          expect(sa.members.find((m) => m.id === "w2")?.address).toBe(w2.address)
          const epochOfTwo = sa.epochHex

          // w2 is killed: it leaves both coordinators' membership, and the epoch moves the same way on both.
          yield* kill9(w2.child)
          const one = (s: ClusterStatus) => ids(s) === "w1"
          const la = yield* pollUntil(status(a), one, 60_000, () => `a kept w2\n${why()}`)
          const lb = yield* pollUntil(status(b), (s) => one(s) && s.epochHex === la.epochHex, 60_000, () => `b kept w2\n${why()}`)
          expect(la.epochHex).not.toBe(epochOfTwo)
          expect(lb.epochHex).toBe(la.epochHex)
          // Its lease then expires in etcd: the record itself is gone on both (w1's and the two coordinators' remain).
          for (const c of [a, b]) {
            yield* pollUntil(gauge(c, "talon_coordinator_records"), (n) => n === 3, 60_000, () => `w2's record never expired\n${why()}`)
          }

          // b restarts (kill -9, then again on the same ports): it reports the epoch it reported before.
          yield* kill9(children[1]![1])
          children.push(["coordinator b (restarted)", yield* b.start])
          const again = yield* pollUntil(status(b), one, START_MS, () => `restarted b never listed w1\n${why()}`)
          expect(again.epochHex).toBe(la.epochHex)
          expect(again.epoch).toBe(la.epoch)
        })
      ),
    T
  )

  it.live("a worker fails over when its coordinator is killed -9 and stays a member; /readyz follows etcd", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const { etcd, dir, origin, a, b, ca, children, why } = yield* startedPair
        // Both up first, so the worker's first status goes to the head of its list.
        for (const c of [a, b]) yield* pollUntil(readyz(c), (code) => code === 200, START_MS, () => `coordinator not ready\n${why()}`)
        const w = yield* startWorker(dir, origin, {
          id: "wf",
          coordinator: `${a.address},${b.address}`,
          blockSize: 4096,
          heartbeatMs: HEARTBEAT_MS,
          env: { TALON_WORKER_CLUSTER_ID: "aa" }
        })
        children.push(["wf", w.child])
        const listed = (s: ClusterStatus) => ids(s) === "wf"
        const before = yield* pollUntil(status(b), listed, START_MS, () => `b never listed wf\n${why()}`)
        const seqBefore = before.members[0]!.heartbeatSeq
        // The worker's own log line may trail the store write b already follows.
        yield* pollUntil(Effect.sync(() => w.child.output()), (o) => o.includes(`coordinator ${a.address})`), 30_000, () => `wf did not join via a\n${why()}`)

        // a dies hard: the worker's statuses reach b (its sequence keeps rising there), and it never leaves.
        yield* kill9(ca)
        const after = yield* pollUntil(
          status(b),
          (s) => listed(s) && s.members[0]!.heartbeatSeq > seqBefore + 10,
          60_000,
          () => `wf's statuses stopped after a died\n${why()}`
        )
        expect(after.members[0]!.incarnationId).toBe(before.members[0]!.incarnationId)
        yield* pollUntil(Effect.sync(() => w.child.output()), (o) => o.includes(`failed over to ${b.address}`), 30_000, () => `wf never logged its failover\n${why()}`)

        // etcd stops: b cannot serve membership authoritatively, so /readyz is 503; etcd returns, so does readiness.
        expect(yield* readyz(b)).toBe(200)
        yield* Effect.promise(() => etcd.stopMember(0))
        yield* pollUntil(readyz(b), (code) => code === 503, 60_000, () => `b stayed ready without etcd\n${why()}`)
        const down = yield* status(b)
        expect(down.ready).toBe(false)
        expect(down.notReadyReason).toBeTruthy()
        // Cut off from its store, b refuses statuses at once, so a worker moves on to another coordinator.
        const refused = yield* Effect.scoped(
          Effect.flatMap(ControlChannel.make(b.address), (ch) => ch.request({ _tag: "NodeStatusHeartbeat", status: statusOf("wx") }))
        )
        expect(refused).toMatchObject({ _tag: "Ack", ok: false, detail: expect.stringContaining("coordinator not ready") })
        yield* Effect.promise(() => etcd.startMember(0))
        yield* pollUntil(readyz(b), (code) => code === 200, 90_000, () => `b not ready after etcd returned\n${why()}`)
        yield* pollUntil(status(b), listed, 60_000, () => `wf not a member after etcd returned\n${why()}`)
      })
    ),
    T
  )
})
