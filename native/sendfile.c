/*
 * talon_sendfile: the native data plane's kernel calls.
 *
 * Node keeps every TCP socket non-blocking (libuv), so each call here returns at once:
 * it sends what the socket buffer accepts and reports how far it got. Connections the
 * plane serves are registered on ONE epoll instance (level-triggered: EPOLLIN while the
 * serve loop wants requests, EPOLLOUT while a reply waits for buffer space), and that
 * epoll fd is itself watched by a uv_poll on the event loop. The loop's own epoll_wait
 * therefore sleeps on every connection at once: no thread-pool slot is held per socket,
 * the loop is never blocked and nothing spins. When it fires, one epoll_wait copies the
 * ready (fd, events) pairs into a JS-owned Int32Array and one JS callback serves them all
 * (recv into a reused buffer, then send/sendfile), so a busy loop turn costs one call
 * into JS for many connections instead of a stream event per socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "plane.h"

#define CHECK(call) NAPI_CHECK("talon_sendfile", call)

static state_t *get_state(napi_env env) { return (state_t *)instance_data(env); }

int64_t plane_xfer(state_t *st, int sock, const uint8_t *hdr, int64_t hdr_len, int file_fd, int64_t file_off,
                   int64_t file_len, int *err_out) {
  int64_t sent = 0;
  int err = 0;
  int64_t hdr_off = 0;
  while (hdr_len > 0) {
    int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (file_len > 0 ? MSG_MORE : 0);
    st->c.send_calls++;
    ssize_t n = send(sock, hdr + hdr_off, (size_t)hdr_len, flags);
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    sent += n;
    hdr_off += n;
    hdr_len -= n;
    if (hdr_len > 0) { /* short send: buffer full */
      err = EAGAIN;
      break;
    }
  }
  if (err == 0) {
    off_t off = (off_t)file_off;
    while (file_len > 0) {
      st->c.sendfile_calls++;
      ssize_t n = sendfile(sock, file_fd, &off, (size_t)file_len);
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (n == 0) { /* file shorter than promised: nothing more will come */
        err = ENODATA;
        break;
      }
      sent += n;
      file_len -= n;
    }
  }
  if (sent > 0 && (err == EAGAIN || err == EWOULDBLOCK)) {
    /*
     * Stopped for space after sending something: the last bytes queued went under MSG_MORE
     * (our header, or sendfile's own "more pages follow"), and the send that then found the
     * buffer full had copied nothing, so the kernel did not push them. Left corked they stall
     * the connection until a TCP timer fires (~100 ms per EAGAIN, measured on loopback).
     * Setting TCP_NODELAY pushes pending frames.
     */
    int one = 1;
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    st->c.pushes++;
  }
  if (err == EAGAIN || err == EWOULDBLOCK) st->c.eagain++;
  st->c.bytes += (uint64_t)sent;
  *err_out = err;
  return sent;
}

/*
 * sendHeaderFile(sockFd, header|null, hdrOff, hdrLen, fileFd, fileOff, fileLen) -> number
 *
 * Sends header[hdrOff, hdrOff+hdrLen) with MSG_MORE when file bytes follow (so header and
 * payload leave in the same segments), then sendfile(2)s the file range, looping until done
 * or the socket buffer is full. Returns the bytes sent (header and file together); a result
 * short of hdrLen+fileLen means the socket would block (wait for writability, then continue
 * from there). A negative result is -errno with nothing sent: -EAGAIN, or a real failure
 * such as -EPIPE / -ECONNRESET.
 */
