/** The origin stub's per-request context: its state (root, counters, faults) on top of the REST context. */
import type { HttpCtx } from "../http/context.js"
import type { FaultState, RequestKind } from "./faults.js"
import type { StatsCounter } from "./stats.js"
import type { TokenIssuer } from "./tokens.js"

export interface StubState {
  readonly root: string
  readonly stats: StatsCounter
  readonly faults: FaultState
  /** Bearer tokens of the emulated identity endpoints, checked by the GCS front end. */
  readonly tokens: TokenIssuer
  /** Base URL the server answers on, for Azure's ServiceEndpoint attributes. */
  url: string
}

export interface Ctx extends HttpCtx {
  readonly query: URLSearchParams
  readonly state: StubState
  /** Set once the request is classified; faults and stats key on it. */
  kind: RequestKind
  /** Fault injection: reset the connection after this fraction of a GET body. */
  truncateBody?: number
}
