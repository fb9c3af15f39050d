/*
 * talon_fuse: a read-only FUSE session on libfuse3's low-level API, answered from JavaScript.
 *
 * Threads and who may do what:
 *   - the receive thread polls /dev/fuse (non-blocking) beside an eventfd, reads one request at
 *     a time and lets libfuse decode it into the ops below. Each op copies what it needs into a
 *     `held_t` (the request plus its arguments), links it on the session's outstanding list and
 *     queues it on a thread-safe function; it never waits for JavaScript. Mutating ops are
 *     answered EROFS right there.
 *   - the JavaScript thread receives each held request with an external token and answers it
 *     whenever it likes through the reply functions (fuse_reply_* only writes to /dev/fuse, which
 *     is safe from any thread). A token answers once; a token JavaScript drops unanswered is
 *     answered EIO by its finalizer, so the kernel never waits forever on a lost reply.
 *   - the notify thread sends cache invalidations. They may block on a page lock held by a read
 *     only JavaScript can answer, so they must not run on either of the other threads.
 * Teardown: unmount() wakes the receive thread, which detaches the mount and keeps serving until
 * the notify thread has stopped (after NOTIFY_DRAIN_MS answering every request EIO itself), then
 * tells JavaScript the session ended. JavaScript answers EIO to whatever is still outstanding and
 * destroys the session (closing /dev/fuse aborts requests of files still open on the detached
 * mount). An unmount from outside (umount, fusermount3 -u) ends the receive loop the same way.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fuse.h"

#define NOTIFY_DRAIN_MS 2000 /* how long a stopping session lets JavaScript answer before it answers EIO itself */

/* ---- small helpers ---- */

static void sess_unref(sess_t *s) {
  pthread_mutex_lock(&s->mu);
  int left = --s->refs;
  pthread_mutex_unlock(&s->mu);
  if (left > 0) return;
  note_t *n = s->nhead;
  while (n) {
    note_t *next = n->next;
    free(n->name);
    free(n);
    n = next;
  }
  if (s->wake_fd >= 0) close(s->wake_fd);
  free(s->mountpoint);
  pthread_cond_destroy(&s->ncv);
  pthread_mutex_destroy(&s->mu);
  free(s);
}

static void wake(sess_t *s) {
  uint64_t one = 1;
  ssize_t r = write(s->wake_fd, &one, sizeof one);
  (void)r;
}

static void unlink_held(held_t *h) {
  if (h->next) {
    h->prev->next = h->next;
    h->next->prev = h->prev;
    h->next = h->prev = NULL;
  }
}

static void free_held(held_t *h) {
  sess_t *s = h->s;
  free(h->name);
  free(h);
  sess_unref(s);
}

/* Declared in fuse.h: the reply functions take requests through it too. */
int take(held_t *h) {
  if (h->answered || h->req == NULL) return 0;
  pthread_mutex_lock(&h->s->mu);
  unlink_held(h);
  pthread_mutex_unlock(&h->s->mu);
  h->answered = 1;
  return 1;
}

/* ---- receive thread: the low-level ops ---- */

static void post(sess_t *s, fuse_req_t req, int op, uint64_t ino, uint64_t a, int64_t b, size_t size,
                 const char *name) {
  held_t *h = calloc(1, sizeof *h);
  char *copy = NULL;
  if (h != NULL && name != NULL && (copy = strdup(name)) == NULL) {
    free(h);
    h = NULL;
  }
  if (h == NULL) {
    if (req) fuse_reply_err(req, ENOMEM);
    return;
  }
  if (req != NULL && s->draining) {
    free(copy);
    free(h);
    fuse_reply_err(req, EIO);
    return;
  }
  h->s = s;
  h->req = req;
  h->op = op;
  h->ino = ino;
  h->a = a;
  h->b = b;
  h->size = size;
  h->name = copy;
  h->answered = req == NULL;
  pthread_mutex_lock(&s->mu);
  s->refs++;
  if (req) {
    h->next = &s->outstanding;
    h->prev = s->outstanding.prev;
    s->outstanding.prev->next = h;
    s->outstanding.prev = h;
  }
  pthread_mutex_unlock(&s->mu);
  if (napi_call_threadsafe_function(s->tsfn, h, napi_tsfn_nonblocking) != napi_ok) {
    /* The function is closing: nobody in JavaScript will see this request. */
    if (take(h)) fuse_reply_err(req, EIO);
    free_held(h);
  }
}

