/**
 * Settings of `talon up` (the local cluster), one declaration each
 * (src/config/Setting.ts): flag > `TALON_UP_*` > config file > default.
 */
import * as K from "../config/kinds.js"
import * as S from "../config/declare.js"
import { component } from "../config/Setting.js"
import { range } from "../config/checks.js"

export interface UpSettings {
  readonly dir: string | undefined
  readonly keep: boolean
  readonly workers: number
  readonly ephemeral: boolean
  readonly pageSize: number | undefined
  readonly colocate: boolean
}

export const UpSchema = component<UpSettings>({
  name: "local cluster",
  summary: "`talon up`: origin stub, coordinator, workers and gateway in one process.",
  prefix: "TALON_UP",
  settings: {
    dir: S.unset(K.text, "Where origin data and cache dirs live (kept)", { shownDefault: "a temp dir removed on exit", example: ".talon" }),
    keep: S.toggle("Keep the temp dir after exit"),
    workers: S.integer(2, "How many workers to start", { example: "3", check: range(1, 64) }),
    ephemeral: S.toggle("Bind every listener on a free port instead of the defaults (9100, 7000/8000, 7001+/8001+)"),
    pageSize: S.unset(K.size, "Worker page size (0 = whole blocks; K/M suffixes)", { shownDefault: "the worker's, 1M", example: "0" }),
    colocate: S.of(K.boolean, true, "The gateway sends blocks resident in this process's workers to clients by sendfile (false: every read goes through the data port, as a separate gateway's)", { example: "false" })
  }
})
