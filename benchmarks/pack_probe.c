// Issue 14, session 18: how fast can the AMX packing phase be on every core? coopjit's packing
// launch (gemm_recipe's pack(): each worker copies its share of A's row panels and of B's column
// panels into the tiles' layouts) ran at 2.25x (bf16) / 1.83x (int8) the time of torch's copy of
// the same bytes with 16 threads (benchmarks/recorded/issue14-emr16-phases-session18.txt). This
// probe packs the same layouts in C, in coopjit's order and in others, on T threads, against a
// plain copy of the same bytes (each worker its share), so that the order worth building is
// measured before it is built.
//
//   gcc -O2 -mavx512f -mavx512bw -mavx512vbmi -pthread -o /tmp/pack_probe benchmarks/pack_probe.c
//   /tmp/pack_probe 4096 16        # M = N = K = 4096, 16 threads
//
// Layouts (coopjit's AMX plans, mr = nr = 32, a K step = 64 bytes of K):
//   A: row panel q of mr rows at q * mr * K elements; K step s of it (kb elements) at s * mr * kb,
//      mr rows of kb elements, row-major (the tile A rows).
//   B: column panel q of nr columns at q * nr * K; K step s at s * kb * nr: kb / w VNNI rows of
//      nr * w elements (w = 2 bf16, 4 int8: element (k, n) at (k / w) * nr * w + n * w + k % w).
// Variants:
//   A block   coopjit's order: for each panel, each K step, its mr rows (mr streams of 64 bytes).
//   A rows    each panel row by row: one row's K steps one after the other (one read stream).
//   A rows nt as A rows with non-temporal stores.
//   B panel   coopjit's order: for each panel, each K step: kb rows of 64 bytes, VNNI-interleaved.
//   B k-outer for each K step, the worker's panels one after the other (each row read along the
//             worker's panels: 64 x panels contiguous bytes).
//   B k-outer nt  as B k-outer with non-temporal stores.
//   copy      the same bytes read and written by each worker's share, as memcpy does.
// Each: 30 timed repetitions after 3 warm ones (the workers meet at a barrier before and after
// each; the time is the slowest worker's), median and best, GB/s of bytes read + written.
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t M, N, K, T;
static int esz;  // element bytes: 2 bf16, 1 int8
static uint8_t *A, *B, *PA, *PB, *CA, *CB;
static pthread_barrier_t bar;
static int variant;
static double times[64][40];

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void share(int64_t n, int w, int64_t* lo, int64_t* hi) {
  int64_t per = (n + T - 1) / T;
  *lo = w * per < n ? w * per : n;
  *hi = *lo + per < n ? *lo + per : n;
}

enum { MR = 32, NR = 32 };

static inline void st(void* p, __m512i v, int nt) {
  if (nt) _mm512_stream_si512(p, v);
  else _mm512_store_si512(p, v);
}

// A: K step of 64 bytes (kb = 64 / esz elements) of row i of panel q.
static void pack_a(int w, int rows, int nt) {
  int64_t lo, hi;
  share(M / MR, w, &lo, &hi);
  const int64_t rowb = K * esz;  // bytes of a row of A = bytes of a K step column of a panel... per row
  for (int64_t q = lo; q < hi; ++q) {
    const uint8_t* src = A + q * MR * rowb;
    uint8_t* dst = PA + q * MR * rowb;
    if (!rows) {
      for (int64_t s = 0; s < rowb / 64; ++s)
        for (int i = 0; i < MR; ++i) st(dst + (s * MR + i) * 64, _mm512_loadu_si512(src + i * rowb + s * 64), nt);
    } else {
      for (int i = 0; i < MR; ++i)
        for (int64_t s = 0; s < rowb / 64; ++s) st(dst + (s * MR + i) * 64, _mm512_loadu_si512(src + i * rowb + s * 64), nt);
    }
  }
}