static sess_t *S(fuse_req_t req) { return (sess_t *)fuse_req_userdata(req); }

static void ll_init(void *userdata, struct fuse_conn_info *conn) {
  sess_t *s = userdata;
  /* libfuse derives max_pages (the largest single read) from max_write; nothing is written here. */
  if (s->max_read > 0) {
    conn->max_write = s->max_read;
    conn->max_read = s->max_read; /* must equal the max_read mount option, or libfuse ends the session */
  }
  conn->max_readahead = s->max_readahead;
  /* Many reads in flight (readahead, several readers): they are answered out of order anyway. */
  if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
  /* Cached pages go only when the filesystem says so (invalidateInode) or the size changes,
     not whenever the kernel sees a new mtime: FOPEN_KEEP_CACHE means the version is unchanged. */
  conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  conn->max_background = 64;
  conn->congestion_threshold = 48;
  s->got_init = 1;
  s->got_max_readahead = conn->max_readahead;
  s->got_max_write = conn->max_write;
  s->got_max_background = conn->max_background;
  s->got_capable = conn->capable;
  s->got_want = conn->want;
  s->proto_minor = conn->proto_minor;
  /* libfuse sends the INIT reply after this returns; the kernel queues requests until then. */
  post(s, NULL, EV_INIT, 0, 0, 0, 0, NULL);
}

static void ll_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
  post(S(req), req, OP_LOOKUP, parent, 0, 0, 0, name);
}

static void ll_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  sess_t *s = S(req);
  fuse_reply_none(req);
  post(s, NULL, OP_FORGET, ino, nlookup, 0, 0, NULL);
}

static void ll_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets) {
  sess_t *s = S(req);
  for (size_t i = 0; i < count; i++) post(s, NULL, OP_FORGET, forgets[i].ino, forgets[i].nlookup, 0, 0, NULL);
  fuse_reply_none(req);
}

static void ll_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  post(S(req), req, OP_GETATTR, ino, 0, 0, 0, NULL);
}

static void ll_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & (O_TRUNC | O_APPEND)) != 0) {
    fuse_reply_err(req, EROFS);
    return;
  }
  post(S(req), req, OP_OPEN, ino, (uint64_t)(unsigned)fi->flags, 0, 0, NULL);
}

static void ll_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  post(S(req), req, OP_READ, ino, fi->fh, off, size, NULL);
}

static void ll_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  post(S(req), req, OP_RELEASE, ino, fi->fh, 0, 0, NULL);
}

static void ll_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  post(S(req), req, OP_OPENDIR, ino, 0, 0, 0, NULL);
}

static void ll_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
  post(S(req), req, OP_READDIR, ino, fi->fh, off, size, NULL);
}

static void ll_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
  post(S(req), req, OP_RELEASEDIR, ino, fi->fh, 0, 0, NULL);
}

static void ll_statfs(fuse_req_t req, fuse_ino_t ino) { post(S(req), req, OP_STATFS, ino, 0, 0, 0, NULL); }

static void ll_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
  post(S(req), req, OP_GETXATTR, ino, 0, 0, size, name);
}

static void ll_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  post(S(req), req, OP_LISTXATTR, ino, 0, 0, size, NULL);
}

/* Everything that would change the tree or a file: refused here, JavaScript never sees it. */
static void rofs_err(fuse_req_t req) { fuse_reply_err(req, EROFS); }
static void ll_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
  rofs_err(req);
}
static void ll_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev) { rofs_err(req); }
static void ll_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) { rofs_err(req); }
static void ll_unlink(fuse_req_t req, fuse_ino_t parent, const char *name) { rofs_err(req); }
static void ll_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name) { rofs_err(req); }
static void ll_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name) { rofs_err(req); }
static void ll_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent, const char *newname,
                      unsigned int flags) {
  rofs_err(req);
}
static void ll_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname) { rofs_err(req); }
static void ll_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi) {
  rofs_err(req);
}
static void ll_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
  rofs_err(req);
}
static void ll_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
                        int flags) {
  rofs_err(req);
}
static void ll_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name) { rofs_err(req); }
static void ll_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                         struct fuse_file_info *fi) {
  rofs_err(req);
}
static void ll_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                               fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                               int flags) {
  rofs_err(req);
}

