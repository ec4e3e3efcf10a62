"""The peak microbenchmarks (coopjit.peak) and the benchmark runner (coopjit.bench) in a tiny
configuration: keys, fields, files and graceful "n/a" cells. Speed is never asserted."""
import copy
import dataclasses
import importlib.util
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import coopjit
from coopjit import bench

PEAKS = ("f32_fma", "bf16_dot", "amx_bf16", "amx_int8", "copy")
HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

TINY = bench.Config(gemm_sizes=(16,), small_sizes=(4,), batched=(8, 4), lowp_sizes=(16,), reduce_shape=(64, 32),
                    streamk=((48, 16, 512),),
                    shapes=(("float32", 1, 64, 300, 0), ("float32", 70, 1, 300, 0), ("bfloat16", 8, 32, 64, 0),
                            ("int8", 32, 32, 32, 0), ("float32", 8, 8, 8, 4), ("float32", 20, 300, 600, 0, "col")),
                    shape_reductions=(((3, 1000), 1), ((5000,), None)), scaling_n=64, scaling_reduce=4096,
                    epilogue_sizes=(32,), w8a8_shape=(24, 64, 64), softmax_shape=(16, 200),
                    repeat=1, min_sample=0.0, budget=0.0, pause=0.0, retries=0, wait=0.0, retry_budget=0.0,
                    peak_seconds=0.01)


@pytest.fixture(scope="module")
def peak():
    return coopjit.peak(refresh=True, seconds=0.01)


def test_peak_has_every_measurement_with_positive_finite_numbers(peak):
    feats = coopjit.cpu_info()["features"]
    assert set(peak) == {"cpu", "threads", *PEAKS}
    assert peak["threads"] >= 1
    expected = {"f32_fma": True, "copy": True, "bf16_dot": bool(feats.get("avx512bf16")),
                "amx_bf16": bool(feats.get("amx-bf16") and feats.get("amx-tile")),
                "amx_int8": bool(feats.get("amx-int8") and feats.get("amx-tile"))}
    for name in PEAKS:
        e = peak[name]
        assert set(e) == {"unit", "single", "all", "threads", "note"}, name
        assert e["unit"] == {"copy": "GB/s", "amx_int8": "GOP/s"}.get(name, "GFLOP/s")
        if expected[name]:
            for key in ("single", "all"):
                assert isinstance(e[key], float) and math.isfinite(e[key]) and e[key] > 0, (name, key, e[key])
        else:
            assert e["single"] is None and e["all"] is None, name
    for name in ("amx_bf16", "amx_int8"):
        if not expected[name]:
            assert peak[name]["note"] == "no AMX on this CPU"


def test_peak_is_measured_once_per_process(peak):
    first = coopjit.peak()
    again = coopjit.peak()
    assert again == first
    again["f32_fma"]["all"] = -1.0  # the caller's copy, not the cache
    assert coopjit.peak()["f32_fma"]["all"] == first["f32_fma"]["all"]


@pytest.mark.parametrize("name, instruction", [("f32_fma", "vfmadd"), ("bf16_dot", "vdpbf16ps"),
                                               ("amx_bf16", "tdpbf16ps"), ("amx_int8", "tdpbssd")])
def test_peak_kernels_compile_to_their_instruction_on_any_x86(name, instruction):
    # The AMX kernel cannot run without AMX; its code is built with the AMX features added.
    asm = coopjit._core.peak_kernel_assembly(name)
    assert instruction in asm
    if name.startswith("amx"):
        assert "ldtilecfg" in asm and "tilerelease" in asm


def test_measure_peak_rejects_unknown_names_and_bad_durations():
    with pytest.raises(ValueError, match="unknown peak 'fp64'"):
        coopjit._core.measure_peak("fp64", 0.01)
    with pytest.raises(ValueError, match="seconds"):
        coopjit._core.measure_peak("f32_fma", 0.0)
    with pytest.raises(ValueError, match="unknown peak kernel"):
        coopjit._core.peak_kernel_assembly("copy")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, peak):
    out = tmp_path_factory.mktemp("bench")
    return bench.run(TINY, out, "tiny"), out


