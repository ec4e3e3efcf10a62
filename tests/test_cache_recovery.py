"""The disk cache recovers (issue 12, item 12): corrupted entries, or things that are not entries
under an entry's name, are removed once and recompiled; foreign files and folders in the cache
directory are left alone and never make a healthy cache evict itself; a third process loads
everything from disk. Real processes sharing one COOPJIT_CACHE_DIR."""
import os

import pytest

from cache_helpers import run_snippet

N_KERNELS = 6

#: Builds N_KERNELS kernels (one problem, plans that differ), checks each against NumPy, prints
#: this process's cache counters and the entries on disk.
SNIPPET = f"""
import json, numpy as np, coopjit
rng = np.random.default_rng(0)
a, b = rng.standard_normal((24, 20)).astype(np.float32), rng.standard_normal((20, 32)).astype(np.float32)
ok, keys = True, []
for mr in range(1, {N_KERNELS} + 1):
    k = coopjit.compile_gemm(24, 32, 20, np.float32, plan={{"mr": mr, "kb": 4, "fixed": 0}})
    ok &= bool(np.allclose(k(a, b), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4))
    keys.append(k._core.key)
s, i = coopjit._core.cache_stats(), coopjit.cache.info()
print(json.dumps({{"ok": ok, "compiles": s["compiles"], "disk_loads": s["disk_loads"], "evicted": i["process"]["evicted"],
                  "rejected": i["process"]["rejected"], "entries": i["kernels"]["entries"],
                  "paths": [coopjit._core.disk_cache_path("x86-obj", key) for key in keys]}}))
"""


def _run(cache_dir, **env):
    res, err = run_snippet(SNIPPET, cache_dir, env=env or None)
    assert res["ok"], err
    return res


def _foreign(kernels):
    """A user's things in the kernels folder: a backup folder with files, a note, an empty folder."""
    (kernels / "backup.old").mkdir(parents=True, exist_ok=True)
    (kernels / "backup.old" / "0123456789abcdef0123456789abcdef.x86-obj").write_bytes(b"old" * 1000)
    (kernels / "backup.old" / "big.bin").write_bytes(os.urandom(3 << 20))
    (kernels / "notes.txt").write_text("mine")
    (kernels / "empty.d").mkdir(exist_ok=True)


def _foreign_intact(kernels):
    return ((kernels / "backup.old" / "big.bin").stat().st_size == 3 << 20 and (kernels / "notes.txt").read_text() == "mine"
            and (kernels / "empty.d").is_dir())


def test_corrupted_entries_are_replaced_once_and_then_loaded(tmp_path):
    first = _run(tmp_path)
    assert first["compiles"] == N_KERNELS and first["disk_loads"] == 0 and first["evicted"] == 0
    paths = first["paths"]
    # Four kinds of damage: truncated, bytes flipped, a folder (with a file) and a dangling link
    # where the entry was.
    data = open(paths[0], "rb").read()
    open(paths[0], "wb").write(data[: len(data) // 3])
    data = bytearray(open(paths[1], "rb").read())
    data[-100] ^= 0xFF
    open(paths[1], "wb").write(bytes(data))
    os.remove(paths[2])
    os.mkdir(paths[2])
    open(os.path.join(paths[2], "inside"), "w").write("x")
    os.remove(paths[3])
    os.symlink(str(tmp_path / "nowhere"), paths[3])
    second = _run(tmp_path)
    assert second["rejected"] == 4 and second["compiles"] == 4 and second["disk_loads"] == N_KERNELS - 4, second
    assert second["evicted"] == 0 and second["entries"] == N_KERNELS, second
    assert all(os.path.isfile(p) and not os.path.islink(p) for p in paths)
    third = _run(tmp_path)
    assert third["compiles"] == 0 and third["disk_loads"] == N_KERNELS and third["rejected"] == 0, third
    assert third["evicted"] == 0 and third["entries"] == N_KERNELS


def test_a_foreign_folder_never_evicts_a_healthy_cache(tmp_path):
    kernels = tmp_path / "kernels"
    _foreign(kernels)
    # A size limit the entries are far below, the foreign files far above: only entries count.
    first = _run(tmp_path, COOPJIT_CACHE_MAX_MB="2")
    assert first["compiles"] == N_KERNELS and first["evicted"] == 0 and first["entries"] == N_KERNELS, first
    second = _run(tmp_path, COOPJIT_CACHE_MAX_MB="2")
    assert second["compiles"] == 0 and second["disk_loads"] == N_KERNELS and second["evicted"] == 0, second
    third = _run(tmp_path)
    assert third["compiles"] == 0 and third["disk_loads"] == N_KERNELS, third
    assert _foreign_intact(kernels)


def test_clear_deletes_only_coopjits_files(tmp_path):
    kernels = tmp_path / "kernels"
    _foreign(kernels)
    _run(tmp_path)
    res, err = run_snippet("import json, coopjit; print(json.dumps(coopjit.cache.clear()))", tmp_path)
    assert res["kernels"] == N_KERNELS, err
    left = sorted(p.name for p in kernels.iterdir())
    assert left == ["backup.old", "empty.d", "notes.txt"], left
    assert _foreign_intact(kernels)


def test_the_size_limit_still_evicts_least_recently_used_entries_only(tmp_path):
    """The limit works with foreign files present: entries beyond it go (least recently used
    first: test_cache.py checks the order), down to 3/4 of it, never all of them."""
    kernels = tmp_path / "kernels"
    _foreign(kernels)
    first = _run(tmp_path)
    sizes = [os.path.getsize(p) for p in first["paths"]]
    limit_mb = sum(sizes) * 0.8 / 2**20  # room for most but not all
    os.remove(first["paths"][-1])  # one store in the next process, over the limit
    second = _run(tmp_path, COOPJIT_CACHE_MAX_MB=str(limit_mb))
    assert second["compiles"] == 1 and 1 <= second["evicted"] < N_KERNELS, second
    gone = [not os.path.exists(p) for p in second["paths"]]
    assert sum(gone) == second["evicted"] and not gone[-1], gone  # the newest stayed
    assert sum(os.path.getsize(p) for p, g in zip(second["paths"], gone) if not g) <= 0.75 * limit_mb * 2**20
    assert _foreign_intact(kernels)


@pytest.mark.parametrize("value", ["abc", "-5"])
def test_a_size_limit_that_is_not_a_number_evicts_nothing(tmp_path, value):
    first = _run(tmp_path, COOPJIT_CACHE_MAX_MB=value)
    assert first["evicted"] == 0 and first["entries"] == N_KERNELS, first
    second = _run(tmp_path, COOPJIT_CACHE_MAX_MB=value)
    assert second["compiles"] == 0 and second["disk_loads"] == N_KERNELS, second