static const struct fuse_lowlevel_ops ops = {
    .init = ll_init,
    .lookup = ll_lookup,
    .forget = ll_forget,
    .forget_multi = ll_forget_multi,
    .getattr = ll_getattr,
    .open = ll_open,
    .read = ll_read,
    .release = ll_release,
    .opendir = ll_opendir,
    .readdir = ll_readdir,
    .releasedir = ll_releasedir,
    .statfs = ll_statfs,
    .getxattr = ll_getxattr,
    .listxattr = ll_listxattr,
    .setattr = ll_setattr,
    .mknod = ll_mknod,
    .mkdir = ll_mkdir,
    .unlink = ll_unlink,
    .rmdir = ll_rmdir,
    .symlink = ll_symlink,
    .rename = ll_rename,
    .link = ll_link,
    .write = ll_write,
    .create = ll_create,
    .setxattr = ll_setxattr,
    .removexattr = ll_removexattr,
    .fallocate = ll_fallocate,
    .copy_file_range = ll_copy_file_range,
};

static uint64_t mono_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

extern char **environ;

/* Lazily unmounts while keeping /dev/fuse open. fuse_session_unmount would close the fd under the
   threads still using it (a reused fd number would then receive our replies); the fd is closed
   only by fuse_session_destroy, once nothing can write to it. */
static void detach(sess_t *s) {
  struct pollfd pfd = {.fd = fuse_session_fd(s->se), .events = 0};
  /* POLLERR: the connection is already gone (unmounted from outside); the path may hold another mount now. */
  if (poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLERR)) return;
  if (umount2(s->mountpoint, MNT_DETACH) == 0) return;
  if (errno != EPERM) return;
  /* Not root: the setuid helper that mounted it unmounts it. */
  char *argv[] = {"fusermount3", "-u", "-z", "--", s->mountpoint, NULL};
  pid_t pid;
  if (posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ) == 0) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

/* Once only: after our unmount the path may hold another mount, which a second umount would take. */
static void detach_once(sess_t *s) {
  pthread_mutex_lock(&s->mu);
  int already = s->detached;
  s->detached = 1;
  pthread_mutex_unlock(&s->mu);
  if (!already) detach(s);
}

/* Sessions still mounted, detached at exit(): a process that exits without unmounting (process.exit,
   an uncaught error) would otherwise leave a dead mount ("Transport endpoint is not connected")
   on the path until someone runs fusermount3 -u. */
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static sess_t *live_head;
static int live_hooked;

static void detach_all_at_exit(void) {
  pthread_mutex_lock(&live_mu);
  for (sess_t *s = live_head; s != NULL; s = s->live_next) detach_once(s);
  pthread_mutex_unlock(&live_mu);
}

static void live_add(sess_t *s) {
  pthread_mutex_lock(&live_mu);
  if (!live_hooked) {
    atexit(detach_all_at_exit);
    live_hooked = 1;
  }
  s->live_prev = NULL;
  s->live_next = live_head;
  if (live_head) live_head->live_prev = s;
  live_head = s;
  pthread_mutex_unlock(&live_mu);
}

static void live_remove(sess_t *s) {
  pthread_mutex_lock(&live_mu);
  if (s->live_prev)
    s->live_prev->live_next = s->live_next;
  else if (live_head == s)
    live_head = s->live_next;
  if (s->live_next) s->live_next->live_prev = s->live_prev;
  s->live_next = s->live_prev = NULL;
  pthread_mutex_unlock(&live_mu);
}

/* Whether one of this process's live sessions is mounted at `path`: probing it would ask our own
   (blocked) JavaScript thread to answer. */
static int mounted_here(const char *path) {
  int found = 0;
  pthread_mutex_lock(&live_mu);
  for (sess_t *s = live_head; s != NULL && !found; s = s->live_next) found = strcmp(s->mountpoint, path) == 0;
  pthread_mutex_unlock(&live_mu);
  return found;
}

