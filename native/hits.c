/*
 * The hit table: GetRange replies the native plane answers without calling into JS.
 *
 * JS publishes what its own hit path has just proven: an object (its bincode ObjectId
 * bytes, size and geometry, fresh for a bounded time) and resident units of it (a whole
 * block, or one page), each with its own dup(2) of the unit's fd. When the shared epoll
 * fd reports a connection readable and JS has marked that connection idle (no partial
 * frame, no reply in flight), hits_serve reads it and answers every leading GetRange that
 * lies inside one published unit: header and sendfile, the same bytes JS would send. At
 * the first frame it cannot answer (any other type, an unknown object or unit, an expired
 * object, a range error, a frame cut by the read) it stops and hands the rest to JS, which
 * then owns the connection until it marks it idle again; replies therefore stay in request
 * order and every case but the plain hit keeps its single implementation in JS.
 *
 * Why dups: a unit's fd belongs to the block store, which closes it under its open-file
 * cap, and a closed number can come back as another file. A dup stays this file until
 * the table closes it, and a block file never changes once committed (its version is in
 * its key), so the table can only serve the right bytes, or nothing. Staleness is bounded
 * by the object's deadline: JS gives it what is left before its version cache would renew
 * the entry, so a renewal always passes through JS.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "plane.h"

#define OBJ_CAP 256 /* power of two; at most OBJ_MAX live */
#define OBJ_MAX 192
#define UNIT_CAP 8192 /* power of two; at most UNIT_MAX live (each holds an fd) */
#define UNIT_MAX 4096
#define MAX_ID 1024
#define HEADER 16
#define HIST_MAX 32 /* latency bucket bounds at most */
#define MAX_BODY 65536 /* the worker's GetRange cap (WORKER_CAPS in DataServer.ts) */

typedef struct {
  uint32_t oid; /* 0 = empty slot */
  uint32_t hash;
  uint32_t idlen;
  uint8_t *id;
  /* The published version as a bincode String (u64 LE length, UTF-8): a GetCachedRange or GetPinnedRange naming exactly it is ours. */
  uint32_t verlen;
  uint8_t *ver;
  uint64_t size, block_size, page_size;
  uint64_t deadline_ns;
} obj_t;

typedef struct {
  uint32_t oid; /* 0 = empty slot */
  uint32_t touched;
  uint64_t start; /* first object byte of the unit */
  uint64_t bytes;
  int fd;
  int32_t tag;
} unit_t;