def test_tiny_bench_writes_json_with_every_section_and_field(tiny_run):
    result, out = tiny_run
    data = json.loads((out / "tiny.json").read_text())
    assert set(data) >= {"meta", "peak", "rows", "files"}
    assert set(data["meta"]) >= {"cpu", "cores", "coopjit", "llvm", "numpy", "torch", "blas", "date", "config",
                                 "other_load", "peak_other_load", "busy_rows"}
    assert set(data["peak"]) >= set(PEAKS)
    assert {r["section"] for r in data["rows"]} == set(TINY.sections) - {"jit", "streamk", "scaling"} | {"shapes_reduce"}
    shapes = [r["label"] for r in data["rows"] if r["section"] == "shapes"]
    assert shapes == ["float32 1x64x300", "float32 70x1x300", "bfloat16 8x32x64", "int8 32x32x32", "float32 4x 8x8x8",
                      "float32 20x300x600 B col-major"]
    # thread scaling: every op at 1, 2, 4, ... workers up to the cores (and the cores)
    cores = len(os.sched_getaffinity(0))
    counts = sorted({r["threads"] for r in data["scaling"]})
    assert counts[0] == 1 and counts[-1] == cores and all(b <= 2 * a for a, b in zip(counts, counts[1:]))
    for r in data["scaling"]:
        assert r["coopjit"] > 0 and r["efficiency"] > 0 and (r.get("torch", 1.0) > 0), r
    assert {r["op"] for r in data["scaling"]} >= {"f32 GEMM", "sum"}
    assert coopjit.get_num_threads() == cores or "COOPJIT_NUM_THREADS" in os.environ  # restored
    (sk,) = data["streamk"]
    assert sk["shape"] == [48, 16, 512] and sk["ok"] and sk["auto_s"] > 0 and sk["dp_s"] > 0
    assert sk["split"] in ("sk", "sk+dp", "dp") and sk["tiles"] >= 1
    # the JIT section: per kernel kind, a compile (empty cache) and a disk load, in fresh processes
    assert [r["kind"] for r in data["jit"]] == list(bench._bench_jit.KINDS)
    for r in data["jit"]:
        assert r["compile_ms"] > 0 and r["disk_ms"] >= 0 and r["call_us"] > 0, r
    assert sum(r["disk_ms"] for r in data["jit"]) < sum(r["compile_ms"] for r in data["jit"])
    for row in data["rows"]:
        assert set(row) >= {"section", "label", "size", "dtype", "work", "unit", "results", "ratios", "peak_fraction",
                            "other_load", "tries"}
        assert set(row["results"]) == {"coopjit", "numpy", "torch"}
        assert set(row["ratios"]) == {"numpy", "torch"}
        for lib, cell in row["results"].items():
            assert cell["status"] in ("ok", "n/a", "-", "skipped", "error", "WRONG"), (row["label"], lib, cell)
            assert cell["status"] not in ("error", "WRONG"), (row["label"], lib, cell)
            if cell["status"] == "ok":
                assert cell["median_s"] > 0 and cell["rate"] > 0 and cell["samples"] >= 1
            if lib == "torch" and not HAS_TORCH:
                assert cell["status"] == "n/a" and "torch is not installed" in cell["note"]
    f32 = next(r for r in data["rows"] if r["section"] == "gemm_f32")
    assert f32["results"]["coopjit"]["status"] == "ok"
    assert f32["results"]["numpy"]["status"] == "ok"
    assert f32["ratios"]["numpy"] > 0
    assert f32["peak_fraction"]["coopjit"] > 0
    assert (out / "tiny.txt").read_text().startswith("coopjit ")


@pytest.mark.skipif(not HAS_MATPLOTLIB, reason="matplotlib is not installed (a benchmark-only dependency): no PNG")
def test_tiny_bench_writes_the_png_plot(tiny_run):
    _, out = tiny_run
    png = out / "tiny.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_table_names_each_section_and_the_peaks(tiny_run):
    result, _ = tiny_run
    table = bench.report.format_table(result)
    for sec in TINY.sections:
        title = {"jit": "JIT: first call compiling", "streamk": "Stream-K: the automatic plan", "scaling": "thread scaling"}
        assert title.get(sec, bench.report.SECTIONS.get(sec) and bench.report.SECTIONS[sec].title) in table
    assert "peaks measured by coopjit.peak()" in table and "f32 FMA" in table
    # a compute peak measured again (the cores did not scale at first) is said so under the peaks
    again = copy.deepcopy(result)
    again["peak"]["f32_fma"]["note"] += "; all-core figure below 0.7 x single x threads, measured 2 times (all: 1, 2), the best kept"
    lines = bench.report.format_table(again).splitlines()
    assert sum(line.startswith("NOTE: f32 FMA: all-core figure below 0.7") for line in lines) == 1
    assert ("NOTE: f32 FMA" in table) == ("the best kept" in result["peak"]["f32_fma"]["note"])


def test_missing_or_refusing_coopjit_entry_points_give_na_cells(monkeypatch, peak):
    def refuses(*args, **kwargs):
        raise NotImplementedError("not yet")

    def wrong(a, b, **kwargs):
        return np.zeros((a.shape[0], b.shape[1]), a.dtype) + 1.0

    cfg = dataclasses.replace(TINY, sections=("gemm_f32", "reduce"))
    monkeypatch.setattr(coopjit, "matmul", refuses)
    monkeypatch.setattr(coopjit, "reduce", refuses, raising=False)
    rows = bench.run(cfg, None)["rows"]
    assert all(r["results"]["coopjit"]["status"] == "n/a" for r in rows)
    assert all(r["results"]["numpy"]["status"] == "ok" for r in rows)
    assert all(r["ratios"]["numpy"] is None for r in rows)
    monkeypatch.delattr(coopjit, "reduce")
    monkeypatch.setattr(coopjit, "matmul", wrong)
    rows = bench.run(cfg, None)["rows"]
    by_section = {r["section"]: r["results"]["coopjit"] for r in rows}
    assert by_section["gemm_f32"]["status"] == "WRONG"
    assert "does not exist" in by_section["reduce"]["note"]


