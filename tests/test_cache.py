"""The persistent kernel cache: a new process links a stored kernel without compiling; entries of another build, truncated or corrupted ones are discarded and recompiled; concurrent processes compile a key once; info, clear, disabling."""
import fcntl
import os

import numpy as np
import pytest

import coopjit
from cache_helpers import COMPILE_AND_CHECK, private_cache, result_of, run_snippet  # noqa: F401
from conftest import assert_gemm_close, needs_spirv_tools


def _kernel(plan=None, shape=(40, 50, 30)):
    return coopjit.compile_gemm(*shape, np.float64, plan=plan or {"mr": 3, "kb": 16})


def _check(k, rng, shape=(40, 50, 30)):
    m, n, kk = shape
    a, b = rng.standard_normal((m, kk)), rng.standard_normal((kk, n))
    assert_gemm_close(k(a, b), a, b)


def test_new_process_loads_the_kernel_from_disk_without_compiling(tmp_path):
    first, _ = run_snippet(COMPILE_AND_CHECK, tmp_path)
    assert first["ok"] and first["compiles"] == 1 and first["disk_loads"] == 0 and first["origin"] == "compiled"
    second, err = run_snippet(COMPILE_AND_CHECK, tmp_path, env={"COOPJIT_DEBUG": "cache"})
    assert second["ok"] and second["compiles"] == 0 and second["disk_loads"] == 1 and second["origin"] == "disk"
    assert second["ir"] == first["ir"] and second["key"] == first["key"]
    assert second["fma"] > 0  # the assembly of a loaded kernel, regenerated from its stored LLVM IR
    assert "loaded from disk" in err


def test_disabled_cache_writes_nothing(tmp_path):
    env = {"COOPJIT_CACHE": "off"}
    for _ in range(2):
        res, _ = run_snippet(COMPILE_AND_CHECK, tmp_path, env=env)
        assert res["ok"] and res["compiles"] == 1 and res["disk_loads"] == 0
    assert not any(tmp_path.iterdir())
    res, _ = run_snippet("import json, coopjit; print(json.dumps(coopjit.cache.info()))", tmp_path, env=env)
    assert res["directory"] is None and not res["enabled"]


@pytest.mark.parametrize("field", ["coopjit=", "build=", "llvm="])
def test_an_entry_of_another_version_is_never_used(private_cache, rng, field):
    k = _kernel()
    path = coopjit._core.disk_cache_path("x86-obj", k._core.key)
    data = open(path, "rb").read()
    start = data.index(field.encode()) + len(field)
    forged = data[:start] + b"0.0.0-other" + data[data.index(b" ", start) if field != "llvm=" else data.index(b"\n", start):]
    open(path, "wb").write(forged)
    coopjit._core.cache_clear()
    k2 = _kernel()
    stats = coopjit._core.cache_stats()
    assert stats["compiles"] == 1 and stats["disk_loads"] == 0 and k2._core.origin == "compiled"
    assert b"0.0.0-other" not in open(path, "rb").read()  # rewritten by this build
    _check(k2, rng)


