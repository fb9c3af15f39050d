/*
 * What talon-ref-load measures over its window: a latency histogram (1 µs
 * buckets up to 1 s, then one overflow bucket; percentiles are bucket floors),
 * the server's CPU from /proc/PID/stat (utime + stime of all its threads, in
 * clock ticks), its peak VmRSS sampled every 100 ms, and the client's own CPU.
 */
#ifndef TALON_REF_STATS_H
#define TALON_REF_STATS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define HIST_US 1000000u

typedef struct {
  uint32_t hist[HIST_US + 1];
  uint64_t samples, errors, max_us;
  long pid;
  int started, ended, have_cpu;
  uint64_t next_rss_ns, rss_kb_peak;
  long long srv_user0, srv_sys0, srv_user, srv_sys;
  double cli0, cli;
} stats;

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void stats_init(stats *s, long pid) {
  memset(s, 0, sizeof *s);
  s->pid = pid;
}

static inline void stats_sample(stats *s, uint64_t us) {
  s->hist[us < HIST_US ? us : HIST_US]++;
  if (us > s->max_us) s->max_us = us;
  s->samples++;
}

/* utime and stime (clock ticks) of a process: fields 14 and 15, counted after the ")" that ends its name. */
static inline int proc_cpu(long pid, long long *user, long long *sys) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  if (p == NULL) return 0;
  /* After ") " comes field 3 (state); utime is field 14, eleven fields on. */
  return sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", user, sys) == 2;
}

static inline uint64_t proc_rss_kb(long pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%ld/status", pid);
  FILE *f = fopen(path, "r");
  unsigned long long kb = 0;
  if (f == NULL) return 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) break;
  fclose(f);
  return kb;
}

static inline double self_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static inline void stats_end(stats *s) {
  if (!s->started || s->ended) return;
  s->ended = 1;
  s->cli = self_cpu_s();
  if (s->pid > 0) s->have_cpu = s->have_cpu && proc_cpu(s->pid, &s->srv_user, &s->srv_sys);
}

/* Called every loop turn: opens and closes the window's CPU counters and samples RSS inside it. */
static inline void stats_tick(stats *s, uint64_t now, uint64_t start, uint64_t end) {
  if (!s->started && now >= start) {
    s->started = 1;
    s->cli0 = self_cpu_s();
    if (s->pid > 0) s->have_cpu = proc_cpu(s->pid, &s->srv_user0, &s->srv_sys0);
  }
  if (s->started && !s->ended && s->pid > 0 && now >= s->next_rss_ns) {
    uint64_t kb = proc_rss_kb(s->pid);
    if (kb > s->rss_kb_peak) s->rss_kb_peak = kb;
    s->next_rss_ns = now + 100000000ull;
  }
  if (s->started && now >= end) stats_end(s);
}

static inline uint64_t stats_percentile(const stats *s, double q) {
  uint64_t want = (uint64_t)(q * (double)s->samples + 0.999999), seen = 0;
  if (want == 0) want = 1;
  for (uint32_t us = 0; us < HIST_US; us++)
    if ((seen += s->hist[us]) >= want) return us;
  return s->max_us;
}

static inline void stats_report(stats *s, int json, long conns, long depth, uint64_t range, double seconds) {
  stats_end(s);
  double rps = (double)s->samples / seconds, mib = rps * (double)range / 1048576.0;
  char p50[32] = "null", p90[32] = "null", p99[32] = "null", p999[32] = "null", mx[32] = "null";
  if (s->samples > 0) {
    snprintf(p50, sizeof p50, "%llu", (unsigned long long)stats_percentile(s, 0.50));
    snprintf(p90, sizeof p90, "%llu", (unsigned long long)stats_percentile(s, 0.90));
    snprintf(p99, sizeof p99, "%llu", (unsigned long long)stats_percentile(s, 0.99));
    snprintf(p999, sizeof p999, "%llu", (unsigned long long)stats_percentile(s, 0.999));
    snprintf(mx, sizeof mx, "%llu", (unsigned long long)s->max_us);
  }
  char cores[32] = "null", kshare[32] = "null", per_req[32] = "null", rss[32] = "null";
  if (s->have_cpu) {
    double hz = (double)sysconf(_SC_CLK_TCK);
    double user = (double)(s->srv_user - s->srv_user0) / hz, sys = (double)(s->srv_sys - s->srv_sys0) / hz;
    snprintf(cores, sizeof cores, "%.3f", (user + sys) / seconds);
    if (user + sys > 0) snprintf(kshare, sizeof kshare, "%.3f", sys / (user + sys));
    if (s->samples > 0) snprintf(per_req, sizeof per_req, "%.2f", (user + sys) * 1e6 / (double)s->samples);
    snprintf(rss, sizeof rss, "%llu", (unsigned long long)s->rss_kb_peak);
  }
  double client = (s->cli - s->cli0) / seconds;
  if (json) {
    printf("{\"conns\":%ld,\"depth\":%ld,\"range\":%llu,\"rps\":%.1f,\"mib_s\":%.1f,\"p50_us\":%s,\"p90_us\":%s,\"p99_us\":%s,"
           "\"p999_us\":%s,\"max_us\":%s,\"samples\":%llu,\"errors\":%llu,\"server_cores\":%s,\"server_kernel_share\":%s,"
           "\"server_cpu_us_per_req\":%s,\"server_rss_kb\":%s,\"client_cores\":%.3f}\n",
           conns, depth, (unsigned long long)range, rps, mib, p50, p90, p99, p999, mx, (unsigned long long)s->samples,
           (unsigned long long)s->errors, cores, kshare, per_req, rss, client);
  } else {
    printf("conns %ld depth %ld range %llu: %.0f rps, %.1f MiB/s, p50 %s p90 %s p99 %s p99.9 %s max %s us, %llu samples, %llu errors; "
           "server cores %s (kernel share %s, %s us/req, peak RSS %s kB), client cores %.3f\n",
           conns, depth, (unsigned long long)range, rps, mib, p50, p90, p99, p999, mx, (unsigned long long)s->samples,
           (unsigned long long)s->errors, cores, kshare, per_req, rss, client);
  }
  fflush(stdout);
}

#endif
