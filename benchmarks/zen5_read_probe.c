// Read-bandwidth probe for the 2-core Zen 5 (issue 14, session 23): how fast can 1 or 2 threads
// read a 4096 x 4096 f32 matrix (64 MiB, twice the 32 MiB L3) in the patterns a vector times a
// row-major matrix takes: each thread a contiguous half (the K split), each thread half of every
// 16 KiB row (the N split), and the K split's tile pattern (kt rows at a time, 256 B of each per
// step, as the k_outer nest reads them), optionally with software prefetch `pf` bytes ahead.
// "product": the vector-matrix product itself in that walk (y's 64 columns updated once a tile, as
// coopjit's k_outer nest does). Sums are kept so the loads are not dropped. One thread: its CPU time; two: wall time; median and min.
//   gcc -O2 -mavx512f -fopenmp benchmarks/zen5_read_probe.c -o /tmp/zen5_read_probe && /tmp/zen5_read_probe [REPS] [1|2]
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K = 4096, N = 4096 };
static float* B;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

// rows [k0, k1), columns [n0, n1): kt rows a tile, 64 floats (4 vectors) of each row per step
static __m512 tiles(int k0, int k1, int n0, int n1, int kt, int pf) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (int kb = k0; kb < k1; kb += kt) {
    const int ke = kb + kt < k1 ? kb + kt : k1;
    for (int n = n0; n < n1; n += 64)
      for (int k = kb; k < ke; ++k) {
        const float* p = B + (size_t)k * N + n;
        if (pf) _mm_prefetch((const char*)p + pf, _MM_HINT_T0);
        s0 = _mm512_add_ps(s0, _mm512_load_ps(p));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(p + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(p + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(p + 48));
      }
  }
  return _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));
}

