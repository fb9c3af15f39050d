/*
 * XXH64 (seed 0) for the worker's per-unit checksums, one-shot and streaming. The worker loads
 * this addon anyway; hashing here keeps WebAssembly (its engine, and the optimizing tier a busy
 * fill reaches) out of the process: xxhash-wasm cost an idle worker ~1.3 MiB of RSS and a loaded
 * one several more (BENCHMARKS.md, "Footprint").
 *
 * Streaming state lives in a Uint8Array(XXH64_STATE_BYTES) the caller owns, so a hash in
 * progress is plain memory with no finalizer: 4 accumulators, the total length, a partial stripe
 * and its length.
 */
#include <string.h>
#include "plane.h"
#include "le_load.h"
#include "xxh64.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

#define XXH64_STATE_BYTES 80

typedef struct {
  uint64_t v[4];
  uint64_t total;
  uint8_t mem[32];
  uint32_t memsize;
  uint32_t pad;
} xxh64_state_t;

_Static_assert(sizeof(xxh64_state_t) == XXH64_STATE_BYTES, "state layout");

static inline uint64_t round64(uint64_t acc, uint64_t input) {
  acc += input * P2;
  acc = rotl64(acc, 31);
  return acc * P1;
}

static inline uint64_t merge64(uint64_t acc, uint64_t v) {
  acc ^= round64(0, v);
  return acc * P1 + P4;
}

/* Consumes whole 32-byte stripes of p[0..len): how many bytes it used. */
static size_t stripes(uint64_t v[4], const uint8_t *p, size_t len) {
  size_t n = len & ~(size_t)31;
  for (size_t i = 0; i < n; i += 32) {
    v[0] = round64(v[0], le_load64(p + i));
    v[1] = round64(v[1], le_load64(p + i + 8));
    v[2] = round64(v[2], le_load64(p + i + 16));
    v[3] = round64(v[3], le_load64(p + i + 24));
  }
  return n;
}

static uint64_t finish(uint64_t h, const uint8_t *p, size_t len) {
  while (len >= 8) {
    h ^= round64(0, le_load64(p));
    h = rotl64(h, 27) * P1 + P4;
    p += 8;
    len -= 8;
  }
  if (len >= 4) {
    h ^= (uint64_t)le_load32(p) * P1;
    h = rotl64(h, 23) * P2 + P3;
    p += 4;
    len -= 4;
  }
  while (len > 0) {
    h ^= (*p++) * P5;
    h = rotl64(h, 11) * P1;
    len--;
  }
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

static uint64_t converge(const uint64_t v[4]) {
  uint64_t h = rotl64(v[0], 1) + rotl64(v[1], 7) + rotl64(v[2], 12) + rotl64(v[3], 18);
  for (int i = 0; i < 4; i++) h = merge64(h, v[i]);
  return h;
}

static void reset(xxh64_state_t *s) {
  memset(s, 0, sizeof(*s));
  s->v[0] = P1 + P2;
  s->v[1] = P2;
  s->v[2] = 0;
  s->v[3] = -P1;
}

uint64_t talon_xxh64(const uint8_t *p, size_t len) {
  uint64_t h;
  size_t used = 0;
  if (len >= 32) {
    uint64_t v[4] = {P1 + P2, P2, 0, -P1};
    used = stripes(v, p, len);
    h = converge(v);
  } else {
    h = P5;
  }
  return finish(h + (uint64_t)len, p + used, len - used);
}

static void update(xxh64_state_t *s, const uint8_t *p, size_t len) {
  s->total += len;
  if (s->memsize + len < 32) {
    memcpy(s->mem + s->memsize, p, len);
    s->memsize += (uint32_t)len;
    return;
  }
  if (s->memsize > 0) {
    size_t fill = 32 - s->memsize;
    memcpy(s->mem + s->memsize, p, fill);
    stripes(s->v, s->mem, 32);
    p += fill;
    len -= fill;
    s->memsize = 0;
  }
  size_t used = stripes(s->v, p, len);
  memcpy(s->mem, p + used, len - used);
  s->memsize = (uint32_t)(len - used);
}

static uint64_t digest(const xxh64_state_t *s) {
  uint64_t h = s->total >= 32 ? converge(s->v) : P5;
  return finish(h + s->total, s->mem, s->memsize);
}

#define CHECK(call) NAPI_CHECK("talon_sendfile", call)

static int arg_state(napi_env env, napi_value v, xxh64_state_t **s) {
  uint8_t *data;
  size_t len;
  if (!arg_bytes(env, v, &data, &len) || len != XXH64_STATE_BYTES || ((uintptr_t)data & 7) != 0) return 0;
  *s = (xxh64_state_t *)data;
  return 1;
}

/* xxh64(bytes: Uint8Array): bigint */
static napi_value Xxh64(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  uint8_t *data;
  size_t len;
  if (argc < 1 || !arg_bytes(env, argv[0], &data, &len)) {
    napi_throw_type_error(env, NULL, "xxh64: expected a Uint8Array");
    return NULL;
  }
  napi_value out;
  CHECK(napi_create_bigint_uint64(env, talon_xxh64(data, len), &out));
  return out;
}

/* xxh64Reset(state: Uint8Array(80), 8-byte aligned): undefined */
static napi_value Xxh64Reset(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  xxh64_state_t *s;
  if (argc < 1 || !arg_state(env, argv[0], &s)) {
    napi_throw_type_error(env, NULL, "xxh64Reset: expected an 8-byte-aligned Uint8Array of 80 bytes");
    return NULL;
  }
  reset(s);
  return NULL;
}

/* xxh64Update(state, bytes: Uint8Array): undefined */
static napi_value Xxh64Update(napi_env env, napi_callback_info info) {
  NAPI_ARGS(2);
  xxh64_state_t *s;
  uint8_t *data;
  size_t len;
  if (argc < 2 || !arg_state(env, argv[0], &s) || !arg_bytes(env, argv[1], &data, &len)) {
    napi_throw_type_error(env, NULL, "xxh64Update: expected (state, Uint8Array)");
    return NULL;
  }
  update(s, data, len);
  return NULL;
}

/* xxh64Digest(state): bigint (the state is left as it was: more updates may follow) */
static napi_value Xxh64Digest(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  xxh64_state_t *s;
  if (argc < 1 || !arg_state(env, argv[0], &s)) {
    napi_throw_type_error(env, NULL, "xxh64Digest: expected an 8-byte-aligned Uint8Array of 80 bytes");
    return NULL;
  }
  napi_value out;
  CHECK(napi_create_bigint_uint64(env, digest(s), &out));
  return out;
}

napi_value xxh64_export(napi_env env, napi_value exports) {
  NAPI_EXPORT("xxh64", Xxh64);
  NAPI_EXPORT("xxh64Reset", Xxh64Reset);
  NAPI_EXPORT("xxh64Update", Xxh64Update);
  NAPI_EXPORT("xxh64Digest", Xxh64Digest);
  return exports;
}
