// What one core's AMX tiles can do per K step of coopjit's 2 x 2 tile kernel (issue 14, session 31):
// the same step (2 A + 2 B tileloadd, 4 tdpbf16ps on tmm0-3) fed from L1, from L2, in the access
// pattern of coopjit's default nest (a 1 MiB block of A panels, a column panel's 128 KiB slice of B
// read by 8 kernels, then the next slice), with the nest's kernel ends and with C's stores, one
// feature added at a time, so that each one's cost reads off the difference to the case before.
//
//   gcc -O2 -mamx-tile -mamx-bf16 -mavx512f -mprfchw -o /tmp/amx_step_ceiling benchmarks/amx_step_ceiling.c
//   taskset -c 1 /tmp/amx_step_ceiling [rounds]
//
// Operands are random bf16 (the tile unit's rate depends on the values: on the 2-core Emerald
// Rapids guest of session 31 the loop without loads ran 4 products in ~24 ns with zeros and ~29 ns
// with random values). Times are the thread's CPU time (a descheduled thread does not count), each
// case the best of 3 passes of 200,000 steps, cases in turn, `rounds` rounds; the median is printed.
// A K step is 32 bf16 of K: 4 tile loads of 1 KiB, 4 products of 16 x 16 x 32.
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define STEPS 200000L
#define KERNEL 64        // K steps of one kernel (kt 2048 bf16: coopjit's default K tile)
#define GROUP 8          // kernels reading one B slice (mc_tiles 8)
#define ABLOCK (1L << 20)      // A's block: 8 panels x 64 steps x 2 KiB
#define BSLICE (128L << 10)    // one column panel's K-tile slice of B
#define BREGION (8L << 20)     // the slices of all column panels (2048 columns)
#define CSTRIDE 8192L          // C 2048 f32 wide

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static char* alloc(size_t bytes) {
  char* p = aligned_alloc(1 << 21, bytes);
  if (!p) exit(1);
  uint64_t x = 88172645463325252ull;
  uint16_t* h = (uint16_t*)p;
  for (size_t i = 0; i < bytes / 2; ++i) {  // bf16 uniform in [-1, 1)
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    float f = ((float)(x >> 40) / (float)(1 << 24) - 0.5f) * 2;
    uint32_t u;
    memcpy(&u, &f, 4);
    h[i] = (uint16_t)(u >> 16);
  }
  return p;
}

enum { LOOP, L1, L2, A_L1, A_L1_SWAP8, O0, O0_COLD_B, O0_KERNELS, O0_C, O0_C_PFW, O0_C_SPREAD, O0_C_SPREAD_NT, NCASES };
static const char* names[NCASES] = {
    "loop: no loads (coopjit.peak()'s loop)",
    "L1: A and B from 32 KiB",
    "L2: the four tiles streamed from 1 MiB",
    "A from 16 KiB (L1), B streamed from 1 MiB",
    "  + C's tiles swapped every 8 steps",
    "o0: A block 1 MiB, B slice 128 KiB x 8",
    "  + the next B slice every 512 steps",
    "  + kernel ends every 64 steps",
    "  + C's tiles stored into C (2048 wide)",
    "  + prefetchw of C over the last 16 steps",
    "C via a hot buffer, a line a step",
    "C via a hot buffer, a line a step, NT",
};

static char *A, *B, *C, *SLOT;
static char hot[2][4096] __attribute__((aligned(64)));

static inline void step(const char* a, const char* b, long bstride) {
  _tile_loadd(4, a, 64);
  _tile_loadd(6, b, bstride);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b + (bstride == 128 ? 64 : 1024), bstride);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a + 1024, 64);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

static void store_c(char* c, long stride) {
  _tile_stored(0, c, stride);
  _tile_stored(1, c + 64, stride);
  _tile_stored(2, c + 16 * stride, stride);
  _tile_stored(3, c + 16 * stride + 64, stride);
}

