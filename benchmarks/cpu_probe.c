/* Issue 14, session 19: does each CPU of this machine compute at the same rate, alone and with the
 * others busy? A pinned compute loop (no memory traffic) per CPU: AVX-512 FMA (12 chains of
 * vfmadd231ps zmm) or AMX (4 accumulator tiles of tdpbf16ps / tdpbssd, operands in tiles), a fixed
 * number of iterations per thread; each thread's wall time and its thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID: less than the wall time when the thread was not running), and the
 * steal / idle ticks of /proc/stat per CPU over each section.
 *
 *   gcc -O2 -pthread -o /tmp/cpu_probe benchmarks/cpu_probe.c
 *   /tmp/cpu_probe fma|amx_bf16|amx_int8 [ms per unit, default 30]
 *   /tmp/cpu_probe gaps fma|amx_bf16 [seconds, default 1]
 *
 * `gaps`: every CPU at once, each thread running the loop in chunks of about a microsecond and
 * stamping each chunk (CLOCK_MONOTONIC): per CPU, the 1 ms windows at full rate (> 75% of the best
 * window seen on any CPU) and at about half (35-65%), and the pauses between two chunks longer
 * than 50 us (a vCPU that the host time-slices runs at full rate between pauses; one whose core's
 * other hardware thread is busy runs at half rate without pauses).
 *
 * Sections: each CPU alone (3 runs, one CPU at a time); all CPUs together (5 runs); pairs (0, j)
 * for every j (and (j, j + n/2)); the first half of the CPUs, then every other CPU. Rates in
 * GFLOP/s (GOP/s for int8) per thread. Recorded: benchmarks/recorded/issue14-emr16-shares-session19.txt. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(clockid_t c) {
  struct timespec t;
  clock_gettime(c, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

__attribute__((target("avx512f"))) static float fma_loop(int64_t iters) {
  __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(0.001f);
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3);
  __m512 a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7);
  __m512 a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
  for (int64_t i = 0; i < iters; ++i) {
    a0 = _mm512_fmadd_ps(a0, x, y); a1 = _mm512_fmadd_ps(a1, x, y); a2 = _mm512_fmadd_ps(a2, x, y);
    a3 = _mm512_fmadd_ps(a3, x, y); a4 = _mm512_fmadd_ps(a4, x, y); a5 = _mm512_fmadd_ps(a5, x, y);
    a6 = _mm512_fmadd_ps(a6, x, y); a7 = _mm512_fmadd_ps(a7, x, y); a8 = _mm512_fmadd_ps(a8, x, y);
    a9 = _mm512_fmadd_ps(a9, x, y); a10 = _mm512_fmadd_ps(a10, x, y); a11 = _mm512_fmadd_ps(a11, x, y);
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5));
    __asm__ volatile("" : "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11));
  }
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  return _mm512_reduce_add_ps(s);
}

struct TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static __attribute__((aligned(64))) uint8_t g_tiles[4][1024];

__attribute__((target("amx-tile,amx-bf16,amx-int8"))) static float amx_loop(int64_t iters, int int8) {
  struct TileConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, g_tiles[0], 64); _tile_loadd(5, g_tiles[1], 64);
  _tile_loadd(6, g_tiles[2], 64); _tile_loadd(7, g_tiles[3], 64);
  if (int8) {
    for (int64_t i = 0; i < iters; ++i) {
      _tile_dpbssd(0, 4, 6); _tile_dpbssd(1, 4, 7); _tile_dpbssd(2, 5, 6); _tile_dpbssd(3, 5, 7);
    }
  } else {
    for (int64_t i = 0; i < iters; ++i) {
      _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
  }
  static __thread __attribute__((aligned(64))) float out[256];
  _tile_stored(0, out, 64);
  _tile_release();
  return out[0];
}

static int g_kind;  /* 0 fma, 1 amx bf16, 2 amx int8 */
static double g_ops_per_iter;
static int64_t g_iters;

static float work(int64_t iters) { return g_kind == 0 ? fma_loop(iters) : amx_loop(iters, g_kind == 2); }

struct Thread {
  int cpu;
  double wall, cpu_time;
  pthread_t th;
};
static volatile int g_go, g_ready;
static volatile float g_sink;

static void* body(void* p) {
  struct Thread* t = p;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(t->cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (g_kind) syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */);
  g_sink = work(1000);
  __sync_fetch_and_add(&g_ready, 1);
  while (!g_go) {
  }
  double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_THREAD_CPUTIME_ID);
  g_sink = work(g_iters);
  t->wall = now(CLOCK_MONOTONIC) - w0;
  t->cpu_time = now(CLOCK_THREAD_CPUTIME_ID) - c0;
  return NULL;
}