@pytest.mark.parametrize("damage", ["truncate", "flip_payload_byte", "garbage", "empty", "header_only"])
def test_a_damaged_entry_is_discarded_and_recompiled(private_cache, rng, damage):
    k = _kernel()
    path = coopjit._core.disk_cache_path("x86-obj", k._core.key)
    data = open(path, "rb").read()
    if damage == "truncate":
        data = data[: len(data) * 2 // 3]
    elif damage == "flip_payload_byte":
        i = data.index(b"\nend\n") + 5 + 200
        data = data[:i] + bytes([data[i] ^ 0x40]) + data[i + 1:]
    elif damage == "garbage":
        data = os.urandom(4096)
    elif damage == "empty":
        data = b""
    else:
        data = data[: data.index(b"\nend\n") + 5]
    open(path, "wb").write(data)
    rejected = coopjit.cache.info()["process"]["rejected"]
    coopjit._core.cache_clear()
    k2 = _kernel()
    assert coopjit._core.cache_stats()["compiles"] == 1 and k2._core.origin == "compiled"
    assert coopjit.cache.info()["process"]["rejected"] == rejected + 1
    _check(k2, rng)
    coopjit._core.cache_clear()  # the rewritten entry is whole again
    k3 = _kernel()
    assert k3._core.origin == "disk" and coopjit._core.cache_stats()["compiles"] == 0
    _check(k3, rng)


def test_concurrent_processes_compile_a_key_once(tmp_path):
    procs = [run_snippet(COMPILE_AND_CHECK, tmp_path, wait=False) for _ in range(3)]
    results = [result_of(p) for p in procs]
    assert all(r["ok"] for r in results)
    assert sum(r["compiles"] for r in results) == 1, results
    assert sum(r["disk_loads"] for r in results) == 2
    files = sorted(p.name for p in (tmp_path / "kernels").iterdir())
    assert len([f for f in files if f.endswith(".x86-obj")]) == 1 and not [f for f in files if f.endswith(".tmp")], files
    later, _ = run_snippet(COMPILE_AND_CHECK, tmp_path)
    assert later["ok"] and later["compiles"] == 0 and later["disk_loads"] == 1


def test_a_held_lock_delays_but_never_blocks_forever(tmp_path, private_cache):
    key = coopjit.compile_gemm(96, 80, 64, np.float32, plan={"mr": 5, "kb": 8})._core.key  # the snippet's kernel
    coopjit.cache.set_directory(tmp_path / "other")
    lock = coopjit._core.disk_cache_path("x86-obj", key).replace(".x86-obj", ".lock")
    os.makedirs(os.path.dirname(lock), exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # as if another process were compiling it, forever
        res, _ = run_snippet(COMPILE_AND_CHECK, tmp_path / "other", env={"COOPJIT_CACHE_LOCK_TIMEOUT": "0.3"})
    assert res["ok"] and res["compiles"] == 1 and res["lock_timeouts"] == 1


def test_info_and_clear(private_cache):
    _kernel()
    _kernel(plan={"mr": 2, "kb": 8})
    info = coopjit.cache.info()
    assert info["directory"] == str(private_cache) and info["enabled"]
    assert info["kernels"]["entries"] == 2 and info["kernels"]["kinds"] == {"x86-obj": 2}
    assert info["kernels"]["bytes"] > 1000
    assert coopjit.__version__ in info["identity"] and coopjit.llvm_version in info["identity"]
    cleared = coopjit.cache.clear()
    assert cleared["kernels"] == 2 and cleared["tuning"] == 0 and cleared["memory"] >= 2
    assert coopjit.cache.info()["kernels"]["entries"] == 0
    _kernel()  # kernels of this process keep working, and a miss stores again
    coopjit._core.cache_clear()
    _kernel()
    assert coopjit.cache.info()["kernels"]["entries"] == 1


def test_the_least_recently_used_entries_go_past_the_size_limit(private_cache, monkeypatch, rng):
    kernels = [_kernel(plan={"mr": mr, "kb": 8}) for mr in (1, 2, 3)]
    paths = [coopjit._core.disk_cache_path("x86-obj", k._core.key) for k in kernels]
    for p, t in zip(paths, (1000, 1005, 1002)):  # least recently used first: 0, 2, 1
        os.utime(p, (t, t))
    limit = sum(os.path.getsize(p) for p in paths)
    evicted = coopjit.cache.info()["process"]["evicted"]
    monkeypatch.setenv("COOPJIT_CACHE_MAX_MB", str(limit / 2**20))
    coopjit._core.cache_clear()
    newest = coopjit._core.disk_cache_path("x86-obj", _kernel(plan={"mr": 4, "kb": 8})._core.key)  # over the limit
    gone = [not os.path.exists(paths[i]) for i in (0, 2, 1)]
    assert gone[0] and gone == sorted(gone, reverse=True), gone  # the oldest went, in age order
    assert os.path.exists(newest) and coopjit.cache.info()["kernels"]["bytes"] <= 0.75 * limit
    assert coopjit.cache.info()["process"]["evicted"] == evicted + sum(gone)
    _check(_kernel(plan={"mr": 1, "kb": 8}), rng)  # an evicted kernel is compiled again


def test_an_unwritable_directory_costs_nothing_but_the_cache(tmp_path, private_cache, rng):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.warns(RuntimeWarning, match="tuning database"):
        coopjit.cache.set_directory(blocker)
    k = _kernel(plan={"mr": 1, "kb": 32})
    _check(k, rng)
    assert coopjit.cache.info()["process"]["write_errors"] >= 1


def _xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 re-written from the xxHash specification: the reference of the C++ checksum."""
    p1, p2, p3, p4, p5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                          0x27D4EB2F165667C5)
    mask = (1 << 64) - 1

    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & mask

    def rnd(acc, lane):
        return rotl((acc + lane * p2) & mask, 31) * p1 & mask

    n, i = len(data), 0
    if n >= 32:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed, (seed - p1) & mask]
        while i + 32 <= n:
            for j in range(4):
                v[j] = rnd(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
        for x in v:
            h = ((h ^ rnd(0, x)) * p1 + p4) & mask
    else:
        h = (seed + p5) & mask
    h = (h + n) & mask
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, int.from_bytes(data[i:i + 8], "little")), 27) * p1 + p4) & mask
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * p1 & mask), 23) * p2 + p3) & mask
        i += 4
    while i < n:
        h = rotl(h ^ (data[i] * p5 & mask), 11) * p1 & mask
        i += 1
    h ^= h >> 33
    h = h * p2 & mask
    h ^= h >> 29
    h = h * p3 & mask
    return h ^ (h >> 32)


def test_checksum_is_xxh64():
    assert coopjit._core.xxh64(b"") == "ef46db3751d8e999"  # the specification's test values
    assert coopjit._core.xxh64(b"abc") == "44bc2cf5ad770999"
    for n in (1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000, 4099):
        data = os.urandom(n)
        for seed in (0, 1):
            assert coopjit._core.xxh64(data, seed) == f"{_xxh64(data, seed):016x}", (n, seed)


def test_debug_shows_the_lowering_and_the_cache(tmp_path):
    _, err = run_snippet(COMPILE_AND_CHECK, tmp_path, env={"COOPJIT_DEBUG": "plan,lower,cache"})
    assert "[coopjit] plan gemm.f32" in err and "before O3" in err and "define void @" in err
    assert "[coopjit] cache: stored" in err and "compiled in" in err


SPIRV_SNIPPET = """
import json, sys, coopjit
sys.path.insert(0, {tests!r})
from spirv_kernels import AXPY_INDEX
binary = coopjit.spirv.compile(AXPY_INDEX)
coopjit.spirv.validate(binary)
print(json.dumps({{"binary": binary.hex(), **coopjit._core.spirv_cache_stats()}}))
"""


def test_a_spirv_module_is_compiled_once_per_machine(tmp_path):
    needs_spirv_tools()  # the snippet validates the module it compiles
    code = SPIRV_SNIPPET.format(tests=os.path.dirname(__file__))
    first, _ = run_snippet(code, tmp_path)
    assert first["compiles"] == 1 and first["disk_loads"] == 0
    second, _ = run_snippet(code, tmp_path)
    assert second["compiles"] == 0 and second["disk_loads"] == 1 and second["binary"] == first["binary"]
    assert len(list((tmp_path / "kernels").glob("*.spirv"))) == 1
