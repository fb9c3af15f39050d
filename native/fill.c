/*
 * talon_fill: an origin response body received straight into a fill's staging buffer, off the
 * JS thread.
 *
 * The fill's origin client (src/backend/receiveConnection.ts) parses a response head itself;
 * once it knows the body's length it stops node reading the socket and hands the fd and a
 * region of a page's staging buffer to `receive`. A thread of this module's own pool then
 * polls and recvs until the region is full, the origin closes, the connection fails or no
 * byte came for the timeout, and (when asked, with the page complete) hashes the page with
 * XXH64, so the JS thread hears back once per page with the bytes already in place and summed.
 *
 * Its own threads, not libuv's pool: a receive waits on the network for milliseconds, and
 * parking up to one per origin connection on libuv's threads would queue the fill's own disk
 * writes, fdatasyncs and renames behind them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "napi_util.h"
#include "xxh64.h"

#define CHECK(call) NAPI_CHECK("talon_fill", call)

/* A receive's end codes (besides -errno): every byte came, or the origin closed first. */
#define FILL_DONE 0
#define FILL_EOF 1
/* Threads kept at most; receives beyond that many at once wait in the queue. */
#define MAX_THREADS 256

/* ---- receives ---- */

typedef struct job {
  struct job *next;
  napi_threadsafe_function tsfn;
  int fd;
  int timeout_ms;
  int hash;
  uint8_t *buf;
  size_t from, to;
  napi_ref buf_ref, cb_ref;
  /* results */
  size_t got;
  int code;
  uint64_t sum;
} job_t;

typedef struct {
  napi_threadsafe_function tsfn;
  int64_t in_flight;
  uint64_t receives, bytes, hashed;
} fstate_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static job_t *q_head, *q_tail;
static int threads, idle;
/* Touched by the pool's threads: read under `mu` by counters(). */
static uint64_t polls_total;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Fills buf[from, to) from the non-blocking socket; a pause longer than the timeout ends it. */
static void run(job_t *j) {
  size_t at = j->from;
  uint64_t polls = 0;
  j->code = FILL_DONE;
  while (at < j->to) {
    ssize_t n = recv(j->fd, j->buf + at, j->to - at, MSG_DONTWAIT);
    if (n > 0) {
      at += (size_t)n;
      continue;
    }
    if (n == 0) {
      j->code = FILL_EOF;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      j->code = -errno;
      break;
    }
    struct pollfd pfd = {.fd = j->fd, .events = POLLIN | POLLRDHUP};
    uint64_t deadline = now_ms() + (uint64_t)j->timeout_ms;
    int r;
    for (;;) {
      uint64_t now = now_ms();
      int wait = j->timeout_ms <= 0 ? -1 : now >= deadline ? 0 : (int)(deadline - now);
      polls++;
      r = poll(&pfd, 1, wait);
      if (r >= 0 || errno != EINTR) break;
    }
    if (r == 0) {
      j->code = -ETIMEDOUT;
      break;
    }
    if (r < 0) {
      j->code = -errno;
      break;
    }
    /* Readable, hung up or failed: the next recv says which. */
  }
  j->got = at - j->from;
  if (j->hash && j->code == FILL_DONE) j->sum = talon_xxh64(j->buf, j->to);
  pthread_mutex_lock(&mu);
  polls_total += polls;
  pthread_mutex_unlock(&mu);
}

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&mu);
    idle++;
    while (q_head == NULL) pthread_cond_wait(&cv, &mu);
    idle--;
    job_t *j = q_head;
    q_head = j->next;
    if (q_head == NULL) q_tail = NULL;
    pthread_mutex_unlock(&mu);
    run(j);
    napi_threadsafe_function tsfn = j->tsfn;
    if (napi_call_threadsafe_function(tsfn, j, napi_tsfn_blocking) != napi_ok) free(j); /* the env is going away */
  }
  return NULL;
}

/* 0, or -errno when no thread could be started and none is running. */
static int submit(job_t *j) {
  pthread_mutex_lock(&mu);
  j->next = NULL;
  if (q_tail != NULL) q_tail->next = j;
  else q_head = j;
  q_tail = j;
  int rc = 0;
  if (idle == 0 && threads < MAX_THREADS) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* Receives need little stack; the default 8 MiB of address space each is waste. */
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int e = pthread_create(&t, &attr, worker, NULL);
    pthread_attr_destroy(&attr);
    if (e == 0) threads++;
    else if (threads == 0) {
      q_head = q_tail = NULL;
      rc = -e;
    }
  }
  if (rc == 0) pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  return rc;
}

static fstate_t *get_state(napi_env env) { return (fstate_t *)instance_data(env); }

/* On the JS thread: one receive ended; onDone(code, bytes, sum | undefined). */
static void call_js(napi_env env, napi_value unused, void *context, void *data) {
  (void)unused;
  fstate_t *st = (fstate_t *)context;
  job_t *j = (job_t *)data;
  if (env == NULL) {
    free(j);
    return;
  }
  st->bytes += j->got;
  if (j->hash && j->code == FILL_DONE) st->hashed++;
  if (--st->in_flight == 0) napi_unref_threadsafe_function(env, st->tsfn);
  napi_value cb, global, argv[3], result;
  napi_get_reference_value(env, j->cb_ref, &cb);
  napi_delete_reference(env, j->cb_ref);
  napi_delete_reference(env, j->buf_ref);
  argv[0] = make_int(env, j->code);
  argv[1] = make_int(env, (int64_t)j->got);
  if (j->hash && j->code == FILL_DONE) napi_create_bigint_uint64(env, j->sum, &argv[2]);
  else napi_get_undefined(env, &argv[2]);
  free(j);
  if (cb == NULL) return;
  napi_get_global(env, &global);
  if (napi_call_function(env, global, cb, 3, argv, &result) == napi_pending_exception) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
}