static int g_ncpu;

static void read_stat(long long out[][2]) {
  FILE* f = fopen("/proc/stat", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    int c;
    long long u, n, s, idle, io, irq, sirq, steal;
    if (sscanf(line, "cpu%d %lld %lld %lld %lld %lld %lld %lld %lld", &c, &u, &n, &s, &idle, &io, &irq, &sirq, &steal) == 9 &&
        c >= 0 && c < 1024) {
      out[c][0] = steal;
      out[c][1] = idle;
    }
  }
  if (f) fclose(f);
}

/* Runs one thread per CPU of cpus[0..n) together; prints each thread's rate. */
static void run_set(const char* label, const int* cpus, int n) {
  struct Thread t[1024];
  g_go = 0;
  g_ready = 0;
  for (int i = 0; i < n; ++i) {
    t[i].cpu = cpus[i];
    pthread_create(&t[i].th, NULL, body, &t[i]);
  }
  while (g_ready < n) {
  }
  g_go = 1;
  for (int i = 0; i < n; ++i) pthread_join(t[i].th, NULL);
  printf("%-22s", label);
  for (int i = 0; i < n; ++i)
    printf(" %d:%.0f%s", cpus[i], g_ops_per_iter * g_iters / t[i].wall / 1e9, t[i].cpu_time < 0.95 * t[i].wall ? "*" : "");
  printf("\n");
  fflush(stdout);
}

/* The `gaps` mode (see the top). */
enum { kMaxWindows = 20000 };
struct GapThread {
  int cpu;
  double seconds;
  int64_t chunk;
  int windows;
  float* work_in_window;  /* chunks done per 1 ms window */
  int gaps;
  double gap_total, gap_max;
  pthread_t th;
};

