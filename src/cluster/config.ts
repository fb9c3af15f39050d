/**
 * Settings of `talon up` (the local cluster), one declaration each
 * (src/config/Setting.ts): flag > `TALON_UP_*` > config file > default.
 */
import * as K from "../config/kinds.js"
import { component, setting } from "../config/Setting.js"

export interface UpSettings {
  readonly dir: string | undefined
  readonly keep: boolean
  readonly workers: number
  readonly ephemeral: boolean
  readonly pageSize: number | undefined
}

export const UpSchema = component<UpSettings>({
  name: "local cluster",
  summary: "`talon up`: origin stub, coordinator, workers and gateway in one process.",
  settings: {
    dir: setting(K.optional(K.text), {
      env: "TALON_UP_DIR",
      flag: "dir",
      default: undefined,
      shownDefault: "a temp dir removed on exit",
      help: "Where origin data and cache dirs live (kept)",
      example: ".talon"
    }),
    keep: setting(K.boolean, {
      env: "TALON_UP_KEEP",
      flag: "keep",
      presence: true,
      default: false,
      help: "Keep the temp dir after exit",
      example: "true"
    }),
    workers: setting(K.integer, {
      env: "TALON_UP_WORKERS",
      flag: "workers",
      default: 2,
      help: "How many workers to start",
      example: "3",
      check: (n) => (n >= 1 && n <= 64 ? undefined : "must be in 1..64")
    }),
    ephemeral: setting(K.boolean, {
      env: "TALON_UP_EPHEMERAL",
      flag: "ephemeral",
      presence: true,
      default: false,
      help: "Bind every listener on a free port instead of the defaults (9100, 7000/8000, 7001+/8001+)",
      example: "true"
    }),
    pageSize: setting(K.optional(K.size), {
      env: "TALON_UP_PAGE_SIZE",
      flag: "page-size",
      default: undefined,
      shownDefault: "the worker's, 1M",
      help: "Worker page size (0 = whole blocks; K/M suffixes)",
      example: "0"
    })
  }
})
