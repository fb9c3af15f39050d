/**
 * How replies of one connection are ordered. Both modes hand replies to the
 * connection's single `ConnectionWriter`, which sends each whole response
 * before the next, so bytes of two responses never interleave:
 *
 * - `pipelined`: replies leave in request order (a miss holds back the hits
 *   behind it, like Talon's default).
 * - `multiplexed`: each reply leaves as soon as it is ready (a miss does not
 *   hold back hits; clients match replies by request id).
 */
import { Context, Layer } from "effect"
import { type ConnectionWriter, WRITTEN } from "../plane/DataPlane.js"
import type { Reply } from "./RequestHandler.js"

/** What a connection's serve loop needs from the rest of the server. */
export interface ConnectionContext {
  readonly writer: ConnectionWriter
  /** Sends one ready reply through the writer; resolves/rejects with the write. */
  readonly send: (reply: Reply) => Promise<void>
  /** Returns a reply's resources (pinned blocks) once it was sent, failed or dropped. */
  readonly done: (reply: Reply) => void
  /** Called whenever the number of unfinished requests drops (for read backpressure and half-close). */
  readonly onSettled: () => void
  /** The writer failed: the connection is gone. */
  readonly onWriteFailure: (error: unknown) => void
}

export interface ServeConnection {
  /** Accepts the next request's reply (ready now, or later). */
  readonly push: (reply: Reply | Promise<Reply>) => void
  /** Requests accepted and not yet fully written (or dropped). */
  readonly pending: () => number
  /** Stops sending: later replies are released unsent. */
  readonly close: () => void
}

export interface ServeModeShape {
  readonly name: "pipelined" | "multiplexed"
  readonly open: (ctx: ConnectionContext) => ServeConnection
}

export class ServeMode extends Context.Tag("talon/worker/ServeMode")<ServeMode, ServeModeShape>() {
  static readonly Pipelined: Layer.Layer<ServeMode> = Layer.sync(ServeMode, () => ({ name: "pipelined" as const, open: openPipelined }))
  static readonly Multiplexed: Layer.Layer<ServeMode> = Layer.sync(ServeMode, () => ({
    name: "multiplexed" as const,
    open: openMultiplexed
  }))
  static readonly layerFor = (name: "pipelined" | "multiplexed"): Layer.Layer<ServeMode> =>
    name === "multiplexed" ? ServeMode.Multiplexed : ServeMode.Pipelined
}

const isPromise = (r: Reply | Promise<Reply>): r is Promise<Reply> => typeof (r as Promise<Reply>).then === "function"

interface Slot {
  reply: Reply | undefined
}

/** Replies in request order: a FIFO of slots, flushed from the head while the head is ready. */
const openPipelined = (ctx: ConnectionContext): ServeConnection => {
  const queue: Array<Slot> = []
  let head = 0
  let writing = 0
  let closed = false

  const write = (reply: Reply) => {
    if (closed) {
      ctx.done(reply)
      return
    }
    const sent = ctx.send(reply)
    if (sent === WRITTEN) {
      // Fully written already (native hit path): finish now, no promise callbacks per request.
      ctx.done(reply)
      ctx.onSettled()
      return
    }
    writing++
    sent.then(
      () => {
        writing--
        ctx.done(reply)
        ctx.onSettled()
      },
      (e: unknown) => {
        writing--
        ctx.done(reply)
        ctx.onWriteFailure(e)
        ctx.onSettled()
      }
    )
  }

  const flush = () => {
    while (head < queue.length && queue[head]!.reply !== undefined) {
      const reply = queue[head]!.reply!
      queue[head++] = undefined as unknown as Slot
      write(reply)
    }
    if (head === queue.length) {
      queue.length = 0
      head = 0
    } else if (head > 1024) {
      queue.splice(0, head)
      head = 0
    }
  }

  return {
    push: (r) => {
      if (!isPromise(r)) {
        if (head === queue.length) return write(r)
        queue.push({ reply: r })
        return flush()
      }
      const slot: Slot = { reply: undefined }
      queue.push(slot)
      r.then((reply) => {
        slot.reply = reply
        if (closed) {
          ctx.done(reply)
          return
        }
        flush()
      })
    },
    pending: () => queue.length - head + writing,
    close: () => {
      closed = true
      for (let i = head; i < queue.length; i++) {
        const reply = queue[i]!.reply
        if (reply !== undefined) ctx.done(reply)
      }
      queue.length = 0
      head = 0
    }
  }
}

/** Replies as soon as each is ready; the writer keeps each response whole. */
const openMultiplexed = (ctx: ConnectionContext): ServeConnection => {
  let outstanding = 0
  let closed = false
  const write = (reply: Reply) => {
    if (closed) {
      outstanding--
      ctx.done(reply)
      return
    }
    const sent = ctx.send(reply)
    if (sent === WRITTEN) {
      outstanding--
      ctx.done(reply)
      ctx.onSettled()
      return
    }
    sent.then(
      () => {
        outstanding--
        ctx.done(reply)
        ctx.onSettled()
      },
      (e: unknown) => {
        outstanding--
        ctx.done(reply)
        ctx.onWriteFailure(e)
        ctx.onSettled()
      }
    )
  }
  return {
    push: (r) => {
      outstanding++
      if (isPromise(r)) r.then(write)
      else write(r)
    },
    pending: () => outstanding,
    close: () => {
      closed = true
    }
  }
}
