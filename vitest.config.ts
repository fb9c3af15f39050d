import * as os from "node:os"
import * as path from "node:path"
import { defineConfig } from "vitest/config"

/**
 * In-process test files (no child process, native addon, process-wide handler or TestClock) that
 * pass sharing one module graph. They run first, in two worker threads without per-file isolation:
 * an isolated file costs a fresh process that imports effect and src/ again, ~2 s of CPU each on
 * a loaded 2-core box (48 such files: 128 s of CPU isolated, 25 s shared). Everything else, and
 * every new file, runs isolated in its own fork as before. A file joins this list only after it
 * passes here, and no file that runs on the TestClock (it.effect, it.scoped) may: with effect's
 * modules shared, some found a Clock that was not the TestClock they adjusted.
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
  "test/coordinator/admin.test.ts",
  "test/coordinator/listLimits.test.ts",
  "test/coordinator/registryView.test.ts",
  "test/coordinator/state/rules.test.ts",
  "test/core/bitmap.test.ts",
  "test/core/geometry.test.ts",
  "test/core/size.test.ts",
  "test/core/version.test.ts",
  "test/layering.test.ts",
  "test/loadgen/options.test.ts",
  "test/loadgen/stat.test.ts",
  "test/mount/InodeTable.test.ts",
  "test/mount/cluster.test.ts",
  "test/mount/listing.test.ts",
  "test/origin/azureSdk.test.ts",
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
    // Processes the tests start through bin/talon.mjs keep their V8 code cache in a temp dir, not
    // in the user's ~/.cache/talon; a test that checks the cache sets its own dir.
    env: { TALON_CODE_CACHE_DIR: path.join(os.tmpdir(), "talon-test-code-cache") },
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