static napi_value SendHeaderFile(napi_env env, napi_callback_info info) {
  NAPI_ARGS(7);
  state_t *st = get_state(env);
  int64_t sock, hdr_off, hdr_len, file_fd, file_off, file_len;
  if (argc < 7 || !arg_i64(env, argv[0], &sock) || !arg_i64(env, argv[2], &hdr_off) ||
      !arg_i64(env, argv[3], &hdr_len) || !arg_i64(env, argv[4], &file_fd) ||
      !arg_i64(env, argv[5], &file_off) || !arg_i64(env, argv[6], &file_len)) {
    napi_throw_type_error(env, NULL, "sendHeaderFile(sockFd, header, hdrOff, hdrLen, fileFd, fileOff, fileLen)");
    return NULL;
  }
  uint8_t *hdr = NULL;
  size_t hdr_cap = 0;
  if (hdr_len > 0) {
    if (!arg_bytes(env, argv[1], &hdr, &hdr_cap) || hdr_off < 0 || (uint64_t)(hdr_off + hdr_len) > hdr_cap) {
      napi_throw_range_error(env, NULL, "sendHeaderFile: header range outside the buffer");
      return NULL;
    }
  }
  if (file_len < 0 || file_off < 0) {
    napi_throw_range_error(env, NULL, "sendHeaderFile: negative file range");
    return NULL;
  }

  int err = 0;
  int64_t sent = plane_xfer(st, (int)sock, hdr == NULL ? NULL : hdr + hdr_off, hdr_len, (int)file_fd, file_off, file_len, &err);
  if (sent == 0 && err != 0) return make_int(env, -(int64_t)err);
  /* progress then a hard error: report the progress; the caller's retry reports the error */
  return make_int(env, sent);
}

/*
 * A few epoll_waits per wakeup of the loop at most (more only while the hit table answered
 * everything, and at most one call into JS): registrations are level-triggered, so whatever
 * is left ready fires again on the next turn, and a flood of ready connections cannot keep
 * libuv from its timers and accepts. The ready list is
 * copied out as (fd, events) pairs before JS runs: a registration changed by the callback
 * can never overwrite a wakeup not handled yet.
 */
static void drain_epoll(state_t *st) {
  napi_env env = st->env;
  napi_handle_scope scope;
  if (napi_open_handle_scope(env, &scope) != napi_ok) return;
  napi_value buf_v, cb_v, global, recv;
  if (napi_get_reference_value(env, st->ready_buf, &buf_v) != napi_ok ||
      napi_get_reference_value(env, st->callback, &cb_v) != napi_ok || buf_v == NULL || cb_v == NULL) {
    napi_close_handle_scope(env, scope);
    return;
  }
  napi_get_global(env, &global);
  recv = global;
  napi_typedarray_type type;
  size_t cap = 0;
  void *data = NULL;
  napi_get_typedarray_info(env, buf_v, &type, &cap, &data, NULL, NULL);
  cap /= 2;
  if (type != napi_int32_array || cap == 0) {
    napi_close_handle_scope(env, scope);
    return;
  }
  if (cap > 1024) cap = 1024;
  struct epoll_event events[1024];
  for (int round = 0;; round++) {
    int n;
    do {
      n = epoll_wait(st->epfd, events, (int)cap, 0);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) break;
    int32_t *out = (int32_t *)data;
    int count = 0, handed = 0;
    st->c.wakeups += (uint64_t)n;
    for (int i = 0; i < n; i++) {
      uint32_t e = events[i].events;
      int fd = events[i].data.fd;
      /*
       * A plain read of a connection JS left idle: hits.c answers the published hits in it
       * without JS. The first read it cannot finish goes to JS in st->handoff (the bytes are
       * in the shared read buffer, which nothing may overwrite before JS has them: so only
       * one handoff per wakeup, and the rest of the list goes to JS untouched).
       */
      hits_t *table = !handed && e == EPOLLIN && fd >= 0 && (size_t)fd < st->conn_fast_len ? st->tables[st->conn_fast[fd] & (HITS_TABLES - 1)] : NULL;
      if (table != NULL) {
        if (hits_serve(st, table, fd)) continue;
        handed = 1;
        continue;
      }
      out[2 * count] = fd;
      out[2 * count + 1] = ((e & EPOLLIN) ? 1 : 0) | ((e & EPOLLOUT) ? 2 : 0) | ((e & (EPOLLERR | EPOLLHUP)) ? 4 : 0);
      count++;
    }
    if (count == 0 && !handed) {
      /*
       * All answered here: look again at once, a few times, before going back to libuv (a
       * loop turn and its epoll_pwait per batch is what small batches pay for most). Bounded,
       * so timers, accepts and JS still get their turn.
       */
      if (round + 1 < st->drain_rounds) continue;
      break;
    }
    napi_value arg = make_int(env, count), result;
    napi_status s = napi_make_callback(env, st->async_ctx, recv, cb_v, 1, &arg, &result);
    if (s == napi_pending_exception) {
      napi_value exc;
      napi_get_and_clear_last_exception(env, &exc);
      napi_fatal_exception(env, exc);
    }
    break;
  }
  napi_close_handle_scope(env, scope);
}

