/**
 * The client's connections to workers: the data-plane pool (pipelined GetRange /
 * GetPinnedRange, WorkerPool.ts) and one control channel per worker for the
 * StatObject a worker answers while no coordinator does. Both are closed for a
 * worker that leaves the membership, and all of them when the client's scope ends.
 */
import { Effect } from "effect"
import { ControlChannel } from "../transport/ControlChannel.js"
import { controlTlsFilesOf } from "../transport/controlTls.js"
import { ClientConfig } from "./ClientConfig.js"
import { SLAB_BYTES, SlabPool } from "./SlabPool.js"
import { WorkerPool } from "./WorkerPool.js"

export class Workers extends Effect.Service<Workers>()("talon/client/Workers", {
  scoped: Effect.gen(function* () {
    const options = yield* ClientConfig
    const control = new Map<string, ControlChannel>()
    // A worker serving TLS does so on its data port, which also answers the control channel's StatObject.
    const tls = options.dataTls ? controlTlsFilesOf(options) : undefined
    const pool = yield* Effect.acquireRelease(
      Effect.sync(
        () =>
          new WorkerPool({
            connectionsPerWorker: options.connectionsPerWorker,
            requestTimeout: `${options.requestTimeoutMs} millis`,
            connectTimeout: `${options.connectTimeoutMs} millis`,
            maxRequestBytes: options.maxRequestBytes,
            slabs: new SlabPool(SLAB_BYTES, Math.ceil(options.readBuffersKeptBytes / SLAB_BYTES)),
            tenant: options.tenant,
            tls
          })
      ),
      (pool) =>
        Effect.suspend(() => {
          pool.close()
          const channels = [...control.values()]
          control.clear()
          return Effect.forEach(channels, (c) => c.close, { discard: true })
        })
    )

    /** The control channel to the worker at `address` (opened on first use, no retries: the next worker is asked instead). */
    const controlChannel = (address: string): ControlChannel => {
      let channel = control.get(address)
      if (channel === undefined) {
        channel = ControlChannel.unsafeMake(address, {
          requestTimeout: `${options.requestTimeoutMs} millis`,
          connectTimeout: `${options.connectTimeoutMs} millis`,
          retries: 0,
          tls
        })
        control.set(address, channel)
      }
      return channel
    }

    /** Closes every connection to a worker that left the membership, so a dead worker's sockets do not linger. */
    const forget = (address: string): Effect.Effect<void> =>
      Effect.suspend(() => {
        pool.forget(address)
        const channel = control.get(address)
        control.delete(address)
        return channel === undefined ? Effect.void : channel.close
      })

    return { pool, controlChannel, forget }
  })
}) {}
