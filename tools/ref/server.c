/*
 * talon-ref-server: a minimal Talon data-plane server in C, the reference the
 * worker and the load generators are measured and tested against. One thread, one
 * level-triggered epoll loop; every GetRange is answered from one file (whatever
 * object it names), replies leave in request order, each as the header with
 * send(MSG_MORE) and then the body with sendfile(2).
 *
 *   talon-ref-server --listen 127.0.0.1:0 --file BLOB [--error MSG] [--sndbuf N]
 *
 * Prints "talon-ref-server: listening on HOST:PORT pid N file F (S bytes)".
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "wire.h"

#define IN_CAP (WIRE_HEADER_LEN + CAP_OTHER)
/* Replies queued per connection before the server stops reading it (back-pressure). */
#define QUEUE_PAUSE 4096

typedef struct {
  uint8_t head[WIRE_HEADER_LEN];
  char *msg; /* an error text or NULL */
  uint32_t msg_len;
  uint64_t file_off, file_len;
  uint64_t sent;
} reply;

typedef struct {
  int fd;
  uint8_t in[IN_CAP];
  size_t in_len;
  reply *q;
  size_t q_head, q_len, q_cap; /* ring, q_cap a power of two */
  int read_closed, blocked;
  uint32_t interest;
} conn;

static int ep, file_fd, listen_fd;
static uint64_t file_size;
static const char *error_msg;
static int sndbuf;
static conn **conns;
static size_t conns_cap;