// B: VNNI rows of K step s of panel q: from B's rows k .. k + kb - 1 at columns n0 .. n0 + 31.
static inline void vnni_step(const uint8_t* src, uint8_t* dst, int nt) {
  // src: B at (k, n0) (row stride N * esz); dst: the step's 64 x esz... kb / w VNNI rows of 128 bytes.
  const int64_t rs = N * esz;
  if (esz == 2) {
    const __m512i lo = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37, 5, 36, 4,
                                        35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i hi = _mm512_set_epi16(63, 31, 62, 30, 61, 29, 60, 28, 59, 27, 58, 26, 57, 25, 56, 24, 55, 23, 54, 22, 53, 21,
                                        52, 20, 51, 19, 50, 18, 49, 17, 48, 16);
    for (int r = 0; r < 32; r += 2) {  // kb = 32 rows: 16 VNNI rows of 32 x 2 bf16 (128 bytes)
      __m512i r0 = _mm512_loadu_si512(src + r * rs), r1 = _mm512_loadu_si512(src + (r + 1) * rs);
      st(dst + r / 2 * 128, _mm512_permutex2var_epi16(r0, lo, r1), nt);
      st(dst + r / 2 * 128 + 64, _mm512_permutex2var_epi16(r0, hi, r1), nt);
    }
  } else {
    // kb = 64 rows: 16 VNNI rows of 32 x 4 bytes. Only 32 columns (32 bytes of each row).
    __m512i i8lo, i16lo, i16hi;
    {
      uint8_t b8[64];
      for (int l = 0; l < 64; ++l) b8[l] = (uint8_t)((l % 2 ? 64 : 0) + l / 2);  // pairs (r0[j], r1[j]), j < 32
      i8lo = _mm512_loadu_si512(b8);
      uint16_t b16[32];
      for (int l = 0; l < 32; ++l) b16[l] = (uint16_t)((l % 2 ? 32 : 0) + l / 2);
      i16lo = _mm512_loadu_si512(b16);
      for (int l = 0; l < 32; ++l) b16[l] = (uint16_t)((l % 2 ? 32 : 0) + 16 + l / 2);
      i16hi = _mm512_loadu_si512(b16);
    }
    for (int r = 0; r < 64; r += 4) {
      __m512i r0 = _mm512_castsi256_si512(_mm256_loadu_si256((const void*)(src + r * rs)));
      __m512i r1 = _mm512_castsi256_si512(_mm256_loadu_si256((const void*)(src + (r + 1) * rs)));
      __m512i r2 = _mm512_castsi256_si512(_mm256_loadu_si256((const void*)(src + (r + 2) * rs)));
      __m512i r3 = _mm512_castsi256_si512(_mm256_loadu_si256((const void*)(src + (r + 3) * rs)));
      __m512i p01 = _mm512_permutex2var_epi8(r0, i8lo, r1), p23 = _mm512_permutex2var_epi8(r2, i8lo, r3);
      st(dst + r / 4 * 128, _mm512_permutex2var_epi16(p01, i16lo, p23), nt);
      st(dst + r / 4 * 128 + 64, _mm512_permutex2var_epi16(p01, i16hi, p23), nt);
    }
  }
}

static void pack_b(int w, int k_outer, int nt) {
  int64_t lo, hi;
  share(N / NR, w, &lo, &hi);
  const int64_t kb = 64 / esz, step_bytes = kb * NR * esz;  // a K step of a panel: 2 KiB
  if (!k_outer) {
    for (int64_t q = lo; q < hi; ++q)
      for (int64_t k = 0; k < K; k += kb) vnni_step(B + (k * N + q * NR) * esz, PB + q * NR * K * esz + k / kb * step_bytes, nt);
  } else {
    for (int64_t k = 0; k < K; k += kb)
      for (int64_t q = lo; q < hi; ++q) vnni_step(B + (k * N + q * NR) * esz, PB + q * NR * K * esz + k / kb * step_bytes, nt);
  }
}

static void copy_share(int w) {
  int64_t lo, hi;
  const int64_t ab = M * K * esz, bb = K * N * esz;
  share(ab / 4096, w, &lo, &hi);
  memcpy(CA + lo * 4096, A + lo * 4096, (hi - lo) * 4096);
  share(bb / 4096, w, &lo, &hi);
  memcpy(CB + lo * 4096, B + lo * 4096, (hi - lo) * 4096);
}

static void run_variant(int w) {
  switch (variant) {
    case 0: pack_a(w, 0, 0); pack_b(w, 0, 0); break;  // coopjit's orders
    case 1: pack_a(w, 1, 0); pack_b(w, 1, 0); break;  // rows / k-outer
    case 2: pack_a(w, 1, 1); pack_b(w, 1, 1); break;  // rows / k-outer, non-temporal
    case 3: pack_a(w, 0, 0); break;
    case 4: pack_a(w, 1, 0); break;
    case 5: pack_a(w, 1, 1); break;
    case 6: pack_b(w, 0, 0); break;
    case 7: pack_b(w, 1, 0); break;
    case 8: pack_b(w, 1, 1); break;
    case 9: copy_share(w); break;
  }
  _mm_sfence();
}

