#ifndef TALON_LE_LOAD_H
#define TALON_LE_LOAD_H
#include <stdint.h>
#include <string.h>

/* Little-endian loads whatever the host's order and alignment, and a 64-bit rotate: what the
 * XXH64 and XXH3 code in native/xxh64.c and native/xxh3.c read input with. */
static inline uint64_t le_load64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap64(v);
#endif
  return v;
}

static inline uint32_t le_load32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

#endif