static void *rx_main(void *arg) {
  sess_t *s = arg;
  struct fuse_buf buf = {0};
  int fd = fuse_session_fd(s->se);
  int detached = 0;
  uint64_t deadline = 0;
  for (;;) {
    pthread_mutex_lock(&s->mu);
    int stopping = s->stopping, ndone = s->ndone;
    pthread_mutex_unlock(&s->mu);
    if (stopping && !detached) {
      /* Lazy: a busy mount goes from the namespace now and ends when its last user lets go. */
      detach_once(s);
      detached = 1;
      deadline = mono_ms() + NOTIFY_DRAIN_MS;
      pthread_mutex_lock(&s->mu);
      s->nstop = 1;
      pthread_cond_signal(&s->ncv);
      pthread_mutex_unlock(&s->mu);
    }
    /* Keep answering while the notify thread finishes: its call may wait on the page locks of any
       read, answered or not yet read. Past the deadline every request is answered EIO (outstanding
       ones by JavaScript's thread, new ones here), so the invalidation cannot wait forever on a
       read JavaScript never answers, and this loop cannot stop while it waits. */
    if (detached && ndone) break;
    if (detached && !s->draining && mono_ms() >= deadline) {
      s->draining = 1;
      post(s, NULL, EV_DRAIN, 0, 0, 0, 0, NULL);
    }
    if (fuse_session_exited(s->se)) break;
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = s->wake_fd, .events = POLLIN}};
    int r = poll(pfd, 2, detached ? 20 : -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pfd[1].revents & POLLIN) {
      uint64_t v;
      ssize_t n = read(s->wake_fd, &v, sizeof v);
      (void)n;
    }
    if (pfd[0].revents & (POLLIN | POLLERR | POLLHUP)) {
      int res = fuse_session_receive_buf(s->se, &buf);
      if (res == -EINTR || res == -EAGAIN) continue;
      if (res <= 0) break; /* 0: the kernel ended the session (ENODEV): unmounted from outside */
      fuse_session_process_buf(s->se, &buf);
    }
  }
  free(buf.mem);
  post(s, NULL, EV_ENDED, 0, 0, 0, 0, NULL);
  return NULL;
}

/* ---- notify thread ---- */

static void destroy_fuse(sess_t *s) {
  if (s->se) {
    fuse_session_destroy(s->se);
    s->se = NULL;
  }
}

static void *nt_main(void *arg) {
  sess_t *s = arg;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (s->nhead == NULL && !s->nstop) pthread_cond_wait(&s->ncv, &s->mu);
    if (s->nstop) break;
    note_t *n = s->nhead;
    s->nhead = n->next;
    if (s->nhead == NULL) s->ntail = NULL;
    s->nqueued--;
    s->nbusy = 1;
    pthread_mutex_unlock(&s->mu);
    /* Errors are expected and harmless: ENOENT when the kernel has no such inode/name cached. */
    if (n->name)
      fuse_lowlevel_notify_inval_entry(s->se, n->ino, n->name, strlen(n->name));
    else
      fuse_lowlevel_notify_inval_inode(s->se, n->ino, n->off, n->len);
    free(n->name);
    free(n);
    pthread_mutex_lock(&s->mu);
    s->nbusy = 0;
  }
  s->ndone = 1;
  int destroy = s->destroy_by_notify;
  pthread_mutex_unlock(&s->mu);
  wake(s);
  if (destroy) {
    destroy_fuse(s);
    sess_unref(s);
  }
  return NULL;
}

/* ---- JavaScript thread ---- */

static void finalize_token(napi_env env, void *data, void *hint) {
  held_t *h = data;
  if (take(h)) fuse_reply_err(h->req, EIO);
  free_held(h);
}

/* The session ended (unmount, or unmounted from outside): answer what is left, release the fuse session. */
static void answer_outstanding(sess_t *s) {
  pthread_mutex_lock(&s->mu);
  held_t *h = s->outstanding.next;
  while (h != &s->outstanding) {
    held_t *next = h->next;
    h->next = h->prev = NULL;
    h->answered = 1;
    fuse_reply_err(h->req, EIO);
    h = next;
  }
  s->outstanding.next = s->outstanding.prev = &s->outstanding;
  pthread_mutex_unlock(&s->mu);
}

