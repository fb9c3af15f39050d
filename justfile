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
    npx tsx bench/micro.ts run "$@"

# Promote bench/results/latest.json to bench/baselines/NAME.json
bench-save name:
    npx tsx bench/micro.ts save "$1"

# Compare latest results to a baseline: [-p AREA] [--threshold N] [--soft]
bench-check *args:
    npx tsx bench/micro.ts check "$@"

# Start the embedded local cluster.
up *args:
    ./bin/talon.mjs up "$@"

# Run one component (each accepts --help).
origin *args:
    ./bin/talon.mjs origin "$@"

coordinator *args:
    ./bin/talon.mjs coordinator "$@"

worker *args:
    ./bin/talon.mjs worker "$@"

gateway *args:
    ./bin/talon.mjs gateway "$@"

loadgen *args:
    ./bin/talon.mjs loadgen "$@"

# Render bench/data/*.json into docs/assets/bench/*.svg and BENCHMARKS.md tables (--check: fail when stale).
bench-charts *args:
    npx tsx bench/bench-charts.ts "$@"

# Render docs/configuration.md from the settings' declarations (--check: fail when stale).
config-docs *args:
    npx tsx scripts/config-docs.ts "$@"

# Native vs portable, pipelined vs multiplexed, 1 vs 2 loops, against the C ceiling server (C pound client; tools/ref where ../shared is absent).
dataplane-bench *args:
    npx tsx bench/dataplane-bench.ts "$@"

# The same arms driven by our own loadgen, swept over connection counts.
dataplane-loadtest *args:
    npx tsx bench/dataplane-loadtest.ts "$@"

# Proof that loadgen is not the bottleneck: loadgen vs C pound against the ceiling server.
loadgen-vs-pound *args:
    npx tsx bench/loadgen-vs-pound.ts "$@"

# Per-call cost of the native data plane's syscalls.
plane-measure:
    taskset -c 0 npx tsx bench/plane-measure.ts

# Gateway runtime under controlled delays, and the slow-consumer RSS run (JSON Lines).
gateway-bench *args:
    npx tsx bench/gateway-bench.ts "$@"

# Cold sequential reads through one worker (miss path, read-ahead) vs direct origin reads (JSON Lines).
miss-path-bench *args:
    npx tsx bench/miss-path.ts "$@"
# CPU ns per filled byte of one worker's cluster process and of its reader, alternating with direct origin reads.
miss-path-cpu *args:
    npx tsx bench/miss-path/cpu.ts "$@"

# CPU per byte of the fill's disk writes, per way of writing (bare process)
miss-path-write-cost *args:
    npx tsx bench/miss-path/write-cost.ts "$@"

# Client/gateway read-ahead before vs after on cold objects over a slow origin stub
readahead-bench *args:
    npx tsx bench/readahead-bench.ts "$@"

# Reads through `talon mount` vs TalonClient in-process vs the gateway (dd, fio), paired order-swapped; --quick for a short run.
mount-bench *args:
    npx tsx bench/mount-bench.ts "$@"

# S3/Azure x cache/origin routes + a control arm, paired order-swapped rounds.
gateway-proxy-bench *args:
    npx tsx bench/gateway-proxy-bench.ts "$@"

# talon gateway's cache route vs nginx proxy_cache + slice 1m, warm 64K/1M/8M/whole-object GETs (needs nginx: apt-get install nginx-light).
gateway-nginx-bench *args:
    npx tsx bench/gateway-nginx-bench.ts "$@"

# node:http serving warm ranges of a file: body copied through JS vs sendfile by the native addon (prints only).
gateway-body-probe *args:
    npx tsx bench/gateway-body-probe.ts "$@"

# The first epoch: cold/warm reads via TalonClient and the gateway vs the origin directly (--quick: a few minutes).
cold-bench *args:
    npx tsx bench/cold-bench.ts "$@"

# Pipelined vs multiplexed serve mode under mixed cache hits and origin misses (--quick).
mixed-bench *args:
    npx tsx bench/mixed-bench.ts "$@"

# The FUSE binding's own cost: dd through a mount served from memory (JSON Lines; needs /dev/fuse).
fuse-bench *args:
    npx tsx bench/fuse-binding.ts "$@"

# Page-fill cost with and without fsync, hashing speed, verify and size-check cost of the durable store.
store-durability *args:
    npx tsx bench/store-durability.ts "$@"

# Hosts as network namespaces on tc-shaped links (root, Linux): cross-node throughput vs the C reference server, and the HA scenarios; services from deploy/docker-compose.yml.
multihost *args:
    npx tsx bench/multihost.ts "$@"

# RSS per process idle, under load and after abuse, and CLI start-up times -> bench/data/footprint.json.
footprint *args:
    npx tsx bench/footprint.ts "$@"