static void* worker(void* arg) {
  int w = (int)(intptr_t)arg;
  for (int r = 0; r < 33; ++r) {
    pthread_barrier_wait(&bar);
    double t = now();
    run_variant(w);
    double e = now() - t;
    pthread_barrier_wait(&bar);
    if (r >= 3) times[w][r - 3] = e;
  }
  return NULL;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double one(int v, double* best) {
  variant = v;
  pthread_t th[64];
  pthread_barrier_init(&bar, NULL, (unsigned)T);
  for (int w = 1; w < T; ++w) pthread_create(&th[w], NULL, worker, (void*)(intptr_t)w);
  worker((void*)0);
  for (int w = 1; w < T; ++w) pthread_join(th[w], NULL);
  pthread_barrier_destroy(&bar);
  double slow[30];
  for (int r = 0; r < 30; ++r) {
    slow[r] = 0;
    for (int w = 0; w < T; ++w) slow[r] = times[w][r] > slow[r] ? times[w][r] : slow[r];
  }
  qsort(slow, 30, sizeof(double), cmp);
  *best = slow[0];
  return slow[15];
}

static int check(void) {  // a sample of elements of every variant's panels against the layouts
  const int64_t kb = 64 / esz;
  for (int64_t i = 0; i < 4096; ++i) {
    int64_t m = (i * 7919) % M, n = (i * 104729) % N, k = (i * 1299709) % K;
    const uint8_t* a = A + (m * K + k) * esz;
    const uint8_t* pa = PA + ((m / MR) * MR * K + (k / kb) * MR * kb + (m % MR) * kb + k % kb) * esz;
    if (memcmp(a, pa, (size_t)esz)) return 1;
    const int64_t wv = 4 / esz;
    const uint8_t* b = B + (k * N + n) * esz;
    const uint8_t* pb = PB + ((n / NR) * NR * K + (k / kb) * kb * NR + ((k % kb) / wv) * NR * wv + (n % NR) * wv + k % wv) * esz;
    if (memcmp(b, pb, (size_t)esz)) return 2;
  }
  return 0;
}

int main(int argc, char** argv) {
  int64_t s = argc > 1 ? atoll(argv[1]) : 4096;
  T = argc > 2 ? atoll(argv[2]) : 16;
  M = N = K = s;
  static const char* names[] = {"A block + B panel (coopjit's orders)", "A rows + B k-outer", "A rows + B k-outer, nt stores",
                                "A block", "A rows", "A rows nt", "B panel", "B k-outer", "B k-outer nt", "copy of A and B"};
  for (esz = 2; esz >= 1; --esz) {
    const size_t bytes = (size_t)(M * K * esz);
    A = aligned_alloc(64, bytes); B = aligned_alloc(64, bytes); PA = aligned_alloc(64, bytes); PB = aligned_alloc(64, bytes);
    CA = aligned_alloc(64, bytes); CB = aligned_alloc(64, bytes);
    for (size_t i = 0; i < bytes; ++i) { A[i] = (uint8_t)(i * 131 + 7); B[i] = (uint8_t)(i * 61 + 3); }
    memset(PA, 0, bytes); memset(PB, 0, bytes); memset(CA, 0, bytes); memset(CB, 0, bytes);
    printf("%s %lldx%lldx%lld, %lld threads (A and B %.0f MiB each)\n", esz == 2 ? "bf16" : "int8", (long long)M, (long long)N,
           (long long)K, (long long)T, bytes / 1048576.0);
    for (int rep = 0; rep < 2; ++rep)
      for (int v = 0; v < 10; ++v) {
        memset(PA, 0, bytes); memset(PB, 0, bytes);
        double best, med = one(v, &best);
        double moved = (v >= 3 && v <= 8 ? 1.0 : 2.0) * bytes * 2;  // read + written
        int bad = v <= 2 ? check() : 0;
        printf("  round %d  %-38s median %7.3f ms  best %7.3f ms  %6.1f GB/s (median)%s\n", rep, names[v], med * 1e3, best * 1e3,
               moved / med / 1e9, bad ? (bad == 1 ? "  A WRONG" : "  B WRONG") : "");
        fflush(stdout);
      }
    free(A); free(B); free(PA); free(PB); free(CA); free(CB);
  }
  return 0;
}
