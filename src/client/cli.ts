/**
 * `talon read` and `talon cluster`. Every flag is optional and falls back to
 * `TALON_CLIENT_*`, the config file and then the defaults (see ./config.ts).
 */
import * as fs from "node:fs"
import { Args, Command, Options } from "@effect/cli"
import { Console, Effect, Option, Schema, Stream } from "effect"
import { explicitFrom, flaggedKeys, flagOf, flagsOf } from "../config/cli.js"
import { resolve } from "../config/Setting.js"
import { NodeRole } from "../core/ids.js"
import { ClusterStatus } from "../protocol/clusterStatus.js"
import { adminAuthHeaders } from "../config/adminToken.js"
import { ClientSchema, ClusterViewSchema, type TalonClientOptions } from "./config.js"
import { CoordinatorUnavailable, type TalonClientError } from "./errors.js"
import { makeTalonClient, type TalonClientShape } from "./TalonClient.js"

/** Every client setting as a flag of `talon read`, generated from its declaration in ./config.ts. */
const clientFlags = flagsOf(ClientSchema, flaggedKeys(ClientSchema))
const adminFlag = flagOf(ClusterViewSchema.settings.admin)

/** Writes a chunk and waits for the sink to drain when it asks us to (backpressure). */
const writeChunk = (sink: NodeJS.WritableStream, chunk: Uint8Array) =>
  Effect.async<void, Error>((resume) => {
    const ok = sink.write(chunk, (err) => {
      if (err) resume(Effect.fail(err))
      else if (ok) resume(Effect.void)
    })
    if (!ok) sink.once("drain", () => resume(Effect.void))
  })

/** Streams `[offset, offset+length)` of `uri` into `sink` in order, honouring its backpressure; returns bytes written. */
export const readToSink = (
  client: TalonClientShape,
  uri: string,
  offset: number,
  length: number,
  sink: NodeJS.WritableStream
): Effect.Effect<number, TalonClientError | Error> => {
  let written = 0
  return client.readStream(uri, offset, length).pipe(
    Stream.runForEach((chunk) => {
      written += chunk.length
      return writeChunk(sink, chunk)
    }),
    Effect.map(() => written)
  )
}

export const read = Command.make(
  "read",
  {
    uri: Args.text({ name: "uri" }).pipe(
      Args.withDescription("Object to read: s3://bucket/key, az://container/key, or a path /s3/bucket/key.")
    ),
    offset: Options.integer("offset").pipe(
      Options.withDescription("First byte to read (default 0)."),
      Options.withDefault(0)
    ),
    length: Options.integer("length").pipe(
      Options.withDescription("Bytes to read; clamped at the object's end (default: to the end of the object)."),
      Options.optional
    ),
    out: Options.file("out").pipe(
      Options.withDescription("Write the bytes to this file instead of stdout."),
      Options.optional
    ),
    ...clientFlags
  },
  ({ uri, offset, length, out, ...flags }) =>
    Effect.scoped(
      Effect.gen(function* () {
        const client = yield* makeTalonClient(explicitFrom<TalonClientOptions, keyof TalonClientOptions>(flags))
        const info = yield* client.stat(uri)
        const len = Option.getOrElse(length, () => Math.max(0, info.size - offset))
        const sink: NodeJS.WritableStream = Option.isSome(out)
          ? yield* Effect.acquireRelease(
              Effect.sync(() => fs.createWriteStream(out.value)),
              (s) =>
                Effect.async<void>((resume) => {
                  s.end(() => resume(Effect.void))
                })
            )
          : process.stdout
        const written = yield* readToSink(client, uri, offset, len, sink)
        if (Option.isSome(out)) {
          yield* Console.error(`wrote ${written} bytes of ${uri} [${offset}, ${offset + written}) to ${out.value}`)
        }
      })
    )
).pipe(
  Command.withDescription(
    "Read a byte range of an object through the cache cluster and print it to stdout (or write it with --out)."
  )
)

const pad = (rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)))
  return rows.map((r) => r.map((cell, i) => cell.padEnd(widths[i]!)).join("  ").trimEnd()).join("\n")
}

/** Renders the cluster view as a table (exported for tests). */
export const renderClusterTable = (status: ClusterStatus): string => {
  const header = ["ID", "ADDRESS", "ROLE", "LAST HEARTBEAT", "BLOCKS"]
  const rows = status.members.map((m) => [
    m.id,
    m.address,
    m.role,
    `${(m.lastHeartbeatAgeMs / 1000).toFixed(1)}s ago`,
    String(m.blockCount)
  ])
  const summary = `epoch ${status.epoch} · ${status.members.length} member(s) · liveness window ${status.livenessWindowMs} ms · control ${status.controlAddress}`
  // A coordinator older than its own records sends no list.
  const coordinators = (status.coordinators ?? []).map((c) => `${c.id} (${c.health})`)
  const peers = coordinators.length === 0 ? "" : `\ncoordinators: ${coordinators.join(", ")}`
  return (status.members.length === 0 ? `${summary}\n(no healthy members)` : `${summary}\n${pad([header, ...rows])}`) + peers
}

export const cluster = Command.make(
  "cluster",
  {
    admin: adminFlag,
    coordinator: clientFlags.coordinator,
    controlTimeoutMs: clientFlags.controlTimeoutMs
  },
  ({ admin: adminGiven, ...flags }) =>
    Effect.gen(function* () {
      const view = yield* resolve(ClusterViewSchema, { admin: Option.getOrUndefined(adminGiven) })
      const admin = Option.fromNullable(view.admin)
      if (Option.isSome(admin)) {
        const url = `http://${admin.value}/api/v1/cluster`
        const status = yield* Effect.tryPromise({
          try: async () => {
            const res = await fetch(url, { headers: adminAuthHeaders(view.adminToken) })
            if (res.status === 401) {
              throw new Error(`HTTP 401: ${view.adminToken === undefined ? "the coordinator has an admin token; set TALON_ADMIN_TOKEN" : "TALON_ADMIN_TOKEN is not the coordinator's admin token"}`)
            }
            if (!res.ok) throw new Error(`HTTP ${res.status}`)
            return Schema.decodeUnknownSync(ClusterStatus)(await res.json())
          },
          catch: (e) =>
            new CoordinatorUnavailable({ coordinator: admin.value, detail: `GET ${url} failed: ${e instanceof Error ? e.message : String(e)}` })
        })
        yield* Console.log(renderClusterTable(status))
        return
      }
      const members = yield* Effect.scoped(
        Effect.flatMap(makeTalonClient(explicitFrom<TalonClientOptions, "coordinator" | "controlTimeoutMs">(flags, ["coordinator", "controlTimeoutMs"])), (c) => c.members(true))
      )
      const rows = members.map((n) => [n.id, n.address, n.role === NodeRole.Worker ? "worker" : "coordinator"])
      yield* Console.log(
        members.length === 0
          ? "(no healthy members)"
          : `${members.length} member(s) (use --admin for heartbeat ages and block counts)\n${pad([["ID", "ADDRESS", "ROLE"], ...rows])}`
      )
    })
).pipe(Command.withDescription("Show the cluster's healthy members as a table."))
