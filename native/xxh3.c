/*
 * XXH3-64 (seed 0, default secret), one-shot: the hash of Talon's membership epoch
 * (src/coordinator/state/epoch.ts), which must equal Talon's and hash-wasm's bit for bit
 * (test/coordinator/epochHash.test.ts checks it against hash-wasm over every size class).
 * Hashing here keeps WebAssembly's engine out of the coordinator, as native/xxh64.c did for the
 * worker's checksums: an idle coordinator otherwise carries it for one small hash per
 * membership change. Portable scalar code only: a membership is a few KiB at most.
 */
#include <string.h>
#include "plane.h"
#include "le_load.h"

#define P32_1 0x9E3779B1U
#define P32_2 0x85EBCA77U
#define P32_3 0xC2B2AE3DU
#define P64_1 0x9E3779B185EBCA87ULL
#define P64_2 0xC2B2AE3D27D4EB4FULL
#define P64_3 0x165667B19E3779F9ULL
#define P64_4 0x85EBCA77C2B2AE63ULL
#define P64_5 0x27D4EB2F165667C5ULL
#define MX1 0x165667919E3779F9ULL
#define MX2 0x9FB21C651E98DF25ULL

#define SECRET_BYTES 192
#define STRIPE 64
#define STRIPES_PER_BLOCK ((SECRET_BYTES - STRIPE) / 8)
#define BLOCK (STRIPE * STRIPES_PER_BLOCK)

/* The specification's default secret (XXH3's kSecret). */
static const uint8_t SECRET[SECRET_BYTES] = {
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
  0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
  0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
  0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
  0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
  0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
  0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
  0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
  0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
  0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
  0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
  0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

/* The 128-bit product's halves xor-ed. */
static inline uint64_t fold(uint64_t a, uint64_t b) {
  unsigned __int128 m = (unsigned __int128)a * b;
  return (uint64_t)m ^ (uint64_t)(m >> 64);
}

static inline uint64_t avalanche64(uint64_t h) {
  h ^= h >> 33;
  h *= P64_2;
  h ^= h >> 29;
  h *= P64_3;
  return h ^ (h >> 32);
}

static inline uint64_t avalanche3(uint64_t h) {
  h ^= h >> 37;
  h *= MX1;
  return h ^ (h >> 32);
}

static inline uint64_t rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= MX2;
  h ^= (h >> 35) + len;
  h *= MX2;
  return h ^ (h >> 28);
}

static inline uint64_t mix16(const uint8_t *p, const uint8_t *s) {
  return fold(le_load64(p) ^ le_load64(s), le_load64(p + 8) ^ le_load64(s + 8));
}

static uint64_t upto16(const uint8_t *p, size_t len) {
  if (len > 8) {
    uint64_t lo = le_load64(p) ^ (le_load64(SECRET + 24) ^ le_load64(SECRET + 32));
    uint64_t hi = le_load64(p + len - 8) ^ (le_load64(SECRET + 40) ^ le_load64(SECRET + 48));
    return avalanche3((uint64_t)len + __builtin_bswap64(lo) + hi + fold(lo, hi));
  }
  if (len >= 4) {
    uint64_t in = (uint64_t)le_load32(p + len - 4) + ((uint64_t)le_load32(p) << 32);
    return rrmxmx(in ^ (le_load64(SECRET + 8) ^ le_load64(SECRET + 16)), len);
  }
  if (len > 0) {
    uint32_t combined = ((uint32_t)p[0] << 16) | ((uint32_t)p[len >> 1] << 24) | (uint32_t)p[len - 1] | ((uint32_t)len << 8);
    return avalanche64((uint64_t)combined ^ (uint64_t)(le_load32(SECRET) ^ le_load32(SECRET + 4)));
  }
  return avalanche64(le_load64(SECRET + 56) ^ le_load64(SECRET + 64));
}

