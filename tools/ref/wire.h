/*
 * Talon wire protocol v1 as the reference tools need it: the 16-byte big-endian
 * frame header and the bincode (little-endian) GetRange body. The layouts are the
 * ones test/fixtures/talon-wire-vectors.json pins down.
 */
#ifndef TALON_REF_WIRE_H
#define TALON_REF_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WIRE_MAGIC 0x544Cu
#define WIRE_VERSION 1u
#define WIRE_HEADER_LEN 16u

enum { MSG_CONTROL = 0, MSG_GET = 1, MSG_GET_RANGE = 2, MSG_PUT = 3, MSG_PING = 4, MSG_DELETE = 5 };
enum { FLAG_END_OF_STREAM = 1, FLAG_ERROR = 2 };

/* Per-type caps on an advertised body, checked before anything is buffered. */
#define CAP_GET_RANGE (64u * 1024u)
#define CAP_PING (4u * 1024u)
#define CAP_OTHER (64u * 1024u)

typedef struct {
  uint16_t magic;
  uint8_t version;
  uint8_t type;
  uint16_t flags;
  uint32_t id;
  uint32_t length;
} wire_header;

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static inline uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void wire_read_header(const uint8_t *p, wire_header *h) {
  h->magic = be16(p);
  h->version = p[2];
  h->type = p[3];
  h->flags = be16(p + 4);
  h->id = be32(p + 8);
  h->length = be32(p + 12);
}

static inline void wire_put_header(uint8_t *p, uint8_t type, uint16_t flags, uint32_t id, uint32_t length) {
  p[0] = WIRE_MAGIC >> 8;
  p[1] = WIRE_MAGIC & 0xff;
  p[2] = WIRE_VERSION;
  p[3] = type;
  p[4] = (uint8_t)(flags >> 8);
  p[5] = (uint8_t)flags;
  p[6] = 0;
  p[7] = 0;
  p[8] = (uint8_t)(id >> 24);
  p[9] = (uint8_t)(id >> 16);
  p[10] = (uint8_t)(id >> 8);
  p[11] = (uint8_t)id;
  p[12] = (uint8_t)(length >> 24);
  p[13] = (uint8_t)(length >> 16);
  p[14] = (uint8_t)(length >> 8);
  p[15] = (uint8_t)length;
}

static inline uint32_t wire_cap(uint8_t type) {
  return type == MSG_GET_RANGE ? CAP_GET_RANGE : type == MSG_PING ? CAP_PING : CAP_OTHER;
}

/* "64K", "8M", "1G" (binary) or plain bytes; 0 on a malformed size. */
static inline uint64_t parse_size(const char *s) {
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) return 0;
  uint64_t mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1024ull, end++;
  else if (*end == 'M' || *end == 'm') mult = 1024ull * 1024, end++;
  else if (*end == 'G' || *end == 'g') mult = 1024ull * 1024 * 1024, end++;
  if (*end != '\0') return 0;
  return (uint64_t)v * mult;
}

/* Splits "host:port" in place; returns the port or -1. */
static inline int split_addr(char *addr, char **host) {
  char *colon = strrchr(addr, ':');
  if (colon == NULL) return -1;
  *colon = '\0';
  *host = addr;
  char *end = NULL;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) return -1;
  return (int)port;
}

#endif