static void finish(napi_env env, sess_t *s) {
  if (s->ended) return;
  s->ended = 1;
  answer_outstanding(s);
  if (s->rx_started) pthread_join(s->rx, NULL);
  s->rx_started = 0;
  /* The loop can also end on its own (an error, a bad init): the mount must not outlive it. Once
     detached, never again: the path may by now hold someone else's mount. detach() skips this
     when the kernel has already ended the connection (unmounted from outside). */
  detach_once(s);
  live_remove(s);
  pthread_mutex_lock(&s->mu);
  s->nstop = 1;
  pthread_cond_signal(&s->ncv);
  int destroy_here = !s->nt_started || s->ndone;
  if (!destroy_here) {
    /* An invalidation is stuck in the kernel: the notify thread closes the session when it returns. */
    s->destroy_by_notify = 1;
    s->refs++;
  }
  pthread_mutex_unlock(&s->mu);
  if (destroy_here) {
    if (s->nt_started) pthread_join(s->nt, NULL);
    destroy_fuse(s);
  } else {
    pthread_detach(s->nt);
  }
  s->nt_started = 0;
  napi_release_threadsafe_function(s->tsfn, napi_tsfn_release);
}

static void call_js(napi_env env, napi_value js_cb, void *context, void *data) {
  held_t *h = data;
  sess_t *s = h->s;
  if (env == NULL) {
    /* The function is being torn down with this request still queued. */
    if (take(h)) fuse_reply_err(h->req, EIO);
    free_held(h);
    return;
  }
  if (h->op == EV_DRAIN) {
    answer_outstanding(s);
    free_held(h);
    return;
  }
  if (h->op == EV_ENDED) {
    finish(env, s);
  }
  napi_value argv[7], undef, token;
  napi_get_undefined(env, &undef);
  if (h->req != NULL) {
    if (napi_create_external(env, h, finalize_token, NULL, &token) != napi_ok) {
      if (take(h)) fuse_reply_err(h->req, EIO);
      free_held(h);
      return;
    }
  } else {
    token = undef;
  }
  napi_create_int32(env, h->op, &argv[0]);
  argv[1] = token;
  napi_create_double(env, (double)h->ino, &argv[2]);
  napi_create_double(env, (double)h->a, &argv[3]);
  napi_create_double(env, (double)h->b, &argv[4]);
  napi_create_double(env, (double)h->size, &argv[5]);
  if (h->name)
    napi_create_string_utf8(env, h->name, NAPI_AUTO_LENGTH, &argv[6]);
  else
    argv[6] = undef;
  if (h->req == NULL) free_held(h); /* events carry no reply: their data is in argv already */
  napi_value ret;
  napi_status st = napi_call_function(env, undef, js_cb, 7, argv, &ret);
  if (st == napi_pending_exception) {
    /* Surfaces like any exception thrown from a callback (native.ts catches handler errors and
       answers EIO, so this is a bug in the dispatcher itself). */
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
}

static void tsfn_finalize(napi_env env, void *data, void *hint) { sess_unref((sess_t *)data); }

/* ---- exported functions ---- */

static sess_t *session_of(napi_env env, napi_value v) {
  void *p = NULL;
  napi_valuetype t;
  if (napi_typeof(env, v, &t) != napi_ok || t != napi_external) return NULL;
  if (napi_get_value_external(env, v, &p) != napi_ok) return NULL;
  return p;
}

static void session_finalize(napi_env env, void *data, void *hint) { sess_unref((sess_t *)data); }

static char *string_arg(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, NULL, 0, &len) != napi_ok) return NULL;
  char *out = malloc(len + 1);
  if (out == NULL) return NULL;
  napi_get_value_string_utf8(env, v, out, len + 1, &len);
  return out;
}

/* The path made absolute and canonical through its parent only: resolving the last component would
   stat it, and if it is one of our own mounts that asks this (blocked) thread to answer. */
static char *canonical(const char *given) {
  size_t n = strlen(given);
  while (n > 1 && given[n - 1] == '/') n--;
  char *copy = strndup(given, n);
  if (copy == NULL) return NULL;
  char *slash = strrchr(copy, '/');
  const char *base = slash ? slash + 1 : copy;
  char *parent;
  if (slash == copy)
    parent = realpath("/", NULL);
  else if (slash) {
    *slash = '\0';
    parent = realpath(copy, NULL);
  } else
    parent = realpath(".", NULL);
  char *out = NULL;
  if (parent != NULL && *base != '\0' && asprintf(&out, "%s%s%s", parent, strcmp(parent, "/") == 0 ? "" : "/", base) < 0)
    out = NULL;
  if (out == NULL) out = strdup(given); /* let the checks below say what is wrong with it */
  free(parent);
  free(copy);
  return out;
}

