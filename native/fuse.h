/*
 * What native/fuse.c (the session, its threads, the exported entry points) and native/fuse_reply.c
 * (the reply functions JavaScript answers requests with) share.
 */
#ifndef TALON_FUSE_H
#define TALON_FUSE_H

#define FUSE_USE_VERSION 35
#include <fuse_lowlevel.h>
#include <node_api.h>
#include <pthread.h>
#include <stdint.h>

/* Op codes handed to JavaScript; src/mount/fuse/native.ts mirrors them. */
enum {
  OP_LOOKUP = 1,
  OP_FORGET = 2,
  OP_GETATTR = 3,
  OP_OPEN = 4,
  OP_READ = 5,
  OP_RELEASE = 6,
  OP_OPENDIR = 7,
  OP_READDIR = 8,
  OP_RELEASEDIR = 9,
  OP_STATFS = 10,
  OP_GETXATTR = 11,
  OP_LISTXATTR = 12,
  EV_ENDED = 100,
  EV_INIT = 101,
  EV_DRAIN = 102 /* internal: answer every outstanding request EIO (never reaches JavaScript) */
};

typedef struct sess sess_t;

typedef struct held {
  struct held *prev, *next; /* on sess->outstanding while unanswered */
  sess_t *s;
  fuse_req_t req; /* NULL for events (forget, ended) */
  int op;
  int answered;
  uint64_t ino, a;
  int64_t b;
  size_t size; /* what the kernel can take: readdir/read buffer, xattr size (0 = size probe) */
  char *name;
} held_t;

typedef struct note {
  struct note *next;
  uint64_t ino;
  int64_t off, len;
  char *name; /* non-NULL: an entry invalidation (ino is the parent) */
} note_t;

struct sess {
  pthread_mutex_t mu;
  int refs;
  struct fuse_session *se;
  char *mountpoint;
  int wake_fd;
  napi_threadsafe_function tsfn;
  pthread_t rx, nt;
  int rx_started, nt_started;
  int stopping; /* unmount asked */
  int draining; /* receive thread only: answering every new request EIO itself */
  int detached; /* unmounted by us (at most once: see detach_once) */
  struct sess *live_next, *live_prev; /* on the live list while mounted */
  int ended;    /* JavaScript has finished the session */
  held_t outstanding;
  /* notify queue */
  pthread_cond_t ncv;
  note_t *nhead, *ntail;
  int nstop, ndone, destroy_by_notify;
  int nbusy; /* the notify thread is inside a kernel call */
  unsigned nqueued;
  /* options and what the kernel granted */
  unsigned max_read, max_readahead;
  unsigned got_max_readahead, got_max_write, got_max_background, got_capable, got_want, proto_minor;
  int got_init;
};

/* Takes a held request for answering: 1 if it was still unanswered (the caller must reply). */
int take(held_t *h);

#define THROW(msg)                            \
  do {                                        \
    napi_throw_error(env, NULL, (msg));       \
    return NULL;                              \
  } while (0)

static inline napi_value undefined(napi_env env) {
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

static inline napi_value boolean(napi_env env, int b) {
  napi_value v;
  napi_get_boolean(env, b, &v);
  return v;
}

static inline int get_args(napi_env env, napi_callback_info info, size_t want, napi_value *argv) {
  size_t argc = want;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return 0;
  for (size_t i = argc; i < want; i++) napi_get_undefined(env, &argv[i]);
  return 1;
}

static inline double num(napi_env env, napi_value v) {
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

static inline held_t *token_of(napi_env env, napi_value v) {
  void *p = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external) return NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok) return NULL;
  return p;
}

napi_value js_reply_err(napi_env env, napi_callback_info info);
napi_value js_reply_entry(napi_env env, napi_callback_info info);
napi_value js_reply_negative(napi_env env, napi_callback_info info);
napi_value js_reply_attr(napi_env env, napi_callback_info info);
napi_value js_reply_open(napi_env env, napi_callback_info info);
napi_value js_reply_data(napi_env env, napi_callback_info info);
napi_value js_reply_none(napi_env env, napi_callback_info info);
napi_value js_reply_dir(napi_env env, napi_callback_info info);
napi_value js_reply_statfs(napi_env env, napi_callback_info info);
napi_value js_reply_xattr(napi_env env, napi_callback_info info);
napi_value js_reply_xattr_names(napi_env env, napi_callback_info info);

#endif
