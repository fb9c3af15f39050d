# Every recipe also exists as an `npm run` script.
set positional-arguments

default:
    @just --list

# Install exactly what package-lock.json pins.
install:
    npm ci

test:
    npm test

typecheck:
    npx tsc --noEmit

# Microbenchmarks -> bench/results/latest.json
bench *args:
    npx tsx scripts/bench.ts run "$@"

# Promote bench/results/latest.json to bench/baselines/NAME.json
bench-save name:
    npx tsx scripts/bench.ts save "$1"

# Compare latest results to a baseline: [-p AREA] [--threshold N] [--soft]
bench-check *args:
    npx tsx scripts/bench.ts check "$@"

# Start the embedded local cluster.
up *args:
    node bin/talon.mjs up "$@"
