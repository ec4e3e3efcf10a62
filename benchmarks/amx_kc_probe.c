// Which loop nest feeds the AMX tiles from a realistic packed layout (issue 14, session 21): one
// thread over coopjit's packed panels (an A panel: K steps of 32 rows x 64 bytes, two 1 KiB tiles
// one after the other; a B panel: K steps of 16 VNNI rows x 128 bytes, the two column tiles side by
// side, read at a 128-byte stride), the 2 x 2 tile kernel (2 A + 2 B tileloadd, 4 tile products on
// tmm0-3 a K step), in several loop orders, K tiles, prefetches and load hints, each checked
// against sums in double / int64 first. Each case reports its rate as a share of the register-only
// tile loop (4 accumulators, no loads: coopjit.peak()'s loop) measured just before and just after
// its passes: the vCPUs of the 16-core host run at two rates about 2:1 apart and switch within
// milliseconds, so a sample counts only where the two loop rates agree within 5%, and the summary
// splits the samples into those at the loop's full rate and those at a slower one.
//
// Orders (KT: K steps of a K tile, a K step is 32 bf16 / 64 int8 elements; the partial sums of a
// tile continued through a scratch between K tiles, the last K tile stores to C, f32 / i32
// row-major N wide, by tilestored):
//   o0  coopjit's default: for each K tile, for each block of MC row panels, for each column
//       panel, for each row panel of the block
//   o2  coopjit's nc_tiles = MC: for each K tile, for each block of MC column panels, for each
//       row panel, the block's column panels (A's K-tile slice reused across the block)
//   o3  for each block of MC column panels, for each row panel, for each K tile, the block's
//       column panels: A's K-tile slice (KT x 2 KiB) stays in L1 while the block's B slices
//       stream from L2, and the block's partial sums of that row panel (MC x 4 KiB) stay in L1/L2
//   o4  the converse: for each block of MC row panels, for each column panel, for each K tile,
//       the block's row panels (B's K-tile slice in L1, A streamed)
// Scratch: "row" rows N * 4 bytes apart (coopjit's default scratch), "tile" each tile's sums one
// contiguous 4 KiB block (coopjit's k_inner scratch), "slot" (o3 / o4) one 4 KiB block a kernel of
// the group, reused by every group (MC x 4 KiB). o4 with MC 0: the row panels whose whole K slice
// stays within 1 MiB. pfA / pfB: prefetcht0 of the operand's lines that many K steps ahead in the
// order the kernels read them (past the end of a kernel's slice: the next kernel's); t1:
// tileloaddt1 for that operand; far A / B: the next slice of the operand (the one the next group
// of kernels reads), part j of each K step in kernel j of the group, into L2 (T1) or L1 (T0).
//
//   gcc -O2 -mamx-tile -mamx-bf16 -mamx-int8 -o /tmp/amx_kc_probe benchmarks/amx_kc_probe.c -lm
//   (-DEMU: the tiles emulated in C, to check the nests' sums on a CPU without AMX: amx_kc_probe 1 4 64 96 256)
//   taskset -c 2 /tmp/amx_kc_probe [rounds [set [M N K ...]]]
//   (default: 3 rounds, set 4, 2048^3, 1024x1024x4096, 256x128x2048; set 1-6: the cases of session 21's runs 1-6;
//   (*): not a product, C left unwritten)
#define _GNU_SOURCE
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef EMU
#define PEAK_ITERS 10
// Tiles of 16 rows x 64 bytes, as config() sets them.
static char emu_t[8][16][64];
static void emu_load(int t, const void* p, long stride) {
  for (int r = 0; r < 16; ++r) memcpy(emu_t[t][r], (const char*)p + r * stride, 64);
}
static void emu_store(int t, void* p, long stride) {
  for (int r = 0; r < 16; ++r) memcpy((char*)p + r * stride, emu_t[t][r], 64);
}
static float emu_bf(const char* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void emu_dp(int c, int a, int b, int int8) {
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      char* cp = emu_t[c][m] + 4 * n;
      if (int8) {
        int32_t v;
        memcpy(&v, cp, 4);
        for (int p = 0; p < 16; ++p)
          for (int q = 0; q < 4; ++q) v += (signed char)emu_t[a][m][4 * p + q] * (signed char)emu_t[b][p][4 * n + q];
        memcpy(cp, &v, 4);
      } else {
        float v;
        memcpy(&v, cp, 4);
        for (int p = 0; p < 16; ++p)
          for (int q = 0; q < 2; ++q) v += emu_bf(emu_t[a][m] + 4 * p + 2 * q) * emu_bf(emu_t[b][p] + 4 * n + 2 * q);
        memcpy(cp, &v, 4);
      }
    }
}
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stream_loadd
#undef _tile_stored
#undef _tile_dpbf16ps
#undef _tile_dpbssd
#undef _tile_loadconfig
#define _tile_zero(t) memset(emu_t[t], 0, 1024)
#define _tile_loadd(t, p, s) emu_load(t, p, s)
#define _tile_stream_loadd(t, p, s) emu_load(t, p, s)
#define _tile_stored(t, p, s) emu_store(t, p, s)
#define _tile_dpbf16ps(c, a, b) emu_dp(c, a, b, 0)
#define _tile_dpbssd(c, a, b) emu_dp(c, a, b, 1)
#define _tile_loadconfig(p) (void)(p)
#define syscall(...) 0
#endif

