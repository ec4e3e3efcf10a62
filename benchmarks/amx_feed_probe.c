// The AMX tile unit fed from memory, without coopjit (issue 14): how fast one core runs the 2 x 2
// block of accumulator tiles (2 A + 2 B tile loads per 4 tile products, the shape of coopjit's AMX
// plans) when the operand tiles come from L1, from L2, with software prefetch at several
// distances, in two load orders, and with the partial sums continued through memory. Each case
// reports its rate as a share of the same core's rate with no loads at all (the peak loop of
// coopjit.peak(): 4 accumulators, operands held in tiles).
//
//   gcc -O2 -mamx-tile -mamx-bf16 -mamx-int8 -o /tmp/amx_feed_probe benchmarks/amx_feed_probe.c
//   taskset -c 2 /tmp/amx_feed_probe [zero | const | random] [short]
//
// The operands (the peak loop's tiles too) hold zeros, one constant (bf16 1/64, int8 1: what
// coopjit.peak() multiplies) or random values (bf16 normal, int8 uniform): the tile unit's rate
// depends on them (its power, the core's clock).
//
// Layout as coopjit packs it: an A panel is K steps of 32 rows x 64 bytes (two 1 KiB tiles one
// after the other); a B panel is K steps of 16 VNNI rows x 128 bytes (the two column tiles side
// by side, each tile read with a 128-byte row stride), or with "tiled B" two 1 KiB tiles one
// after the other (64-byte stride).
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
  memset(p, 0, bytes);
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

static int int8_mode;  // 0: tdpbf16ps, 1: tdpbssd
static int fill_mode;  // 0: zeros, 1: a constant, 2: random

// xorshift64: bf16 ~ normal (the sum of 4 uniforms, scaled), int8 uniform.
static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}
static void fill(char* p, size_t bytes) {
  if (fill_mode == 0) {
    memset(p, 0, bytes);
  } else if (int8_mode) {
    for (size_t i = 0; i < bytes; ++i) p[i] = fill_mode == 1 ? 1 : (char)next_rand();
  } else {
    for (size_t i = 0; i + 1 < bytes; i += 2) {
      float x = 1.0f / 64;
      if (fill_mode == 2) {
        x = 0;
        for (int j = 0; j < 4; ++j) x += (float)(next_rand() >> 40) / (float)(1 << 24) - 0.5f;
        x *= 1.7320508f;
      }
      uint32_t u;
      memcpy(&u, &x, 4);
      uint16_t h = (uint16_t)(u >> 16);
      memcpy(p + i, &h, 2);
    }
  }
}
#if 0  
#endif
#define DP(c, a, b)                   \
  do {                                \
    if (int8_mode) _tile_dpbssd(c, a, b); \
    else _tile_dpbf16ps(c, a, b);     \
  } while (0)

// Tile products with no loads: `chains` accumulators (4: the peak loop).
static double peak(long iters, int chains) {
  static char buf[8192] __attribute__((aligned(64)));
  fill(buf, sizeof buf);
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, buf, 64); _tile_loadd(5, buf + 1024, 64);
  _tile_loadd(6, buf + 2048, 64); _tile_loadd(7, buf + 3072, 64);
  double t0 = now();
  if (chains == 4)
    for (long i = 0; i < iters; ++i) { DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7); }
  else if (chains == 2)
    for (long i = 0; i < iters; ++i) { DP(0, 4, 6); DP(1, 4, 7); DP(0, 5, 6); DP(1, 5, 7); }
  else
    for (long i = 0; i < iters; ++i) { DP(0, 4, 6); DP(0, 4, 7); DP(0, 5, 6); DP(0, 5, 7); }
  double t = now() - t0;
  _tile_stored(0, buf, 64);
  return t / (4.0 * iters);  // seconds per tile product
}

typedef struct {
  int steps;       // K steps of a micro kernel (32 bf16 / 64 int8 each)
  int mt, nt;      // row panels x column panels of the block (the micro kernels: nt outer, mt inner)
  int order;       // 0: 4 loads then 4 products; 1: A0 B0 T00 B1 T01 A1 T10 T11
  int tiled_b;     // B steps as two 1 KiB tiles (stride 64) instead of 128-byte VNNI rows
  int pf_a, pf_b;  // prefetcht0 of A's / B's lines this many K steps ahead (0: none)
  int cont;        // the partial sums continued: C tiles loaded from memory (else zeroed)
  int reps;        // passes over the block
  int t1;          // tileloaddt1 for A
} Case;