static double run(int cs) {
  _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
  _tile_loadd(4, A, 64); _tile_loadd(5, A + 1024, 64); _tile_loadd(6, A + 2048, 64); _tile_loadd(7, A + 3072, 64);
  long ao = 0, bo = 0, bs = 0, kern = 0;
  const char* pend = NULL;
  char* pdst = NULL;
  const double t0 = now();
  for (long i = 0; i < STEPS; ++i) {
    switch (cs) {
      case LOOP:
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
        continue;
      case L1:
        step(A + (i & 7) * 4096, A + (i & 7) * 4096 + 2048, 64);
        continue;
      case L2:
        step(A + ao, A + ao + 2048, 64);
        ao = ao + 4096 >= ABLOCK ? 0 : ao + 4096;
        continue;
      case A_L1:
      case A_L1_SWAP8:
        step(A + (i & 7) * 2048, B + bo, 128);
        bo = bo + 2048 >= ABLOCK ? 0 : bo + 2048;
        if (cs == A_L1_SWAP8 && (i & 7) == 7) {  // 8 slots of 4 KiB, one a column panel of a block
          char *w = SLOT + ((i >> 3) & 7) * 4096, *nw = SLOT + (((i >> 3) + 1) & 7) * 4096;
          _tile_stored(0, w, 64); _tile_stored(1, w + 1024, 64); _tile_stored(2, w + 2048, 64); _tile_stored(3, w + 3072, 64);
          _tile_loadd(0, nw, 64); _tile_loadd(1, nw + 1024, 64); _tile_loadd(2, nw + 2048, 64); _tile_loadd(3, nw + 3072, 64);
        }
        continue;
      default:
        break;
    }
    // o0 and its additions
    step(A + ao, B + bs + bo, 128);
    ao = ao + 2048 >= ABLOCK ? 0 : ao + 2048;
    bo = bo + 2048 >= BSLICE ? 0 : bo + 2048;
    if (cs >= O0_COLD_B && (i + 1) % (KERNEL * GROUP) == 0) bs = bs + BSLICE >= BREGION ? 0 : bs + BSLICE;
    // kernel (mt, nt) of a 64 x 64 grid of 32 x 32 tiles
    char* cc = C + (kern & 63) * 32 * CSTRIDE + ((kern >> 6) & 63) * 128;
    if (cs == O0_C_PFW && i % KERNEL >= KERNEL - 16) {
      const int l0 = (int)(i % KERNEL - (KERNEL - 16)) * 4;
      for (int l = l0; l < l0 + 4; ++l) _m_prefetchw(cc + (l >> 1) * CSTRIDE + (l & 1) * 64);
    }
    if (cs >= O0_C_SPREAD && pend) {  // the last kernel's C, one 64-byte line a step
      const int l = (int)(i % KERNEL), r = l >> 1, h = l & 1;
      const __m512 v = _mm512_load_ps(pend + (r >> 4) * 2048 + h * 1024 + (r & 15) * 64);
      float* d = (float*)(pdst + r * CSTRIDE + h * 64);
      if (cs == O0_C_SPREAD_NT) _mm512_stream_ps(d, v);
      else _mm512_store_ps(d, v);
    }
    if (cs >= O0_KERNELS && (i + 1) % KERNEL == 0) {
      if (cs == O0_KERNELS) {
        store_c(hot[0], 128);
      } else if (cs >= O0_C_SPREAD) {
        char* w = hot[kern & 1];
        _tile_stored(0, w, 64); _tile_stored(1, w + 1024, 64); _tile_stored(2, w + 2048, 64); _tile_stored(3, w + 3072, 64);
        pend = w, pdst = cc;
      } else {
        store_c(cc, CSTRIDE);
      }
      ++kern;
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    }
  }
  const double t = now() - t0;
  _tile_stored(0, hot[1], 64);
  return t / STEPS;
}

static int cmp_d(const void* x, const void* y) {
  const double d = *(const double*)x - *(const double*)y;
  return (d > 0) - (d < 0);
}

int main(int argc, char** argv) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    perror("arch_prctl(ARCH_REQ_XCOMP_PERM): no AMX tiles for this process");
    return 1;
  }
  unsigned char cfg[64] = {0};
  cfg[0] = 1;
  for (int t = 0; t < 8; ++t) cfg[16 + 2 * t] = 64, cfg[48 + t] = 16;
  _tile_loadconfig(cfg);
  const int rounds = argc > 1 ? atoi(argv[1]) : 5;
  A = alloc(ABLOCK + 8192);
  B = alloc(BREGION + BSLICE);
  C = alloc(64 * 32 * CSTRIDE);
  SLOT = alloc(8 * 4096);
  double t[NCASES][64];
  for (int r = 0; r < rounds && r < 64; ++r)
    for (int c = 0; c < NCASES; ++c) {
      double best = 1e9;
      for (int p = 0; p < 3; ++p) {
        const double x = run(c);
        if (x < best) best = x;
      }
      t[c][r] = best;
    }
  double loop = 0;
  printf("%-44s %9s %9s %9s\n", "case (bf16, one core)", "ns/step", "% loop", "GFLOP/s");
  for (int c = 0; c < NCASES; ++c) {
    qsort(t[c], rounds, sizeof(double), cmp_d);
    const double m = t[c][rounds / 2];
    if (c == LOOP) loop = m;
    printf("%-44s %9.1f %9.1f %9.0f\n", names[c], m * 1e9, 100 * loop / m, 4 * 2.0 * 16 * 16 * 32 / m * 1e-9);
  }
  _tile_release();
  return 0;
}