struct hits_s {
  obj_t objs[OBJ_CAP];
  unit_t units[UNIT_CAP];
  uint32_t nobjs, nunits, next_oid;
  /*
   * JS's Float64Array of this table: [replies answered here, their payload bytes, then, when JS
   * gave bucket bounds, the summed latency in seconds and one count per bucket (+Inf last)]:
   * the worker's hit counters and its request-duration histogram, kept here so a hit answered
   * without JS is still timed without JS.
   */
  double *counts;
  uint32_t nbounds; /* 0: no latency histogram */
  uint64_t bounds_ns[HIST_MAX];
  napi_ref counts_ref;
  obj_t *last; /* the object of the last answered request (nearly every request repeats it) */
};

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint32_t hash_bytes(const uint8_t *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static uint32_t unit_hash(uint32_t oid, uint64_t start) {
  uint64_t x = (start ^ ((uint64_t)oid << 40)) * 0x9E3779B97F4A7C15ull;
  return (uint32_t)(x >> 32);
}

static obj_t *obj_find(hits_t *h, const uint8_t *id, uint32_t idlen) {
  obj_t *l = h->last;
  if (l != NULL && l->oid != 0 && l->idlen == idlen && memcmp(l->id, id, idlen) == 0) return l;
  uint32_t hash = hash_bytes(id, idlen);
  for (uint32_t i = hash & (OBJ_CAP - 1);; i = (i + 1) & (OBJ_CAP - 1)) {
    obj_t *o = &h->objs[i];
    if (o->oid == 0) return NULL;
    if (o->hash == hash && o->idlen == idlen && memcmp(o->id, id, idlen) == 0) return h->last = o;
  }
}

static obj_t *obj_by_oid(hits_t *h, uint32_t oid) {
  if (oid == 0) return NULL;
  for (uint32_t i = 0; i < OBJ_CAP; i++)
    if (h->objs[i].oid == oid) return &h->objs[i];
  return NULL;
}

static unit_t *unit_find(hits_t *h, uint32_t oid, uint64_t start) {
  for (uint32_t i = unit_hash(oid, start) & (UNIT_CAP - 1);; i = (i + 1) & (UNIT_CAP - 1)) {
    unit_t *u = &h->units[i];
    if (u->oid == 0) return NULL;
    if (u->oid == oid && u->start == start) return u;
  }
}

/*
 * Linear probing with backward-shift deletion (no tombstones): after emptying slot i, each
 * following entry of the run moves back into the hole unless its home lies cyclically in
 * (i, j]. Callers scanning the table re-check slot i afterwards: an entry may have moved in.
 */
static void unit_remove_at(hits_t *h, uint32_t i) {
  unit_t *u = &h->units[i];
  if (u->fd >= 0) close(u->fd);
  u->oid = 0;
  h->nunits--;
  for (uint32_t j = (i + 1) & (UNIT_CAP - 1);; j = (j + 1) & (UNIT_CAP - 1)) {
    unit_t *v = &h->units[j];
    if (v->oid == 0) return;
    uint32_t k = unit_hash(v->oid, v->start) & (UNIT_CAP - 1);
    int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    h->units[i] = *v;
    v->oid = 0;
    i = j;
  }
}

static void obj_remove_at(hits_t *h, uint32_t i) {
  obj_t *o = &h->objs[i];
  if (h->last == o) h->last = NULL;
  free(o->id);
  free(o->ver);
  o->id = NULL;
  o->ver = NULL;
  o->oid = 0;
  h->nobjs--;
  for (uint32_t j = (i + 1) & (OBJ_CAP - 1);; j = (j + 1) & (OBJ_CAP - 1)) {
    obj_t *v = &h->objs[j];
    if (v->oid == 0) return;
    uint32_t k = v->hash & (OBJ_CAP - 1);
    int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (stays) continue;
    if (h->last == v) h->last = &h->objs[i];
    h->objs[i] = *v;
    v->oid = 0;
    v->id = NULL;
    v->ver = NULL;
    i = j;
  }
}

/* Drops every unit of `oid` (0: every unit). Returns how many. */
static uint32_t units_drop(hits_t *h, uint32_t oid) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < UNIT_CAP; i++) {
    while (h->units[i].oid != 0 && (oid == 0 || h->units[i].oid == oid)) {
      unit_remove_at(h, i);
      n++;
    }
  }
  return n;
}

/* Empties the table: every unit (closing its dup) and every object. Returns the units dropped. */
static uint32_t table_clear(hits_t *h) {
  uint32_t n = units_drop(h, 0);
  for (uint32_t i = 0; i < OBJ_CAP; i++) {
    free(h->objs[i].id);
    free(h->objs[i].ver);
    h->objs[i].id = NULL;
    h->objs[i].ver = NULL;
    h->objs[i].oid = 0;
  }
  h->nobjs = 0;
  h->last = NULL;
  return n;
}

static void table_free(napi_env env, hits_t *h) {
  table_clear(h);
  if (env != NULL && h->counts_ref != NULL) napi_delete_reference(env, h->counts_ref);
  free(h);
}

void hits_free(state_t *st) {
  for (int t = 0; t < HITS_TABLES; t++) {
    if (st->tables[t] != NULL) table_free(NULL, st->tables[t]);
    st->tables[t] = NULL;
  }
}

static uint32_t be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}