static double cputime(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
// The product itself: y[n0, n1) += x[k0, k1) . B[k0, k1)[n0, n1), kt rows a tile, 64 columns a step
// (4 accumulators), y's 64 columns loaded, added and stored once a tile (as the k_outer nest does).
static float X[K], Y[2][N] __attribute__((aligned(64)));
static void gemv(int k0, int k1, int n0, int n1, int kt, int pf, float* y) {
  for (int kb = k0; kb < k1; kb += kt) {
    const int ke = kb + kt < k1 ? kb + kt : k1;
    for (int n = n0; n < n1; n += 64) {
      __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
      for (int k = kb; k < ke; ++k) {
        const float* p = B + (size_t)k * N + n;
        if (pf) _mm_prefetch((const char*)p + pf, _MM_HINT_T0);
        const __m512 x = _mm512_set1_ps(X[k]);
        s0 = _mm512_fmadd_ps(x, _mm512_load_ps(p), s0);
        s1 = _mm512_fmadd_ps(x, _mm512_load_ps(p + 16), s1);
        s2 = _mm512_fmadd_ps(x, _mm512_load_ps(p + 32), s2);
        s3 = _mm512_fmadd_ps(x, _mm512_load_ps(p + 48), s3);
      }
      _mm512_store_ps(y + n, _mm512_add_ps(s0, _mm512_load_ps(y + n)));
      _mm512_store_ps(y + n + 16, _mm512_add_ps(s1, _mm512_load_ps(y + n + 16)));
      _mm512_store_ps(y + n + 32, _mm512_add_ps(s2, _mm512_load_ps(y + n + 32)));
      _mm512_store_ps(y + n + 48, _mm512_add_ps(s3, _mm512_load_ps(y + n + 48)));
    }
  }
}

static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return (x > y) - (x < y); }

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 60;
  const int only = argc > 2 ? atoi(argv[2]) : 0;  // 1: the one-thread cases only, 2: the two-thread ones
  B = aligned_alloc(4096, (size_t)K * N * 4);
  for (size_t i = 0; i < (size_t)K * N; ++i) B[i] = (float)(i & 7);
  struct { const char* name; int threads, split, kt, pf, product; } cases[] = {
      {"1 thread, product, rows whole (kt 1)", 1, 0, 1, 0, 1},
      {"1 thread, product, kt 1, pf 1024", 1, 0, 1, 1024, 1},
      {"1 thread, product, kt 2", 1, 0, 2, 0, 1},
      {"1 thread, product, kt 4, pf 1024", 1, 0, 4, 1024, 1},
      {"1 thread, product, kt 8, pf 1024", 1, 0, 8, 1024, 1},
      {"1 thread, product, kt 8", 1, 0, 8, 0, 1},
      {"1 thread, product, kt 16, pf 1024", 1, 0, 16, 1024, 1},
      {"1 thread, rows whole (kt 1)", 1, 0, 1, 0},
      {"1 thread, kt 2", 1, 0, 2, 0},
      {"1 thread, kt 4", 1, 0, 4, 0},
      {"1 thread, kt 4, pf 1024", 1, 0, 4, 1024},
      {"1 thread, kt 8", 1, 0, 8, 0},
      {"1 thread, kt 8, pf 1024", 1, 0, 8, 1024},
      {"2 threads, K halves, rows whole (kt 1)", 2, 0, 1, 0},
      {"2 threads, K halves, kt 4", 2, 0, 4, 0},
      {"2 threads, K halves, kt 8", 2, 0, 8, 0},
      {"2 threads, K halves, kt 8, pf 512", 2, 0, 8, 512},
      {"2 threads, K halves, kt 8, pf 1024", 2, 0, 8, 1024},
      {"2 threads, K halves, kt 8, pf 2048", 2, 0, 8, 2048},
      {"2 threads, K halves, kt 16", 2, 0, 16, 0},
      {"2 threads, K halves, kt 16, pf 1024", 2, 0, 16, 1024},
      {"2 threads, product, K halves, rows whole (kt 1)", 2, 0, 1, 0, 1},
      {"2 threads, product, K halves, kt 4, pf 1024", 2, 0, 4, 1024, 1},
      {"2 threads, product, K halves, kt 8, pf 1024", 2, 0, 8, 1024, 1},
      {"2 threads, N halves, rows (kt 1)", 2, 1, 1, 0},
      {"2 threads, N halves, kt 4", 2, 1, 4, 0},
      {"2 threads, N halves, kt 8, pf 1024", 2, 1, 8, 1024},
  };
  double sink = 0;
  for (int k = 0; k < K; ++k) X[k] = 1.0f / (1 + k);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    double t[1000];
    const int th = cases[c].threads;
    if (only && only != th) continue;
    for (int r = 0; r < reps + 3; ++r) {
      const int cpu = th == 1;  // one thread: its CPU time (robust while other work shares the cores)
      double t0 = cpu ? cputime() : now();
#pragma omp parallel num_threads(th) reduction(+ : sink)
      {
        const int w = omp_get_thread_num();
        int k0 = 0, k1 = K, n0 = 0, n1 = N;
        if (th == 2 && cases[c].split == 0) k0 = w * K / 2, k1 = k0 + K / 2;
        if (th == 2 && cases[c].split == 1) n0 = w * N / 2, n1 = n0 + N / 2;
        if (cases[c].product) {
          gemv(k0, k1, n0, n1, cases[c].kt, cases[c].pf, Y[w]);
        } else {
          __m512 s = tiles(k0, k1, n0, n1, cases[c].kt, cases[c].pf);
          sink += _mm512_reduce_add_ps(s);
        }
      }
      if (r >= 3) t[r - 3] = (cpu ? cputime() : now()) - t0;
    }
    qsort(t, reps, sizeof(double), cmp);
    const double bytes = (double)K * N * 4;
    printf("%-42s median %7.0f us (%5.1f GB/s)  min %7.0f us (%5.1f GB/s)\n", cases[c].name, t[reps / 2] * 1e6,
           bytes / t[reps / 2] * 1e-9, t[0] * 1e6, bytes / t[0] * 1e-9);
    fflush(stdout);
  }
  return sink + Y[0][5] + Y[1][7] == 12345.0;
}
