/*
 * State shared by the native plane's translation units: sendfile.c (kernel calls, the
 * shared epoll fd, the JS entry points) and hits.c (the hit table and the serve loop
 * that answers published hits without calling into JS).
 */
#ifndef TALON_PLANE_H
#define TALON_PLANE_H

#include <stddef.h>
#include <stdint.h>
#include "napi_util.h"

typedef struct {
  uint64_t send_calls;
  uint64_t sendfile_calls;
  uint64_t eagain;
  uint64_t waits;
  uint64_t wakeups;
  uint64_t bytes;
  uint64_t pushes;
  uint64_t recv_calls;
  uint64_t accepts;
  uint64_t accept_batches;
  /* Replies sent by hits.c without JS, their payload bytes, and reads it handed to JS. */
  uint64_t fast_hits;
  uint64_t fast_bytes;
  uint64_t handoffs;
} counters_t;

typedef struct hits_s hits_t;
#define HITS_TABLES 16

typedef struct {
  napi_env env;
  int epfd;
  uv_poll_t *poll; /* heap-allocated: freed in its close callback */
  int polling;
  napi_ref callback;
  napi_ref ready_buf;
  napi_async_context async_ctx;
  napi_async_cleanup_hook_handle cleanup;
  counters_t c;
  /* epoll_waits per wakeup at most, while everything ready is answered without JS */
  int drain_rounds;
  /* hits.c: one table per data server (a test process runs several), and JS-owned memory it works in. */
  hits_t *tables[HITS_TABLES];
  napi_ref hits_refs[3];
  uint8_t *conn_fast; /* conn_fast[fd] = t: the connection is idle in JS, table t may serve its reads */
  size_t conn_fast_len;
  /*
   * What the last fast read left to JS (hits.c): [0] fd (-1: nothing), [1] recv's result, [2] the
   * first byte not served; [3] 1 when a reply went out only partly, then [4] a dup of its file,
   * [5] header bytes sent, [6..7] file offset (lo, hi), [8] file bytes left, [12..15] its header.
   */
  int32_t *handoff;
  uint8_t *rbuf;    /* the plane's one read buffer (JS reads it too) */
  size_t rbuf_len;
} state_t;

/*
 * Sends hdr[0, hdr_len) (MSG_MORE when file bytes follow) then sendfile(2)s
 * [file_off, file_off+file_len) of file_fd, until done or the socket would block.
 * Returns the bytes sent; *err is 0 when everything went, else the errno that stopped it
 * (EAGAIN for a full buffer). A stop for space after progress pushes what was corked.
 */
int64_t plane_xfer(state_t *st, int sock, const uint8_t *hdr, int64_t hdr_len, int file_fd, int64_t file_off,
                   int64_t file_len, int *err);

/* hits.c */
void hits_free(state_t *st);
/* Serves the connection's readable bytes if it can: 1 = all handled, 0 = handed to JS (st->handoff filled). */
int hits_serve(state_t *st, hits_t *h, int fd);
void hits_export(napi_env env, napi_value exports);
/* listen.c: SO_REUSEPORT listening sockets for --loops N */
napi_value listen_export(napi_env env, napi_value exports);
/* memory.c: mallocTrim. */
napi_value memory_export(napi_env env, napi_value exports);
/* XXH64 one-shot and streaming (native/xxh64.c): the worker's per-unit checksums. */
napi_value xxh64_export(napi_env env, napi_value exports);
/* XXH3-64 one-shot (native/xxh3.c): the coordinator's membership epoch. */
napi_value xxh3_export(napi_env env, napi_value exports);

#endif