def test_cli_bench_help():
    run = subprocess.run([sys.executable, "-m", "coopjit", "bench", "--help"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "--quick" in run.stdout and "--out" in run.stdout


def test_sizes_follow_the_machine():
    small = bench.for_machine(bench.FULL, cores=2)
    assert small == bench.FULL
    big = bench.for_machine(bench.FULL, cores=16)
    assert 4096 in big.gemm_sizes and set(bench.FULL.gemm_sizes) <= set(big.gemm_sizes)
    w = min(16, coopjit.get_num_threads())
    assert big.streamk == ((12 * (w + 1), 32, 8192), (12 * (3 * w // 2), 32, 8192))


def test_device_bench_takes_cuda_devices_only(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--device", "opencl:0"])
    assert "--device takes cuda:N" in capsys.readouterr().err


@pytest.mark.skipif("cuda:0" not in coopjit.devices(), reason="no NVIDIA GPU (cuda:0) on this machine")
def test_device_bench_runs_against_torch(tmp_path):
    from coopjit import _bench_cuda

    res = _bench_cuda.run("cuda:0", quick=True, out_dir=tmp_path)
    assert res["copy_gbs"] > 0 and len(res["rows"]) >= 5
    for r in res["rows"]:
        assert r["coopjit_s"] > 0 and r["torch_s"] > 0 and r["error"] < 2e-2, r
    assert (tmp_path / "coopjit-bench-cuda.json").exists()


def test_peak_measures_again_where_all_cores_do_not_scale():
    # A compute peak whose all-core figure is below 0.7 x single x threads (the 2-core Zen 4's first
    # f32 FMA of a fresh process, session 20: 117 / 117) is measured again, the best kept, the note
    # saying so; a scaling figure, one thread, or the copy bandwidth is measured once.
    from coopjit import _peak

    def fake(alls, name_seen):
        calls = iter(alls)

        def measure_peak(name, seconds):
            name_seen.append(name)
            return {"unit": "GFLOP/s", "single": 100.0, "all": next(calls), "threads": 2, "note": "n"}
        return measure_peak

    seen = []
    got = _peak.measure("f32_fma", 0.01, fake([101.0, 190.0, 50.0], seen), lambda: None, lambda s: None)
    assert got["all"] == 190.0 and len(seen) == 2 and "measured 2 times" in got["note"] and "101" in got["note"]
    seen = []
    got = _peak.measure("bf16_dot", 0.01, fake([120.0, 130.0, 125.0], seen), lambda: None, lambda s: None)
    assert got["all"] == 130.0 and len(seen) == 3 and "measured 3 times" in got["note"]  # never scaled: the best
    seen = []
    got = _peak.measure("f32_fma", 0.01, fake([150.0, 190.0], seen), lambda: None, lambda s: None)
    assert got["all"] == 150.0 and len(seen) == 1 and got["note"] == "n"  # 150 >= 0.7 x 100 x 2
    seen = []
    got = _peak.measure("copy", 0.01, fake([20.0, 36.0], seen), lambda: None, lambda s: None)
    assert got["all"] == 20.0 and len(seen) == 1
    # the stolen seconds of each try, from /proc/stat's per-CPU rows
    stat = iter([[(0.0, 1.0), (0.0, 2.0)], [(0.0, 1.5), (0.0, 2.0)], [(0.0, 1.5), (0.0, 2.0)], [(0.0, 1.5), (0.0, 2.0)]])
    got = _peak.measure("f32_fma", 0.01, fake([101.0, 190.0], []), lambda: next(stat), lambda s: None)
    assert "(0.50 s stolen)" in got["note"] and "(0.00 s stolen)" in got["note"]


def test_shape_case_column_major_b():
    # the sweep's a @ w.T rows: B column-major for every library (coopjit, NumPy and torch get the same
    # layout); other layouts, batches and int8 are refused by name
    libs, check = bench.shape_case("float32", 20, 300, 600, 0, "col").setup()
    assert check(libs["coopjit"]()) is None and check(libs["numpy"]()) is None
    with pytest.raises(ValueError, match="b_layout='tn'"):
        bench.shape_case("float32", 4, 4, 4, 0, "tn")
    with pytest.raises(ValueError, match="b_layout='col'.*batch=2"):
        bench.shape_case("float32", 4, 4, 4, 2, "col")
    with pytest.raises(ValueError, match="b_layout='col'.*int8"):
        bench.shape_case("int8", 32, 32, 32, 0, "col")