#ifndef PEAK_ITERS
#define PEAK_ITERS 400000
#endif
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
#define STEP 2048L  // bytes of A (and of B) a K step of a panel

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void* big(size_t bytes) {
  void* p = NULL;
  bytes = (bytes + (2 << 20) - 1) / (2 << 20) * (2 << 20);
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

static uint64_t rng_state = 88172645463325252ull;
static uint64_t next_rand(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static int int8_mode;

static float bf16_to_f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

// bf16 ~ normal (the sum of 4 uniforms, scaled), int8 uniform.
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

// The register-only loop: seconds per tile product.
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

typedef struct {
  const char* label;
  int order;    // 0, 2, 3, 4 (above)
  int mc;       // panels a block
  int kt;       // K steps a K tile (0: coopjit's default, min(steps, 64))
  int tiled;    // scratch: 1 each tile's sums a 4 KiB block, 0 rows N * 4 bytes apart
  int pfa, pfb; // prefetcht0 distances in K steps (0: none)
  int at1, bt1; // tileloaddt1 for A / B
  int far;      // the next slice of A (1, 2) / B (3, 4) / both (5), part j of it in kernel j of a group
                // (the kernels that read one slice in turn), into L2 (1, 3, 5: prefetcht1) or L1 (2, 4)
  int cw;       // C: 0 stored by the last K tile, 1 its lines prefetched for writing (prefetchw) by
                // the first K tile's kernel, 2 the last K tile stores to the scratch instead (warm
                // lines: not a product, the cost of C's cold lines), 3 prefetchw by the last K tile's
                // kernel over the first half of its steps, 4 by the K tile before the last
} Case;

typedef struct {
  int mt, nt, k0, s;
  const char *fa, *fb;  // far: this kernel's part of the next A / B slice (at K step 0)
  int fal, fbl;         // its lines a K step
} Kern;

static long M, N, K, STEPS, TM, TN;
static char *PA, *PB, *WS;
static char* C;
static Kern* LIST;
static long NLIST;

// MC 0: the row panels whose whole K stays within 1 MiB (o4's block of A, read for every column panel)
static long mcs(const Case* c) {
  if (c->mc) return c->mc;
  const long m = (1L << 20) / (STEPS * STEP);
  return m < 1 ? 1 : m;
}

static void plan(const Case* c) {
  const long kt = c->kt ? c->kt : (STEPS < 64 ? STEPS : 64), mc = mcs(c);
  NLIST = 0;
#define ADD(m, n, k)                                                               \
  do {                                                                             \
    LIST[NLIST].mt = (int)(m), LIST[NLIST].nt = (int)(n), LIST[NLIST].k0 = (int)(k); \
    LIST[NLIST].s = (int)((k) + kt < STEPS ? kt : STEPS - (k));                    \
    ++NLIST;                                                                       \
  } while (0)
  if (c->order == 0) {
    for (long k = 0; k < STEPS; k += kt)
      for (long mb = 0; mb < TM; mb += mc)
        for (long n = 0; n < TN; ++n)
          for (long m = mb; m < mb + mc && m < TM; ++m) ADD(m, n, k);
  } else if (c->order == 2) {
    for (long k = 0; k < STEPS; k += kt)
      for (long nb = 0; nb < TN; nb += mc)
        for (long m = 0; m < TM; ++m)
          for (long n = nb; n < nb + mc && n < TN; ++n) ADD(m, n, k);
  } else if (c->order == 3) {
    for (long nb = 0; nb < TN; nb += mc)
      for (long m = 0; m < TM; ++m)
        for (long k = 0; k < STEPS; k += kt)
          for (long n = nb; n < nb + mc && n < TN; ++n) ADD(m, n, k);
  } else {
    for (long mb = 0; mb < TM; mb += mc)
      for (long n = 0; n < TN; ++n)
        for (long k = 0; k < STEPS; k += kt)
          for (long m = mb; m < mb + mc && m < TM; ++m) ADD(m, n, k);
  }
#undef ADD
  // far: groups of consecutive kernels reading one A (B) slice; kernel j of a group of g fetches
  // lines [j * l, (j + 1) * l) of each K step of the next group's slice, l = ceil(32 / g).
  const long panel = STEPS * STEP;
  for (int op = 0; op < 2; ++op)
    for (long i = 0; i < NLIST;) {
      long e = i;
#define KEY(x) (op ? LIST[x].nt : LIST[x].mt) * 100000L + LIST[x].k0
      while (e < NLIST && KEY(e) == KEY(i)) ++e;
      const long g = e - i, l = (32 + g - 1) / g;
      for (long j = i; j < e; ++j) {
        const char* p = NULL;
        if (e < NLIST)
          p = (op ? PB + LIST[e].nt * panel : PA + LIST[e].mt * panel) + LIST[e].k0 * STEP + (j - i) * l * 64;
        if ((j - i) * l >= 32) p = NULL;
        if (op) LIST[j].fb = p, LIST[j].fbl = (int)l;
        else LIST[j].fa = p, LIST[j].fal = (int)l;
      }
#undef KEY
      i = e;
    }
}

static inline void pf_far(const char* p, int lines, int hint) {
  for (int l = 0; l < lines; ++l)
    if (hint) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
    else _mm_prefetch(p + 64 * l, _MM_HINT_T1);
}

static inline void pf_step(const char* p) {
#pragma GCC unroll 32
  for (int l = 0; l < 32; ++l) _mm_prefetch(p + 64 * l, _MM_HINT_T0);
}

// One pass over the kernel list.
static double nest(const Case* c) {
  const long panel = STEPS * STEP, cst = N * 4;
  double t0 = now();
  for (long i = 0; i < NLIST; ++i) {
    const Kern* kn = &LIST[i];
    const Kern* nx = &LIST[i + 1 < NLIST ? i + 1 : i];
    const char* a = PA + kn->mt * panel + kn->k0 * STEP;
    const char* b = PB + kn->nt * panel + kn->k0 * STEP;
    const char* na = PA + nx->mt * panel + nx->k0 * STEP;
    const char* nb = PB + nx->nt * panel + nx->k0 * STEP;
    const int first = kn->k0 == 0, last = kn->k0 + kn->s == STEPS;
    // tiled 2: one slot a kernel of the group (o3: the block's column panel, o4: the block's row
    // panel), reused by the next group: the scratch stays in L1 / L2
    char* ws = c->tiled == 2 ? WS + (c->order == 3 ? kn->nt % c->mc : kn->mt % mcs(c)) * 4096L
               : c->tiled  ? WS + ((long)kn->mt * TN + kn->nt) * 4096
                           : WS + (long)kn->mt * 32 * cst + kn->nt * 128;
    const long wst = c->tiled ? 64 : cst;
    const long w01 = c->tiled ? 1024 : 64, w10 = c->tiled ? 2048 : 16 * cst, w11 = c->tiled ? 3072 : 16 * cst + 64;
    if (first) {
      _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
      _tile_loadd(0, ws, wst); _tile_loadd(1, ws + w01, wst);
      _tile_loadd(2, ws + w10, wst); _tile_loadd(3, ws + w11, wst);
    }
    const int s = kn->s;
    const char* fa = (c->far == 1 || c->far == 2 || c->far == 5) ? kn->fa : NULL;
    const char* fb = (c->far == 3 || c->far == 4 || c->far == 5) ? kn->fb : NULL;
    const int fhint = c->far == 2 || c->far == 4;
    const int prev_last = kn->k0 + kn->s < STEPS && kn->k0 + 2 * kn->s >= STEPS;  // (the K tile before the last)
    const int cpf = (c->cw == 1 && first) || (c->cw == 4 && (prev_last || (first && last))) ? (64 + s - 1) / s
                    : c->cw == 3 && last ? (64 + (s + 1) / 2 - 1) / ((s + 1) / 2)
                                         : 0;  // C's 64 lines over the K steps
    char* cc0 = C + (long)kn->mt * 32 * cst + kn->nt * 128;
    for (int k = 0; k < s; ++k, a += STEP, b += STEP) {
      for (int l = k * cpf; l < (k + 1) * cpf && l < 64; ++l) __builtin_prefetch(cc0 + (l >> 1) * cst + (l & 1) * 64, 1, 3);
      if (fa) pf_far(fa + k * STEP, kn->fal, fhint);
      if (fb) pf_far(fb + k * STEP, kn->fbl, fhint);
      if (c->pfa) pf_step(k + c->pfa < s ? a + c->pfa * STEP : na + (k + c->pfa - s) * STEP);
      if (c->pfb) pf_step(k + c->pfb < s ? b + c->pfb * STEP : nb + (k + c->pfb - s) * STEP);
      if (c->at1) { _tile_stream_loadd(4, a, 64); _tile_stream_loadd(5, a + 1024, 64); }
      else { _tile_loadd(4, a, 64); _tile_loadd(5, a + 1024, 64); }
      if (c->bt1) { _tile_stream_loadd(6, b, 128); _tile_stream_loadd(7, b + 64, 128); }
      else { _tile_loadd(6, b, 128); _tile_loadd(7, b + 64, 128); }
      DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7);
    }
    if (last && c->cw != 2) {
      char* cc = C + (long)kn->mt * 32 * cst + kn->nt * 128;
      _tile_stored(0, cc, cst); _tile_stored(1, cc + 64, cst);
      _tile_stored(2, cc + 16 * cst, cst); _tile_stored(3, cc + 16 * cst + 64, cst);
    } else {
      _tile_stored(0, ws, wst); _tile_stored(1, ws + w01, wst);
      _tile_stored(2, ws + w10, wst); _tile_stored(3, ws + w11, wst);
    }
  }
  return now() - t0;
}

// C (i, j) from the packed panels, in double / int64.
static double reference(long i, long j) {
  const long panel = STEPS * STEP, mt = i / 32, r = i % 32, nt = j / 32, cl = j % 32;
  double sum = 0;
  for (long k = 0; k < STEPS; ++k) {
    const char* a = PA + mt * panel + k * STEP + (r / 16) * 1024 + (r % 16) * 64;  // 64 bytes of row i
    const char* b = PB + nt * panel + k * STEP + (cl / 16) * 64;                   // VNNI rows, 128 apart
    for (long p = 0; p < 16; ++p) {
      if (int8_mode) {
        for (int q = 0; q < 4; ++q) sum += (double)(signed char)a[4 * p + q] * (signed char)b[p * 128 + (cl % 16) * 4 + q];
      } else {
        for (int q = 0; q < 2; ++q) {
          uint16_t x, y;
          memcpy(&x, a + 4 * p + 2 * q, 2);
          memcpy(&y, b + p * 128 + (cl % 16) * 4 + 2 * q, 2);
          sum += (double)bf16_to_f(x) * bf16_to_f(y);
        }
      }
    }
  }
  return sum;
}

static int check(const Case* c) {
  memset(C, 0xff, M * N * 4);  // (NaN / -1: a tile never stored shows)
  memset(WS, 0xff, M * N * 4);
  plan(c);
  nest(c);
  int bad = 0;
  for (int t = 0; t < 48; ++t) {
    long i = t < 4 ? (t & 1) * (M - 1) : (long)(next_rand() % M), j = t < 4 ? (t >> 1) * (N - 1) : (long)(next_rand() % N);
    double want = reference(i, j), got;
    if (int8_mode) {
      int32_t v;
      memcpy(&v, C + (i * N + j) * 4, 4);
      got = v;
    } else {
      float v;
      memcpy(&v, C + (i * N + j) * 4, 4);
      got = v;
    }
    const int ok = int8_mode ? got == want : fabs(got - want) <= 1e-3 * sqrt((double)K) + 1e-4 * fabs(want);
    if (!ok && !bad++) printf("  WRONG %s: C(%ld, %ld) = %g, want %g\n", c->label, i, j, got, want);
  }
  return bad;
}

static int cmp_d(const void* x, const void* y) {
  const double d = *(const double*)x - *(const double*)y;
  return (d > 0) - (d < 0);
}

#define MAXC 32
#define MAXR 12

int main(int argc, char** argv) {
  if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)) {
    printf("no AMX permission\n");
    return 1;
  }
  config();
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  if (rounds < 1 || rounds > MAXR) rounds = 3;
  // (256 x 128 x 2048: A 1 MiB, B 512 KiB, the same panels every pass: the nests fed from L2 only)
  long shapes[8][3] = {{2048, 2048, 2048}, {1024, 1024, 4096}, {256, 128, 2048}};
  int nshapes = 3;
  if (argc > 5) {
    nshapes = 0;
    for (int i = 3; i + 2 < argc && nshapes < 8; i += 3, ++nshapes)
      for (int d = 0; d < 3; ++d) shapes[nshapes][d] = atol(argv[i + d]);
  }
  // The cases of session 21's runs 1-4 (benchmarks/recorded/issue14-emr16-amx-feed-session21.txt;
  // runs 1 and 2 with the earlier statistics: the loop measured once before each case's best of 3
  // passes). Run 1: o3 / o4 with every kt, NC / MC, pfB, t1 at 25-48% of the loop (medians), below
  // nc_tiles 8; run 2: the far prefetches, none consistently past nc_tiles 8; run 3: on 256 x 128 x
  // 2048 (all in L2) o4 MC8 kt16 A t1 at 77% of the loop, o3 NC8 kt16 B t1 69%, main 64-65%, but
  // 31-48% on the large shapes; run 4: the scratch slots and o4's far B; run 5: C's cold lines;
  // set 6: C's lines prefetched for writing at three distances (prepared, not run in session 21).
  static const Case set1[] = {
      {"main: o0 MC8 kt=K pfA2", 0, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"o0 MC8 kt=K no pf", 0, 8, 0, 0, 0, 0, 0, 0, 0, 0},
      {"nc_tiles 8: o2 NC8 kt=K pfA2", 2, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"nc_tiles 8 kt16: o2 NC8 pfA2", 2, 8, 16, 0, 2, 0, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile", 3, 8, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile pfB1", 3, 8, 16, 1, 0, 1, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile pfB2", 3, 8, 16, 1, 0, 2, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile pfB4", 3, 8, 16, 1, 0, 4, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile B t1", 3, 8, 16, 1, 0, 0, 0, 1, 0, 0},
      {"o3 NC8 kt16 tile pfA2", 3, 8, 16, 1, 2, 0, 0, 0, 0, 0},
      {"o3 NC8 kt16 row", 3, 8, 16, 0, 0, 0, 0, 0, 0, 0},
      {"o3 NC8 kt8 tile", 3, 8, 8, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC8 kt8 tile B t1", 3, 8, 8, 1, 0, 0, 0, 1, 0, 0},
      {"o3 NC8 kt32 tile", 3, 8, 32, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC4 kt16 tile", 3, 4, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC16 kt16 tile", 3, 16, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC16 kt8 tile", 3, 16, 8, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC32 kt16 tile", 3, 32, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o4 MC8 kt16 tile", 4, 8, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o4 MC8 kt16 tile A t1", 4, 8, 16, 1, 0, 0, 1, 0, 0, 0},
      {"o4 MC8 kt16 tile pfA2", 4, 8, 16, 1, 2, 0, 0, 0, 0, 0},
      {"o4 MC16 kt8 tile", 4, 16, 8, 1, 0, 0, 0, 0, 0, 0},
  };
  static const Case set2[] = {
      {"main: o0 MC8 kt=K pfA2", 0, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"main + far A,B T1 (amx_prefetch 6)", 0, 8, 0, 0, 2, 0, 0, 0, 5, 0},
      {"main + far B T1", 0, 8, 0, 0, 2, 0, 0, 0, 3, 0},
      {"nc_tiles 8: o2 NC8 kt=K pfA2", 2, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"o2 NC8 kt=K pfA2 far A T1", 2, 8, 0, 0, 2, 0, 0, 0, 1, 0},
      {"o2 NC8 kt=K pfA2 far A T0", 2, 8, 0, 0, 2, 0, 0, 0, 2, 0},
      {"o2 NC8 kt=K far A T1", 2, 8, 0, 0, 0, 0, 0, 0, 1, 0},
      {"o2 NC4 kt=K pfA2 far A T1", 2, 4, 0, 0, 2, 0, 0, 0, 1, 0},
      {"o2 NC16 kt=K pfA2 far A T1", 2, 16, 0, 0, 2, 0, 0, 0, 1, 0},
      {"o2 NC8 kt32 pfA2 far A T1", 2, 8, 32, 0, 2, 0, 0, 0, 1, 0},
      {"o2 NC16 kt32 pfA2 far A T1", 2, 16, 32, 0, 2, 0, 0, 0, 1, 0},
      {"o3 NC8 kt16 tile far A T1", 3, 8, 16, 1, 0, 0, 0, 0, 1, 0},
      {"o3 NC8 kt16 tile far A T0", 3, 8, 16, 1, 0, 0, 0, 0, 2, 0},
      {"o3 NC8 kt16 tile B t1 far A T0", 3, 8, 16, 1, 0, 0, 0, 1, 2, 0},
      {"o3 NC8 kt32 tile far A T1", 3, 8, 32, 1, 0, 0, 0, 0, 1, 0},
  };
  static const Case set3[] = {
      {"main: o0 MC8 kt=K pfA2", 0, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"main + far A,B T1 (amx_prefetch 6)", 0, 8, 0, 0, 2, 0, 0, 0, 5, 0},
      {"main + far B T1", 0, 8, 0, 0, 2, 0, 0, 0, 3, 0},
      {"nc_tiles 8: o2 NC8 kt=K pfA2", 2, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"o2 NC8 kt=K far A T1", 2, 8, 0, 0, 0, 0, 0, 0, 1, 0},
      {"o2 NC8 kt32 pfA2 far A T1", 2, 8, 32, 0, 2, 0, 0, 0, 1, 0},
      {"o2 NC16 kt32 pfA2 far A T1", 2, 16, 32, 0, 2, 0, 0, 0, 1, 0},
      {"o3 NC8 kt8 tile", 3, 8, 8, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile", 3, 8, 16, 1, 0, 0, 0, 0, 0, 0},
      {"o3 NC8 kt16 tile B t1", 3, 8, 16, 1, 0, 0, 0, 1, 0, 0},
      {"o3 NC8 kt16 tile far A T0", 3, 8, 16, 1, 0, 0, 0, 0, 2, 0},
      {"o3 NC8 kt32 tile far A T1", 3, 8, 32, 1, 0, 0, 0, 0, 1, 0},
      {"o4 MC8 kt16 tile A t1", 4, 8, 16, 1, 0, 0, 1, 0, 0, 0},
  };
  static const Case set4[] = {
      {"main: o0 MC8 kt=K pfA2", 0, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"nc_tiles 8: o2 NC8 kt=K pfA2", 2, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"o2 NC8 kt=K far A T1", 2, 8, 0, 0, 0, 0, 0, 0, 1, 0},
      {"o4 MC8 kt16 tile A t1", 4, 8, 16, 1, 0, 0, 1, 0, 0, 0},
      {"o4 MC8 kt16 slot A t1", 4, 8, 16, 2, 0, 0, 1, 0, 0, 0},
      {"o4 MC8 kt16 slot A t1 far B T1", 4, 8, 16, 2, 0, 0, 1, 0, 3, 0},
      {"o4 MC8 kt16 slot A t1 far B T0", 4, 8, 16, 2, 0, 0, 1, 0, 4, 0},
      {"o4 MC8 kt8 slot A t1 far B T0", 4, 8, 8, 2, 0, 0, 1, 0, 4, 0},
      {"o4 MCauto kt16 slot A t1 far B T1", 4, 0, 16, 2, 0, 0, 1, 0, 3, 0},
      {"o4 MCauto kt16 slot A t1 far B T0", 4, 0, 16, 2, 0, 0, 1, 0, 4, 0},
      {"o4 MCauto kt16 slot far B T0", 4, 0, 16, 2, 0, 0, 0, 0, 4, 0},
      {"o4 MC4 kt16 slot A t1 far B T0", 4, 4, 16, 2, 0, 0, 1, 0, 4, 0},
      {"o3 NC8 kt16 slot B t1", 3, 8, 16, 2, 0, 0, 0, 1, 0, 0},
      {"o3 NC8 kt16 slot B t1 far A T1", 3, 8, 16, 2, 0, 0, 0, 1, 1, 0},
      {"o3 NC8 kt16 slot B t1 far A T0", 3, 8, 16, 2, 0, 0, 0, 1, 2, 0},
  };
  static const Case set5[] = {
      {"nc_tiles 8: o2 NC8 kt=K pfA2", 2, 8, 0, 0, 2, 0, 0, 0, 0, 0},
      {"o2 NC8 kt=K far A T1", 2, 8, 0, 0, 0, 0, 0, 0, 1, 0},
      {"o2 NC8 kt=K far A T1, C prefetchw", 2, 8, 0, 0, 0, 0, 0, 0, 1, 1},
      {"o2 NC8 kt=K far A T1, C warm (*)", 2, 8, 0, 0, 0, 0, 0, 0, 1, 2},
      {"o4 MCauto kt16 slot A t1 far B T1", 4, 0, 16, 2, 0, 0, 1, 0, 3, 0},
      {"o4 ... C prefetchw", 4, 0, 16, 2, 0, 0, 1, 0, 3, 1},
      {"o4 ... C warm (*)", 4, 0, 16, 2, 0, 0, 1, 0, 3, 2},
      {"o3 NC8 kt16 slot B t1 far A T1", 3, 8, 16, 2, 0, 0, 0, 1, 1, 0},
      {"o3 ... C prefetchw", 3, 8, 16, 2, 0, 0, 0, 1, 1, 1},
      {"o3 ... C warm (*)", 3, 8, 16, 2, 0, 0, 0, 1, 1, 2},
  };
  static const Case set6[] = {
      {"o4 MCauto kt16 slot A t1 far B T1", 4, 0, 16, 2, 0, 0, 1, 0, 3, 0},
      {"o4 ... C prefetchw first K tile", 4, 0, 16, 2, 0, 0, 1, 0, 3, 1},
      {"o4 ... C prefetchw last K tile", 4, 0, 16, 2, 0, 0, 1, 0, 3, 3},
      {"o4 ... C prefetchw K tile before", 4, 0, 16, 2, 0, 0, 1, 0, 3, 4},
      {"o3 NC8 kt16 slot B t1 far A T1, C pfw 1st", 3, 8, 16, 2, 0, 0, 0, 1, 1, 1},
      {"o3 ... C prefetchw last K tile", 3, 8, 16, 2, 0, 0, 0, 1, 1, 3},
      {"o3 ... C prefetchw K tile before", 3, 8, 16, 2, 0, 0, 0, 1, 1, 4},
  };
  const Case* sets[] = {set1, set2, set3, set4, set5, set6};
  const int sizes[] = {sizeof set1 / sizeof *set1, sizeof set2 / sizeof *set2, sizeof set3 / sizeof *set3, sizeof set4 / sizeof *set4,
                       sizeof set5 / sizeof *set5, sizeof set6 / sizeof *set6};
  int which = argc > 2 ? atoi(argv[2]) : 4;
  if (which < 1 || which > 6) {
    printf("set: 1 to 6 (the cases of session 21's run 1 to 6), got %s\n", argv[2]);
    return 1;
  }
  const Case* cases = sets[which - 1];
  const int ncases = sizes[which - 1];

  for (int sh = 0; sh < nshapes; ++sh)
    for (int mode = 0; mode < 2; ++mode) {
      int8_mode = mode;
      M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
      if (M % 32 || N % 32 || K % (mode ? 64 : 32)) {
        printf("M, N multiples of 32 and K of %d, got %ld %ld %ld\n", mode ? 64 : 32, M, N, K);
        return 1;
      }
      STEPS = K / (mode ? 64 : 32), TM = M / 32, TN = N / 32;
      const char* dt = mode ? "int8" : "bf16";
      PA = big(TM * STEPS * STEP + 64 * STEP);  // (prefetches read past the last panel)
      PB = big(TN * STEPS * STEP + 64 * STEP);
      C = big(M * N * 4);
      WS = big(M * N * 4);
      LIST = malloc(sizeof(Kern) * TM * TN * STEPS);
      fill(PA, TM * STEPS * STEP);
      fill(PB, TN * STEPS * STEP);
      const double per_product = mode ? 2.0 * 16 * 16 * 64 : 2.0 * 16 * 16 * 32;
      const double flop = 2.0 * M * N * K;
      // Samples: the loop's rate just before and just after the passes (a sample counts where the
      // two agree within 5%), the case's passes in between (15 ms at least); 3 samples a case a
      // round, the cases in turn each round.
      enum { SPR = 3 };
      static double pct[MAXC][MAXR * SPR], rate[MAXC][MAXR * SPR], loop[MAXC][MAXR * SPR];
      static int ok[MAXC][MAXR * SPR];
      double top = 0;
      for (int ci = 0; ci < ncases; ++ci)
        if (cases[ci].cw != 2 && check(&cases[ci])) printf("  %s %ldx%ldx%ld %s: WRONG sums\n", dt, M, N, K, cases[ci].label);
      for (int r = 0; r < rounds; ++r)
        for (int ci = 0; ci < ncases; ++ci) {
          plan(&cases[ci]);
          nest(&cases[ci]);  // (warm)
          for (int i = 0; i < SPR; ++i) {
            const int x = r * SPR + i;
            const double p0 = peak(PEAK_ITERS / 4);
            double t = 0;
            long passes = 0;
            while (t < 0.015) t += nest(&cases[ci]), ++passes;
            const double p1 = peak(PEAK_ITERS / 4);
            const double l0 = per_product / p0 / 1e9, l1 = per_product / p1 / 1e9;
            ok[ci][x] = fabs(l0 - l1) <= 0.05 * (l0 > l1 ? l0 : l1);
            loop[ci][x] = 0.5 * (l0 + l1);
            rate[ci][x] = flop * passes / t / 1e9;
            pct[ci][x] = 100.0 * rate[ci][x] / loop[ci][x];
            if (ok[ci][x] && loop[ci][x] > top) top = loop[ci][x];
          }
        }
      // summary: the samples at the loop's full rate (>= 85% of the fastest loop seen), and at a lower one
      printf("%s %ldx%ldx%ld, %d rounds x %d samples: register-only loop up to %.0f G/s\n", dt, M, N, K, rounds, SPR, top);
      printf("  %-36s %s\n", "case", "full rate: n  median %  max %  median G/s | slower: n  median %  median G/s | unpaired");
      for (int ci = 0; ci < ncases; ++ci) {
        double fp[MAXR * SPR], fg[MAXR * SPR], sp[MAXR * SPR], sg[MAXR * SPR];
        int nf = 0, ns = 0, nu = 0;
        for (int x = 0; x < rounds * SPR; ++x) {
          if (!ok[ci][x]) ++nu;
          else if (loop[ci][x] >= 0.85 * top) fp[nf] = pct[ci][x], fg[nf++] = rate[ci][x];
          else sp[ns] = pct[ci][x], sg[ns++] = rate[ci][x];
        }
        qsort(fp, nf, sizeof(double), cmp_d);
        qsort(fg, nf, sizeof(double), cmp_d);
        qsort(sp, ns, sizeof(double), cmp_d);
        qsort(sg, ns, sizeof(double), cmp_d);
        printf("  %-36s %2d  %6.1f  %6.1f  %7.0f | %2d  %6.1f  %7.0f | %2d\n", cases[ci].label, nf, nf ? fp[nf / 2] : 0, nf ? fp[nf - 1] : 0,
               nf ? fg[nf / 2] : 0, ns, ns ? sp[ns / 2] : 0, ns ? sg[ns / 2] : 0, nu);
      }
      fflush(stdout);
      free(PA), free(PB), free(C), free(WS), free(LIST);
    }
  return 0;
}
