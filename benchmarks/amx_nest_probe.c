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
//   taskset -c 2 /tmp/amx_nest_probe [M N K [MC [KT [order [cases]]]]]
// KT: the K tile in bf16 elements (int8: twice as many; 0 or absent: all of K), the partial sums
// continued in C (tileloadd / tilestored, rows N * 4 bytes apart, as coopjit's scratch) between
// K tiles; order 1 (k_inner): each block of row panels through every K tile before the next block
// (coopjit's plan k_inner); order 2 (session 16, coopjit's plan nc_tiles = MC): for each K tile,
// for each block of MC column panels (their B slices stay in L2), for each row panel, the block's
// column panels (A's slice from L3 once, then from L1 / L2; pf 0 only); cases: pf 0 .. cases - 1
// (4: all).
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

static long M, N, K, MC, KT;
static int k_inner;  // 0: for each K tile, for each block (coopjit's default); 1: for each block, for each K tile;
                     // 2: for each K tile, for each block of MC column panels, each row panel across the block
static char *PA, *PB;
static float* C;

static void pf_lines(const char* p, long bytes, int hint) {
  for (long o = 0; o < bytes; o += 64) {
    if (hint == 1) _mm_prefetch(p + o, _MM_HINT_T1);
    else _mm_prefetch(p + o, _MM_HINT_T2);
  }
}

// The kernels of one K tile [k0, k0 + ksteps) of block [mb, mend), column panel nt.
static void block_panel(int pf, long mb, long mend, long nt, long k0, long ksteps, int first) {
  const long step = 2048, tm = M / 32, tn = N / 32, panel = (K / (int8_mode ? 64 : 32)) * step;
  const long mcount = mend - mb;
  const int hint = pf == 3 ? 2 : 1;
  for (long mt = mb; mt < mend; ++mt) {
    const char* a = PA + mt * panel + k0 * step;
    const char* b = PB + nt * panel + k0 * step;
    // cold operands of later kernels, this kernel's part of them per K step
    const char* nb = NULL;  // the next column panel's B slice, part (mt - mb) of mcount
    long nb_per = 0;
    if (pf >= 1 && nt + 1 < tn) {
      const long part = (ksteps * step / mcount + 63) / 64 * 64;
      nb = PB + (nt + 1) * panel + k0 * step + (mt - mb) * part;
      nb_per = (part / ksteps + 63) / 64 * 64;
    }
    const char* na = NULL;  // the next block's A panel (mt + MC), over the last two column panels
    long na_per = 0;
    if (pf >= 2 && nt + 2 >= tn && mt + MC < tm) {
      const long half = ksteps * step / 2;
      na = PA + (mt + MC) * panel + k0 * step + (nt + 2 == tn ? 0 : half);
      na_per = (half / ksteps + 63) / 64 * 64;
    }
    float* c = C + mt * 32 * N + nt * 32;
    if (first) {
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
      _tile_loadd(0, c, N * 4); _tile_loadd(1, c + 16, N * 4);
      _tile_loadd(2, c + 16 * N, N * 4); _tile_loadd(3, c + 16 * N + 16, N * 4);
    }
    for (long k = 0; k < ksteps; ++k, a += step, b += step) {
      for (int l = 0; l < 32; ++l) _mm_prefetch(a + 2 * step + 64 * l, _MM_HINT_T0);
      if (nb) pf_lines(nb + k * nb_per, nb_per, hint);
      if (na) pf_lines(na + k * na_per, na_per, hint);
      _tile_loadd(4, a, 64); _tile_loadd(5, a + 1024, 64);
      _tile_loadd(6, b, 128); _tile_loadd(7, b + 64, 128);
      DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7);
    }
    _tile_stored(0, c, N * 4); _tile_stored(1, c + 16, N * 4);
    _tile_stored(2, c + 16 * N, N * 4); _tile_stored(3, c + 16 * N + 16, N * 4);
  }
}

// One pass of the nest (K tiles of KT, blocks of MC row panels); returns seconds.
static double nest(int pf) {
  const long kstep = int8_mode ? 64 : 32, steps = K / kstep, kts = KT / kstep;
  const long tm = M / 32, tn = N / 32;
  double t0 = now();
  if (k_inner == 2) {
    for (long k0 = 0; k0 < steps; k0 += kts)
      for (long nb = 0; nb < tn; nb += MC) {
        const long nend = nb + MC < tn ? nb + MC : tn;
        for (long mt = 0; mt < tm; ++mt)
          for (long nt = nb; nt < nend; ++nt) block_panel(0, mt, mt + 1, nt, k0, kts < steps - k0 ? kts : steps - k0, k0 == 0);
      }
  } else if (!k_inner) {
    for (long k0 = 0; k0 < steps; k0 += kts)
      for (long mb = 0; mb < tm; mb += MC) {
        const long mend = mb + MC < tm ? mb + MC : tm;
        for (long nt = 0; nt < tn; ++nt) block_panel(pf, mb, mend, nt, k0, kts < steps - k0 ? kts : steps - k0, k0 == 0);
      }
  } else {
    for (long mb = 0; mb < tm; mb += MC) {
      const long mend = mb + MC < tm ? mb + MC : tm;
      for (long k0 = 0; k0 < steps; k0 += kts)
        for (long nt = 0; nt < tn; ++nt) block_panel(pf, mb, mend, nt, k0, kts < steps - k0 ? kts : steps - k0, k0 == 0);
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
  if (MC < 1) {
    printf("MC (row panels a block) must be at least 1, got %ld\n", MC);
    return 1;
  }
  const long kt_arg = argc > 5 ? atol(argv[5]) : 0;  // K elements a K tile (bf16; int8 takes twice as many); 0: K
  k_inner = argc > 6 ? atoi(argv[6]) : 0;
  const int pfs = k_inner == 2 ? 1 : argc > 7 ? atoi(argv[7]) : 4;  // the prefetch cases run: pf 0 .. pfs - 1
  for (int mode = 0; mode < 2; ++mode) {
    int8_mode = mode;
    KT = kt_arg ? kt_arg * (mode ? 2 : 1) : K;
    if (KT > K) KT = K;
    if (KT < (mode ? 64 : 32) || KT % (mode ? 64 : 32)) {
      printf("KT %ld: a K tile is a whole number of K steps (%d elements)\n", KT, mode ? 64 : 32);
      return 1;
    }
    const long bytes = M * K * (mode ? 1 : 2);
    PA = big(bytes);
    PB = big(N * K * (mode ? 1 : 2));
    C = big(M * N * 4);
    fill(PA, bytes);
    fill(PB, N * K * (mode ? 1 : 2));
    memset(C, 0, M * N * 4);
    const double pk = peak(2000000);
    const double flop = 2.0 * M * N * K;
    printf("%s %ldx%ldx%ld MC=%ld KT=%ld order=%d: peak loop %.2f ns/product (%.0f G/s)\n", mode ? "int8" : "bf16", M, N, K, MC, KT, k_inner,
           pk * 1e9, (mode ? 2.0 * 16 * 16 * 64 : 2.0 * 16 * 16 * 32) / pk / 1e9);
    for (int round = 0; round < 2; ++round)
      for (int pf = 0; pf < pfs; ++pf) {
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
