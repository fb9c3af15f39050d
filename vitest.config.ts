import { defineConfig } from "vitest/config"

/**
 * In-process test files (no child process, native addon or process-wide handler) that pass sharing
 * one module graph. They run first, in two worker threads without per-file isolation: an isolated
 * file costs a fresh process that imports effect and src/ again, ~2 s of CPU each on a loaded
 * 2-core box against a fraction of that shared (38 such files: 93 s of CPU isolated, 17-25 s
 * shared). Everything else, and every new file, runs isolated in its own fork as before; a file
 * joins this list only after it passes here (test/mount/Filesystem.test.ts does not: its
 * TestClock is not the one it adjusts once effect's modules are shared).
 */
const SHARED = [
  "test/actor/later.test.ts",
  "test/actor/readme.test.ts",
  "test/bench/compare.test.ts",
  "test/bench/mixed.test.ts",
  "test/bench/mount.test.ts",
  "test/cluster/colocate.test.ts",
  "test/cluster/workerEnv.test.ts",
  "test/config/declare.test.ts",
  "test/config/talonNames.test.ts",
  "test/coordinator/admin.test.ts",
  "test/coordinator/listLimits.test.ts",
  "test/coordinator/registryView.test.ts",
  "test/coordinator/state/memory.test.ts",
  "test/coordinator/state/rules.test.ts",
  "test/coordinator/viaWorker.test.ts",
  "test/core/bitmap.test.ts",
  "test/core/geometry.test.ts",
  "test/core/size.test.ts",
  "test/core/version.test.ts",
  "test/layering.test.ts",
  "test/loadgen/options.test.ts",
  "test/loadgen/stat.test.ts",
  "test/mount/InodeTable.test.ts",
  "test/mount/admin.test.ts",
  "test/mount/cluster.test.ts",
  "test/mount/listing.test.ts",
  "test/mount/mountpoint.test.ts",
  "test/origin/azureSdk.test.ts",
  "test/origin/expiry.test.ts",
  "test/origin/pure.test.ts",
  "test/origin/userMetadata.test.ts",
  "test/placement/maglev.vectors.test.ts",
  "test/placement/sha256.gen.test.ts",
  "test/placement/sha256.test.ts",
  "test/protocol/bincodeSchema.test.ts",
  "test/protocol/cached.test.ts",
  "test/protocol/conformance-drift.test.ts",
  "test/protocol/conformance.test.ts",
  "test/protocol/loadAck.test.ts",
  "test/transport/address.test.ts",
  "test/worker/checksum.test.ts",
  "test/worker/fetchRun.test.ts",
  "test/worker/fillActors.test.ts",
  "test/worker/objectIdCache.test.ts",
  "test/worker/server/loads.test.ts",
  "test/worker/store.test.ts",
  "test/worker/tenants/limiter.test.ts",
  "test/worker/versionCache.test.ts",
]

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: process-heavy suites (clusters, SDK suites) contend if run all at once.
    poolOptions: {
      forks: { maxForks: 2, minForks: 1 },
      threads: { maxThreads: 2, minThreads: 1, isolate: false }
    },
    // Workers, coordinators and gateways built in-process log their start-up at INFO through
    // Effect's default logger (one stdout block per line in the report); warnings and errors
    // still print.
    onConsoleLog: (log) => !/^timestamp=\S+ level=(INFO|DEBUG|TRACE) /.test(log),
    benchmark: { include: ["bench/**/*.bench.ts"] },
    projects: [
      { extends: true, test: { name: "shared", include: SHARED, pool: "threads", sequence: { groupOrder: 0 } } },
      { extends: true, test: { name: "isolated", include: ["test/**/*.test.ts"], exclude: SHARED, pool: "forks", sequence: { groupOrder: 1 } } }
    ]
  }
})