/* Finds the bdi of the mount just made (its st_dev, from mountinfo: stat would ask ourselves) and
   raises its readahead: the kernel starts every FUSE mount at 128 KiB and init can only lower it. */
static unsigned raise_bdi_readahead(const char *mountpoint, unsigned bytes) {
  FILE *f = fopen("/proc/self/mountinfo", "r");
  if (f == NULL) return 0;
  char line[4096];
  unsigned maj = 0, min = 0;
  int found = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned id, parent, ma, mi;
    char root[1024], mnt[1024];
    if (sscanf(line, "%u %u %u:%u %1023s %1023s", &id, &parent, &ma, &mi, root, mnt) != 6) continue;
    /* mountinfo escapes spaces etc. as \040; the mountpoint given here is matched unescaped when plain */
    if (strcmp(mnt, mountpoint) == 0) {
      maj = ma;
      min = mi;
      found = 1; /* the last match is the topmost mount */
    }
  }
  fclose(f);
  if (!found) return 0;
  char path[128];
  snprintf(path, sizeof path, "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char val[32];
  int n = snprintf(val, sizeof val, "%u", bytes / 1024);
  ssize_t w = write(fd, val, (size_t)n);
  close(fd);
  return w == n ? bytes : 0;
}

/* mount(mountpoint, fsName, allowOther, maxRead, maxReadahead, dispatch) -> session external.
   Throws an Error whose message says what to do. */
