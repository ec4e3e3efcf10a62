"""The command line: python -m coopjit --help / --version / dump, and usage errors instead of tracebacks."""
import subprocess
import sys

import numpy as np
import pytest

import coopjit
from cache_helpers import private_cache  # noqa: F401


def run(*args, check=True):
    r = subprocess.run([sys.executable, "-m", "coopjit", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def test_help_lists_every_command_with_a_description():
    from coopjit.__main__ import COMMANDS

    out = run("--help").stdout
    for name, what in COMMANDS.items():
        assert f"{name}   {what}" in out or f"{name}  {what}" in out or f"{name} {what}" in out, name
    assert set(COMMANDS) == {"info", "demo", "bench", "tune", "dump"}


def test_version():
    assert run("--version").stdout.strip() == f"coopjit {coopjit.__version__} (LLVM {coopjit.llvm_version})"


@pytest.mark.parametrize("args,message", [
    (("tune", "--shape", "64x64"), "a GEMM shape is MxNxK"),
    (("tune", "--shape", "axbxc"), "a GEMM shape is MxNxK"),
    (("dump", "64x64"), "a GEMM shape is MxNxK"),
    (("dump", "8x8x8", "--what", "ptx"), "not available for target 'cpu'"),
    (("dump", "8x8x8", "--dtype", "complex64"), "complex64"),
    (("dump", "8x8x8", "--target", "nosuchdevice:3"), "nosuchdevice"),
    (("frobnicate",), "invalid choice"),
    (("info", "extra"), "info takes no arguments"),
])
def test_bad_arguments_are_usage_errors_not_tracebacks(args, message):
    r = run(*args, check=False)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_every_option_has_help():
    for cmd in ("tune", "dump", "bench"):
        lines = run(cmd, "--help").stdout.splitlines()
        options = [i for i, ln in enumerate(lines) if ln.startswith("  -")]
        assert options, cmd
        for i in options:  # help on the option's line (after two spaces) or on the indented line below
            same_line = len(lines[i].strip().split("  ", 1)) == 2
            next_line = i + 1 < len(lines) and lines[i + 1].startswith("        ") and lines[i + 1].strip()
            assert same_line or next_line, (cmd, lines[i])


def test_dump_prints_the_same_plan_and_code_as_the_kernel():
    kern = coopjit.compile_gemm(48, 40, 32, np.float32)
    out = run("dump", "48x40x32", "--what", "all").stdout
    assert str(kern).splitlines()[0] in out and kern.source("ir") in out and kern.source("asm").strip() in out
    assert "===== llvm =====" in out


def test_dump_ptx_for_an_nvidia_architecture_without_a_gpu():
    out = run("dump", "64x64x64", "--dtype", "bfloat16", "--out-dtype", "float32", "--target", "sm_90", "--what", "ptx").stdout
    assert ".target sm_90" in out and ".entry" in out


def test_the_coopjit_logger_reports_compiles_and_tuning(caplog, private_cache):
    import logging

    with caplog.at_level(logging.DEBUG, logger="coopjit"):
        coopjit.compile_gemm(40, 24, 16, np.float32, plan={"mr": 3})
        report = coopjit.tune(shape=(48, 32, 16), budget=2, max_candidates=3, progress=False, save=False)
        coopjit.cache.clear(kernels=False, tuning=False, memory=True)
    text = caplog.text
    line = next(ln for ln in text.splitlines() if "gemm float32 M=40 N=24 K=16" in ln)
    assert " 3x" in line and ("compiled" in line or "disk" in line)  # the plan's mr=3, and where it came from
    assert f"{report.speedup or 1.0:.2f}x the default" in text and "cache cleared" in text


def test_the_progress_bar_counts_the_budget(capsys, private_cache):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        coopjit.tune(shape=(32, 32, 32), budget=1.5, max_candidates=4, progress=True, save=False)
    err = capsys.readouterr().err
    assert "% of the budget" in err and "s left" in err and "/4 plans" in err


def test_the_tune_report_gives_one_speed_up_figure(private_cache):
    r = coopjit.tune(shape=(64, 64, 64), budget=3, max_candidates=5, progress=False, save=False)
    winner_row = [ln for ln in r.table().splitlines() if ln.rstrip().endswith("winner") or "winner" in ln.split()[-1:]]
    if r.speedup and r.winner is not r.default:
        assert winner_row and f"{r.speedup:.2f}x" in winner_row[0]
        assert f"{r.speedup:.2f}x the default plan" in str(r)
    fig = r.plot()
    import matplotlib.pyplot as plt

    assert fig is not None and plt.get_fignums() == []  # not a pyplot figure: Jupyter shows it once
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert any(t.startswith("default:") for t in texts)


def test_ptx_dump_hopper_parses_its_arguments(tmp_path):
    # scripts/ptx_dump_hopper.py took sys.argv[1] as its output file: --help wrote a file named
    # "--help" and dumped every case into it (session 23's note). Now argparse: --help prints the
    # usage and writes nothing; a missing OUT and an unknown option are usage errors (exit 2).
    import os
    import pathlib

    script = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "ptx_dump_hopper.py"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def script_run(*args):
        return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path, env=env)

    r = script_run("--help")
    assert r.returncode == 0, r.stderr
    assert "usage: ptx_dump_hopper.py" in r.stdout and "OUT" in r.stdout and "--more" in r.stdout
    assert list(tmp_path.iterdir()) == []
    for args, message in (((), "the following arguments are required: OUT"),
                          (("x.txt", "--bogus"), "unrecognized arguments: --bogus"),
                          ((str(tmp_path / "no" / "such" / "dir.txt"),), "cannot write")):
        r = script_run(*args)
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)
    assert list(tmp_path.iterdir()) == []
