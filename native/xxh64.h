#ifndef TALON_XXH64_H
#define TALON_XXH64_H
#include <stddef.h>
#include <stdint.h>

/* XXH64 with seed 0, the function of xxhash-wasm's h64 (native/xxh64.c). Shared by the worker's
 * checksums (talon_sendfile) and the native fill receive (talon_fill). */
uint64_t talon_xxh64(const uint8_t *p, size_t len);

#endif