static void on_epoll_readable(uv_poll_t *handle, int status, int events) {
  (void)status;
  (void)events;
  drain_epoll((state_t *)handle->data);
}

/* init(ready: Int32Array of (fd, events) pairs, onReady: (count) => void) -> 0 | -errno. Idempotent per env. */
static napi_value Init(napi_env env, napi_callback_info info) {
  NAPI_ARGS(2);
  state_t *st = get_state(env);
  napi_typedarray_type type;
  size_t len;
  void *d;
  napi_valuetype cbt;
  if (argc < 2 || napi_get_typedarray_info(env, argv[0], &type, &len, &d, NULL, NULL) != napi_ok ||
      type != napi_int32_array || len < 2 || napi_typeof(env, argv[1], &cbt) != napi_ok || cbt != napi_function) {
    napi_throw_type_error(env, NULL, "init(readyFds: Int32Array, onReady: (count: number) => void)");
    return NULL;
  }
  if (st->callback) napi_delete_reference(env, st->callback);
  if (st->ready_buf) napi_delete_reference(env, st->ready_buf);
  CHECK(napi_create_reference(env, argv[1], 1, &st->callback));
  CHECK(napi_create_reference(env, argv[0], 1, &st->ready_buf));
  if (st->epfd < 0) {
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->epfd < 0) return make_int(env, -(int64_t)errno);
  }
  if (!st->polling) {
    uv_loop_t *loop = NULL;
    CHECK(napi_get_uv_event_loop(env, &loop));
    int r = poll_epoll_fd(loop, st->epfd, st, on_epoll_readable, &st->poll);
    if (r != 0) return make_int(env, r);
    st->polling = 1;
  }
  return make_int(env, 0);
}

/* waitWritable(fd) -> 0 | -errno: one-shot EPOLLOUT on the shared epoll fd. */
static napi_value WaitWritable(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  state_t *st = get_state(env);
  int64_t fd;
  if (argc < 1 || !arg_i64(env, argv[0], &fd)) {
    napi_throw_type_error(env, NULL, "waitWritable(fd)");
    return NULL;
  }
  if (st->epfd < 0) return make_int(env, -(int64_t)EBADF);
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLOUT | EPOLLONESHOT;
  ev.data.fd = (int)fd;
  st->c.waits++;
  return make_int(env, epoll_set(st->epfd, (int)fd, &ev));
}

/*
 * watch(fd, interest) -> 0 | -errno: the fd's level-triggered registration on the shared
 * epoll fd, interest 1 = readable, 2 = writable (3 = both); 0 removes it. The caller keeps
 * the current interest and calls this only when it changes (a reading connection that
 * never blocks costs no epoll_ctl per request). A registration disappears by itself when
 * its socket closes, and the number may come back as another connection: MOD falls back
 * to ADD, DEL of a vanished registration is not an error.
 */
static napi_value Watch(napi_env env, napi_callback_info info) {
  NAPI_ARGS(2);
  state_t *st = get_state(env);
  int64_t fd, interest;
  if (argc < 2 || !arg_i64(env, argv[0], &fd) || !arg_i64(env, argv[1], &interest)) {
    napi_throw_type_error(env, NULL, "watch(fd, interest)");
    return NULL;
  }
  if (st->epfd < 0) return make_int(env, -(int64_t)EBADF);
  if (interest == 0) {
    if (epoll_ctl(st->epfd, EPOLL_CTL_DEL, (int)fd, NULL) == 0 || errno == ENOENT || errno == EBADF) return make_int(env, 0);
    return make_int(env, -(int64_t)errno);
  }
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = ((interest & 1) ? EPOLLIN : 0) | ((interest & 2) ? EPOLLOUT : 0);
  ev.data.fd = (int)fd;
  if (interest & 2) st->c.waits++;
  return make_int(env, epoll_set(st->epfd, (int)fd, &ev));
}