static napi_value js_mount(napi_env env, napi_callback_info info) {
  napi_value argv[6];
  if (!get_args(env, info, 6, argv)) THROW("talon_fuse.mount: bad arguments");
  char *given = string_arg(env, argv[0]);
  char *mountpoint = given ? canonical(given) : NULL;
  free(given);
  char *fsname = string_arg(env, argv[1]);
  bool allow_other = false;
  napi_get_value_bool(env, argv[2], &allow_other);
  double max_read = num(env, argv[3]), max_ra = num(env, argv[4]);
  char msg[1024];
  if (mountpoint == NULL || fsname == NULL) {
    free(mountpoint);
    free(fsname);
    THROW("talon_fuse.mount: mountpoint and fsName must be strings");
  }
  for (const char *p = fsname; *p; p++) {
    if (*p == ',' || *p == '\\' || *p == ' ') {
      free(mountpoint);
      free(fsname);
      THROW("talon_fuse.mount: fsName may not contain ',', '\\' or spaces");
    }
  }
  if (access("/dev/fuse", R_OK | W_OK) != 0) {
    if (errno == EACCES && geteuid() != 0)
      /* libfuse3 opens /dev/fuse as the calling user (fusermount3 only does the mount(2)). */
      snprintf(msg, sizeof msg,
               "cannot open /dev/fuse as uid %u (Permission denied): the device is not open to this user here; "
               "libfuse opens it as the mounting user, so give it the usual mode (chmod 0666 /dev/fuse, as udev does) or mount as root",
               (unsigned)geteuid());
    else
      snprintf(msg, sizeof msg,
               "cannot open /dev/fuse (%s): install fuse3 and load the fuse module (modprobe fuse); in a container, "
               "pass --device /dev/fuse --cap-add SYS_ADMIN",
               strerror(errno));
    free(mountpoint);
    free(fsname);
    THROW(msg);
  }
  if (mounted_here(mountpoint)) {
    snprintf(msg, sizeof msg, "cannot mount at %s: this process already serves a mount there; unmount it first",
             mountpoint);
    free(mountpoint);
    free(fsname);
    THROW(msg);
  }
  /* Forced past cached attributes: a dead FUSE mount answers its cached root attributes for a
     while, but any request to it fails ENOTCONN. */
  struct statx stx;
  int stat_err = statx(AT_FDCWD, mountpoint, AT_STATX_FORCE_SYNC, STATX_TYPE, &stx) != 0 ? errno : 0;
  struct stat st;
  st.st_mode = stx.stx_mode;
  if (stat_err == ENOTCONN) {
    snprintf(msg, sizeof msg,
             "cannot mount at %s: a dead FUSE mount is left there (its process ended without unmounting); "
             "run fusermount3 -u -z %s (or umount -l) first",
             mountpoint, mountpoint);
    free(mountpoint);
    free(fsname);
    THROW(msg);
  }
  if (stat_err != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(msg, sizeof msg, "cannot mount at %s: %s; the mountpoint must be an existing directory", mountpoint,
             stat_err ? strerror(stat_err) : "not a directory");
    free(mountpoint);
    free(fsname);
    THROW(msg);
  }

  sess_t *s = calloc(1, sizeof *s);
  if (s == NULL) THROW("talon_fuse.mount: out of memory");
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->ncv, NULL);
  s->refs = 1; /* the JS session external */
  s->outstanding.next = s->outstanding.prev = &s->outstanding;
  s->max_read = max_read > 0 ? (unsigned)max_read : 0;
  s->max_readahead = max_ra > 0 ? (unsigned)max_ra : 0;
  s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  s->mountpoint = strdup(mountpoint);

  char opts[512];
  snprintf(opts, sizeof opts, "fsname=%s,subtype=%s,ro,default_permissions%s%s", fsname, fsname,
           allow_other ? ",allow_other" : "", "");
  if (s->max_read > 0) {
    size_t l = strlen(opts);
    snprintf(opts + l, sizeof opts - l, ",max_read=%u", s->max_read);
  }
  char *args_v[] = {"talon", "-o", opts, NULL};
  struct fuse_args args = FUSE_ARGS_INIT(3, args_v);
  s->se = fuse_session_new(&args, &ops, sizeof ops, s);
  if (s->se == NULL) {
    snprintf(msg, sizeof msg, "cannot start a FUSE session with options %s (libfuse refused them; see stderr)", opts);
    goto fail;
  }
  if (fuse_session_mount(s->se, mountpoint) != 0) {
    snprintf(msg, sizeof msg,
             "cannot mount FUSE at %s: is /dev/fuse usable and fusermount3 installed (apt-get install fuse3)? "
             "Without root, allow_other needs user_allow_other in /etc/fuse.conf; see stderr for libfuse's reason",
             mountpoint);
    goto fail_destroy;
  }
  {
    int fd = fuse_session_fd(s->se);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  }
  if (s->max_readahead > 128 * 1024) raise_bdi_readahead(mountpoint, s->max_readahead);

  napi_value resource, ext;
  napi_create_string_utf8(env, "talon_fuse", NAPI_AUTO_LENGTH, &resource);
  s->refs++; /* the thread-safe function */
  if (napi_create_threadsafe_function(env, argv[5], NULL, resource, 0, 1, s, tsfn_finalize, s, call_js, &s->tsfn) !=
      napi_ok) {
    s->refs--;
    snprintf(msg, sizeof msg, "talon_fuse.mount: could not create the dispatch function");
    goto fail_unmount;
  }
  /* The threads hold no reference of their own: the thread-safe function's outlives them, as it
     is released only by finish(), after the receive thread is joined and the notify thread is
     joined or holds the reference it takes there. */
  if (pthread_create(&s->nt, NULL, nt_main, s) != 0) {
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    snprintf(msg, sizeof msg, "talon_fuse.mount: could not start the notify thread");
    goto fail_unmount;
  }
  s->nt_started = 1;
  if (pthread_create(&s->rx, NULL, rx_main, s) != 0) {
    pthread_mutex_lock(&s->mu);
    s->nstop = 1;
    pthread_cond_signal(&s->ncv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->nt, NULL);
    s->nt_started = 0;
    napi_release_threadsafe_function(s->tsfn, napi_tsfn_abort);
    snprintf(msg, sizeof msg, "talon_fuse.mount: could not start the receive thread");
    goto fail_unmount;
  }
  s->rx_started = 1;
  live_add(s);
  free(mountpoint);
  free(fsname);
  if (napi_create_external(env, s, session_finalize, NULL, &ext) != napi_ok) THROW("talon_fuse.mount: external");
  return ext;

fail_unmount:
  detach(s);
fail_destroy:
  fuse_session_destroy(s->se);
  s->se = NULL;
fail:
  free(mountpoint);
  free(fsname);
  sess_unref(s); /* the would-be JS reference; a created thread-safe function drops its own */
  THROW(msg);
}

/* unmount(session): asks the receive thread to detach and stop; the dispatch gets EV_ENDED when done. */
static napi_value js_unmount(napi_env env, napi_callback_info info) {
  napi_value argv[1];
  get_args(env, info, 1, argv);
  sess_t *s = session_of(env, argv[0]);
  if (s == NULL) THROW("talon_fuse.unmount: not a session");
  if (s->ended) return boolean(env, 0);
  pthread_mutex_lock(&s->mu);
  s->stopping = 1;
  pthread_mutex_unlock(&s->mu);
  wake(s);
  return boolean(env, 1);
}

