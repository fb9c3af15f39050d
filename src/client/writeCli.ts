/**
 * `talon put FILE URI` and `talon rm URI`: write an object through a worker to the origin, or
 * delete it there. Flags fall back to `TALON_CLIENT_*`, the config file and then the defaults,
 * like `talon read` (see ./config.ts).
 */
import { Args, Command } from "@effect/cli"
import { Console, Effect } from "effect"
import { explicitFrom, flaggedKeys, flagsOf } from "../config/cli.js"
import { ClientSchema, type TalonClientOptions } from "./config.js"
import { makeTalonClient } from "./TalonClient.js"

const clientFlags = flagsOf(ClientSchema, flaggedKeys(ClientSchema))
const uriArg = Args.text({ name: "uri" }).pipe(Args.withDescription("Object: s3://bucket/key, az://container/key, or a path /s3/bucket/key."))

export const put = Command.make(
  "put",
  {
    file: Args.file({ name: "file", exists: "yes" }).pipe(Args.withDescription("Local file to upload (streamed: never read whole into memory).")),
    uri: uriArg,
    ...clientFlags
  },
  ({ file, uri, ...flags }) =>
    Effect.scoped(
      Effect.gen(function* () {
        const client = yield* makeTalonClient(explicitFrom<TalonClientOptions, keyof TalonClientOptions>(flags))
        const result = yield* client.put(uri, { file })
        yield* Console.error(`put ${result.size} bytes of ${file} to ${uri}, version ${result.version}`)
      })
    )
).pipe(
  Command.withDescription(
    "Write a local file to an object through the cluster: a worker streams it to the origin (S3 or Azure) and drops the cached blocks of the old version; reads after it see the new bytes."
  )
)

export const rm = Command.make("rm", { uri: uriArg, ...clientFlags }, ({ uri, ...flags }) =>
  Effect.scoped(
    Effect.gen(function* () {
      const client = yield* makeTalonClient(explicitFrom<TalonClientOptions, keyof TalonClientOptions>(flags))
      yield* client.delete(uri)
      yield* Console.error(`deleted ${uri}`)
    })
  )
).pipe(
  Command.withDescription(
    "Delete an object at the origin through the cluster (a worker deletes it and drops its cached blocks); deleting an object that does not exist succeeds."
  )
)
