/*
 * The N-API and event-loop plumbing the native modules share (sendfile.c, hits.c, splice.c):
 * argument and result helpers, the checked-call macro, and the uv_poll that lets the event
 * loop's own epoll_wait sleep on a module's epoll fd. Static inline: each module is its own
 * shared object, so nothing here is a symbol another module could clash with.
 */
#ifndef TALON_NAPI_UTIL_H
#define TALON_NAPI_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <node_api.h>
#include <uv.h>

/* A failed N-API call throws, naming the module and the call, and the entry point returns. */
#define NAPI_CHECK(module, call)                                      \
  do {                                                                \
    if ((call) != napi_ok) {                                          \
      napi_throw_error(env, NULL, module ": " #call " failed");       \
      return NULL;                                                    \
    }                                                                 \
  } while (0)

/* An entry point's first `count` arguments in argv (argc: how many were passed); needs CHECK. */
#define NAPI_ARGS(count)  \
  size_t argc = count;    \
  napi_value argv[count]; \
  CHECK(napi_get_cb_info(env, info, &argc, argv, NULL, NULL))

/* exports[name] = fn; needs CHECK, env and exports. */
#define NAPI_EXPORT(name, fn)                                               \
  do {                                                                      \
    napi_value f;                                                           \
    CHECK(napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f)); \
    CHECK(napi_set_named_property(env, exports, name, f));                  \
  } while (0)

static inline void *instance_data(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
  return data;
}

static inline napi_value make_int(napi_env env, int64_t v) {
  napi_value out;
  napi_create_int64(env, v, &out);
  return out;
}

static inline int arg_i64(napi_env env, napi_value v, int64_t *out) {
  return napi_get_value_int64(env, v, out) == napi_ok;
}

/* A typed array of exactly type `want`: its data and element count. */
static inline int arg_typed(napi_env env, napi_value v, napi_typedarray_type want, void **data, size_t *len) {
  napi_typedarray_type type;
  return napi_get_typedarray_info(env, v, &type, len, data, NULL, NULL) == napi_ok && type == want;
}

/* Bytes of a Uint8Array (Buffer included), already adjusted for its byteOffset. */
static inline int arg_bytes(napi_env env, napi_value v, uint8_t **data, size_t *len) {
  napi_typedarray_type type;
  void *ptr = NULL;
  size_t length = 0;
  if (napi_get_typedarray_info(env, v, &type, &length, &ptr, NULL, NULL) != napi_ok) return 0;
  if (type != napi_uint8_array && type != napi_uint8_clamped_array) return 0;
  *data = (uint8_t *)ptr;
  *len = length;
  return 1;
}

/*
 * A uv_poll on `loop` watching `epfd` for readability, calling `cb` with handle->data = data.
 * Unreferenced: the sockets registered on epfd keep the process alive, this watcher must not.
 * 0, -ENOMEM or libuv's error; *out is set once the handle is initialized (to be closed by the
 * module's cleanup even when starting it failed).
 */
static inline int poll_epoll_fd(uv_loop_t *loop, int epfd, void *data, uv_poll_cb cb, uv_poll_t **out) {
  uv_poll_t *poll = (uv_poll_t *)calloc(1, sizeof(uv_poll_t));
  if (poll == NULL) return -ENOMEM;
  int r = uv_poll_init(loop, poll, epfd);
  if (r != 0) {
    free(poll);
    return r;
  }
  poll->data = data;
  *out = poll;
  r = uv_poll_start(poll, UV_READABLE, cb);
  if (r != 0) return r;
  uv_unref((uv_handle_t *)poll);
  return 0;
}

/*
 * (Re)registers fd on epfd: 0 or -errno. A registration disappears by itself when its socket
 * is closed, and the fd number may be reused by a later connection: so MOD first (re-arming
 * the common case), ADD when absent.
 */
static inline int epoll_set(int epfd, int fd, struct epoll_event *ev) {
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, fd, ev) == 0) return 0;
  if (errno != ENOENT) return -errno;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, ev) == 0) return 0;
  return -errno;
}

#endif
