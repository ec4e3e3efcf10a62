// coopjit's blocked AMX nest without coopjit (issue 14, session 15): one thread over packed
// panels as coopjit's AMX plans lay them out (A panels of 32 rows x 64 bytes a K step, B panels
// of 16 VNNI rows x 128 bytes a K step), in coopjit's loop order: for each block of MC row panels,
// for each column panel, for each row panel of the block, the 2 x 2 tile kernel over one K tile,
// its sums stored to C (f32, row-major, N wide). Its question: how much of the gap between the tile
// loop fed from L2 (amx_feed_probe.c: 65-72% of the peak loop) and coopjit's one-thread rate
// (~36%) comes from the operands that each block reads cold (B's column panel slices, read again
// from L3 for each block of A; A's panels, from L3 at the block's first column panel), and how
// much software prefetch into L2 of the next kernel's cold operands wins back:
//   pf 0: A's lines two K steps ahead into L1 only (coopjit's amx_prefetch 1)
//   pf 1: and the next column panel's B slice into L2 (prefetcht1), spread over the block's
//         kernels of the current column panel (kernel i of MC prefetches part i)
//   pf 2: and the next block's A panels into L2, spread over the kernels of the last two column
//         panels
//   pf 3: pf 1 and 2, the cold parts fetched as prefetcht2 (L3 -> L2 hint) instead
//
//   gcc -O2 -mamx-tile -mamx-bf16 -mamx-int8 -o /tmp/amx_nest_probe benchmarks/amx_nest_probe.c
//   taskset -c 2 /tmp/amx_nest_probe [M N K [MC]]
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void* big(size_t bytes) {
  void* p = NULL;
  if (posix_memalign(&p, 2 << 20, bytes)) exit(1);
  madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

static void config(void) {
  unsigned char cfg[64] = {0};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = 64;
    cfg[48 + t] = 16;
  }
  _tile_loadconfig(cfg);
}

static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int int8_mode;

static void fill(char* p, size_t bytes) {
  for (size_t i = 0; i + 1 < bytes; i += 2) {
    if (int8_mode) {
      uint64_t r = next_rand();
      p[i] = (char)r;
      p[i + 1] = (char)(r >> 8);
      continue;
    }
    float x = 0;
    for (int j = 0; j < 4; ++j) x += (float)(next_rand() >> 40) / (float)(1 << 24) - 0.5f;
    x *= 1.7320508f;
    uint32_t u;
    memcpy(&u, &x, 4);
    uint16_t h = (uint16_t)(u >> 16);
    memcpy(p + i, &h, 2);
  }
}

#define DP(c, a, b)                       \
  do {                                    \
    if (int8_mode) _tile_dpbssd(c, a, b); \
    else _tile_dpbf16ps(c, a, b);         \
  } while (0)

static double peak(long iters) {
  static char buf[4096] __attribute__((aligned(64)));
  fill(buf, sizeof buf);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, buf, 64); _tile_loadd(5, buf + 1024, 64);
  _tile_loadd(6, buf + 2048, 64); _tile_loadd(7, buf + 3072, 64);
  double t0 = now();
  for (long i = 0; i < iters; ++i) { DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7); }
  double t = now() - t0;
  _tile_stored(0, buf, 64);
  return t / (4.0 * iters);
}

static long M, N, K, MC;
static char *PA, *PB;
static float* C;

static void pf_lines(const char* p, long bytes, int hint) {
  for (long o = 0; o < bytes; o += 64) {
    if (hint == 1) _mm_prefetch(p + o, _MM_HINT_T1);
    else _mm_prefetch(p + o, _MM_HINT_T2);
  }
}

