/**
 * An in-process coordinator on ephemeral loopback ports whose members never expire (a heartbeat
 * every 500 ms, a thousand may be missed): a loaded machine can delay heartbeats, and the tests
 * that use it are about something else.
 */
import { Effect, type Layer } from "effect"
import type { BackendStore } from "../../src/backend/BackendStore.js"
import { makeCoordinator } from "../../src/coordinator/Coordinator.js"

export const patientCoordinator = (backend: Layer.Layer<BackendStore>) =>
  makeCoordinator({
    listen: "127.0.0.1:0",
    adminListen: "127.0.0.1:0",
    heartbeatIntervalMs: 500,
    missedHeartbeats: 1000
  }).pipe(Effect.provide(backend))
