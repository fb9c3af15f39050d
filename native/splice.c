/*
 * talon_splice: a response body relayed socket-to-socket by the kernel.
 *
 * The gateway asks a worker for a piece over the data protocol and reads the reply's header
 * itself; the body's bytes then go from the worker connection's socket into a pipe and from
 * the pipe to the HTTP client's socket with splice(2), never through user space. Both sockets
 * are non-blocking (libuv's): a relay that cannot move a byte registers the side that stopped
 * it (the worker socket for EPOLLIN, the client socket for EPOLLOUT) on this module's own
 * epoll fd, which a uv_poll watches on the event loop, and carries on when it fires. The
 * loop never waits on a socket, and JS is called once per relay when it ends (plus a progress
 * note at most once a second while a slow reader holds it, for the client's idle timeout).
 *
 * Its own epoll fd and state, not the data plane's (sendfile.c): a separate-process gateway has
 * no data plane, and a co-located one must not share registrations with the worker's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "napi_util.h"

#define CHECK(call) NAPI_CHECK("talon_splice", call)

/* -RELAY_EOF: the worker closed its connection before the body's last byte. */
#define RELAY_EOF 1000
#define PROGRESS_NOTE_MS 1000
/* onEvent codes: 1 is a relay's progress note (the slot stays taken); a wait ends with WAIT_DONE | events seen. */
#define WAIT_DONE 0x100

enum { IDLE = 0, WAITING = 1, RELAYING = 2 };

typedef struct {
  int kind;
  int src, dst, pr, pw;
  int64_t left;   /* bytes still to take from src */
  int64_t inpipe; /* bytes in the pipe, not yet sent */
  int64_t pipe_size;
  uint8_t *head;
  size_t head_len, head_done;
  int reg; /* the fd registered on epfd for this slot (-1: none) */
  uint64_t last_note;
  int progressed;
} relay_t;

typedef struct {
  napi_env env;
  int epfd;
  uv_poll_t *poll;
  uv_loop_t *loop;
  napi_ref callback;
  napi_async_context async_ctx;
  napi_async_cleanup_hook_handle cleanup;
  relay_t *slots;
  int nslots;
  uint64_t relays, splices, bytes, waits, wakeups;
} sstate_t;

static sstate_t *get_state(napi_env env) { return (sstate_t *)instance_data(env); }

