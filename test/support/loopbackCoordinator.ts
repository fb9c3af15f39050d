/** In-process coordinators for tests, on ephemeral loopback ports over a given backend. */
import { Effect, type Layer } from "effect"
import type { BackendStore } from "../../src/backend/BackendStore.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"
import type { CoordinatorOptions } from "../../src/coordinator/config.js"

/** A coordinator with `settings` over `backend`, listening on 127.0.0.1:0 (control and admin). */
export const loopbackCoordinator = (backend: Layer.Layer<BackendStore>, settings: Partial<CoordinatorOptions> = {}) =>
  makeCoordinator({ listen: "127.0.0.1:0", adminListen: "127.0.0.1:0", ...settings }).pipe(Effect.provide(backend))

/**
 * One whose members never expire (a heartbeat every 500 ms, a thousand may be missed): a loaded
 * machine can delay heartbeats, and the tests that use it are about something else.
 */
export const patientCoordinator = (backend: Layer.Layer<BackendStore>) =>
  loopbackCoordinator(backend, { heartbeatIntervalMs: 500, missedHeartbeats: 1000 })