static void die(const char *what) {
  fprintf(stderr, "talon-ref-server: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void usage(const char *why) {
  fprintf(stderr, "talon-ref-server: %s\nusage: talon-ref-server --listen HOST:PORT --file PATH [--error MSG] [--sndbuf N]\n", why);
  exit(2);
}

static void on_term(int sig) {
  (void)sig;
  _exit(0);
}

static reply *enqueue(conn *c) {
  if (c->q_len == c->q_cap) {
    size_t cap = c->q_cap ? c->q_cap * 2 : 16;
    reply *q = malloc(cap * sizeof *q);
    if (q == NULL) die("malloc");
    for (size_t i = 0; i < c->q_len; i++) q[i] = c->q[(c->q_head + i) & (c->q_cap - 1)];
    free(c->q);
    c->q = q;
    c->q_cap = cap;
    c->q_head = 0;
  }
  reply *r = &c->q[(c->q_head + c->q_len++) & (c->q_cap - 1)];
  memset(r, 0, sizeof *r);
  return r;
}

static void reply_error(conn *c, uint8_t type, uint32_t id, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void reply_error(conn *c, uint8_t type, uint32_t id, const char *fmt, ...) {
  reply *r = enqueue(c);
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&r->msg, fmt, ap);
  va_end(ap);
  if (n < 0) die("vasprintf");
  r->msg_len = (uint32_t)n;
  wire_put_header(r->head, type, FLAG_ERROR, id, r->msg_len);
}

/* Reads a bincode String (u64 length + bytes) at *pos; 0 when the body ends first. */
static int skip_string(const uint8_t *b, uint32_t len, uint32_t *pos) {
  if (len - *pos < 8) return 0;
  uint64_t n = le64(b + *pos);
  *pos += 8;
  if (n > len - *pos) return 0;
  *pos += (uint32_t)n;
  return 1;
}

static void get_range(conn *c, uint32_t id, const uint8_t *b, uint32_t len) {
  if (error_msg != NULL) return reply_error(c, MSG_GET_RANGE, id, "%s", error_msg);
  uint32_t pos = 0;
  if (len < 4) return reply_error(c, MSG_GET_RANGE, id, "malformed GetRange body: %u bytes, too short for the backend tag", len);
  uint32_t backend = le32(b);
  pos = 4;
  if (backend > 2) return reply_error(c, MSG_GET_RANGE, id, "malformed GetRange body: backend tag %u is not 0 (s3), 1 (gcs) or 2 (azure)", backend);
  if (!skip_string(b, len, &pos) || !skip_string(b, len, &pos) || len - pos < 16)
    return reply_error(c, MSG_GET_RANGE, id, "malformed GetRange body: truncated (%u bytes)", len);
  uint64_t off = le64(b + pos), n = le64(b + pos + 8);
  pos += 16;
  if (pos != len) return reply_error(c, MSG_GET_RANGE, id, "malformed GetRange body: %u trailing bytes", len - pos);
  if (off > file_size || n > file_size - off)
    return reply_error(c, MSG_GET_RANGE, id, "range out of bounds: offset %llu + len %llu exceeds object size %llu",
                       (unsigned long long)off, (unsigned long long)n, (unsigned long long)file_size);
  if (n > UINT32_MAX) return reply_error(c, MSG_GET_RANGE, id, "range too long: len %llu exceeds a frame's u32 length", (unsigned long long)n);
  reply *r = enqueue(c);
  wire_put_header(r->head, MSG_GET_RANGE, 0, id, (uint32_t)n);
  r->file_off = off;
  r->file_len = n;
}

/* Answers every whole frame in the buffer; -1 when the connection must be dropped unanswered. */
static int parse(conn *c) {
  size_t pos = 0;
  while (c->in_len - pos >= WIRE_HEADER_LEN) {
    wire_header h;
    wire_read_header(c->in + pos, &h);
    /* Not a Talon frame (or over its cap): there is no well-formed reply to give. */
    if (h.magic != WIRE_MAGIC || h.version != WIRE_VERSION || h.type > MSG_DELETE || h.length > wire_cap(h.type)) return -1;
    if (c->in_len - pos < WIRE_HEADER_LEN + h.length) break;
    const uint8_t *body = c->in + pos + WIRE_HEADER_LEN;
    if (h.type == MSG_GET_RANGE) get_range(c, h.id, body, h.length);
    else if (h.type == MSG_PING) wire_put_header(enqueue(c)->head, MSG_PING, 0, h.id, 0);
    else reply_error(c, h.type, h.id, "unsupported message type %u: this server answers GetRange (2) and Ping (4)", h.type);
    pos += WIRE_HEADER_LEN + h.length;
  }
  memmove(c->in, c->in + pos, c->in_len - pos);
  c->in_len -= pos;
  return 0;
}

static void close_conn(conn *c) {
  epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  for (size_t i = 0; i < c->q_len; i++) free(c->q[(c->q_head + i) & (c->q_cap - 1)].msg);
  conns[c->fd] = NULL;
  free(c->q);
  free(c);
}

/* Sends queued replies until the queue is empty or the socket is full; -1 on a dead socket. */
static int flush(conn *c) {
  c->blocked = 0;
  while (c->q_len > 0) {
    reply *r = &c->q[c->q_head];
    uint64_t front = WIRE_HEADER_LEN + r->msg_len;
    ssize_t n;
    if (r->sent < front) {
      struct iovec iov[2];
      int cnt = 0;
      if (r->sent < WIRE_HEADER_LEN) iov[cnt++] = (struct iovec){ r->head + r->sent, WIRE_HEADER_LEN - r->sent };
      if (r->msg_len > 0) {
        uint64_t done = r->sent > WIRE_HEADER_LEN ? r->sent - WIRE_HEADER_LEN : 0;
        iov[cnt++] = (struct iovec){ r->msg + done, r->msg_len - done };
      }
      struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
      n = sendmsg(c->fd, &m, MSG_NOSIGNAL | (r->file_len > 0 ? MSG_MORE : 0));
    } else {
      off_t off = (off_t)(r->file_off + (r->sent - front));
      uint64_t left = front + r->file_len - r->sent;
      n = sendfile(c->fd, file_fd, &off, left > (1u << 30) ? (1u << 30) : left);
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return c->blocked = 1, 0;
      if (errno == EINTR) continue;
      return -1;
    }
    r->sent += (uint64_t)n;
    if (r->sent == front + r->file_len) {
      free(r->msg);
      c->q_head = (c->q_head + 1) & (c->q_cap - 1);
      c->q_len--;
    }
  }
  return 0;
}

static void set_interest(conn *c) {
  uint32_t want = (c->read_closed || c->q_len >= QUEUE_PAUSE ? 0 : EPOLLIN) | (c->blocked ? EPOLLOUT : 0);
  if (want == c->interest) return;
  struct epoll_event ev = { .events = want, .data.fd = c->fd };
  if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0) die("epoll_ctl");
  c->interest = want;
}

