/*
 * talon-ref-load: a pipelined Talon GetRange load client in C. Each connection
 * keeps --depth requests in flight (closed loop) at random --range-aligned
 * offsets; every reply must be the next one asked on its connection (FIFO), a
 * GetRange of exactly --range bytes, and with --verify FILE every byte must equal
 * FILE at that offset. Latency runs from queueing a request to its last byte;
 * only replies completed inside the measured window (after --warmup) are samples.
 *
 *   talon-ref-load --addr HOST:PORT --object az://container/key --size 64M
 *     [--range 64K] [--conns 1] [--depth 1] [--seconds 5] [--warmup 1] [--seed 1]
 *     [--verify FILE] [--server-pid PID] [--drain-timeout 5] [--fail-fast] [--spin] [--json]
 *
 * Exit 0 on a clean run, 1 on any failure (the first one on stderr verbatim),
 * 2 on a usage error.
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wire.h"
#include "stats.h"

typedef struct {
  uint32_t id;
  uint64_t off, t0;
} inflight;

typedef struct {
  int fd, idx, dead;
  uint64_t rng;
  uint32_t next_id;
  inflight *fifo; /* ring of --depth */
  size_t f_head, f_len;
  uint8_t *out; /* requests not yet taken by the socket */
  size_t out_len, out_sent;
  int want_out;
  uint8_t hdr[WIRE_HEADER_LEN];
  size_t hdr_got;
  wire_header h;
  int in_body;
  uint64_t body_got;
  char err[512];
  size_t err_len;
} conn;

static struct {
  char *addr;
  const char *object, *verify;
  uint64_t size, range;
  long conns, depth, seed, server_pid;
  double seconds, warmup, drain_timeout;
  int fail_fast, spin, json;
} opt = { .range = 65536, .conns = 1, .depth = 1, .seconds = 5, .warmup = 1, .seed = 1, .drain_timeout = 5 };

static uint8_t *tmpl; /* one GetRange frame; id and offset patched per request */
static size_t tmpl_len;
static const uint8_t *verify_map;
static uint64_t slots, measure_start, measure_end;
static int sending = 1;
static conn *conns;
static int ep;
static uint8_t rbuf[256 * 1024];
static stats st;

static void usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "talon-ref-load: ");
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nusage: talon-ref-load --addr HOST:PORT --object URI --size N [--range N] [--conns N] [--depth N] "
                  "[--seconds S] [--warmup S] [--seed N] [--verify FILE] [--server-pid PID] [--drain-timeout S] "
                  "[--fail-fast] [--spin] [--json]\n");
  exit(2);
}

