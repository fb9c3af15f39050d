import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Two cores: process-heavy suites (clusters, SDK suites) contend if run all at once.
    pool: "forks",
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
    benchmark: { include: ["bench/**/*.bench.ts"] }
  }
})
