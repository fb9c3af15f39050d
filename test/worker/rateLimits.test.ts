/**
 * Per-tenant rate limits over real sockets, on the portable plane and the default one (native
 * where it builds, with its hit table, which must not answer limited untagged reads): a tenant
 * over its limit gets Talon's typed RateLimited (with a retry hint) while another tenant on the
 * same worker, interleaved on the same connection, is served every read; untagged reads (types
 * 2 and 6) are charged to the default; a byte-rate limit refuses on read_throughput; /metrics
 * counts it all. Limits refill over hours, so the counts cannot depend on how fast this runs.
 */
import { createHash } from "node:crypto"
import { afterEach, describe, expect, it } from "vitest"
import { Backend, type ObjectId } from "../../src/core/ids.js"
import {
  DataErrorCode,
  decodeErrorPayload,
  encodeFrame,
  encodeGetCachedRangeFrame,
  encodeGetRangeFrame,
  encodeTenantScopedRange,
  Flags,
  type Frame,
  MsgType,
  retryAfterMs,
  BincodeWriter,
  writeObjectId
} from "../../src/protocol/index.js"
import { Sendfile } from "../../src/worker/plane/Sendfile.js"
import { ServeMode } from "../../src/worker/server/ServeMode.js"
import { parsePolicy } from "../../src/worker/tenants/policy.js"
import { pattern, startDirWorker } from "./support/dirBackend.js"
import { makeCleanup } from "./support/harness.js"
import { connect } from "./support/rawClient.js"

const cleanup = makeCleanup()
afterEach(() => cleanup.run())

const KiB = 1024
const obj = (key: string): ObjectId => ({ backend: Backend.S3, bucket: "bkt", objectPath: key })

// A burst of N and a refill of one unit per 1000 s: nothing refills while the test runs.
const policy = parsePolicy(
  JSON.stringify({
    enabled: true,
    default: { read_iops: { rate: 0.001, burst_ratio: 3000 } },
    overrides: {
      heavy: { read_iops: { rate: 0.001, burst_ratio: 5000 } },
      light: { read_iops: { rate: 1e9 } },
      bytes: { read_throughput: { rate: 1, burst_ratio: 100_000 } }
    }
  })
)
if (policy._tag === "Left") throw new Error(policy.left)

const tenantFrame = (requestId: number, tenant: string, object: ObjectId, offset: number, len: number) =>
  encodeFrame(MsgType.GetRangeTenant, requestId, encodeTenantScopedRange({ tenant: { _tag: "Named", name: tenant }, request: { object, offset, len } }))

type Outcome = { readonly ok: true; readonly bytes: Buffer } | { readonly ok: false; readonly code: number; readonly message: string }
const outcome = (f: Frame): Outcome => {
  expect(f.header.type).toBe(MsgType.GetRange)
  if ((f.header.flags & Flags.Error) === 0) return { ok: true, bytes: Buffer.from(f.payload) }
  const e = decodeErrorPayload(f.payload)
  return { ok: false, code: e.code, message: e.message }
}

describe.each([
  ["portable", Sendfile.Portable],
  ["auto", Sendfile.Auto]
] as const)("per-tenant rate limits on the %s plane", (_name, plane) => {
  it("limits the heavy tenant without slowing the light one; untagged reads count against the default", async () => {
    const { w, put } = await startDirWorker(cleanup, { blockSize: 64 * KiB, pageSize: 0, versionTtlMs: 600_000, rateLimits: policy.right }, ServeMode.Pipelined, plane)
    const data = pattern(256 * KiB, 9)
    await put("a.bin", data)
    const c = await connect(w.worker.dataPort)
    const slice = (offset: number) => data.subarray(offset, offset + 4 * KiB)

    // Interleaved on one connection: heavy (burst 5) and light (unlimited), 20 reads each.
    const seen = { heavy: { ok: 0, limited: 0 }, light: { ok: 0, limited: 0 } }
    for (let i = 0; i < 20; i++) {
      for (const tenant of ["heavy", "light"] as const) {
        const offset = (i % 8) * 4 * KiB
        c.send(tenantFrame(i * 2 + (tenant === "heavy" ? 0 : 1), tenant, obj("a.bin"), offset, 4 * KiB))
        const o = outcome(await c.next())
        if (o.ok) {
          expect(o.bytes.equals(slice(offset))).toBe(true)
          seen[tenant].ok++
        } else {
          expect(o.code).toBe(DataErrorCode.RateLimited)
          expect(o.message).toMatch(/^tenant rate limit exceeded on read_iops; retry after \d+ ms$/)
          // One unit per 1000 s: the hint says about that long.
          expect(retryAfterMs(o.message)).toBeGreaterThan(900_000)
          seen[tenant].limited++
        }
      }
    }
    expect(seen).toEqual({ heavy: { ok: 5, limited: 15 }, light: { ok: 20, limited: 0 } })

    // Untagged: GetRange (2) and GetCachedRange (6) share the unattributed tenant's burst of 3,
    // repeated hits included (which the native hit table would otherwise answer itself).
    const untagged: Array<boolean> = []
    for (let i = 0; i < 6; i++) {
      c.send(i % 2 === 0
        ? encodeGetRangeFrame(100 + i, { object: obj("a.bin"), offset: 0, len: 4 * KiB })
        : encodeGetCachedRangeFrame(100 + i, { object: obj("a.bin"), version: createHash("md5").update(data).digest("hex"), offset: 0, len: 4 * KiB }))
      const o = outcome(await c.next())
      if (!o.ok) expect(o.code).toBe(DataErrorCode.RateLimited)
      untagged.push(o.ok)
    }
    expect(untagged).toEqual([true, true, true, false, false, false])
    // Get (type 1) is untagged too: refused in a Get frame carrying the typed error.
    const id = new BincodeWriter(64)
    writeObjectId(id, obj("a.bin"))
    c.send(encodeFrame(MsgType.Get, 150, id.finish()))
    const whole = await c.next()
    expect(whole.header).toMatchObject({ type: MsgType.Get, requestId: 150, flags: Flags.Error })
    expect(decodeErrorPayload(whole.payload).code).toBe(DataErrorCode.RateLimited)

    // A byte-rate limit (100,000 B of burst): one 64 KiB read fits, the next does not.
    c.send(tenantFrame(200, "bytes", obj("a.bin"), 0, 64 * KiB))
    expect(outcome(await c.next()).ok).toBe(true)
    c.send(tenantFrame(201, "bytes", obj("a.bin"), 64 * KiB, 64 * KiB))
    const refused = outcome(await c.next())
    expect(refused).toMatchObject({ ok: false, code: DataErrorCode.RateLimited })
    expect(refused.ok ? "" : refused.message).toContain("read_throughput")
    // Still unlimited for light, on the same connection.
    c.send(tenantFrame(202, "light", obj("a.bin"), 0, 4 * KiB))
    expect(outcome(await c.next()).ok).toBe(true)

    const metrics = await (await fetch(`http://127.0.0.1:${w.worker.adminPort}/metrics`)).text()
    expect(metrics).toContain(`talon_worker_rate_limited_total{metric="read_iops"} 19`)
    expect(metrics).toContain(`talon_worker_rate_limited_total{metric="read_throughput"} 1`)
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="heavy",outcome="rate_limited"} 15`)
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="light",outcome="admitted"} 21`)
    expect(metrics).toContain(`talon_worker_tenant_requests_total{tenant="unattributed",outcome="admitted"} 3`)
    expect(metrics).toContain(`talon_worker_tenant_bytes_total{tenant="bytes"} ${64 * KiB}`)
  })
})