/*
 * Length of the ObjectId at the front of a GetCachedRange or GetPinnedRange body of `n` bytes (before offset and
 * len), when exactly one version String follows it; else 0 (malformed: JS reports it).
 */
static uint32_t cached_id_len(const uint8_t *b, uint32_t n) {
  uint64_t q = 4;
  for (int field = 0; field < 2; field++) {
    if (q + 8 > n) return 0;
    uint64_t l = le64(b + q);
    if (l > n) return 0;
    q += 8 + l;
  }
  if (q + 8 > n) return 0;
  uint64_t v = le64(b + q);
  if (v > n || q + 8 + v != n) return 0;
  return (uint32_t)q;
}

static void observe_latency(hits_t *h, uint64_t ns) {
  uint32_t i = 0;
  while (i < h->nbounds && ns > h->bounds_ns[i]) i++;
  h->counts[2] += (double)ns / 1e9;
  h->counts[3 + i] += 1;
}

static void handoff(state_t *st, int fd, int64_t n, size_t p) {
  int32_t *ho = st->handoff;
  ho[0] = fd;
  ho[1] = (int32_t)n;
  ho[2] = (int32_t)p;
  ho[3] = 0;
  st->conn_fast[fd] = 0;
  st->c.handoffs++;
}

int hits_serve(state_t *st, hits_t *h, int fd) {
  uint8_t *buf = st->rbuf;
  ssize_t n;
  do {
    n = recv(fd, buf, st->rbuf_len, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  st->c.recv_calls++;
  if (n <= 0) {
    handoff(st, fd, n < 0 ? -(int64_t)errno : 0, 0);
    return 0;
  }
  size_t p = 0, end = (size_t)n;
  /* The batch's requests were all read now: each one's latency runs from here to its reply's send. */
  uint64_t now = mono_ns();
  while (end - p >= HEADER) {
    const uint8_t *f = buf + p;
    /*
     * Only a well-formed GetRange, GetCachedRange (6) or GetPinnedRange (10) is ours; JS answers
     * (or refuses) everything else. 6 and 10 share a body and differ only on a miss (CacheMiss vs
     * a fill), and a miss is never answered here: a published unit is resident, so its bytes are
     * the right reply to both.
     */
    int versioned = f[3] == 6 || f[3] == 10;
    if (f[0] != 0x54 || f[1] != 0x4c || f[2] != 1 || (f[3] != 2 && !versioned)) break;
    uint32_t blen = be32(f + 12);
    if (blen <= 16 || blen > MAX_BODY || end - p - HEADER < blen) break;
    const uint8_t *body = f + HEADER;
    uint32_t idlen = blen - 16;
    const uint8_t *ver = NULL;
    uint32_t verlen = 0;
    if (versioned) {
      /* ObjectId (backend u32, bucket String, path String), then the version String. */
      uint32_t q = cached_id_len(body, idlen);
      if (q == 0) break;
      ver = body + q;
      verlen = idlen - q;
      idlen = q;
    }
    obj_t *o = obj_find(h, body, idlen);
    if (o == NULL) break;
    /* A pinned read of any version but the one JS published (the current one) is JS's to answer. */
    if (ver != NULL && (o->ver == NULL || o->verlen != verlen || memcmp(o->ver, ver, verlen) != 0)) break;
    if (now >= o->deadline_ns) break;
    const uint8_t *range = body + blen - 16;
    uint64_t off = le64(range), len = le64(range + 8);
    /* Range errors and empty ranges get JS's reply; so does anything a u32 length cannot hold. */
    if (len == 0 || len > 0xffffffffu || off >= o->size || len > o->size - off) break;
    uint64_t block = off - off % o->block_size;
    uint64_t start = o->page_size > 0 ? block + (off - block) / o->page_size * o->page_size : block;
    unit_t *u = unit_find(h, o->oid, start);
    if (u == NULL || off + len > start + u->bytes) break;
    uint8_t hdr[HEADER] = {0x54, 0x4c, 1, 2, 0, 0, 0, 0, f[8], f[9], f[10], f[11],
                           (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8), (uint8_t)len};
    int err = 0;
    int64_t sent = plane_xfer(st, fd, hdr, HEADER, u->fd, (int64_t)(off - start), (int64_t)len, &err);
    /* Nothing went (a full buffer, or a broken connection): JS answers this frame and finds out which. */
    if (sent == 0) break;
    u->touched = 1;
    p += HEADER + blen;
    st->c.fast_hits++;
    st->c.fast_bytes += len;
    h->counts[0] += 1;
    h->counts[1] += (double)len;
    if (h->nbounds > 0) observe_latency(h, mono_ns() - now);
    if (err == 0) continue;
    /* Partly sent: JS finishes the reply (from its own dup of the file) before anything else. */
    int tail = dup(u->fd);
    if (tail < 0) {
      /* Cannot hand the rest over: the reply is cut, so the connection must go. */
      shutdown(fd, SHUT_RDWR);
      handoff(st, fd, n, end);
      return 0;
    }
    uint64_t file_sent = sent > HEADER ? (uint64_t)sent - HEADER : 0;
    uint64_t file_off = off - start + file_sent;
    handoff(st, fd, n, p);
    int32_t *ho = st->handoff;
    ho[3] = 1;
    ho[4] = tail;
    ho[5] = (int32_t)(sent < HEADER ? sent : HEADER);
    ho[6] = (int32_t)(uint32_t)file_off;
    ho[7] = (int32_t)(uint32_t)(file_off >> 32);
    ho[8] = (int32_t)(uint32_t)(len - file_sent);
    memcpy(ho + 12, hdr, HEADER); /* the reply header, as sent */
    return 0;
  }
  if (p == end) return 1;
  handoff(st, fd, n, p);
  return 0;
}

/* ------------------------------------------------------------------ JS entry points */

#define ARGS(count)                                                          \
  size_t argc = count;                                                       \
  napi_value argv[count];                                                    \
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL; \
  state_t *st = NULL;                                                        \
  napi_get_instance_data(env, (void **)&st)

static hits_t *arg_table(napi_env env, state_t *st, napi_value v) {
  int64_t t;
  if (!arg_i64(env, v, &t) || t < 1 || t >= HITS_TABLES) return NULL;
  return st->tables[(int)t];
}

/*
 * hitsCreate(counts: Float64Array(2), bounds?: Float64Array) -> table id (1..15) or -errno. With
 * ascending bucket bounds (seconds, at most HIST_MAX) counts must hold 3 + bounds + 1 doubles.
 */
static napi_value HitsCreate(napi_env env, napi_callback_info info) {
  ARGS(2);
  size_t len = 0, nb = 0;
  void *data = NULL, *bdata = NULL;
  if (argc < 1 || !arg_typed(env, argv[0], napi_float64_array, &data, &len) || len < 2) {
    napi_throw_type_error(env, NULL, "hitsCreate(counts: Float64Array(2))");
    return NULL;
  }
  napi_valuetype bt = napi_undefined;
  if (argc >= 2) napi_typeof(env, argv[1], &bt);
  if (bt != napi_undefined &&
      (!arg_typed(env, argv[1], napi_float64_array, &bdata, &nb) || nb == 0 || nb > HIST_MAX || len < 3 + nb + 1)) {
    napi_throw_type_error(env, NULL, "hitsCreate(counts: Float64Array(3 + bounds + 1), bounds: Float64Array(1..32))");
    return NULL;
  }
  int t = 1;
  while (t < HITS_TABLES && st->tables[t] != NULL) t++;
  if (t == HITS_TABLES) return make_int(env, -ENOSPC);
  hits_t *h = (hits_t *)calloc(1, sizeof(hits_t));
  if (h == NULL) return make_int(env, -ENOMEM);
  for (uint32_t i = 0; i < UNIT_CAP; i++) h->units[i].fd = -1;
  h->counts = (double *)data;
  h->nbounds = (uint32_t)nb;
  for (size_t i = 0; i < nb; i++) h->bounds_ns[i] = (uint64_t)(((double *)bdata)[i] * 1e9);
  napi_create_reference(env, argv[0], 1, &h->counts_ref);
  st->tables[t] = h;
  return make_int(env, t);
}

/* hitsDestroy(table): closes every dup; connections still marked for it are simply not served by it. */
static napi_value HitsDestroy(napi_env env, napi_callback_info info) {
  ARGS(1);
  hits_t *h = argc < 1 ? NULL : arg_table(env, st, argv[0]);
  if (h == NULL) return make_int(env, 0);
  int64_t t;
  arg_i64(env, argv[0], &t);
  st->tables[(int)t] = NULL;
  table_free(env, h);
  return make_int(env, 1);
}

/*
 * hitsInit(connFast: Uint8Array, handoff: Int32Array(>= 16), readBuf: Uint8Array) -> 0
 * All three stay owned by JS (the table holds references): connFast[fd] = 1 lets the table
 * serve the connection's reads; readBuf is the plane's read buffer, where a handoff's bytes are.
 */
static napi_value HitsInit(napi_env env, napi_callback_info info) {
  ARGS(3);
  uint8_t *fast = NULL, *rbuf = NULL;
  size_t fast_len = 0, rbuf_len = 0, ho_len = 0;
  void *ho = NULL;
  if (argc < 3 || !arg_bytes(env, argv[0], &fast, &fast_len) || !arg_typed(env, argv[1], napi_int32_array, &ho, &ho_len) ||
      ho_len < 16 || !arg_bytes(env, argv[2], &rbuf, &rbuf_len) || rbuf_len < 4096) {
    napi_throw_type_error(env, NULL, "hitsInit(connFast: Uint8Array, handoff: Int32Array(16), readBuf: Uint8Array)");
    return NULL;
  }
  for (int i = 0; i < 3; i++) {
    if (st->hits_refs[i]) napi_delete_reference(env, st->hits_refs[i]);
    napi_create_reference(env, argv[i], 1, &st->hits_refs[i]);
  }
  st->conn_fast = fast;
  st->conn_fast_len = fast_len;
  st->handoff = (int32_t *)ho;
  st->handoff[0] = -1;
  st->rbuf = rbuf;
  st->rbuf_len = rbuf_len;
  return make_int(env, 0);
}

/*
 * hitsObject(id: Uint8Array, size, blockSize, pageSize, freshMs, version: Uint8Array) -> oid (> 0)
 * or -errno. `version` is the bincode String of the object's current version: GetCachedRanges and GetPinnedRanges
 * naming it are answered too (an empty array: GetRange only). An id already published keeps its
 * oid and takes the new size, geometry, version and deadline (JS drops an object whose version
 * changed before publishing the new one).
 */
static napi_value HitsObject(napi_env env, napi_callback_info info) {
  ARGS(7);
  uint8_t *id = NULL;
  size_t idlen = 0;
  int64_t size, bs, ps, fresh_ms;
  if (argc < 6 || !arg_bytes(env, argv[1], &id, &idlen) || !arg_i64(env, argv[2], &size) || !arg_i64(env, argv[3], &bs) ||
      !arg_i64(env, argv[4], &ps) || !arg_i64(env, argv[5], &fresh_ms) || size < 0 || bs < 1 || ps < 0) {
    napi_throw_type_error(env, NULL, "hitsObject(table, id, size, blockSize >= 1, pageSize >= 0, freshMs)");
    return NULL;
  }
  uint8_t *ver = NULL;
  size_t verlen = 0;
  if (argc >= 7 && !arg_bytes(env, argv[6], &ver, &verlen)) {
    napi_throw_type_error(env, NULL, "hitsObject: version must be a Uint8Array");
    return NULL;
  }
  hits_t *h = arg_table(env, st, argv[0]);
  if (h == NULL) return make_int(env, -EBADF);
  if (idlen == 0 || idlen > MAX_ID || verlen > MAX_ID) return make_int(env, -ENAMETOOLONG);
  uint8_t *ver_copy = NULL;
  if (verlen > 0) {
    ver_copy = (uint8_t *)malloc(verlen);
    if (ver_copy == NULL) return make_int(env, -ENOMEM);
    memcpy(ver_copy, ver, verlen);
  }
  uint64_t deadline = mono_ns() + (fresh_ms > 0 ? (uint64_t)fresh_ms * 1000000u : 0);
  obj_t *o = obj_find(h, id, (uint32_t)idlen);
  if (o == NULL) {
    if (h->nobjs >= OBJ_MAX) {
      free(ver_copy);
      return make_int(env, -ENOSPC);
    }
    uint32_t hash = hash_bytes(id, idlen);
    uint32_t i = hash & (OBJ_CAP - 1);
    while (h->objs[i].oid != 0) i = (i + 1) & (OBJ_CAP - 1);
    o = &h->objs[i];
    o->id = (uint8_t *)malloc(idlen);
    if (o->id == NULL) {
      free(ver_copy);
      return make_int(env, -ENOMEM);
    }
    memcpy(o->id, id, idlen);
    o->idlen = (uint32_t)idlen;
    o->hash = hash;
    if (++h->next_oid == 0) h->next_oid = 1;
    o->oid = h->next_oid;
    h->nobjs++;
  }
  free(o->ver);
  o->ver = ver_copy;
  o->verlen = (uint32_t)verlen;
  o->size = (uint64_t)size;
  o->block_size = (uint64_t)bs;
  o->page_size = (uint64_t)ps;
  o->deadline_ns = deadline;
  return make_int(env, o->oid);
}

/* hitsUnit(oid, start, bytes, fd, tag) -> 0 or -errno: publishes a resident unit (its own dup of fd). */
static napi_value HitsUnit(napi_env env, napi_callback_info info) {
  ARGS(6);
  int64_t oid, start, bytes, fd, tag;
  if (argc < 6 || !arg_i64(env, argv[1], &oid) || !arg_i64(env, argv[2], &start) || !arg_i64(env, argv[3], &bytes) ||
      !arg_i64(env, argv[4], &fd) || !arg_i64(env, argv[5], &tag) || start < 0 || bytes < 1 || fd < 0) {
    napi_throw_type_error(env, NULL, "hitsUnit(table, oid, start, bytes >= 1, fd, tag)");
    return NULL;
  }
  hits_t *h = arg_table(env, st, argv[0]);
  if (h == NULL) return make_int(env, -EBADF);
  if (obj_by_oid(h, (uint32_t)oid) == NULL) return make_int(env, -ENOENT);
  unit_t *u = unit_find(h, (uint32_t)oid, (uint64_t)start);
  if (u == NULL && h->nunits >= UNIT_MAX) return make_int(env, -ENOSPC);
  int copy = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return make_int(env, -errno);
  if (u == NULL) {
    uint32_t i = unit_hash((uint32_t)oid, (uint64_t)start) & (UNIT_CAP - 1);
    while (h->units[i].oid != 0) i = (i + 1) & (UNIT_CAP - 1);
    u = &h->units[i];
    h->nunits++;
  } else close(u->fd);
  u->oid = (uint32_t)oid;
  u->start = (uint64_t)start;
  u->bytes = (uint64_t)bytes;
  u->fd = copy;
  u->tag = (int32_t)tag;
  u->touched = 0;
  return make_int(env, 0);
}

/* hitsDropObject(oid) -> units dropped: the object and all its units leave the table. */
static napi_value HitsDropObject(napi_env env, napi_callback_info info) {
  ARGS(2);
  int64_t oid;
  if (argc < 2 || !arg_i64(env, argv[1], &oid) || oid < 1) {
    napi_throw_type_error(env, NULL, "hitsDropObject(table, oid)");
    return NULL;
  }
  hits_t *h = arg_table(env, st, argv[0]);
  if (h == NULL) return make_int(env, 0);
  obj_t *o = obj_by_oid(h, (uint32_t)oid);
  if (o != NULL) obj_remove_at(h, (uint32_t)(o - h->objs));
  return make_int(env, units_drop(h, (uint32_t)oid));
}

/* hitsDropUnit(oid, start) -> 1 when it was published. */
static napi_value HitsDropUnit(napi_env env, napi_callback_info info) {
  ARGS(3);
  int64_t oid, start;
  if (argc < 3 || !arg_i64(env, argv[1], &oid) || !arg_i64(env, argv[2], &start)) {
    napi_throw_type_error(env, NULL, "hitsDropUnit(table, oid, start)");
    return NULL;
  }
  hits_t *h = arg_table(env, st, argv[0]);
  if (h == NULL || oid < 1) return make_int(env, 0);
  unit_t *u = unit_find(h, (uint32_t)oid, (uint64_t)start);
  if (u == NULL) return make_int(env, 0);
  unit_remove_at(h, (uint32_t)(u - h->units));
  return make_int(env, 1);
}

/* hitsClear() -> units dropped: empties the table (the worker stopped being ready, or shuts down). */
static napi_value HitsClear(napi_env env, napi_callback_info info) {
  ARGS(1);
  hits_t *h = arg_table(env, st, argv[0]);
  return make_int(env, h == NULL ? 0 : table_clear(h));
}

/* hitsSweep(out: Int32Array) -> count: tags of units answered since the last sweep (for the store's LRU). */
static napi_value HitsSweep(napi_env env, napi_callback_info info) {
  ARGS(2);
  size_t cap = 0;
  void *data = NULL;
  if (argc < 2 || !arg_typed(env, argv[1], napi_int32_array, &data, &cap)) {
    napi_throw_type_error(env, NULL, "hitsSweep(table, out: Int32Array)");
    return NULL;
  }
  hits_t *h = arg_table(env, st, argv[0]);
  if (h == NULL) return make_int(env, 0);
  int32_t *out = (int32_t *)data;
  size_t n = 0;
  for (uint32_t i = 0; i < UNIT_CAP && n < cap; i++) {
    unit_t *u = &h->units[i];
    if (u->oid != 0 && u->touched) {
      u->touched = 0;
      out[n++] = u->tag;
    }
  }
  return make_int(env, (int64_t)n);
}

/* closeFd(fd) -> 0 or -errno: closes a handoff's dup once JS has sent the rest of its reply. */
static napi_value CloseFd(napi_env env, napi_callback_info info) {
  ARGS(1);
  int64_t fd;
  (void)st;
  if (argc < 1 || !arg_i64(env, argv[0], &fd) || fd < 0) {
    napi_throw_type_error(env, NULL, "closeFd(fd)");
    return NULL;
  }
  return make_int(env, close((int)fd) == 0 ? 0 : -errno);
}

void hits_export(napi_env env, napi_value exports) {
  static const struct {
    const char *name;
    napi_callback fn;
  } fns[] = {{"hitsInit", HitsInit},         {"hitsCreate", HitsCreate},     {"hitsDestroy", HitsDestroy},
             {"hitsObject", HitsObject},     {"hitsUnit", HitsUnit},         {"hitsDropObject", HitsDropObject},
             {"hitsDropUnit", HitsDropUnit}, {"hitsClear", HitsClear},       {"hitsSweep", HitsSweep},
             {"closeFd", CloseFd}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) == napi_ok)
      napi_set_named_property(env, exports, fns[i].name, f);
  }
}
