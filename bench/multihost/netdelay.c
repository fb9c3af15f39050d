/*
 * talon-netdelay: a fixed one-way delay for kernels without netem. Every packet an iptables
 * NFQUEUE rule hands to queue --queue is held for --delay-us microseconds and then accepted;
 * the delay is constant, so packets leave in the order they came and TCP sees no reordering.
 * Speaks nfnetlink_queue directly (linux headers only): packets are queued as metadata only
 * (NFQNL_COPY_META) and unsegmented (NFQA_CFG_F_GSO), and one batch verdict accepts every
 * packet that is due, so the cost is one message per packet and one per wake-up.
 *
 *   talon-netdelay --queue 0 --delay-us 500
 *
 * Runs until SIGTERM/SIGINT; exits 1 with the reason on a netlink error, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RING (1u << 20)

static uint32_t ring_id[RING];
static uint64_t ring_due[RING];
static size_t head, len;
static volatile sig_atomic_t stop;
static int fd;
static uint16_t queue;

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void die(const char *what) {
  fprintf(stderr, "talon-netdelay: %s: %s\n", what, strerror(errno));
  exit(1);
}

struct attr {
  uint16_t type;
  const void *data;
  uint16_t len;
};

/* One nfnetlink_queue message to this queue carrying the attributes `attrs`. */
static void send_msg(uint16_t type, uint16_t flags, const struct attr *attrs, int count) {
  char buf[256];
  memset(buf, 0, sizeof buf);
  struct nlmsghdr *nh = (struct nlmsghdr *)buf;
  nh->nlmsg_type = (NFNL_SUBSYS_QUEUE << 8) | type;
  nh->nlmsg_flags = NLM_F_REQUEST | flags;
  struct nfgenmsg *g = (struct nfgenmsg *)NLMSG_DATA(nh);
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(queue);
  size_t off = NLMSG_ALIGN(NLMSG_LENGTH(sizeof *g));
  for (int i = 0; i < count; i++) {
    struct nlattr *a = (struct nlattr *)(buf + off);
    a->nla_type = attrs[i].type;
    a->nla_len = (uint16_t)(NLA_HDRLEN + attrs[i].len);
    memcpy((char *)a + NLA_HDRLEN, attrs[i].data, attrs[i].len);
    off += NLA_ALIGN(a->nla_len);
  }
  nh->nlmsg_len = (uint32_t)off;
  struct sockaddr_nl to = {.nl_family = AF_NETLINK};
  if (sendto(fd, buf, off, 0, (struct sockaddr *)&to, sizeof to) < 0) die("sendto");
}

static void send_config(uint16_t attr, const void *data, uint16_t data_len) {
  struct attr a = {attr, data, data_len};
  send_msg(NFQNL_MSG_CONFIG, NLM_F_ACK, &a, 1);
}

static void configure(void) {
  struct nfqnl_msg_config_cmd cmd = {.command = NFQNL_CFG_CMD_BIND, .pf = htons(AF_INET)};
  send_config(NFQA_CFG_CMD, &cmd, sizeof cmd);
  struct nfqnl_msg_config_params params = {.copy_range = htonl(0), .copy_mode = NFQNL_COPY_META};
  send_config(NFQA_CFG_PARAMS, &params, sizeof params);
  uint32_t maxlen = htonl(RING / 2);
  send_config(NFQA_CFG_QUEUE_MAXLEN, &maxlen, sizeof maxlen);
  /* Flags and their mask go in one message. */
  uint32_t v = htonl(NFQA_CFG_F_GSO | NFQA_CFG_F_FAIL_OPEN);
  struct attr flags[2] = {{NFQA_CFG_FLAGS, &v, sizeof v}, {NFQA_CFG_MASK, &v, sizeof v}};
  send_msg(NFQNL_MSG_CONFIG, NLM_F_ACK, flags, 2);
}

static void accept_upto(uint32_t id) {
  struct nfqnl_msg_verdict_hdr vh = {.verdict = htonl(NF_ACCEPT), .id = htonl(id)};
  struct attr a = {NFQA_VERDICT_HDR, &vh, sizeof vh};
  send_msg(NFQNL_MSG_VERDICT_BATCH, 0, &a, 1);
}