/*
 * receive(fd, buf, from, to, hash, timeoutMs, onDone) -> 0 | -errno.
 * Receives buf[from, to) from the socket `fd` (which nobody else may read meanwhile), then calls
 * onDone(code, bytes, sum): code 0 when every byte came, 1 when the peer closed first, -errno
 * (-ETIMEDOUT: no byte for timeoutMs) otherwise; bytes received at buf[from, from+bytes); with
 * `hash` and code 0, sum is XXH64 of buf[0, to) as a bigint.
 */
static napi_value Receive(napi_env env, napi_callback_info info) {
  NAPI_ARGS(7);
  fstate_t *st = get_state(env);
  int64_t fd, from, to, timeout;
  bool hash = false;
  uint8_t *data;
  size_t cap;
  napi_valuetype t;
  if (argc < 7 || !arg_i64(env, argv[0], &fd) || fd < 0 || !arg_bytes(env, argv[1], &data, &cap) || !arg_i64(env, argv[2], &from) ||
      !arg_i64(env, argv[3], &to) || from < 0 || to < from || (size_t)to > cap || napi_get_value_bool(env, argv[4], &hash) != napi_ok ||
      !arg_i64(env, argv[5], &timeout) || napi_typeof(env, argv[6], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, NULL, "receive(fd, buf, from, to, hash: boolean, timeoutMs, onDone) with 0 <= from <= to <= buf.length");
    return NULL;
  }
  job_t *j = (job_t *)calloc(1, sizeof(job_t));
  if (j == NULL) return make_int(env, -ENOMEM);
  j->tsfn = st->tsfn;
  j->fd = (int)fd;
  j->buf = data;
  j->from = (size_t)from;
  j->to = (size_t)to;
  j->hash = hash ? 1 : 0;
  j->timeout_ms = timeout > INT32_MAX ? INT32_MAX : (int)timeout;
  /* The buffer stays alive (and, being a typed array's backing store, in place) until onDone. */
  CHECK(napi_create_reference(env, argv[1], 1, &j->buf_ref));
  CHECK(napi_create_reference(env, argv[6], 1, &j->cb_ref));
  if (st->in_flight++ == 0) napi_ref_threadsafe_function(env, st->tsfn);
  int rc = submit(j);
  if (rc != 0) {
    if (--st->in_flight == 0) napi_unref_threadsafe_function(env, st->tsfn);
    napi_delete_reference(env, j->buf_ref);
    napi_delete_reference(env, j->cb_ref);
    free(j);
    return make_int(env, rc);
  }
  st->receives++;
  return make_int(env, 0);
}

/* shutdown(fd) -> 0 | -errno: wakes a receive blocked on fd (the connection is being dropped) without closing the fd under it. */
static napi_value Shutdown(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  int64_t fd;
  if (argc < 1 || !arg_i64(env, argv[0], &fd) || fd < 0) {
    napi_throw_type_error(env, NULL, "shutdown(fd)");
    return NULL;
  }
  return make_int(env, shutdown((int)fd, SHUT_RDWR) == 0 ? 0 : -errno);
}

static napi_value Counters(napi_env env, napi_callback_info info) {
  (void)info;
  fstate_t *st = get_state(env);
  pthread_mutex_lock(&mu);
  uint64_t polls = polls_total;
  int nthreads = threads;
  pthread_mutex_unlock(&mu);
  napi_value out;
  CHECK(napi_create_object(env, &out));
#define SET(name, v) CHECK(napi_set_named_property(env, out, name, make_int(env, (int64_t)(v))))
  SET("receives", st->receives);
  SET("bytes", st->bytes);
  SET("hashed", st->hashed);
  SET("polls", polls);
  SET("inFlight", st->in_flight);
  SET("threads", nthreads);
#undef SET
  return out;
}

#define EXPORT NAPI_EXPORT

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  fstate_t *st = (fstate_t *)calloc(1, sizeof(fstate_t));
  if (st == NULL) {
    napi_throw_error(env, NULL, "talon_fill: out of memory");
    return NULL;
  }
  napi_value name;
  CHECK(napi_create_string_utf8(env, "talon_fill", NAPI_AUTO_LENGTH, &name));
  CHECK(napi_create_threadsafe_function(env, NULL, NULL, name, 0, 1, NULL, NULL, st, call_js, &st->tsfn));
  /* Referenced only while a receive is in flight: an idle module must not keep the process up. */
  CHECK(napi_unref_threadsafe_function(env, st->tsfn));
  CHECK(napi_set_instance_data(env, st, NULL, NULL));
  EXPORT("receive", Receive);
  EXPORT("shutdown", Shutdown);
  EXPORT("counters", Counters);
  return exports;
}
