/**
 * The client's resolved settings as a service, so each part of the client
 * (coordinators, membership, stats, workers, reader) reads the same values.
 */
import { Context, Layer } from "effect"
import { resolveClientOptions, type TalonClientOptions } from "./config.js"

export class ClientConfig extends Context.Tag("talon/client/ClientConfig")<ClientConfig, TalonClientOptions>() {
  /** Explicit options over `TALON_CLIENT_*` over the defaults. */
  static readonly layer = (explicit: Partial<TalonClientOptions> = {}) => Layer.effect(ClientConfig, resolveClientOptions(explicit))
}