static char *PA, *PB, *PC;

static double gemm(const Case* c) {
  const size_t step = 2048;  // bytes of A (and of B) per K step
  const size_t apanel = step * c->steps, bpanel = step * c->steps;
  const long bs = c->tiled_b ? 64 : 128, b1 = c->tiled_b ? 1024 : 64;
  long products = 0;
  double t0 = now();
  for (int r = 0; r < c->reps; ++r)
    for (int n = 0; n < c->nt; ++n)
      for (int m = 0; m < c->mt; ++m) {
        char* cc = PC + ((size_t)n * c->mt + m) * 4096;
        if (c->cont) {
          _tile_loadd(0, cc, 64); _tile_loadd(1, cc + 1024, 64);
          _tile_loadd(2, cc + 2048, 64); _tile_loadd(3, cc + 3072, 64);
        } else {
          _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
        }
        const char* a = PA + m * apanel;
        const char* b = PB + n * bpanel;
        for (int k = 0; k < c->steps; ++k, a += step, b += step) {
          if (c->pf_a)
            for (int l = 0; l < 32; ++l) _mm_prefetch(a + c->pf_a * step + 64 * l, _MM_HINT_T0);
          if (c->pf_b)
            for (int l = 0; l < 32; ++l) _mm_prefetch(b + c->pf_b * step + 64 * l, _MM_HINT_T0);
          if (c->order == 0) {
            if (c->t1) { _tile_stream_loadd(4, a, 64); _tile_stream_loadd(5, a + 1024, 64); }
            else { _tile_loadd(4, a, 64); _tile_loadd(5, a + 1024, 64); }
            _tile_loadd(6, b, bs); _tile_loadd(7, b + b1, bs);
            DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7);
          } else {
            _tile_loadd(4, a, 64); _tile_loadd(6, b, bs);
            DP(0, 4, 6);
            _tile_loadd(7, b + b1, bs);
            DP(1, 4, 7);
            _tile_loadd(5, a + 1024, 64);
            DP(2, 5, 6); DP(3, 5, 7);
          }
        }
        _tile_stored(0, cc, 64); _tile_stored(1, cc + 1024, 64);
        _tile_stored(2, cc + 2048, 64); _tile_stored(3, cc + 3072, 64);
        products += 4L * c->steps;
      }
  return (now() - t0) / products;
}