/* Counts a failure; the first is printed verbatim. The connection is closed: its stream has no next frame to trust. */
static void fail(conn *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (st.errors++ == 0) {
    fprintf(stderr, "talon-ref-load: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
  }
  va_end(ap);
  if (opt.fail_fast) sending = 0;
  if (c != NULL && !c->dead) {
    c->dead = 1;
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
  }
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void build_template(void) {
  int backend;
  const char *rest;
  if (strncmp(opt.object, "s3://", 5) == 0) backend = 0, rest = opt.object + 5;
  else if (strncmp(opt.object, "gs://", 5) == 0) backend = 1, rest = opt.object + 5;
  else if (strncmp(opt.object, "az://", 5) == 0) backend = 2, rest = opt.object + 5;
  else usage("--object %s: want s3://bucket/key, gs://bucket/key or az://container/key", opt.object);
  const char *slash = strchr(rest, '/');
  if (slash == NULL || slash == rest || slash[1] == '\0') usage("--object %s: want a bucket and a key", opt.object);
  size_t blen = (size_t)(slash - rest), klen = strlen(slash + 1);
  size_t body = 4 + 8 + blen + 8 + klen + 16;
  tmpl_len = WIRE_HEADER_LEN + body;
  tmpl = calloc(1, tmpl_len);
  wire_put_header(tmpl, MSG_GET_RANGE, 0, 0, (uint32_t)body);
  uint8_t *p = tmpl + WIRE_HEADER_LEN;
  put_le32(p, (uint32_t)backend), p += 4;
  put_le64(p, blen), p += 8;
  memcpy(p, rest, blen), p += blen;
  put_le64(p, klen), p += 8;
  memcpy(p, slash + 1, klen), p += klen;
  put_le64(p + 8, opt.range);
}

static void set_out_interest(conn *c, int want) {
  if (c->dead || c->want_out == want) return;
  struct epoll_event ev = { .events = EPOLLIN | (want ? EPOLLOUT : 0), .data.ptr = c };
  epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
  c->want_out = want;
}

/* Tops the connection up to --depth in flight (while the run is sending) and writes what the socket takes. */
static void pump(conn *c) {
  uint64_t now = now_ns();
  /* Only requests still unsent stay buffered, so the buffer never holds more than --depth of them. */
  if (c->out_sent > 0) {
    memmove(c->out, c->out + c->out_sent, c->out_len - c->out_sent);
    c->out_len -= c->out_sent;
    c->out_sent = 0;
  }
  while (sending && c->f_len < (size_t)opt.depth) {
    inflight *f = &c->fifo[(c->f_head + c->f_len++) % (size_t)opt.depth];
    f->id = ++c->next_id;
    f->off = (splitmix64(&c->rng) % slots) * opt.range;
    f->t0 = now;
    uint8_t *p = c->out + c->out_len;
    memcpy(p, tmpl, tmpl_len);
    p[8] = (uint8_t)(f->id >> 24), p[9] = (uint8_t)(f->id >> 16), p[10] = (uint8_t)(f->id >> 8), p[11] = (uint8_t)f->id;
    put_le64(p + tmpl_len - 16, f->off);
    c->out_len += tmpl_len;
  }
  while (c->out_sent < c->out_len) {
    ssize_t n = send(c->fd, c->out + c->out_sent, c->out_len - c->out_sent, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return set_out_interest(c, 1);
      return fail(c, "send (conn %d): %s", c->idx, strerror(errno));
    }
    c->out_sent += (size_t)n;
  }
  c->out_len = c->out_sent = 0;
  set_out_interest(c, 0);
}

static void complete(conn *c) {
  inflight f = c->fifo[c->f_head];
  if (c->h.flags & FLAG_ERROR) {
    return fail(c, "error frame from server (conn %d, id %u, offset %llu): %.*s", c->idx, f.id, (unsigned long long)f.off,
                (int)c->err_len, c->err);
  }
  uint64_t t = now_ns();
  c->f_head = (c->f_head + 1) % (size_t)opt.depth;
  c->f_len--;
  c->in_body = 0;
  c->hdr_got = 0;
  if (t >= measure_start && t <= measure_end) stats_sample(&st, (t - f.t0) / 1000);
}

/* Checks a complete reply header against the connection's oldest outstanding request. */
static int check_header(conn *c) {
  wire_read_header(c->hdr, &c->h);
  if (c->h.magic != WIRE_MAGIC || c->h.version != WIRE_VERSION)
    return fail(c, "bad reply header (conn %d): magic 0x%04x version %u, want 0x544c version 1", c->idx, c->h.magic, c->h.version), -1;
  if (c->f_len == 0) return fail(c, "reply id %u (conn %d) with no request outstanding", c->h.id, c->idx), -1;
  inflight *f = &c->fifo[c->f_head];
  if (c->h.id != f->id)
    return fail(c, "out-of-order reply (conn %d): expected id %u (offset %llu), got id %u", c->idx, f->id, (unsigned long long)f->off,
                c->h.id), -1;
  if (c->h.type != MSG_GET_RANGE) return fail(c, "reply type %u (conn %d, id %u), expected 2 (GetRange)", c->h.type, c->idx, c->h.id), -1;
  if (!(c->h.flags & FLAG_ERROR) && c->h.length != opt.range)
    return fail(c, "reply length %u (expected %llu for offset %llu) (conn %d, id %u)", c->h.length, (unsigned long long)opt.range,
                (unsigned long long)f->off, c->idx, c->h.id), -1;
  c->in_body = 1;
  c->body_got = 0;
  c->err_len = 0;
  return 0;
}

static void consume(conn *c, const uint8_t *p, size_t n) {
  while (n > 0 && !c->dead) {
    if (!c->in_body) {
      size_t take = WIRE_HEADER_LEN - c->hdr_got < n ? WIRE_HEADER_LEN - c->hdr_got : n;
      memcpy(c->hdr + c->hdr_got, p, take);
      c->hdr_got += take, p += take, n -= take;
      if (c->hdr_got < WIRE_HEADER_LEN || check_header(c) < 0) continue;
    } else {
      uint64_t left = c->h.length - c->body_got;
      size_t take = left < n ? (size_t)left : n;
      if (c->h.flags & FLAG_ERROR) {
        size_t room = sizeof c->err - c->err_len, keep = take < room ? take : room;
        memcpy(c->err + c->err_len, p, keep);
        c->err_len += keep;
      } else if (verify_map != NULL) {
        const inflight *f = &c->fifo[c->f_head];
        const uint8_t *want = verify_map + f->off + c->body_got;
        if (memcmp(p, want, take) != 0) {
          size_t i = 0;
          while (p[i] == want[i]) i++;
          return fail(c, "payload mismatch (conn %d, id %u, offset %llu): byte %llu of the reply is 0x%02x, the file has 0x%02x",
                      c->idx, f->id, (unsigned long long)f->off, (unsigned long long)(c->body_got + i), p[i], want[i]);
        }
      }
      c->body_got += take, p += take, n -= take;
    }
    if (c->in_body && c->body_got == c->h.length) complete(c);
  }
}

static void on_readable(conn *c) {
  for (;;) {
    ssize_t n = recv(c->fd, rbuf, sizeof rbuf, 0);
    if (n > 0) {
      consume(c, rbuf, (size_t)n);
      if (c->dead) return;
      if ((size_t)n < sizeof rbuf) break;
    } else if (n == 0) {
      return fail(c, "server closed the connection (conn %d) with %zu replies outstanding", c->idx, c->f_len);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      return fail(c, "recv (conn %d): %s", c->idx, strerror(errno));
    }
  }
  pump(c);
}

static void open_conns(void) {
  char *host;
  int port = split_addr(opt.addr, &host);
  struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
  if (port < 0 || inet_pton(AF_INET, host, &sa.sin_addr) != 1) usage("--addr takes IPv4:PORT, e.g. 127.0.0.1:7001");
  conns = calloc((size_t)opt.conns, sizeof *conns);
  for (long i = 0; i < opt.conns; i++) {
    conn *c = &conns[i];
    c->idx = (int)i;
    c->rng = (uint64_t)opt.seed * 0x9e3779b97f4a7c15ull + (uint64_t)i;
    c->fifo = calloc((size_t)opt.depth, sizeof *c->fifo);
    c->out = malloc((size_t)opt.depth * tmpl_len);
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
      fprintf(stderr, "talon-ref-load: connect %s:%d (conn %ld): %s\n", host, port, i, strerror(errno));
      exit(1);
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    fcntl(c->fd, F_SETFL, O_NONBLOCK);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
  }
}

static void parse_args(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--fail-fast") == 0) opt.fail_fast = 1;
    else if (strcmp(a, "--spin") == 0) opt.spin = 1;
    else if (strcmp(a, "--json") == 0) opt.json = 1;
    else if (i + 1 >= argc) usage("%s needs a value (or is unknown)", a);
    else if (strcmp(a, "--addr") == 0) opt.addr = argv[++i];
    else if (strcmp(a, "--object") == 0) opt.object = argv[++i];
    else if (strcmp(a, "--verify") == 0) opt.verify = argv[++i];
    else if (strcmp(a, "--size") == 0) opt.size = parse_size(argv[++i]);
    else if (strcmp(a, "--range") == 0) opt.range = parse_size(argv[++i]);
    else if (strcmp(a, "--conns") == 0) opt.conns = atol(argv[++i]);
    else if (strcmp(a, "--depth") == 0) opt.depth = atol(argv[++i]);
    else if (strcmp(a, "--seed") == 0) opt.seed = atol(argv[++i]);
    else if (strcmp(a, "--server-pid") == 0) opt.server_pid = atol(argv[++i]);
    else if (strcmp(a, "--seconds") == 0) opt.seconds = atof(argv[++i]);
    else if (strcmp(a, "--warmup") == 0) opt.warmup = atof(argv[++i]);
    else if (strcmp(a, "--drain-timeout") == 0) opt.drain_timeout = atof(argv[++i]);
    else usage("unknown option %s", a);
  }
  if (opt.addr == NULL || opt.object == NULL || opt.size == 0) usage("--addr, --object and --size are required");
  if (opt.range == 0 || opt.range > UINT32_MAX || opt.range > opt.size) usage("--range must be between 1 and --size (and fit a frame)");
  if (opt.conns < 1 || opt.depth < 1) usage("--conns and --depth must be at least 1");
  if (opt.seconds <= 0 || opt.warmup < 0 || opt.drain_timeout <= 0) usage("--seconds and --drain-timeout must be > 0, --warmup >= 0");
  slots = (opt.size - opt.range) / opt.range + 1;
}

static void map_verify_file(void) {
  int fd = open(opt.verify, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) < 0) usage("--verify %s: %s", opt.verify, strerror(errno));
  if ((uint64_t)sb.st_size < opt.size) usage("--verify %s is %lld bytes, less than --size %llu", opt.verify, (long long)sb.st_size, (unsigned long long)opt.size);
  verify_map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (verify_map == MAP_FAILED) usage("--verify %s: mmap: %s", opt.verify, strerror(errno));
}

