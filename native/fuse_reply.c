/*
 * The reply functions: JavaScript answers a held request through its token. Each returns true when
 * it answered, false when the token had been answered already (a second answer is ignored).
 * fuse_reply_* only writes to /dev/fuse, so answering never waits on the kernel's other work.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include "fuse.h"

static void fill_stat(struct stat *st, napi_env env, napi_value *a, unsigned blksize) {
  memset(st, 0, sizeof *st);
  double mtime_ms = num(env, a[4]);
  st->st_ino = (ino_t)num(env, a[0]);
  st->st_mode = (mode_t)num(env, a[1]);
  st->st_nlink = (nlink_t)num(env, a[2]);
  st->st_size = (off_t)num(env, a[3]);
  st->st_uid = (uid_t)num(env, a[5]);
  st->st_gid = (gid_t)num(env, a[6]);
  st->st_blocks = (st->st_size + 511) / 512;
  st->st_blksize = blksize;
  int64_t sec = (int64_t)(mtime_ms / 1000.0);
  if ((double)sec * 1000.0 > mtime_ms) sec--;
  long nsec = (long)((mtime_ms - (double)sec * 1000.0) * 1e6);
  if (nsec < 0) nsec = 0;
  if (nsec > 999999999) nsec = 999999999;
  st->st_mtim.tv_sec = sec;
  st->st_mtim.tv_nsec = nsec;
  st->st_atim = st->st_mtim;
  st->st_ctim = st->st_mtim;
}

/* Every reply function takes the token first and returns true when it answered, false when the
   token had been answered already (a second answer is ignored). */
#define TAKE(n)                                                    \
  napi_value argv[n];                                              \
  get_args(env, info, n, argv);                                    \
  held_t *h = token_of(env, argv[0]);                              \
  if (h == NULL) THROW("talon_fuse: the first argument must be a request token"); \
  if (!take(h)) return boolean(env, 0);

static unsigned blksize_of(held_t *h) { return h->s->max_read > 0 ? h->s->max_read : 4096; }

/* replyErr(token, errno) */
napi_value js_reply_err(napi_env env, napi_callback_info info) {
  TAKE(2);
  int e = (int)num(env, argv[1]);
  if (e <= 0) e = EIO;
  fuse_reply_err(h->req, e);
  return boolean(env, 1);
}

/* replyEntry(token, ino, mode, nlink, size, mtimeMs, uid, gid, attrTtl, entryTtl) */
napi_value js_reply_entry(napi_env env, napi_callback_info info) {
  TAKE(10);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  fill_stat(&e.attr, env, &argv[1], blksize_of(h));
  e.ino = e.attr.st_ino;
  e.generation = 1;
  e.attr_timeout = num(env, argv[8]);
  e.entry_timeout = num(env, argv[9]);
  fuse_reply_entry(h->req, &e);
  return boolean(env, 1);
}

/* replyNegative(token, entryTtl): ENOENT the kernel may remember */
napi_value js_reply_negative(napi_env env, napi_callback_info info) {
  TAKE(2);
  struct fuse_entry_param e;
  memset(&e, 0, sizeof e);
  e.ino = 0;
  e.entry_timeout = num(env, argv[1]);
  fuse_reply_entry(h->req, &e);
  return boolean(env, 1);
}

/* replyAttr(token, ino, mode, nlink, size, mtimeMs, uid, gid, attrTtl) */
napi_value js_reply_attr(napi_env env, napi_callback_info info) {
  TAKE(9);
  struct stat st;
  fill_stat(&st, env, &argv[1], blksize_of(h));
  fuse_reply_attr(h->req, &st, num(env, argv[8]));
  return boolean(env, 1);
}

/* replyOpen(token, fh, keepCache, directIo) -> true, or "interrupted" when the open was cancelled
   meanwhile (the caller then releases fh itself; the kernel will not). */
napi_value js_reply_open(napi_env env, napi_callback_info info) {
  TAKE(4);
  struct fuse_file_info fi;
  memset(&fi, 0, sizeof fi);
  bool keep = false, direct = false;
  napi_get_value_bool(env, argv[2], &keep);
  napi_get_value_bool(env, argv[3], &direct);
  fi.fh = (uint64_t)num(env, argv[1]);
  fi.keep_cache = keep;
  fi.direct_io = direct;
  if (fuse_reply_open(h->req, &fi) == -ENOENT) {
    napi_value s;
    napi_create_string_utf8(env, "interrupted", NAPI_AUTO_LENGTH, &s);
    return s;
  }
  return boolean(env, 1);
}

/* replyData(token, chunks: Uint8Array[]) */
napi_value js_reply_data(napi_env env, napi_callback_info info) {
  TAKE(2);
  uint32_t n = 0;
  if (napi_get_array_length(env, argv[1], &n) != napi_ok) {
    fuse_reply_err(h->req, EIO);
    THROW("talon_fuse.replyData: chunks must be an array of Uint8Array (answered EIO)");
  }
  struct iovec stack[16];
  struct iovec *iov = n <= 16 ? stack : malloc(sizeof *iov * n);
  if (iov == NULL) {
    fuse_reply_err(h->req, ENOMEM);
    return boolean(env, 1);
  }
  size_t room = h->size;
  int count = 0;
  for (uint32_t i = 0; i < n && room > 0; i++) {
    napi_value el;
    napi_typedarray_type type;
    size_t len = 0;
    void *data = NULL;
    if (napi_get_element(env, argv[1], i, &el) != napi_ok ||
        napi_get_typedarray_info(env, el, &type, &len, &data, NULL, NULL) != napi_ok || type != napi_uint8_array) {
      if (iov != stack) free(iov);
      fuse_reply_err(h->req, EIO);
      THROW("talon_fuse.replyData: chunks must be an array of Uint8Array (answered EIO)");
    }
    if (len == 0) continue;
    if (len > room) len = room; /* never more than the kernel asked for */
    iov[count].iov_base = data;
    iov[count].iov_len = len;
    count++;
    room -= len;
  }
  fuse_reply_iov(h->req, iov, count);
  if (iov != stack) free(iov);
  return boolean(env, 1);
}

