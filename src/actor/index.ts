/**
 * Typed actors: `Actor.make` (a fiber, its state and a bounded mailbox), `Supervision`
 * (restarts on a Schedule), `Remote` (the same reference across a MessagePort or child IPC).
 */
export * as Actor from "./Actor.js"
export type { ActorOptions, ActorRef, AnyMessage, Failure, Handlers, Reply } from "./Actor.js"
export * as Channel from "./Channel.js"
export * from "./errors.js"
export * as Remote from "./Remote.js"
export * as Supervision from "./Supervision.js"
export { SupervisionEvent } from "./Supervision.js"
