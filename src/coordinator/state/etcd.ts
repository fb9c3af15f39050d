/**
 * etcd v3 state store (the `etcd3` client). Keys and values are Talon's:
 * `<prefix>/clusters/<cluster>/nodes/<coordinator|worker>/<node id>` holding
 * the NodeStatus JSON, attached to a lease granted per accepted write (so the
 * lease TTL counts from the last accepted heartbeat). The ordering rule is a
 * read, a judgement, then a transaction that commits only if the key's
 * mod revision (or absence) is still what was read; a racing writer makes it
 * retry with a fresh read, so no interleaving can move a record backwards.
 */
import { FileSystem } from "@effect/platform"
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import { ConfigError, Effect, Either, Redacted, Stream } from "effect"
import {
  Etcd3,
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdUserNotFoundError,
  GRPCUnauthenticatedError,
  type IKeyValue
} from "etcd3"
import type { NodeStatus } from "../../protocol/status.js"
import type { StateStoreSettings } from "./config.js"
import { makeStore, type NodeEvent, type StoreCore } from "./ClusterStateStore.js"
import { CorruptRecord, StoreAuthFailed, StoreTimeout, StoreUnavailable, WatchCompacted, type StateStoreError } from "./errors.js"
import { decodeStoredNode, encodeStoredNode, rejectReason, type StoredNode } from "./record.js"
import { tokenProblem } from "./token.js"

/** Optimistic retries of one write under contention before reporting the store unavailable. */
const MAX_WRITE_RETRIES = 32
const ROLE_SEGMENT = ["coordinator", "worker"] as const

const rev = (n: string | number): string => `etcd:${n}`

const AUTH_ERRORS = [
  EtcdAuthenticationFailedError,
  EtcdInvalidAuthTokenError,
  EtcdPermissionDeniedError,
  EtcdUserNotFoundError,
  GRPCUnauthenticatedError
]

const failureOf = (operation: string, e: unknown): StoreUnavailable | StoreAuthFailed => {
  const detail = e instanceof Error ? e.message : String(e)
  return AUTH_ERRORS.some((c) => e instanceof c) || /permission denied|authentication failed|user name is empty/i.test(detail)
    ? new StoreAuthFailed({ backend: "etcd", operation, detail })
    : new StoreUnavailable({ backend: "etcd", operation, detail })
}

const endpointUrl = (e: string, secure: boolean): string => (/^[a-z]+:\/\//.test(e) ? e : `${secure ? "https" : "http"}://${e}`)

/** TLS credentials for the etcd client from the configured PEM files (read at start; the client keeps its channel). */
const etcdCredentials = (settings: StateStoreSettings) =>
  settings.etcdCaCertPath === undefined
    ? Effect.succeed(undefined)
    : Effect.gen(function* () {
        const fs = yield* FileSystem.FileSystem
        const read = (file: string) => Effect.map(fs.readFile(file), (bytes) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength))
        const rootCertificate = yield* read(settings.etcdCaCertPath!)
        const pair =
          settings.etcdClientCertPath === undefined || settings.etcdClientKeyPath === undefined
            ? {}
            : { certChain: yield* read(settings.etcdClientCertPath), privateKey: yield* read(settings.etcdClientKeyPath) }
        return { rootCertificate, ...pair }
      }).pipe(
        Effect.provide(NodeFileSystem.layer),
        Effect.mapError((e) =>
          ConfigError.InvalidData(["TALON_ETCD_CA_CERT_PATH"], `cannot read the etcd TLS files: ${e.message}; check TALON_ETCD_CA_CERT_PATH, TALON_ETCD_CLIENT_CERT_PATH and TALON_ETCD_CLIENT_KEY_PATH`)
        )
      )

