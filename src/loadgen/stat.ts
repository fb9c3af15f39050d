/** Asks the coordinator for an object's size with a `StatObject` control frame. */
import { Effect } from "effect"
import { ControlChannel } from "../transport/ControlChannel.js"
import { objectIdToUri } from "../core/objectId.js"
import type { ObjectId } from "../core/ids.js"
import { LoadgenError } from "./run.js"

export interface ObjectStat {
  readonly size: number
  readonly version: string
}

export const statObject = (
  addr: { readonly host: string; readonly port: number },
  object: ObjectId
): Effect.Effect<ObjectStat, LoadgenError> =>
  Effect.scoped(
    Effect.gen(function* () {
      const where = `${addr.host}:${addr.port}`
      const channel = yield* ControlChannel.make(where)
      const reply = yield* channel
        .request({ _tag: "StatObject", object })
        .pipe(Effect.mapError((e) => new LoadgenError({ message: `StatObject ${objectIdToUri(object)} at ${where}: ${e.message}` })))
      if (reply._tag === "ObjectStat") return { size: reply.size, version: reply.version }
      const detail = reply._tag === "Ack" ? (reply.detail ?? "no detail") : `unexpected ${reply._tag} reply`
      return yield* Effect.fail(new LoadgenError({ message: `StatObject ${objectIdToUri(object)} at ${where}: ${detail}` }))
    })
  )