static void on_readable(conn *c) {
  while (!c->read_closed && c->q_len < QUEUE_PAUSE && c->in_len < IN_CAP) {
    ssize_t n = recv(c->fd, c->in + c->in_len, IN_CAP - c->in_len, 0);
    if (n > 0) {
      c->in_len += (size_t)n;
      if (parse(c) < 0) return close_conn(c);
    } else if (n == 0) {
      c->read_closed = 1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      return close_conn(c);
    }
  }
  if (flush(c) < 0 || (c->read_closed && c->q_len == 0)) return close_conn(c);
  set_interest(c);
}

static void on_writable(conn *c) {
  if (flush(c) < 0 || (c->read_closed && c->q_len == 0)) return close_conn(c);
  set_interest(c);
}

static void accept_all(void) {
  for (;;) {
    int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EINTR || errno == ECONNABORTED) continue;
      die("accept4");
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (sndbuf > 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if ((size_t)fd >= conns_cap) {
      size_t cap = conns_cap ? conns_cap : 256;
      while (cap <= (size_t)fd) cap *= 2;
      conns = realloc(conns, cap * sizeof *conns);
      if (conns == NULL) die("realloc");
      memset(conns + conns_cap, 0, (cap - conns_cap) * sizeof *conns);
      conns_cap = cap;
    }
    conn *c = calloc(1, sizeof *c);
    if (c == NULL) die("calloc");
    c->fd = fd;
    c->interest = EPOLLIN;
    conns[fd] = c;
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) die("epoll_ctl");
  }
}

int main(int argc, char **argv) {
  char *listen_addr = NULL;
  const char *path = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (i + 1 >= argc) usage("every option takes a value");
    if (strcmp(a, "--listen") == 0) listen_addr = argv[++i];
    else if (strcmp(a, "--file") == 0) path = argv[++i];
    else if (strcmp(a, "--error") == 0) error_msg = argv[++i];
    else if (strcmp(a, "--sndbuf") == 0) sndbuf = (int)parse_size(argv[++i]);
    else usage("unknown option");
  }
  if (listen_addr == NULL || path == NULL) usage("--listen and --file are required");
  char *host;
  int port = split_addr(listen_addr, &host);
  if (port < 0) usage("--listen takes HOST:PORT, e.g. 127.0.0.1:0");

  file_fd = open(path, O_RDONLY | O_CLOEXEC);
  if (file_fd < 0) die(path);
  struct stat st;
  if (fstat(file_fd, &st) < 0) die("fstat");
  file_size = (uint64_t)st.st_size;

  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) usage("--listen host must be an IPv4 address");
  listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(listen_fd, 4096) < 0) die("listen");
  socklen_t sl = sizeof sa;
  getsockname(listen_fd, (struct sockaddr *)&sa, &sl);

  signal(SIGPIPE, SIG_IGN);
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) die("epoll_create1");
  struct epoll_event lev = { .events = EPOLLIN, .data.fd = listen_fd };
  if (epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd, &lev) < 0) die("epoll_ctl");

  printf("talon-ref-server: listening on %s:%d pid %d file %s (%llu bytes)\n", host, ntohs(sa.sin_port), (int)getpid(), path,
         (unsigned long long)file_size);
  fflush(stdout);

  struct epoll_event evs[256];
  for (;;) {
    int n = epoll_wait(ep, evs, 256, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait");
    }
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == listen_fd) {
        accept_all();
        continue;
      }
      conn *c = (size_t)fd < conns_cap ? conns[fd] : NULL;
      if (c == NULL) continue;
      if (evs[i].events & EPOLLERR) close_conn(c);
      else if (evs[i].events & EPOLLOUT) on_writable(c);
      else on_readable(c);
    }
  }
}
