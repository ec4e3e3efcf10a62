"""Reductions on one thread, CPU time (time.thread_time: immune to other processes' use of the
cores, not to their memory traffic), against NumPy and torch (one thread each) and the one-thread
copy rate (NumPy's copy of as many bytes, CPU time; bytes read + written) measured in each round;
plan-override variants of coopjit alternate block by block, the order of the blocks rotated each
round (the first block after the copy measured ~5% slower than the others in session 29).
Medians of --rounds blocks. Session 28; the rotation session 29: this is
benchmarks/reduce_probe_s28.py with --rotate.

    python3 benchmarks/reduce_probe_s29.py [--rounds 9] [--threads 1]
        [--cases 3x4000000:0,3x2000x2000:0.1:float32:max,...] [--plans '{};{"column.split":0}'] [--libs coopjit,numpy,torch]
A case is SHAPE[:AXES[:DTYPE[:OP]]]: SHAPE as AxBxC, AXES as 0 / 0.1 / None (default None), DTYPE
float32 / float64 / bfloat16, OP sum / max. With --threads 2 the time is wall time (perf_counter) and the copy rate
_core.measure_peak('copy')'s (all threads, wall time).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reduce_probe_s28  # noqa: E402

if __name__ == "__main__":
    if "--rotate" not in sys.argv:
        sys.argv.append("--rotate")
    reduce_probe_s28.main()