static void run(const char* name, Case c, double peak_t) {
  // repeat the block so each case does about 4M tile products, best of 3
  long per = 4L * c.steps * c.mt * c.nt;
  c.reps = (int)(4000000 / per) + 1;
  double best = 1e9;
  for (int i = 0; i < 3; ++i) {
    double t = gemm(&c);
    if (t < best) best = t;
  }
  printf("%-58s steps=%-4d mt=%-3d nt=%-3d order=%d tiledB=%d pfA=%d pfB=%d cont=%d t1=%d  %6.1f ns/product  %5.1f%% of peak loop\n",
         name, c.steps, c.mt, c.nt, c.order, c.tiled_b, c.pf_a, c.pf_b, c.cont, c.t1, best * 1e9, 100.0 * peak_t / best);
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    printf("no AMX permission\n");
    return 1;
  }
  config();
  const char* fills[] = {"zero", "const", "random"};
  for (int f = 0; f < 3; ++f)
    if (argc > 1 && !strcmp(argv[1], fills[f])) fill_mode = f;
  const int quick = argc > 2;
  PA = big(8 << 20);  // (the largest case reads 1 MiB of each)
  PB = big(8 << 20);
  PC = big(8 << 20);
  for (int mode = 0; mode < 2; ++mode) {
    int8_mode = mode;
    fill(PA, 8 << 20);
    fill(PB, 8 << 20);
    const char* dt = mode ? "int8" : "bf16";
    double p4 = peak(1000000, 4), p2 = peak(1000000, 2), p1 = peak(1000000, 1);
    p4 = peak(2000000, 4) < p4 ? peak(2000000, 4) : p4;
    printf("[%s operands] %s peak loop: %.2f ns/product with 4 accumulators (%.0f G/s), 2: %.2f, 1: %.2f\n",
           fills[fill_mode], dt, p4 * 1e9, (mode ? 2.0 * 16 * 16 * 64 : 2.0 * 16 * 16 * 32) / p4 / 1e9, p2 * 1e9, p1 * 1e9);
    Case base = {.steps = 8, .mt = 1, .nt = 1};
    Case c;
#define RUN(label, ...) do { c = base; __VA_ARGS__; char nm[96]; snprintf(nm, sizeof nm, "%s %s %s", fills[fill_mode], dt, label); run(nm, c, p4); } while (0)
    // All in L1 (A 16 KiB + B 16 KiB, the same block again and again).
    RUN("L1: one 32x32 block, kc 256", );
    if (!quick) {
    RUN("L1: one 32x32 block, kc 256", c.order = 1);
    RUN("L1: one 32x32 block, kc 256", c.tiled_b = 1);
    RUN("L1: one 32x32 block, kc 256", c.cont = 1);
    RUN("L1: one 32x32 block, kc 128", c.steps = 4);
    RUN("L1: one 32x32 block, kc 512", c.steps = 16);
    }
    // Both streaming from L2: 8 row panels x 4 column panels, kc 2048 (A block 1 MiB, B 512 KiB).
    base = (Case){.steps = 64, .mt = 8, .nt = 4};
    RUN("L2: A and B from L2, kc 2048", );
    if (quick) {
      base = (Case){.steps = 8, .mt = 32, .nt = 4, .cont = 1};
      RUN("B in L1, A from L2, kc 256", );
      // coopjit's 2048^3 blocks: kt 2048, 48 row panels a block (6 MiB of A: L3), A's lines
      // prefetched two steps ahead; and with 8 row panels (1 MiB: L2).
      base = (Case){.steps = 64, .mt = 48, .nt = 2, .pf_a = 2};
      RUN("coopjit's 2048 block: A from L3, kc 2048", );
      RUN("coopjit's 2048 block: A from L3, kc 2048", c.pf_a = 0);
      RUN("coopjit's 2048 block: A from L2, kc 2048", c.mt = 8);
      continue;
    }
    RUN("L2: A and B from L2, kc 2048", c.order = 1);
    RUN("L2: A and B from L2, kc 2048", c.tiled_b = 1);
    RUN("L2: A and B from L2, kc 2048", c.pf_a = 2);
    RUN("L2: A and B from L2, kc 2048", c.pf_a = 2, c.pf_b = 2);
    RUN("L2: A and B from L2, kc 2048", c.pf_a = 4, c.pf_b = 4);
    RUN("L2: A and B from L2, kc 2048", c.pf_a = 8, c.pf_b = 8);
    RUN("L2: A and B from L2, kc 2048", c.pf_a = 4, c.pf_b = 4, c.order = 1);
    RUN("L2: A and B from L2, kc 2048", c.t1 = 1);
    // B slice in L1 (16 / 32 KiB), A streaming from L2 (32 row panels), partial sums continued.
    base = (Case){.steps = 8, .mt = 32, .nt = 4, .cont = 1};
    RUN("B in L1, A from L2, kc 256", );
    RUN("B in L1, A from L2, kc 256", c.pf_a = 2);
    RUN("B in L1, A from L2, kc 256", c.pf_a = 4);
    RUN("B in L1, A from L2, kc 256", c.pf_a = 4, c.order = 1);
    RUN("B in L1, A from L2, kc 256", c.cont = 0);
    RUN("B in L1, A from L2, kc 512", c.steps = 16);
    RUN("B in L1, A from L2, kc 512", c.steps = 16, c.pf_a = 4);
    RUN("B in L1, A from L2, kc 512", c.steps = 16, c.pf_a = 4, c.cont = 0);
    // A slice in L1, B streaming (nt inner would be the other loop order; here mt = 1, nt large).
    base = (Case){.steps = 8, .mt = 1, .nt = 32, .cont = 1};
    RUN("A in L1, B from L2, kc 256", c.pf_b = 4);
    // Small blocks reused from L1: 2 row panels x 2 column panels of kc 256 (64 KiB) / kc 128.
    base = (Case){.steps = 4, .mt = 2, .nt = 2, .cont = 1};
    RUN("2x2 panels of kc 128 in L1, sums continued", );
  }
  return 0;
}
