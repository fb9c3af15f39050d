/**
 * The cluster's cache capacity, from the coordinator's admin API (`GET /api/v1/cluster`):
 * the sum of what each worker in placement last reported in its status.
 */
import { FetchHttpClient, HttpClient } from "@effect/platform"
import { Effect, type Redacted } from "effect"
import { adminAuthHeaders } from "../config/adminToken.js"
import type { ClusterStatus } from "../protocol/clusterStatus.js"
import { CapacityUnknown } from "./prefetchErrors.js"

export interface ClusterCapacity {
  readonly capacityBytes: number
  readonly residentBytes: number
  readonly workers: number
}

export const clusterCapacity = (admin: string, token?: Redacted.Redacted<string>, timeoutMs = 5000): Effect.Effect<ClusterCapacity, CapacityUnknown> => {
  const unknown = (detail: string) => new CapacityUnknown({ admin, detail })
  return HttpClient.get(`http://${admin}/api/v1/cluster`, { headers: adminAuthHeaders(token) }).pipe(
    Effect.filterOrFail(
      (res) => res.status === 200,
      (res) => unknown(`GET /api/v1/cluster answered HTTP ${res.status}`)
    ),
    Effect.flatMap((res) => res.json),
    Effect.timeoutFail({ duration: `${timeoutMs} millis`, onTimeout: () => unknown(`no answer within ${timeoutMs} ms`) }),
    Effect.mapError((e) => (e instanceof CapacityUnknown ? e : unknown(e.message))),
    Effect.flatMap((body) => {
      const members = (body as Partial<ClusterStatus>).members
      if (!Array.isArray(members)) return Effect.fail(unknown("the reply has no members list"))
      if (members.length === 0) return Effect.fail(unknown("the cluster has no worker in placement"))
      if (members.some((m) => typeof m.capacityBytes !== "number")) {
        return Effect.fail(unknown("this coordinator does not report worker capacity (an older version)"))
      }
      return Effect.succeed({
        capacityBytes: members.reduce((n, m) => n + (m.capacityBytes ?? 0), 0),
        residentBytes: members.reduce((n, m) => n + (m.residentBytes ?? 0), 0),
        workers: members.length
      })
    }),
    Effect.provide(FetchHttpClient.layer)
  )
}