// One pass of the nest; returns seconds.
static double nest(int pf) {
  const long steps = K / (int8_mode ? 64 : 32), step = 2048;  // a K step of a panel: 2 KiB
  const long tm = M / 32, tn = N / 32, panel = steps * step;
  const int hint = pf == 3 ? 2 : 1;
  double t0 = now();
  for (long mb = 0; mb < tm; mb += MC) {
    const long mend = mb + MC < tm ? mb + MC : tm, mcount = mend - mb;
    for (long nt = 0; nt < tn; ++nt) {
      for (long mt = mb; mt < mend; ++mt) {
        const char* a = PA + mt * panel;
        const char* b = PB + nt * panel;
        // cold operands of later kernels, this kernel's part of them per K step
        const char* nb = NULL;  // the next column panel's B slice, part (mt - mb) of mcount
        long nb_per = 0;
        if ((pf == 1 || pf >= 2) && nt + 1 < tn) {
          const long part = (panel / mcount + 63) / 64 * 64;
          nb = PB + (nt + 1) * panel + (mt - mb) * part;
          nb_per = (part / steps + 63) / 64 * 64;
        }
        const char* na = NULL;  // the next block's A panel (mt + MC), over the last two column panels
        long na_per = 0;
        if (pf >= 2 && nt + 2 >= tn && mt + MC < tm) {
          const long half = panel / 2;
          na = PA + (mt + MC) * panel + (nt + 2 == tn ? 0 : half);
          na_per = (half / steps + 63) / 64 * 64;
        }
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        for (long k = 0; k < steps; ++k, a += step, b += step) {
          for (int l = 0; l < 32; ++l) _mm_prefetch(a + 2 * step + 64 * l, _MM_HINT_T0);
          if (nb) pf_lines(nb + k * nb_per, nb_per, hint);
          if (na) pf_lines(na + k * na_per, na_per, hint);
          _tile_loadd(4, a, 64); _tile_loadd(5, a + 1024, 64);
          _tile_loadd(6, b, 128); _tile_loadd(7, b + 64, 128);
          DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7);
        }
        float* c = C + mt * 32 * N + nt * 32;
        _tile_stored(0, c, N * 4); _tile_stored(1, c + 16, N * 4);
        _tile_stored(2, c + 16 * N, N * 4); _tile_stored(3, c + 16 * N + 16, N * 4);
      }
    }
  }
  return now() - t0;
}

int main(int argc, char** argv) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    printf("no AMX permission\n");
    return 1;
  }
  config();
  M = argc > 3 ? atol(argv[1]) : 2048;
  N = argc > 3 ? atol(argv[2]) : 2048;
  K = argc > 3 ? atol(argv[3]) : 2048;
  MC = argc > 4 ? atol(argv[4]) : 8;
  for (int mode = 0; mode < 2; ++mode) {
    int8_mode = mode;
    const long bytes = M * K * (mode ? 1 : 2);
    PA = big(bytes);
    PB = big(N * K * (mode ? 1 : 2));
    C = big(M * N * 4);
    fill(PA, bytes);
    fill(PB, N * K * (mode ? 1 : 2));
    memset(C, 0, M * N * 4);
    const double pk = peak(2000000);
    const double flop = 2.0 * M * N * K;
    printf("%s %ldx%ldx%ld MC=%ld: peak loop %.2f ns/product (%.0f G/s)\n", mode ? "int8" : "bf16", M, N, K, MC,
           pk * 1e9, (mode ? 2.0 * 16 * 16 * 64 : 2.0 * 16 * 16 * 32) / pk / 1e9);
    for (int round = 0; round < 2; ++round)
      for (int pf = 0; pf < 4; ++pf) {
        double best = 1e9;
        for (int r = 0; r < 5; ++r) {
          double t = nest(pf);
          if (t < best) best = t;
        }
        const double rate = flop / best / 1e9;
        printf("  pf %d: %8.3f ms  %6.0f G/s  %5.1f%% of the peak loop\n", pf, best * 1e3, rate,
               100.0 * rate / ((mode ? 2.0 * 16 * 16 * 64 : 2.0 * 16 * 16 * 32) / pk / 1e9));
        fflush(stdout);
      }
    free(PA);
    free(PB);
    free(C);
  }
  return 0;
}
