/**
 * A client with a `tenant` names it on every read (GetRangeTenant, and GetPinnedRangeTenant for
 * a pinned version) against a real worker with per-tenant limits: its reads are charged to it
 * (the worker's per-tenant counters say so), over the limit it gets a typed RateLimited
 * rejection with a retry hint, and a client of another tenant on the same worker is not refused.
 */
import { createHash } from "node:crypto"
import { Either } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { type FetchResult, WorkerPool } from "../../src/client/WorkerPool.js"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import { DataErrorCode, retryAfterMs } from "../../src/protocol/index.js"
import { parsePolicy } from "../../src/worker/tenants/policy.js"
import { pattern, startDirWorker } from "../worker/support/dirBackend.js"
import { makeCleanup } from "../worker/support/harness.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const object: ObjectId = { backend: Backend.S3, bucket: "bkt", objectPath: "t.bin" }
const KiB = 1024

const poolFor = (tenant: string | undefined) => {
  const pool = new WorkerPool({ connectionsPerWorker: 1, requestTimeout: "10 seconds", connectTimeout: "5 seconds", maxRequestBytes: 1024 * KiB, tenant })
  cleanup.add(async () => pool.close())
  return pool
}

const fetchOnce = (pool: WorkerPool, address: string, version?: string) =>
  new Promise<FetchResult>((resolve) => pool.fetch(address, object, 0, 4 * KiB, resolve, version))

describe("TalonClient tenant", () => {
  it("sends the tenant on every read; over its limit it is RateLimited, another tenant is not", async () => {
    const policy = Either.getOrThrow(
      parsePolicy(JSON.stringify({ enabled: true, default: { read_iops: { rate: 0.001, burst_ratio: 4000 } }, overrides: { free: { read_iops: { rate: 1e9 } } } }))
    )
    const { w, put } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 0, rateLimits: policy })
    const data = pattern(64 * KiB, 3)
    await put("t.bin", data)
    const version = createHash("md5").update(data).digest("hex")
    const address = `127.0.0.1:${w.worker.dataPort}`
    const capped = poolFor("capped")
    const free = poolFor("free")

    const outcomes: Array<string> = []
    for (let i = 0; i < 8; i++) {
      const r = await fetchOnce(capped, address, i % 2 === 0 ? undefined : version)
      if (r.ok) {
        expect(Buffer.concat(r.payload.views).equals(data.subarray(0, 4 * KiB))).toBe(true)
        r.payload.release()
        outcomes.push("ok")
      } else {
        expect(r.error._tag).toBe("WorkerRejected")
        if (r.error._tag === "WorkerRejected") {
          expect(r.error.code).toBe(DataErrorCode.RateLimited)
          expect(retryAfterMs(r.error.detail)).toBeGreaterThan(0)
        }
        outcomes.push("limited")
      }
      const other = await fetchOnce(free, address, i % 2 === 0 ? version : undefined)
      expect(other.ok).toBe(true)
      if (other.ok) other.payload.release()
    }
    expect(outcomes).toEqual(["ok", "ok", "ok", "ok", "limited", "limited", "limited", "limited"])

    const metrics = await (await fetch(`http://127.0.0.1:${w.worker.adminPort}/metrics`)).text()
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="capped",outcome="admitted"} 4`)
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="capped",outcome="rate_limited"} 4`)
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="free",outcome="admitted"} 8`)
    // Nothing was charged to untagged reads: the tenant went on every frame, pinned ones included.
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="unattributed",outcome="admitted"} 0`)
  })
})
