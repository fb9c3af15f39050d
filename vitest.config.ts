import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: process-heavy suites (clusters, SDK suites) contend if run all at once.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    // Workers, coordinators and gateways built in-process log their start-up at INFO through
    // Effect's default logger (one stdout block per line in the report); warnings and errors
    // still print.
    onConsoleLog: (log) => !/^timestamp=\S+ level=(INFO|DEBUG|TRACE) /.test(log),
    benchmark: { include: ["bench/**/*.bench.ts"] }
  }
})