static void release_due(void) {
  uint64_t t = now_us();
  int any = 0;
  uint32_t last = 0;
  while (len > 0 && ring_due[head] <= t) {
    last = ring_id[head];
    any = 1;
    head = (head + 1) % RING;
    len--;
  }
  if (any) accept_upto(last);
}

static void on_packet(struct nlmsghdr *nh, uint64_t delay) {
  char *p = (char *)NLMSG_DATA(nh) + NLMSG_ALIGN(sizeof(struct nfgenmsg));
  char *end = (char *)nh + nh->nlmsg_len;
  while (p + NLA_HDRLEN <= end) {
    struct nlattr *a = (struct nlattr *)p;
    if (a->nla_len < NLA_HDRLEN || p + a->nla_len > end) return;
    if ((a->nla_type & NLA_TYPE_MASK) == NFQA_PACKET_HDR) {
      struct nfqnl_msg_packet_hdr *ph = (struct nfqnl_msg_packet_hdr *)(p + NLA_HDRLEN);
      uint32_t id = ntohl(ph->packet_id);
      if (len == RING) { /* full: let the oldest go now rather than lose track of it */
        accept_upto(ring_id[(head + len - 1) % RING]);
        len = 0;
      }
      size_t tail = (head + len) % RING;
      ring_id[tail] = id;
      ring_due[tail] = now_us() + delay;
      len++;
      return;
    }
    p += NLA_ALIGN(a->nla_len);
  }
}

static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

int main(int argc, char **argv) {
  long delay = -1, q = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--delay-us") == 0) delay = strtol(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--queue") == 0) q = strtol(argv[i + 1], NULL, 10);
    else {
      fprintf(stderr, "talon-netdelay: unknown option %s\nusage: talon-netdelay --queue N --delay-us D\n", argv[i]);
      return 2;
    }
  }
  if (delay < 0 || q < 0 || q > 65535 || argc % 2 == 0) {
    fprintf(stderr, "usage: talon-netdelay --queue N --delay-us D (D >= 0 microseconds)\n");
    return 2;
  }
  queue = (uint16_t)q;
  /* The default 50 us timer slack would add up to that much to every hold. */
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER);
  if (fd < 0) die("socket(NETLINK_NETFILTER)");
  int rcv = 16 << 20;
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof rcv) < 0) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_NO_ENOBUFS, &one, sizeof one);
  struct sockaddr_nl me = {.nl_family = AF_NETLINK};
  if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) die("bind");
  configure();
  printf("talon-netdelay: queue %u, %ld us\n", queue, delay);
  fflush(stdout);
  static char buf[1 << 16];
  while (!stop) {
    struct timespec ts, *timeout = NULL;
    if (len > 0) {
      uint64_t t = now_us(), wait = ring_due[head] > t ? ring_due[head] - t : 0;
      ts.tv_sec = (time_t)(wait / 1000000u);
      ts.tv_nsec = (long)(wait % 1000000u) * 1000;
      timeout = &ts;
    }
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    /* ppoll sleeps on an hrtimer: microsecond waits without spinning. */
    int r = ppoll(&pfd, 1, timeout, NULL);
    if (r < 0 && errno != EINTR) die("poll");
    if (r > 0) {
      for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EAGAIN || errno == EINTR) break;
          if (errno == ENOBUFS) continue;
          die("recv");
        }
        for (struct nlmsghdr *nh = (struct nlmsghdr *)buf; NLMSG_OK(nh, (size_t)n); nh = NLMSG_NEXT(nh, n)) {
          if (nh->nlmsg_type == NLMSG_ERROR) {
            struct nlmsgerr *e = (struct nlmsgerr *)NLMSG_DATA(nh);
            if (e->error != 0) {
              errno = -e->error;
              die("nfnetlink_queue refused the configuration (is another program bound to this queue?)");
            }
          } else if (nh->nlmsg_type == ((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET)) {
            on_packet(nh, (uint64_t)delay);
          }
        }
      }
    }
    release_due();
  }
  if (len > 0) accept_upto(ring_id[(head + len - 1) % RING]);
  return 0;
}
