import * as os from "node:os"
import * as path from "node:path"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: process-heavy suites (clusters, SDK suites) contend if run all at once.
    pool: "forks",
    // Processes the tests start through bin/talon.mjs keep their V8 code cache in a temp dir, not
    // in the user's ~/.cache/talon; a test that checks the cache sets its own dir.
    env: { TALON_CODE_CACHE_DIR: path.join(os.tmpdir(), "talon-test-code-cache") },
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // Workers, coordinators and gateways built in-process log their start-up at INFO through
    // Effect's default logger (one stdout block per line in the report); warnings and errors
    // still print.
    onConsoleLog: (log) => !/^timestamp=\S+ level=(INFO|DEBUG|TRACE) /.test(log),
    benchmark: { include: ["bench/**/*.bench.ts"] }
  }
})