/* recv(fd, buf, off, len) -> bytes read, 0 at end of stream, or -errno (-EAGAIN: nothing there). */
static napi_value Recv(napi_env env, napi_callback_info info) {
  NAPI_ARGS(4);
  state_t *st = get_state(env);
  int64_t fd, off, len;
  uint8_t *buf = NULL;
  size_t cap = 0;
  if (argc < 4 || !arg_i64(env, argv[0], &fd) || !arg_bytes(env, argv[1], &buf, &cap) || !arg_i64(env, argv[2], &off) ||
      !arg_i64(env, argv[3], &len) || off < 0 || len < 0 || (uint64_t)(off + len) > cap) {
    napi_throw_type_error(env, NULL, "recv(fd, buf, off, len) with [off, off+len) inside buf");
    return NULL;
  }
  ssize_t n;
  do {
    n = recv((int)fd, buf + off, (size_t)len, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  st->c.recv_calls++;
  if (n < 0) return make_int(env, -(int64_t)errno);
  return make_int(env, n);
}

/*
 * accept(listenFd, out: Int32Array) -> connections accepted into out[0..n), or -errno.
 *
 * libuv (>= 1.45) accepts ONE connection per loop turn. A worker whose turns are long
 * because it is busy serving (20 ms at 1024 busy connections, measured) then takes
 * seconds to accept a burst of new connections, and their first requests wait for it.
 * The native plane therefore also watches the listening fd and accepts every pending
 * connection in one call (bounded by out's length; level-triggered, the rest fire next
 * turn). libuv keeps watching the fd too: whichever accepts first wins, the other sees
 * EAGAIN, which both treat as "nothing pending".
 */
static napi_value Accept(napi_env env, napi_callback_info info) {
  NAPI_ARGS(2);
  state_t *st = get_state(env);
  int64_t lfd;
  napi_typedarray_type type;
  size_t cap = 0;
  void *data = NULL;
  if (argc < 2 || !arg_i64(env, argv[0], &lfd) ||
      napi_get_typedarray_info(env, argv[1], &type, &cap, &data, NULL, NULL) != napi_ok || type != napi_int32_array) {
    napi_throw_type_error(env, NULL, "accept(listenFd, out: Int32Array)");
    return NULL;
  }
  int32_t *out = (int32_t *)data;
  size_t n = 0;
  while (n < cap) {
    int fd = accept4((int)lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      out[n++] = fd;
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK || n > 0) break;
    return make_int(env, -(int64_t)errno);
  }
  if (n > 0) st->c.accept_batches++;
  st->c.accepts += n;
  return make_int(env, (int64_t)n);
}

static napi_value sockopt_int(napi_env env, napi_callback_info info, int level, int name, int set) {
  NAPI_ARGS(2);
  int64_t fd, value = 0;
  if (argc < 1 || !arg_i64(env, argv[0], &fd) || (set && (argc < 2 || !arg_i64(env, argv[1], &value)))) {
    napi_throw_type_error(env, NULL, "socket option: (fd[, value])");
    return NULL;
  }
  int v = (int)value;
  socklen_t l = sizeof v;
  int r = set ? setsockopt((int)fd, level, name, &v, l) : getsockopt((int)fd, level, name, &v, &l);
  if (r != 0) return make_int(env, -(int64_t)errno);
  return make_int(env, set ? 0 : v);
}

static napi_value SetSendBuffer(napi_env env, napi_callback_info info) {
  return sockopt_int(env, info, SOL_SOCKET, SO_SNDBUF, 1);
}
static napi_value GetSendBuffer(napi_env env, napi_callback_info info) {
  return sockopt_int(env, info, SOL_SOCKET, SO_SNDBUF, 0);
}
static napi_value SetNoDelay(napi_env env, napi_callback_info info) {
  return sockopt_int(env, info, IPPROTO_TCP, TCP_NODELAY, 1);
}

static void set_num(napi_env env, napi_value obj, const char *key, uint64_t v) {
  napi_value n;
  napi_create_double(env, (double)v, &n);
  napi_set_named_property(env, obj, key, n);
}

/* counters() -> { sendCalls, sendfileCalls, eagain, waits, wakeups, bytes, pushes, recvCalls, accepts, acceptBatches } (this thread's env) */
static napi_value Counters(napi_env env, napi_callback_info info) {
  (void)info;
  state_t *st = get_state(env);
  napi_value obj;
  CHECK(napi_create_object(env, &obj));
  set_num(env, obj, "sendCalls", st->c.send_calls);
  set_num(env, obj, "sendfileCalls", st->c.sendfile_calls);
  set_num(env, obj, "eagain", st->c.eagain);
  set_num(env, obj, "waits", st->c.waits);
  set_num(env, obj, "wakeups", st->c.wakeups);
  set_num(env, obj, "bytes", st->c.bytes);
  set_num(env, obj, "pushes", st->c.pushes);
  set_num(env, obj, "recvCalls", st->c.recv_calls);
  set_num(env, obj, "accepts", st->c.accepts);
  set_num(env, obj, "acceptBatches", st->c.accept_batches);
  set_num(env, obj, "fastHits", st->c.fast_hits);
  set_num(env, obj, "fastBytes", st->c.fast_bytes);
  set_num(env, obj, "handoffs", st->c.handoffs);
  return obj;
}

/* errnoName(n) -> "EPIPE" etc., for messages a user can act on. */
static napi_value ErrnoName(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  int64_t e = 0;
  if (argc < 1 || !arg_i64(env, argv[0], &e)) e = 0;
  if (e < 0) e = -e;
  napi_value s;
  const char *name = uv_err_name(-(int)e);
  CHECK(napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &s));
  return s;
}

static void on_poll_closed(uv_handle_t *h) {
  state_t *st = (state_t *)h->data;
  free(h);
  hits_free(st);
  if (st->epfd >= 0) close(st->epfd);
  napi_remove_async_cleanup_hook(st->cleanup);
  free(st);
}

static void cleanup_hook(napi_async_cleanup_hook_handle handle, void *arg) {
  state_t *st = (state_t *)arg;
  (void)handle;
  if (st->async_ctx) napi_async_destroy(st->env, st->async_ctx);
  if (st->callback) napi_delete_reference(st->env, st->callback);
  if (st->ready_buf) napi_delete_reference(st->env, st->ready_buf);
  st->callback = NULL;
  st->ready_buf = NULL;
  for (int i = 0; i < 3; i++) {
    if (st->hits_refs[i]) napi_delete_reference(st->env, st->hits_refs[i]);
    st->hits_refs[i] = NULL;
  }
  if (st->poll != NULL) {
    uv_poll_stop(st->poll);
    uv_close((uv_handle_t *)st->poll, on_poll_closed);
    return;
  }
  hits_free(st);
  if (st->epfd >= 0) close(st->epfd);
  napi_remove_async_cleanup_hook(st->cleanup);
  free(st);
}

#define EXPORT NAPI_EXPORT

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  state_t *st = (state_t *)calloc(1, sizeof(state_t));
  if (st == NULL) {
    napi_throw_error(env, NULL, "talon_sendfile: out of memory");
    return NULL;
  }
  st->env = env;
  st->epfd = -1;
  /*
   * 4 measured against 1 (bench/dataplane-bench.ts, arm native-pipelined-drain1): +5-8% rps at
   * 1x1 in every round, CPU per request unchanged within noise. The variable is for that A/B only.
   */
  const char *rounds = getenv("TALON_NATIVE_DRAIN_ROUNDS");
  st->drain_rounds = rounds != NULL && atoi(rounds) > 0 ? atoi(rounds) : 4;
  napi_value name;
  CHECK(napi_create_string_utf8(env, "talon_sendfile", NAPI_AUTO_LENGTH, &name));
  CHECK(napi_async_init(env, NULL, name, &st->async_ctx));
  CHECK(napi_set_instance_data(env, st, NULL, NULL));
  CHECK(napi_add_async_cleanup_hook(env, cleanup_hook, st, &st->cleanup));
  EXPORT("sendHeaderFile", SendHeaderFile);
  EXPORT("init", Init);
  EXPORT("waitWritable", WaitWritable);
  EXPORT("watch", Watch);
  EXPORT("recv", Recv);
  EXPORT("accept", Accept);
  EXPORT("setSendBuffer", SetSendBuffer);
  EXPORT("getSendBuffer", GetSendBuffer);
  EXPORT("setNoDelay", SetNoDelay);
  EXPORT("counters", Counters);
  EXPORT("errnoName", ErrnoName);
  hits_export(env, exports);
  listen_export(env, exports);
  memory_export(env, exports);
  xxh64_export(env, exports);
  xxh3_export(env, exports);
  return exports;
}