export const makeEtcdStore = (settings: StateStoreSettings) =>
  Effect.gen(function* () {
    const timeoutMs = settings.requestTimeoutMs
    const credentials = yield* etcdCredentials(settings)
    const client = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new Etcd3({
            hosts: settings.etcdEndpoints.map((e) => endpointUrl(e, credentials !== undefined)),
            dialTimeout: timeoutMs,
            ...(credentials === undefined ? {} : { credentials }),
            ...(settings.etcdUsername !== undefined && settings.etcdPassword !== undefined
              ? { auth: { username: settings.etcdUsername, password: Redacted.value(settings.etcdPassword) } }
              : {}),
            // Unary calls get a deadline; watch streams live until cancelled. gRPC deadlines are
            // wall-clock instants, so this reads the wall clock, not the Effect Clock.
            defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + timeoutMs })
          })
      ),
      (c) => Effect.sync(() => c.close())
    )
    const root = settings.etcdPrefix.replace(/\/+$/, "")
    const clusterPrefix = (clusterId: string): string => `${root}/clusters/${clusterId}/nodes/`
    const keyOf = (s: NodeStatus): string => `${clusterPrefix(s.clusterId)}${ROLE_SEGMENT[s.node.role]}/${s.node.id}`
    /** Node id from a key under `clusterPrefix` (ids may contain '/'). */
    const nodeIdOf = (clusterId: string, key: string): string => {
      const rest = key.slice(clusterPrefix(clusterId).length)
      return rest.slice(rest.indexOf("/") + 1)
    }

    const call = <A>(operation: string, f: () => Promise<A>): Effect.Effect<A, StoreUnavailable | StoreAuthFailed | StoreTimeout> =>
      Effect.tryPromise({ try: f, catch: (e) => failureOf(operation, e) }).pipe(
        Effect.timeoutFail({ duration: timeoutMs, onTimeout: () => new StoreTimeout({ backend: "etcd", operation, timeoutMs }) })
      )
    const decode = (kv: IKeyValue): Effect.Effect<StoredNode, CorruptRecord> =>
      Either.match(decodeStoredNode(kv.value.toString("utf8")), {
        onLeft: (reason) => Effect.fail(new CorruptRecord({ key: kv.key.toString("utf8"), reason })),
        onRight: Effect.succeed
      })
    const revoke = (lease: string) =>
      call("lease revoke", () => client.leaseClient.leaseRevoke({ ID: lease })).pipe(Effect.ignore, Effect.forkDaemon)
    // etcd leases have one-second granularity; round up so a record never expires early.
    const ttlSeconds = Math.ceil(settings.leaseTtlMs / 1000)

    const core: StoreCore = {
      backend: "etcd",
      put: (status, now, options) =>
        Effect.gen(function* () {
          const key = keyOf(status)
          const value = encodeStoredNode({ status, updatedAtUnixMs: now })
          for (let attempt = 0; attempt < MAX_WRITE_RETRIES; attempt++) {
            const read = yield* call("get", () => client.get(key).exec())
            const kv = read.kvs[0]
            const current = kv === undefined ? undefined : (yield* decode(kv)).status
            const refused = tokenProblem(settings.clusterToken, settings.tokenCheck, options.proof ?? "missing", current, status)
            if (refused !== null) return yield* Effect.fail(refused)
            const reject = rejectReason(current, status)
            if (reject !== null) return { disposition: reject, revision: rev(read.header.revision) }
            const lease = yield* call("lease grant", () => client.leaseClient.leaseGrant({ TTL: ttlSeconds, ID: 0 }))
            const txn = yield* call("txn", () =>
              client
                .if(key, kv === undefined ? "Create" : "Mod", "==", kv === undefined ? 0 : kv.mod_revision)
                .then(client.put(key).value(value).lease(lease.ID))
                .commit()
            )
            if (txn.succeeded) {
              if (kv !== undefined && kv.lease !== "0") yield* revoke(kv.lease)
              return { disposition: "applied" as const, revision: rev(txn.header.revision) }
            }
            yield* revoke(lease.ID)
          }
          return yield* new StoreUnavailable({
            backend: "etcd",
            operation: "put",
            detail: `gave up after ${MAX_WRITE_RETRIES} conflicting concurrent writes to ${key}`
          })
        }),
      remove: (clusterId, nodeId, incarnationId) =>
        Effect.gen(function* () {
          for (let attempt = 0; attempt < MAX_WRITE_RETRIES; attempt++) {
            const keys = ROLE_SEGMENT.map((r) => `${clusterPrefix(clusterId)}${r}/${nodeId}`)
            const reads = yield* Effect.all(keys.map((k) => call("get", () => client.get(k).exec())))
            const kv = reads.flatMap((r) => r.kvs)[0]
            const revision = rev(reads[reads.length - 1]!.header.revision)
            if (kv === undefined) return { disposition: "not-found" as const, revision }
            if ((yield* decode(kv)).status.incarnationId !== incarnationId) return { disposition: "stale" as const, revision }
            const key = kv.key.toString("utf8")
            const txn = yield* call("txn", () => client.if(key, "Mod", "==", kv.mod_revision).then(client.delete().key(key)).commit())
            if (txn.succeeded) {
              if (kv.lease !== "0") yield* revoke(kv.lease)
              return { disposition: "applied" as const, revision: rev(txn.header.revision) }
            }
          }
          return yield* new StoreUnavailable({ backend: "etcd", operation: "remove", detail: "too many conflicting concurrent writes" })
        }),
      list: (clusterId) =>
        Effect.gen(function* () {
          const res = yield* call("list", () => client.getAll().prefix(clusterPrefix(clusterId)).exec())
          const nodes = yield* Effect.forEach(res.kvs, decode)
          return { nodes, revision: rev(res.header.revision) }
        }),
      watch: (clusterId, afterRevision) =>
        Stream.asyncScoped<NodeEvent, StateStoreError>((emit) =>
          Effect.gen(function* () {
            let builder = client.watch().prefix(clusterPrefix(clusterId))
            if (afterRevision !== undefined) {
              const n = /^etcd:(\d+)$/.exec(afterRevision)?.[1]
              if (n === undefined) return yield* new WatchCompacted({ requested: afterRevision, oldest: "etcd:?" })
              // The client reports a watch refused for compaction only as a hung create, so ask first:
              // a read at a compacted revision fails with a clear error.
              yield* call("compaction check", () => client.getAll().prefix(clusterPrefix(clusterId)).revision(n).limit(1).exec()).pipe(
                Effect.catchIf(
                  (e) => /compacted/i.test(e._tag === "StoreTimeout" ? "" : e.detail),
                  () => Effect.fail(new WatchCompacted({ requested: afterRevision, oldest: "newer than requested" }))
                )
              )
              builder = builder.startRevision(String(BigInt(n) + 1n))
            }
            const watcher = yield* Effect.acquireRelease(
              call("watch", () => builder.create()),
              // Bounded: cancelling needs the server, and a hung one would hold the caller's round forever.
              (w) => Effect.promise(() => w.cancel()).pipe(Effect.timeout(timeoutMs), Effect.ignore)
            )
            watcher.on("put", (kv) => {
              const decoded = decodeStoredNode(kv.value.toString("utf8"))
              if (Either.isLeft(decoded)) {
                void emit.fail(new CorruptRecord({ key: kv.key.toString("utf8"), reason: decoded.left }))
                return
              }
              const node = decoded.right
              void emit.single({ kind: "upserted", clusterId, nodeId: node.status.node.id, node, revision: rev(kv.mod_revision) })
            })
            watcher.on("delete", (kv) => {
              const nodeId = nodeIdOf(clusterId, kv.key.toString("utf8"))
              void emit.single({ kind: "removed", clusterId, nodeId, revision: rev(kv.mod_revision) })
            })
            watcher.on("error", (e) => {
              void emit.fail(
                /compact/i.test(e.message) ? new WatchCompacted({ requested: afterRevision ?? "now", oldest: "unknown" }) : failureOf("watch", e)
              )
            })
          })
        ),
      checkReady: Effect.map(
        // A linearizable read needs a quorum: it fails while the cluster cannot serve authoritative answers.
        call("readiness read", () => client.get(`${root}/`).exec()),
        (r) => rev(r.header.revision)
      )
    }
    return makeStore(core, settings)
  })

