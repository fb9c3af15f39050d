/**
 * TALON_ADMIN_TOKEN, declared once for every component that serves or calls the admin API:
 * with it set, coordinators and workers demand `Authorization: Bearer <token>` on every admin
 * route but /healthz, /readyz and /metrics, and `talon cluster`, the mount and prefetch send
 * it. A secret, so it has no flag (flags show up in `ps`).
 */
import { Redacted } from "effect"
import * as K from "./kinds.js"
import { setting } from "./Setting.js"

/** Talon's floor for its management bearer token. */
export const MIN_ADMIN_TOKEN_CHARS = 16

export const adminTokenSetting = setting(K.optional(K.secret), {
  env: "TALON_ADMIN_TOKEN",
  aliases: ["TALON_COORDINATOR_AUTH_TOKEN"],
  default: undefined,
  shownDefault: "none: the admin API is open",
  help: "Bearer token the admin API (/api/v1/*, /ui) demands as `Authorization: Bearer <token>`; /healthz, /readyz and /metrics stay open; clients send it too; at least 16 characters",
  example: "$(openssl rand -hex 32)",
  check: (t) =>
    t === undefined || Redacted.value(t).length >= MIN_ADMIN_TOKEN_CHARS
      ? undefined
      : `must be at least ${MIN_ADMIN_TOKEN_CHARS} characters (generate one with \`openssl rand -hex 32\`)`
})

/** The header a client sends the token in, or none. */
export const adminAuthHeaders = (token: Redacted.Redacted<string> | undefined): Record<string, string> =>
  token === undefined ? {} : { authorization: `Bearer ${Redacted.value(token)}` }