int main(int argc, char **argv) {
  parse_args(argc, argv);
  build_template();
  if (opt.verify != NULL) map_verify_file();
  signal(SIGPIPE, SIG_IGN);
  ep = epoll_create1(EPOLL_CLOEXEC);
  stats_init(&st, opt.server_pid);
  open_conns();
  uint64_t start = now_ns(), drain_deadline = 0;
  measure_start = start + (uint64_t)(opt.warmup * 1e9);
  measure_end = measure_start + (uint64_t)(opt.seconds * 1e9);
  for (long i = 0; i < opt.conns; i++) pump(&conns[i]);
  struct epoll_event evs[256];
  for (;;) {
    uint64_t now = now_ns();
    stats_tick(&st, now, measure_start, measure_end);
    if (sending && now >= measure_end) sending = 0;
    size_t outstanding = 0;
    for (long i = 0; i < opt.conns; i++) outstanding += conns[i].dead ? 0 : conns[i].f_len;
    if (opt.fail_fast && st.errors > 0) break;
    if (!sending) {
      if (outstanding == 0) break;
      if (drain_deadline == 0) drain_deadline = now + (uint64_t)(opt.drain_timeout * 1e9);
      if (now >= drain_deadline) {
        fail(NULL, "drain timeout: %zu replies still outstanding %.1f s after the window", outstanding, opt.drain_timeout);
        break;
      }
    }
    int n = epoll_wait(ep, evs, 256, opt.spin ? 0 : 5);
    for (int i = 0; i < n; i++) {
      conn *c = evs[i].data.ptr;
      if (c->dead) continue;
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
      else if (evs[i].events & EPOLLOUT) pump(c);
    }
  }
  if (st.samples == 0) fail(NULL, "no samples: no reply completed inside the %.3g s measured window", opt.seconds);
  stats_report(&st, opt.json, opt.conns, opt.depth, opt.range, opt.seconds);
  return st.errors > 0 ? 1 : 0;
}
