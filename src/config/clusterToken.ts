/**
 * TALON_CLUSTER_TOKEN, declared once for every component that reads it: the
 * coordinators check the HMAC proof each status carries with it, workers make
 * that proof with it. A secret, so it has no flag (flags show up in `ps`).
 */
import { Redacted } from "effect"
import * as K from "./kinds.js"
import { setting } from "./Setting.js"

export const MIN_CLUSTER_TOKEN_CHARS = 16

export const clusterTokenSetting = setting(K.optional(K.secret), {
  env: "TALON_CLUSTER_TOKEN",
  default: undefined,
  shownDefault: "none",
  help: "The cluster's shared secret, the same on every coordinator and worker: each status a worker sends carries an HMAC-SHA256 made with it (never the token), which coordinators check on every registration and status; at least 16 characters",
  example: "$(openssl rand -hex 32)",
  check: (t) =>
    t === undefined || Redacted.value(t).length >= MIN_CLUSTER_TOKEN_CHARS
      ? undefined
      : `must be at least ${MIN_CLUSTER_TOKEN_CHARS} characters (generate one with \`openssl rand -hex 32\`)`
})
