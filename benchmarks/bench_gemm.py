"""Runs coopjit's benchmark: the same runner as `python -m coopjit bench` (coopjit/bench.py).

    python benchmarks/bench_gemm.py [--quick] [--out DIR] [--only gemm_f32 gemm_f64 ...]

coopjit against numpy.matmul / numpy.sum and PyTorch (CPU) side by side: GEMM in float32,
float64, bfloat16, float16 and int8, small and stacked GEMM, reductions; medians, ratios and the
fraction of the peak measured by coopjit.peak(). Writes a table, a JSON file and a PNG plot
into benchmarks/results/ (or DIR).
"""
from coopjit import bench

if __name__ == "__main__":
    bench.main()
