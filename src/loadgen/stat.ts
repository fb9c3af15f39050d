/**
 * Asks the coordinators for an object's size through the client, so
 * `--coordinator` takes the same comma-separated list as every other
 * coordinator setting and fails over between its entries.
 */
import { Effect } from "effect"
import { makeTalonClient } from "../client/TalonClient.js"
import { objectIdToUri } from "../core/objectId.js"
import type { ObjectId } from "../core/ids.js"
import { formatHostPort, type HostPort } from "../transport/address.js"
import { LoadgenError } from "./run.js"

export interface ObjectStat {
  readonly size: number
  readonly version: string
}

/** `coordinator`: the `--coordinator` text (`host:port[,host:port…]`) or one parsed address. */
export const statObject = (coordinator: string | HostPort, object: ObjectId): Effect.Effect<ObjectStat, LoadgenError> =>
  Effect.suspend(() => statVia(typeof coordinator === "string" ? coordinator : formatHostPort(coordinator.host, coordinator.port), object))

const statVia = (coordinator: string, object: ObjectId): Effect.Effect<ObjectStat, LoadgenError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const client = yield* makeTalonClient({ coordinator })
      const info = yield* client.stat(object)
      return { size: info.size, version: info.version }
    })
  ).pipe(Effect.mapError((e) => new LoadgenError({ message: `StatObject ${objectIdToUri(object)} at --coordinator ${coordinator}: ${e.message}` })))
