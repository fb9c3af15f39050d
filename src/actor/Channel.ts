/**
 * The two-way message channels a remote actor runs over: a `worker_threads` MessagePort (or a
 * Worker, or `parentPort`) and a child process's IPC channel (`child_process.fork`, or `process`
 * inside the child). A channel carries plain values; Remote.ts puts Schema-encoded messages on it,
 * so they must survive the channel's serialization (structured clone for ports, JSON for the
 * default IPC: prefer schemas whose encoded form is JSON, e.g. `Schema.Int` over `Schema.Number`
 * when NaN or -0 may occur, or fork with `serialization: "advanced"`).
 */
import type { ChildProcess } from "node:child_process"

export interface Channel {
  /** Posts one message; throws when the channel is already closed. */
  readonly send: (message: unknown) => void
  /** Listens until the returned function is called; `onClose` may be called more than once. */
  readonly subscribe: (onMessage: (message: unknown) => void, onClose: (reason: string) => void) => () => void
}

type Listener = (...args: Array<any>) => void
interface Emitter {
  on(event: string, listener: Listener): unknown
  off(event: string, listener: Listener): unknown
}

/** Anything with `postMessage` and message/close events: MessagePort, Worker, `parentPort`. */
export interface PortLike extends Emitter {
  postMessage(message: unknown): void
}

export const fromPort = (port: PortLike): Channel => {
  let closed: string | undefined
  const markClosed = (reason: string) => () => (closed ??= reason)
  const onPortClose = markClosed("the message port closed")
  const onWorkerExit = (code: number) => (closed ??= `the worker thread exited with code ${code}`)
  port.on("close", onPortClose)
  port.on("exit", onWorkerExit)
  return {
    send: (message) => {
      if (closed) throw new Error(closed)
      port.postMessage(message)
    },
    subscribe: (onMessage, onClose) => {
      const close = () => onClose("the message port closed")
      const exit = (code: number) => onClose(`the worker thread exited with code ${code}`)
      port.on("message", onMessage)
      port.on("close", close)
      port.on("exit", exit)
      if (closed) queueMicrotask(() => onClose(closed!))
      return () => {
        port.off("message", onMessage)
        port.off("close", close)
        port.off("exit", exit)
      }
    }
  }
}

/** The parent's handle on a forked child, or `process` inside the child. */
export type ProcessLike = Pick<ChildProcess, "send" | "connected"> & Emitter

export const fromProcess = (proc: ProcessLike | NodeJS.Process): Channel => {
  const p = proc as ProcessLike
  return {
    send: (message) => {
      if (typeof p.send !== "function" || !p.connected) {
        throw new Error("the IPC channel is closed (or the process was not started with one, e.g. by child_process.fork)")
      }
      // A send that fails after this point shows up as a disconnect, which fails the waiters.
      p.send(message as never, (_err: Error | null) => undefined)
    },
    subscribe: (onMessage, onClose) => {
      const disconnect = () => onClose("the IPC channel disconnected")
      const exit = (code: number | null, signal: string | null) =>
        onClose(`the process exited (${signal ? `signal ${signal}` : `code ${code}`})`)
      p.on("message", onMessage)
      p.on("disconnect", disconnect)
      p.on("exit", exit)
      if (typeof p.send !== "function" || !p.connected) queueMicrotask(disconnect)
      return () => {
        p.off("message", onMessage)
        p.off("disconnect", disconnect)
        p.off("exit", exit)
      }
    }
  }
}
