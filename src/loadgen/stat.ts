/** Asks the coordinator for an object's size with a `StatObject` control frame. */
import { Effect } from "effect"
import type { ObjectId } from "../core/ids.js"
import { LoadgenError } from "./run.js"

export interface ObjectStat {
  readonly size: number
  readonly version: string
}

// Placeholder until src/protocol's control codec lands.
export const statObject = (
  addr: { readonly host: string; readonly port: number },
  object: ObjectId
): Effect.Effect<ObjectStat, LoadgenError> =>
  Effect.fail(
    new LoadgenError({
      message: `asking ${addr.host}:${addr.port} for the size of ${object.bucket}/${object.objectPath} is not available yet; give --size`
    })
  )
