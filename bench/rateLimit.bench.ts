import { TenantLimiter } from "../src/worker/tenants/TenantLimiter.js"
import { benchBatched } from "./batch.js"

/*
 * The per-request cost of the worker's tenant limiter (TenantLimiter.admit: one Map lookup,
 * one clock read, one or two GCRA meters), as Talon's rate_limit_benches measures its own.
 * Rates are high enough that every charge is admitted, so each call takes the full path.
 */
const high = { rate: 1e15, burstRatio: 1 }
const now = () => performance.now()

// Enabled, but the tenant has no limits: the lookup and counters only.
const unlimited = new TenantLimiter({ enabled: true, default: {}, overrides: {} }, now)
benchBatched("admit_unlimited_tenant", 4096, () => unlimited.admit("acme", 65536))

const iops = new TenantLimiter({ enabled: true, default: { readIops: high }, overrides: {} }, now)
benchBatched("admit_iops_only", 4096, () => iops.admit("acme", 65536))

const both = new TenantLimiter({ enabled: true, default: { readIops: high, readThroughput: high }, overrides: {} }, now)
benchBatched("admit_iops_and_throughput", 4096, () => both.admit("acme", 65536))

// Untagged reads (types 2 and 6) go to the unattributed record without a lookup.
benchBatched("admit_unattributed", 4096, () => both.admit(undefined, 65536))

for (const tenants of [1, 64, 1024]) {
  const many = new TenantLimiter({ enabled: true, default: { readIops: high, readThroughput: high }, overrides: {} }, now)
  const names = Array.from({ length: tenants }, (_, i) => `tenant-${i}`)
  let turn = 0
  benchBatched(`admit_across_tenants/${tenants}`, 4096, () => many.admit(names[turn++ % tenants], 65536))
}