static void enqueue_note(sess_t *s, note_t *n) {
  pthread_mutex_lock(&s->mu);
  if (s->nstop || s->ended) {
    pthread_mutex_unlock(&s->mu);
    free(n->name);
    free(n);
    return;
  }
  if (s->ntail)
    s->ntail->next = n;
  else
    s->nhead = n;
  s->ntail = n;
  s->nqueued++;
  pthread_cond_signal(&s->ncv);
  pthread_mutex_unlock(&s->mu);
}

/* invalidateInode(session, ino, offset, length) */
static napi_value js_inval_inode(napi_env env, napi_callback_info info) {
  napi_value argv[4];
  get_args(env, info, 4, argv);
  sess_t *s = session_of(env, argv[0]);
  if (s == NULL) THROW("talon_fuse.invalidateInode: not a session");
  note_t *n = calloc(1, sizeof *n);
  if (n == NULL) THROW("talon_fuse.invalidateInode: out of memory");
  n->ino = (uint64_t)num(env, argv[1]);
  n->off = (int64_t)num(env, argv[2]);
  n->len = (int64_t)num(env, argv[3]);
  enqueue_note(s, n);
  return undefined(env);
}

/* invalidateEntry(session, parent, name) */
static napi_value js_inval_entry(napi_env env, napi_callback_info info) {
  napi_value argv[3];
  get_args(env, info, 3, argv);
  sess_t *s = session_of(env, argv[0]);
  if (s == NULL) THROW("talon_fuse.invalidateEntry: not a session");
  note_t *n = calloc(1, sizeof *n);
  if (n == NULL) THROW("talon_fuse.invalidateEntry: out of memory");
  n->ino = (uint64_t)num(env, argv[1]);
  n->name = string_arg(env, argv[2]);
  if (n->name == NULL) {
    free(n);
    THROW("talon_fuse.invalidateEntry: name must be a string");
  }
  enqueue_note(s, n);
  return undefined(env);
}

/* info(session) -> what init negotiated (for logs and tests). */
static napi_value js_info(napi_env env, napi_callback_info info) {
  napi_value argv[1], out, v;
  get_args(env, info, 1, argv);
  sess_t *s = session_of(env, argv[0]);
  if (s == NULL) THROW("talon_fuse.info: not a session");
  napi_create_object(env, &out);
#define FIELD(name, val)                          \
  napi_create_double(env, (double)(val), &v);     \
  napi_set_named_property(env, out, name, v);
  FIELD("initialized", s->got_init);
  FIELD("protoMinor", s->proto_minor);
  FIELD("maxWrite", s->got_max_write);
  FIELD("maxReadahead", s->got_max_readahead);
  FIELD("maxBackground", s->got_max_background);
  FIELD("capable", s->got_capable);
  FIELD("want", s->got_want);
  pthread_mutex_lock(&s->mu);
  unsigned queued = s->nqueued;
  int busy = s->nbusy;
  pthread_mutex_unlock(&s->mu);
  FIELD("invalidationsQueued", queued);
  FIELD("invalidationInFlight", busy);
#undef FIELD
  return out;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  struct {
    const char *name;
    napi_callback fn;
  } fns[] = {
      {"mount", js_mount},
      {"unmount", js_unmount},
      {"invalidateInode", js_inval_inode},
      {"invalidateEntry", js_inval_entry},
      {"info", js_info},
      {"replyErr", js_reply_err},
      {"replyEntry", js_reply_entry},
      {"replyNegative", js_reply_negative},
      {"replyAttr", js_reply_attr},
      {"replyOpen", js_reply_open},
      {"replyData", js_reply_data},
      {"replyNone", js_reply_none},
      {"replyDir", js_reply_dir},
      {"replyStatfs", js_reply_statfs},
      {"replyXattr", js_reply_xattr},
      {"replyXattrNames", js_reply_xattr_names},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value f;
    if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &f) != napi_ok) return NULL;
    if (napi_set_named_property(env, exports, fns[i].name, f) != napi_ok) return NULL;
  }
  return exports;
}