static void* gap_body(void* p) {
  struct GapThread* t = p;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(t->cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (g_kind) syscall(SYS_arch_prctl, 0x1023, 18);
  g_sink = work(1000);
  __sync_fetch_and_add(&g_ready, 1);
  while (!g_go) {
  }
  const double t0 = now(CLOCK_MONOTONIC);
  double last = t0;
  for (;;) {
    g_sink = work(t->chunk);
    const double n = now(CLOCK_MONOTONIC);
    if (n - last > 50e-6) {
      ++t->gaps;
      t->gap_total += n - last;
      if (n - last > t->gap_max) t->gap_max = n - last;
    }
    last = n;
    const int w = (int)((n - t0) * 1e3);
    if (w >= t->windows || w >= kMaxWindows) break;
    t->work_in_window[w] += 1;
  }
  return NULL;
}

static int gaps_mode(const char* kind, double seconds) {
  g_kind = !strcmp(kind, "amx_bf16") ? 1 : 0;
  if (g_kind && syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    printf("gaps %s: AMX tile data refused (arch_prctl)\n", kind);
    return 0;
  }
  memset(g_tiles, 0, sizeof g_tiles);
  for (int i = 0; i < 2048; ++i) ((uint16_t*)g_tiles)[i] = 0x3c80;
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  static struct GapThread t[1024];
  int n = 0;
  const int64_t chunk = g_kind ? 50 : 300;  /* about a microsecond at full rate */
  for (int c = 0; c < 1024; ++c)
    if (CPU_ISSET(c, &set)) {
      memset(&t[n], 0, sizeof t[n]);
      t[n].cpu = c;
      t[n].chunk = chunk;
      t[n].windows = (int)(seconds * 1e3);
      t[n].work_in_window = calloc(kMaxWindows, sizeof(float));
      ++n;
    }
  g_go = 0;
  g_ready = 0;
  for (int i = 0; i < n; ++i) pthread_create(&t[i].th, NULL, gap_body, &t[i]);
  while (g_ready < n) {
  }
  g_go = 1;
  for (int i = 0; i < n; ++i) pthread_join(t[i].th, NULL);
  float best = 0;
  for (int i = 0; i < n; ++i)
    for (int w = 1; w < t[i].windows - 1; ++w)
      if (t[i].work_in_window[w] > best) best = t[i].work_in_window[w];
  printf("gaps %s, all %d CPUs for %.1f s, chunks of %lld iterations; best 1 ms window %.0f chunks (%.0f G/s)\n", kind, n,
         seconds, (long long)chunk, best, best * chunk * (g_kind ? 4 * 2.0 * 16 * 16 * 32 : 12 * 32.0) / 1e6);
  printf("cpu: windows full / half / other, pauses > 50 us: count, total ms, longest ms; the run of 1 ms windows (F full, h half, . other), first 120 ms\n");
  for (int i = 0; i < n; ++i) {
    int full = 0, half = 0, other = 0;
    char row[121];
    for (int w = 0; w < t[i].windows; ++w) {
      const float r = t[i].work_in_window[w] / best;
      const char k = r > 0.75f ? 'F' : (r > 0.35f && r < 0.65f) ? 'h' : '.';
      if (w > 0 && w < t[i].windows - 1) {
        full += k == 'F';
        half += k == 'h';
        other += k == '.';
      }
      if (w < 120) row[w] = k;
    }
    row[t[i].windows < 120 ? t[i].windows : 120] = 0;
    printf("%3d: %4d / %4d / %4d  pauses %4d %7.2f %6.2f  %s\n", t[i].cpu, full, half, other, t[i].gaps, t[i].gap_total * 1e3,
           t[i].gap_max * 1e3, row);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 2 && !strcmp(argv[1], "gaps")) return gaps_mode(argv[2], argc > 3 ? atof(argv[3]) : 1.0);
  const char* kind = argc > 1 ? argv[1] : "fma";
  double ms = argc > 2 ? atof(argv[2]) : 30;
  g_kind = !strcmp(kind, "amx_bf16") ? 1 : !strcmp(kind, "amx_int8") ? 2 : 0;
  g_ops_per_iter = g_kind == 0 ? 12 * 32.0 : g_kind == 1 ? 4 * 2.0 * 16 * 16 * 32 : 4 * 2.0 * 16 * 16 * 64;
  if (g_kind && syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
    printf("%s: AMX tile data refused (arch_prctl)\n", kind);
    return 0;
  }
  memset(g_tiles, 0, sizeof g_tiles);
  for (int i = 0; i < 2048; ++i) ((uint16_t*)g_tiles)[i] = g_kind == 2 ? 0x0101 : 0x3c80;
  cpu_set_t set;
  sched_getaffinity(0, sizeof set, &set);
  int cpus[1024];
  g_ncpu = 0;
  for (int c = 0; c < 1024; ++c)
    if (CPU_ISSET(c, &set)) cpus[g_ncpu++] = c;
  /* Calibrate on the first CPU: iterations for `ms` milliseconds. */
  g_iters = 1000;
  for (;;) {
    struct Thread t = {cpus[0]};
    g_go = 1;
    g_ready = 0;
    pthread_create(&t.th, NULL, body, &t);
    pthread_join(t.th, NULL);
    if (t.wall > ms * 1e-3 || g_iters > (1ll << 40)) {
      g_iters = (int64_t)(g_iters * ms * 1e-3 / t.wall);
      break;
    }
    g_iters *= 4;
  }
  printf("%s: %d CPUs, %lld iterations a unit (%.0f ops each); rates per thread in G/s, cpu:rate (* thread CPU time < 95%% of wall)\n",
         kind, g_ncpu, (long long)g_iters, g_ops_per_iter);
  long long s0[1024][2], s1[1024][2];
  read_stat(s0);
  for (int r = 0; r < 3; ++r) {
    printf("alone, run %d:        ", r);
    for (int i = 0; i < g_ncpu; ++i) {
      struct Thread t = {cpus[i]};
      g_go = 1;
      g_ready = 0;
      pthread_create(&t.th, NULL, body, &t);
      pthread_join(t.th, NULL);
      printf(" %d:%.0f%s", cpus[i], g_ops_per_iter * g_iters / t.wall / 1e9, t.cpu_time < 0.95 * t.wall ? "*" : "");
    }
    printf("\n");
  }
  for (int r = 0; r < 5; ++r) run_set("all together", cpus, g_ncpu);
  for (int j = 1; j < g_ncpu; ++j) {
    int p[2] = {cpus[0], cpus[j]};
    run_set("pair", p, 2);
  }
  for (int j = 1; j < g_ncpu / 2; ++j) {
    int p[2] = {cpus[j], cpus[j + g_ncpu / 2]};
    run_set("pair", p, 2);
  }
  for (int r = 0; r < 2; ++r) {
    run_set("first half", cpus, g_ncpu / 2);
    int ev[512], k = 0;
    for (int i = 0; i < g_ncpu; i += 2) ev[k++] = cpus[i];
    run_set("every other", ev, k);
  }
  read_stat(s1);
  printf("/proc/stat over the sections, ticks (steal / idle) per CPU:");
  for (int i = 0; i < g_ncpu; ++i) printf(" %d:%lld/%lld", cpus[i], s1[cpus[i]][0] - s0[cpus[i]][0], s1[cpus[i]][1] - s0[cpus[i]][1]);
  printf("\n");
  return 0;
}