static uint64_t upto128(const uint8_t *p, size_t len) {
  uint64_t acc = (uint64_t)len * P64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) {
        acc += mix16(p + 48, SECRET + 96);
        acc += mix16(p + len - 64, SECRET + 112);
      }
      acc += mix16(p + 32, SECRET + 64);
      acc += mix16(p + len - 48, SECRET + 80);
    }
    acc += mix16(p + 16, SECRET + 32);
    acc += mix16(p + len - 32, SECRET + 48);
  }
  acc += mix16(p, SECRET);
  acc += mix16(p + len - 16, SECRET + 16);
  return avalanche3(acc);
}

static uint64_t upto240(const uint8_t *p, size_t len) {
  uint64_t acc = (uint64_t)len * P64_1;
  size_t rounds = len / 16;
  for (size_t i = 0; i < 8; i++) acc += mix16(p + 16 * i, SECRET + 16 * i);
  acc = avalanche3(acc);
  /* Rounds past the eighth take the secret again from byte 3; the last 16 bytes from 136 - 17. */
  for (size_t i = 8; i < rounds; i++) acc += mix16(p + 16 * i, SECRET + 16 * (i - 8) + 3);
  acc += mix16(p + len - 16, SECRET + 136 - 17);
  return avalanche3(acc);
}

static inline void stripe(uint64_t acc[8], const uint8_t *p, const uint8_t *s) {
  for (int i = 0; i < 8; i++) {
    uint64_t v = le_load64(p + 8 * i);
    uint64_t k = v ^ le_load64(s + 8 * i);
    acc[i ^ 1] += v;
    acc[i] += (k & 0xFFFFFFFFULL) * (k >> 32);
  }
}

static inline void scramble(uint64_t acc[8], const uint8_t *s) {
  for (int i = 0; i < 8; i++) {
    uint64_t a = acc[i];
    a ^= a >> 47;
    a ^= le_load64(s + 8 * i);
    acc[i] = a * P32_1;
  }
}

static uint64_t longer(const uint8_t *p, size_t len) {
  uint64_t acc[8] = {P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1};
  size_t blocks = (len - 1) / BLOCK;
  for (size_t b = 0; b < blocks; b++) {
    for (size_t n = 0; n < STRIPES_PER_BLOCK; n++) stripe(acc, p + b * BLOCK + n * STRIPE, SECRET + n * 8);
    scramble(acc, SECRET + SECRET_BYTES - STRIPE);
  }
  /* The last block's whole stripes, then the input's last 64 bytes (overlapping them). */
  size_t stripes = ((len - 1) - blocks * BLOCK) / STRIPE;
  for (size_t n = 0; n < stripes; n++) stripe(acc, p + blocks * BLOCK + n * STRIPE, SECRET + n * 8);
  stripe(acc, p + len - STRIPE, SECRET + SECRET_BYTES - STRIPE - 7);
  uint64_t h = (uint64_t)len * P64_1;
  for (int i = 0; i < 4; i++) h += fold(acc[2 * i] ^ le_load64(SECRET + 11 + 16 * i), acc[2 * i + 1] ^ le_load64(SECRET + 11 + 16 * i + 8));
  return avalanche3(h);
}

static uint64_t talon_xxh3_64(const uint8_t *p, size_t len) {
  if (len <= 16) return upto16(p, len);
  if (len <= 128) return upto128(p, len);
  if (len <= 240) return upto240(p, len);
  return longer(p, len);
}

#define CHECK(call) NAPI_CHECK("talon_sendfile", call)

/* xxh3(bytes: Uint8Array): bigint */
static napi_value Xxh3(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  uint8_t *data;
  size_t len;
  if (argc < 1 || !arg_bytes(env, argv[0], &data, &len)) {
    napi_throw_type_error(env, NULL, "xxh3: expected a Uint8Array");
    return NULL;
  }
  napi_value out;
  CHECK(napi_create_bigint_uint64(env, talon_xxh3_64(data, len), &out));
  return out;
}

napi_value xxh3_export(napi_env env, napi_value exports) {
  NAPI_EXPORT("xxh3", Xxh3);
  return exports;
}