/* Registers `fd` for `events` under `slot` (level-triggered), replacing the slot's earlier registration. */
static int arm(sstate_t *st, int slot, int fd, uint32_t events) {
  relay_t *r = &st->slots[slot];
  struct epoll_event ev;
  memset(&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.u64 = (uint64_t)slot;
  st->waits++;
  if (r->reg == fd) {
    if (epoll_ctl(st->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
    if (errno != ENOENT) return -errno;
  } else if (r->reg >= 0) {
    epoll_ctl(st->epfd, EPOLL_CTL_DEL, r->reg, NULL);
  }
  r->reg = -1;
  if (epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
    /* Still registered under another slot's stale entry (a closed and reused fd): take it over. */
    if (errno != EEXIST || epoll_ctl(st->epfd, EPOLL_CTL_MOD, fd, &ev) != 0) return -errno;
  }
  r->reg = fd;
  return 0;
}

static void release(sstate_t *st, int slot) {
  relay_t *r = &st->slots[slot];
  if (r->reg >= 0) epoll_ctl(st->epfd, EPOLL_CTL_DEL, r->reg, NULL);
  r->reg = -1;
  free(r->head);
  r->head = NULL;
  r->kind = IDLE;
}

/*
 * Moves what the sockets allow. 0: every byte went; 1: blocked (the side to wait on is
 * registered); < 0: -errno, or -RELAY_EOF when the worker closed early.
 */
static int pump(sstate_t *st, int slot) {
  relay_t *r = &st->slots[slot];
  while (r->head_done < r->head_len) {
    ssize_t n = send(r->dst, r->head + r->head_done, r->head_len - r->head_done, MSG_NOSIGNAL | MSG_DONTWAIT | MSG_MORE);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return arm(st, slot, r->dst, EPOLLOUT) == 0 ? 1 : -errno;
      return -errno;
    }
    r->head_done += (size_t)n;
    r->progressed = 1;
  }
  for (;;) {
    int progress = 0;
    if (r->left > 0 && r->inpipe < r->pipe_size) {
      int64_t ask = r->pipe_size - r->inpipe;
      if (ask > r->left) ask = r->left;
      ssize_t n = splice(r->src, NULL, r->pw, NULL, (size_t)ask, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      st->splices++;
      if (n > 0) {
        r->left -= n;
        r->inpipe += n;
        progress = 1;
      } else if (n == 0) {
        return -RELAY_EOF;
      } else if (errno != EAGAIN && errno != EINTR) {
        return -errno;
      }
    }
    if (r->inpipe > 0) {
      unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (r->left > 0 ? SPLICE_F_MORE : 0);
      ssize_t m = splice(r->pr, NULL, r->dst, NULL, (size_t)r->inpipe, flags);
      st->splices++;
      if (m > 0) {
        r->inpipe -= m;
        st->bytes += (uint64_t)m;
        progress = 1;
        r->progressed = 1;
      } else if (m < 0 && errno != EAGAIN && errno != EINTR) {
        return -errno;
      }
    }
    if (r->left == 0 && r->inpipe == 0) return 0;
    if (!progress) {
      /* Bytes in the pipe wait for the client (the worker may have sent everything); else for the worker. */
      int fd = r->inpipe > 0 ? r->dst : r->src;
      int rc = arm(st, slot, fd, fd == r->dst ? EPOLLOUT : (EPOLLIN | EPOLLRDHUP));
      return rc == 0 ? 1 : rc;
    }
  }
}

static void call_js(sstate_t *st, int slot, int64_t code) {
  napi_env env = st->env;
  napi_value cb, global, argv[2], result;
  if (napi_get_reference_value(env, st->callback, &cb) != napi_ok || cb == NULL) return;
  napi_get_global(env, &global);
  argv[0] = make_int(env, slot);
  argv[1] = make_int(env, code);
  napi_status s = napi_make_callback(env, st->async_ctx, global, cb, 2, argv, &result);
  if (s == napi_pending_exception) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
}

static void on_epoll(uv_poll_t *handle, int status, int events) {
  (void)status;
  (void)events;
  sstate_t *st = (sstate_t *)handle->data;
  napi_handle_scope scope;
  if (napi_open_handle_scope(st->env, &scope) != napi_ok) return;
  struct epoll_event evs[256];
  int n;
  do {
    n = epoll_wait(st->epfd, evs, 256, 0);
  } while (n < 0 && errno == EINTR);
  for (int i = 0; i < n; i++) {
    int slot = (int)evs[i].data.u64;
    st->wakeups++;
    if (slot < 0 || slot >= st->nslots) continue;
    relay_t *r = &st->slots[slot];
    if (r->kind == WAITING) {
      /* A one-shot wait (the reply header): JS reads it. */
      uint32_t e = evs[i].events;
      release(st, slot);
      call_js(st, slot, WAIT_DONE | ((e & EPOLLIN) ? 1 : 0) | ((e & EPOLLOUT) ? 2 : 0) | ((e & (EPOLLERR | EPOLLHUP | EPOLLRDHUP)) ? 4 : 0));
    } else if (r->kind == RELAYING) {
      int rc = pump(st, slot);
      if (rc == 1) {
        uint64_t now = uv_now(st->loop);
        if (r->progressed && now - r->last_note >= PROGRESS_NOTE_MS) {
          r->last_note = now;
          r->progressed = 0;
          call_js(st, slot, 1);
        }
        continue;
      }
      release(st, slot);
      call_js(st, slot, rc);
    }
  }
  napi_close_handle_scope(st->env, scope);
}

static int slot_arg(napi_env env, sstate_t *st, napi_value v, int64_t *slot) {
  return arg_i64(env, v, slot) && *slot >= 0 && *slot < st->nslots;
}

/* init(slots, onEvent: (slot, code) => void) -> 0 | -errno. */
static napi_value Init(napi_env env, napi_callback_info info) {
  NAPI_ARGS(2);
  sstate_t *st = get_state(env);
  int64_t slots;
  napi_valuetype t;
  if (argc < 2 || !arg_i64(env, argv[0], &slots) || slots <= 0 || slots > 1 << 20 || napi_typeof(env, argv[1], &t) != napi_ok || t != napi_function) {
    napi_throw_type_error(env, NULL, "init(slots: number, onEvent: (slot: number, code: number) => void)");
    return NULL;
  }
  if (st->slots != NULL) return make_int(env, -EALREADY);
  st->slots = (relay_t *)calloc((size_t)slots, sizeof(relay_t));
  if (st->slots == NULL) return make_int(env, -ENOMEM);
  for (int i = 0; i < slots; i++) st->slots[i].reg = -1;
  st->nslots = (int)slots;
  CHECK(napi_create_reference(env, argv[1], 1, &st->callback));
  st->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (st->epfd < 0) return make_int(env, -errno);
  CHECK(napi_get_uv_event_loop(env, &st->loop));
  return make_int(env, poll_epoll_fd(st->loop, st->epfd, st, on_epoll, &st->poll));
}

/* pipe(out: Int32Array(2)) -> the pipe's capacity in bytes | -errno: a non-blocking pipe, grown to 1 MiB when allowed. */
static napi_value Pipe(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  napi_typedarray_type type;
  size_t len;
  void *data;
  if (argc < 1 || napi_get_typedarray_info(env, argv[0], &type, &len, &data, NULL, NULL) != napi_ok || type != napi_int32_array || len < 2) {
    napi_throw_type_error(env, NULL, "pipe(out: Int32Array(2))");
    return NULL;
  }
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return make_int(env, -errno);
  /* A bigger pipe moves a 1 MiB body in fewer splices; the default 64 KiB still works. */
  fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
  int size = fcntl(fds[1], F_GETPIPE_SZ);
  ((int32_t *)data)[0] = fds[0];
  ((int32_t *)data)[1] = fds[1];
  return make_int(env, size > 0 ? size : 65536);
}

/*
 * relay(slot, src, dst, pipeR, pipeW, pipeSize, length, head | null) -> 0 done | 1 pending | -errno.
 * Sends `head` to dst, then `length` bytes from src to dst through the pipe (empty on entry).
 * Pending: onEvent(slot, code) follows once with the end (0 or < 0), after progress notes (1).
 */
static napi_value Relay(napi_env env, napi_callback_info info) {
  NAPI_ARGS(8);
  sstate_t *st = get_state(env);
  int64_t slot, src, dst, pr, pw, psize, length;
  napi_valuetype ht = napi_null;
  if (argc < 8 || st->slots == NULL || !slot_arg(env, st, argv[0], &slot) || !arg_i64(env, argv[1], &src) || !arg_i64(env, argv[2], &dst) ||
      !arg_i64(env, argv[3], &pr) || !arg_i64(env, argv[4], &pw) || !arg_i64(env, argv[5], &psize) || !arg_i64(env, argv[6], &length) ||
      length < 0 || psize <= 0 || napi_typeof(env, argv[7], &ht) != napi_ok) {
    napi_throw_type_error(env, NULL, "relay(slot, src, dst, pipeR, pipeW, pipeSize, length, head | null) after init");
    return NULL;
  }
  relay_t *r = &st->slots[slot];
  if (r->kind != IDLE) return make_int(env, -EBUSY);
  uint8_t *head = NULL;
  size_t head_len = 0;
  if (ht != napi_null && ht != napi_undefined) {
    uint8_t *bytes;
    if (!arg_bytes(env, argv[7], &bytes, &head_len)) {
      napi_throw_type_error(env, NULL, "relay: head must be a Uint8Array or null");
      return NULL;
    }
    if (head_len > 0) {
      /* Copied: the relay may outlive the JS call that gave it. */
      head = (uint8_t *)malloc(head_len);
      if (head == NULL) return make_int(env, -ENOMEM);
      memcpy(head, bytes, head_len);
    }
  }
  r->kind = RELAYING;
  r->src = (int)src;
  r->dst = (int)dst;
  r->pr = (int)pr;
  r->pw = (int)pw;
  r->left = length;
  r->inpipe = 0;
  r->pipe_size = psize;
  r->head = head;
  r->head_len = head_len;
  r->head_done = 0;
  r->last_note = uv_now(st->loop);
  r->progressed = 0;
  st->relays++;
  int rc = pump(st, (int)slot);
  if (rc != 1) release(st, (int)slot);
  return make_int(env, rc);
}

/* wait(slot, fd, events: 1 readable | 2 writable) -> 0 | -errno: onEvent(slot, WAIT_DONE | events seen) once. */
static napi_value Wait(napi_env env, napi_callback_info info) {
  NAPI_ARGS(3);
  sstate_t *st = get_state(env);
  int64_t slot, fd, events;
  if (argc < 3 || st->slots == NULL || !slot_arg(env, st, argv[0], &slot) || !arg_i64(env, argv[1], &fd) || !arg_i64(env, argv[2], &events)) {
    napi_throw_type_error(env, NULL, "wait(slot, fd, events) after init");
    return NULL;
  }
  relay_t *r = &st->slots[slot];
  if (r->kind != IDLE) return make_int(env, -EBUSY);
  r->kind = WAITING;
  int rc = arm(st, (int)slot, (int)fd, ((events & 1) ? (EPOLLIN | EPOLLRDHUP) : 0) | ((events & 2) ? EPOLLOUT : 0));
  if (rc != 0) release(st, (int)slot);
  return make_int(env, rc);
}

/* cancel(slot) -> 1 when something was pending (no onEvent follows), else 0. */
static napi_value Cancel(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  sstate_t *st = get_state(env);
  int64_t slot;
  if (argc < 1 || st->slots == NULL || !slot_arg(env, st, argv[0], &slot)) {
    napi_throw_type_error(env, NULL, "cancel(slot) after init");
    return NULL;
  }
  int pending = st->slots[slot].kind != IDLE;
  if (pending) release(st, (int)slot);
  return make_int(env, pending);
}

/* recv(fd, buf, off, len) -> bytes read, 0 at end of stream, or -errno. */
static napi_value Recv(napi_env env, napi_callback_info info) {
  NAPI_ARGS(4);
  int64_t fd, off, len;
  uint8_t *data;
  size_t cap;
  if (argc < 4 || !arg_i64(env, argv[0], &fd) || !arg_bytes(env, argv[1], &data, &cap) || !arg_i64(env, argv[2], &off) || !arg_i64(env, argv[3], &len) ||
      off < 0 || len < 0 || (size_t)(off + len) > cap) {
    napi_throw_type_error(env, NULL, "recv(fd, buf, off, len) within buf");
    return NULL;
  }
  ssize_t n;
  do {
    n = recv((int)fd, data + off, (size_t)len, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return make_int(env, n < 0 ? -errno : n);
}

/* close(fd) -> 0 | -errno (a pipe end this module made). */
static napi_value Close(napi_env env, napi_callback_info info) {
  NAPI_ARGS(1);
  int64_t fd;
  if (argc < 1 || !arg_i64(env, argv[0], &fd)) {
    napi_throw_type_error(env, NULL, "close(fd)");
    return NULL;
  }
  return make_int(env, close((int)fd) == 0 ? 0 : -errno);
}

static napi_value Counters(napi_env env, napi_callback_info info) {
  (void)info;
  sstate_t *st = get_state(env);
  napi_value out;
  CHECK(napi_create_object(env, &out));
#define SET(name, v) CHECK(napi_set_named_property(env, out, name, make_int(env, (int64_t)(v))))
  SET("relays", st->relays);
  SET("splices", st->splices);
  SET("bytes", st->bytes);
  SET("waits", st->waits);
  SET("wakeups", st->wakeups);
#undef SET
  return out;
}

static void on_poll_closed(uv_handle_t *h) {
  sstate_t *st = (sstate_t *)h->data;
  free(h);
  if (st->epfd >= 0) close(st->epfd);
  for (int i = 0; i < st->nslots; i++) free(st->slots[i].head);
  free(st->slots);
  napi_remove_async_cleanup_hook(st->cleanup);
  free(st);
}

static void cleanup_hook(napi_async_cleanup_hook_handle handle, void *arg) {
  sstate_t *st = (sstate_t *)arg;
  (void)handle;
  if (st->async_ctx) napi_async_destroy(st->env, st->async_ctx);
  if (st->callback) napi_delete_reference(st->env, st->callback);
  st->callback = NULL;
  if (st->poll != NULL) {
    uv_poll_stop(st->poll);
    uv_close((uv_handle_t *)st->poll, on_poll_closed);
    return;
  }
  if (st->epfd >= 0) close(st->epfd);
  free(st->slots);
  napi_remove_async_cleanup_hook(st->cleanup);
  free(st);
}

#define EXPORT NAPI_EXPORT

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  sstate_t *st = (sstate_t *)calloc(1, sizeof(sstate_t));
  if (st == NULL) {
    napi_throw_error(env, NULL, "talon_splice: out of memory");
    return NULL;
  }
  st->env = env;
  st->epfd = -1;
  napi_value name;
  CHECK(napi_create_string_utf8(env, "talon_splice", NAPI_AUTO_LENGTH, &name));
  CHECK(napi_async_init(env, NULL, name, &st->async_ctx));
  CHECK(napi_set_instance_data(env, st, NULL, NULL));
  CHECK(napi_add_async_cleanup_hook(env, cleanup_hook, st, &st->cleanup));
  EXPORT("init", Init);
  EXPORT("pipe", Pipe);
  EXPORT("relay", Relay);
  EXPORT("wait", Wait);
  EXPORT("cancel", Cancel);
  EXPORT("recv", Recv);
  EXPORT("close", Close);
  EXPORT("counters", Counters);
  return exports;
}