/* replyNone(token): success without data (release, releasedir) */
napi_value js_reply_none(napi_env env, napi_callback_info info) {
  TAKE(1);
  fuse_reply_err(h->req, 0);
  return boolean(env, 1);
}

/* replyDir(token, entries: {name, ino, mode, nextOffset}[]) -> how many entries fit */
napi_value js_reply_dir(napi_env env, napi_callback_info info) {
  TAKE(2);
  uint32_t n = 0;
  napi_get_array_length(env, argv[1], &n);
  size_t cap = h->size;
  char *buf = malloc(cap > 0 ? cap : 1);
  if (buf == NULL) {
    fuse_reply_err(h->req, ENOMEM);
    return boolean(env, 1);
  }
  size_t used = 0;
  uint32_t packed = 0;
  char name[1032];
  for (uint32_t i = 0; i < n; i++) {
    napi_value el, v;
    if (napi_get_element(env, argv[1], i, &el) != napi_ok) break;
    size_t nlen = 0;
    if (napi_get_named_property(env, el, "name", &v) != napi_ok ||
        napi_get_value_string_utf8(env, v, name, sizeof name, &nlen) != napi_ok)
      break;
    struct stat st;
    memset(&st, 0, sizeof st);
    napi_get_named_property(env, el, "ino", &v);
    st.st_ino = (ino_t)num(env, v);
    napi_get_named_property(env, el, "mode", &v);
    st.st_mode = (mode_t)num(env, v);
    napi_get_named_property(env, el, "nextOffset", &v);
    off_t next = (off_t)num(env, v);
    /* The kernel fails the whole readdir (EIO) on an empty name, one over 1024 bytes or one with '/':
       such a name cannot be a file here, so it is left out rather than hiding its neighbours. */
    if (nlen == 0 || nlen >= sizeof name - 1 || nlen > 1024 || memchr(name, '/', nlen) != NULL) continue;
    size_t need = fuse_add_direntry(h->req, buf + used, cap - used, name, &st, next);
    if (need > cap - used) break;
    used += need;
    packed++;
  }
  fuse_reply_buf(h->req, buf, used);
  free(buf);
  napi_value out;
  napi_create_uint32(env, packed, &out);
  return out;
}

/* replyStatfs(token, blockSize, blocks, blocksFree, blocksAvailable, files, filesFree, nameMax) */
napi_value js_reply_statfs(napi_env env, napi_callback_info info) {
  TAKE(8);
  struct statvfs sv;
  memset(&sv, 0, sizeof sv);
  sv.f_bsize = (unsigned long)num(env, argv[1]);
  sv.f_frsize = sv.f_bsize;
  sv.f_blocks = (fsblkcnt_t)num(env, argv[2]);
  sv.f_bfree = (fsblkcnt_t)num(env, argv[3]);
  sv.f_bavail = (fsblkcnt_t)num(env, argv[4]);
  sv.f_files = (fsfilcnt_t)num(env, argv[5]);
  sv.f_ffree = (fsfilcnt_t)num(env, argv[6]);
  sv.f_favail = sv.f_ffree;
  sv.f_namemax = (unsigned long)num(env, argv[7]);
  fuse_reply_statfs(h->req, &sv);
  return boolean(env, 1);
}

/* The xattr size protocol: a probe (size 0) learns the length, a short buffer gets ERANGE. */
static void reply_sized(held_t *h, const char *data, size_t len) {
  if (h->size == 0)
    fuse_reply_xattr(h->req, len);
  else if (len > h->size)
    fuse_reply_err(h->req, ERANGE);
  else
    fuse_reply_buf(h->req, data, len);
}

/* replyXattr(token, value: Uint8Array) */
napi_value js_reply_xattr(napi_env env, napi_callback_info info) {
  TAKE(2);
  napi_typedarray_type type;
  size_t len = 0;
  void *data = NULL;
  if (napi_get_typedarray_info(env, argv[1], &type, &len, &data, NULL, NULL) != napi_ok || type != napi_uint8_array) {
    fuse_reply_err(h->req, EIO);
    THROW("talon_fuse.replyXattr: value must be a Uint8Array (answered EIO)");
  }
  reply_sized(h, data, len);
  return boolean(env, 1);
}

/* replyXattrNames(token, names: string[]) */
napi_value js_reply_xattr_names(napi_env env, napi_callback_info info) {
  TAKE(2);
  uint32_t n = 0;
  napi_get_array_length(env, argv[1], &n);
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value el;
    size_t len = 0;
    napi_get_element(env, argv[1], i, &el);
    if (napi_get_value_string_utf8(env, el, NULL, 0, &len) == napi_ok) total += len + 1;
  }
  char *buf = malloc(total > 0 ? total : 1);
  if (buf == NULL) {
    fuse_reply_err(h->req, ENOMEM);
    return boolean(env, 1);
  }
  size_t pos = 0;
  for (uint32_t i = 0; i < n; i++) {
    napi_value el;
    size_t len = 0;
    napi_get_element(env, argv[1], i, &el);
    if (napi_get_value_string_utf8(env, el, buf + pos, total - pos, &len) == napi_ok) pos += len + 1;
  }
  reply_sized(h, buf, pos);
  free(buf);
  return boolean(env, 1);
}
