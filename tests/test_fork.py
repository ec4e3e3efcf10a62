"""A child forked from a process that has used coopjit (issue 21): the worker pool, the caches,
the JIT and the disk cache's locks work in the child; a fork while another thread runs a kernel
or compiles one leaves the child usable; an OpenCL device the parent opened gives the child a clear
DeviceError, never a hang.

Each scenario runs as a script in its own process (`python -c`), which forks (os.fork,
multiprocessing's "fork" context, ProcessPoolExecutor) and checks the child's results against
NumPy in float64. The script kills a child that does not finish within CHILD_DEADLINE seconds and
fails; the test kills the whole process group after TIMEOUT seconds, so that a hang fails the test
instead of stalling the suite.
"""
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from coopjit._opencl_icd import intel_cpu_runtime

TIMEOUT = 60
CHILD_DEADLINE = 45

# Prepended to every scenario. `in_child(fn)` forks, runs fn() in the child, and returns what fn
# returned (its repr) or raises with the child's traceback; a child still running after
# CHILD_DEADLINE seconds is killed and reported as hung.
PRELUDE = f"""
import os, sys, time, signal, threading, warnings, traceback
warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
import numpy as np
import coopjit
from coopjit import _core

CHILD_DEADLINE = {CHILD_DEADLINE}


def matmul_reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def matmul_bound(a, b, dtype):
    return (a.shape[-1] + 2) * np.finfo(dtype).eps * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))


def check_close(c, ref, bound, what):
    err = np.abs(c.astype(np.float64) - ref)
    assert c.shape == ref.shape and (err <= bound).all(), f"{{what}}: max error {{err.max()}} beyond the bound"


def check_matmul(c, a, b, what):
    check_close(c, matmul_reference(a, b), matmul_bound(a, b, c.dtype), what)


def check_reduce(got, x, axis, what):
    ref = x.astype(np.float64).sum(axis=axis)
    n = x.shape[axis]
    bound = (n + 2) * np.finfo(np.float32).eps * np.abs(x).astype(np.float64).sum(axis=axis)
    err = np.abs(got.astype(np.float64) - ref)
    assert got.shape == ref.shape and (err <= bound).all(), f"{{what}}: max error {{err.max()}} beyond the bound"


def in_child(fn):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 1
        try:
            msg, code = "ok " + repr(fn()), 0
        except BaseException as e:
            msg = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        os.write(w, msg.encode())
        os._exit(code)
    os.close(w)
    end = time.monotonic() + CHILD_DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(r)
            raise SystemExit(f"HANG: the forked child did not finish in {{CHILD_DEADLINE}} s")
        time.sleep(0.02)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    os.close(r)
    msg = out.decode()
    if os.WEXITSTATUS(status) != 0 or not msg.startswith("ok "):
        raise SystemExit(f"the forked child failed (status {{status}}):\\n{{msg}}")
    return msg[3:]


rng = np.random.default_rng(21)
coopjit.set_num_threads(2)
A = rng.standard_normal((512, 512)).astype(np.float32)
B = rng.standard_normal((512, 512)).astype(np.float32)
TWO = {{"threads": 2}}
"""

# Indented as the scenarios' bodies, which are dedented together with it.
WARM = """
    k = coopjit.compile_gemm(512, 512, 512, np.float32, plan=TWO)
    assert int(k.config["threads"]) == 2, k.config
    check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "parent, before the fork")  # the pool's threads run
"""


def run_script(body: str, env_extra: dict | None = None, tmp_path=None):
    script = PRELUDE + textwrap.dedent(body)
    env = dict(os.environ)
    if tmp_path is not None:  # a private disk cache: the child compiles what it compiles
        env["COOPJIT_CACHE_DIR"] = str(tmp_path / "cache")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), os.path.dirname(__file__)]))
    env.update(env_extra or {})
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the script and every child it forked
        out, err = p.communicate()
        pytest.fail(f"hung: no result in {TIMEOUT} s\nstdout:\n{out}\nstderr:\n{err}")
    assert p.returncode == 0, f"exit status {p.returncode}\nstdout:\n{out}\nstderr:\n{err}"
    assert "DONE" in out, out
    assert err.strip() == "", f"unexpected output on stderr:\n{err}"
    return out


def test_warm_pool_fork_child_runs_two_worker_matmul(tmp_path):
    run_script(WARM + """
    def child():
        c = coopjit.matmul(A, B, plan=TWO)
        check_matmul(c, A, B, "child, 2-worker 512^3")
        c = coopjit.matmul(B, A, plan=TWO)  # the fresh pool again
        check_matmul(c, B, A, "child, second call")
        return coopjit.get_num_threads()
    assert in_child(child) == "2"
    check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "parent, after the fork")
    print("DONE")
    """, tmp_path=tmp_path)


def test_warm_pool_fork_child_runs_two_worker_reduce(tmp_path):
    run_script(WARM + """
    X = rng.standard_normal((4096, 1024)).astype(np.float32)
    check_reduce(coopjit.reduce(X, axis=1), X, 1, "parent")
    def child():
        check_reduce(coopjit.reduce(X, axis=1), X, 1, "child, rows")
        check_reduce(coopjit.reduce(X, axis=0), X, 0, "child, columns")
    in_child(child)
    print("DONE")
    """, tmp_path=tmp_path)


def test_warm_pool_process_pool_executor_fork_runs_matmuls(tmp_path):
    run_script(WARM + """
    import functools, multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    task = functools.partial(coopjit.matmul, plan=TWO)
    ex = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"))
    futures = [ex.submit(task, A, B), ex.submit(task, B, A)]
    try:
        c1, c2 = (f.result(timeout=CHILD_DEADLINE) for f in futures)
    except Exception as e:
        for p in multiprocessing.active_children():
            p.kill()
        unfinished = sum(not f.done() for f in futures)
        print(f"HANG or failure: {unfinished} of 2 tasks unfinished: {e!r}", flush=True)
        os._exit(3)
    ex.shutdown()
    check_matmul(c1, A, B, "task 1")
    check_matmul(c2, B, A, "task 2")
    print("DONE")
    """, tmp_path=tmp_path)


def test_multiprocessing_fork_context_process(tmp_path):
    run_script(WARM + """
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    def work(q):
        q.put(coopjit.matmul(A, B, plan=TWO))
    p = ctx.Process(target=work, args=(q,))
    p.start()
    try:
        c = q.get(timeout=CHILD_DEADLINE)
    except Exception:
        p.kill()
        print("HANG: the fork-context Process gave no result", flush=True)
        os._exit(3)
    p.join()
    assert p.exitcode == 0
    check_matmul(c, A, B, "multiprocessing fork Process")
    print("DONE")
    """, tmp_path=tmp_path)


def test_warm_pool_fork_child_runs_one_worker_small_matmul(tmp_path):
    run_script(WARM + """
    a = rng.standard_normal((8, 8)).astype(np.float32)
    b = rng.standard_normal((8, 8)).astype(np.float32)
    def child():
        assert coopjit.compile_gemm(8, 8, 8, np.float32).config["threads"] == 1
        check_matmul(coopjit.matmul(a, b), a, b, "child, 8x8")
    in_child(child)
    print("DONE")
    """, tmp_path=tmp_path)


def test_warm_pool_fork_child_compiles_new_kernels(tmp_path):
    run_script(WARM + """
    a = rng.standard_normal((200, 72)).astype(np.float64)
    b = rng.standard_normal((72, 136)).astype(np.float64)
    def child():
        before = _core.cache_stats()["compiles"]
        c = coopjit.matmul(a, b, plan=TWO)  # a problem the parent never compiled, on 2 workers
        check_matmul(c, a, b, "child, new 2-worker kernel")
        x = rng.standard_normal((333, 77)).astype(np.float32)
        check_reduce(coopjit.reduce(x, axis=0), x, 0, "child, new reduction")
        return _core.cache_stats()["compiles"] - before
    assert int(in_child(child)) >= 2  # really compiled in the child (a private, empty disk cache)
    # The child's compile went to the disk cache; the parent loads it from there.
    before = _core.cache_stats()["disk_loads"]
    check_matmul(coopjit.matmul(a, b, plan=TWO), a, b, "parent, the child's kernel")
    assert _core.cache_stats()["disk_loads"] == before + 1, _core.cache_stats()
    print("DONE")
    """, tmp_path=tmp_path)


def test_pool_never_started_fork_child_runs_two_worker_matmul(tmp_path):
    run_script("""
    def child():
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child, 2-worker 512^3")
    in_child(child)
    check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "parent, after the fork")
    print("DONE")
    """, tmp_path=tmp_path)


def test_fork_while_another_thread_compiles(tmp_path):
    # The thread compiles a new kernel (the GIL released); the main thread forks as soon as the
    # cache has counted the miss, that is while the compile is under way.
    run_script(WARM + """
    a = rng.standard_normal((300, 260)).astype(np.float32)
    b = rng.standard_normal((260, 180)).astype(np.float32)
    results = {}
    misses = _core.cache_stats()["misses"]
    t = threading.Thread(target=lambda: results.setdefault("c", coopjit.matmul(a, b, plan=TWO)))
    t.start()
    while _core.cache_stats()["misses"] == misses and t.is_alive():
        time.sleep(0.0005)
    def child():
        compiles = _core.cache_stats()["compiles"]
        check_matmul(coopjit.matmul(a, b, plan=TWO), a, b, "child, the kernel the thread was compiling")
        # The fork waited for that compile: the child has its result and compiles nothing.
        assert _core.cache_stats()["compiles"] == compiles, _core.cache_stats()
        x = rng.standard_normal((64, 48)).astype(np.float64)
        y = rng.standard_normal((48, 80)).astype(np.float64)
        check_matmul(coopjit.matmul(x, y, plan=TWO), x, y, "child, another new kernel")
        assert _core.cache_stats()["compiles"] == compiles + 1, _core.cache_stats()
    assert _core.cache_stats()["misses"] > misses  # the fork starts while the thread compiles
    in_child(child)
    t.join()
    check_matmul(results["c"], a, b, "parent thread")
    print("DONE")
    """, tmp_path=tmp_path)


def test_fork_while_another_thread_runs_a_kernel(tmp_path):
    # Another thread runs 1024^3 matmuls back to back on both workers (the GIL released); the
    # main thread forks four times while they run, and at least one fork lands inside a call.
    run_script(WARM + """
    big_a = rng.standard_normal((1024, 1024)).astype(np.float32)
    big_b = rng.standard_normal((1024, 1024)).astype(np.float32)
    ref, bound = matmul_reference(big_a, big_b), matmul_bound(big_a, big_b, np.float32)
    stop, calls, errors = threading.Event(), [], []
    def loop():
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                c = coopjit.matmul(big_a, big_b, plan=TWO)
                calls.append((t0, time.monotonic()))
                check_close(c, ref, bound, "parent thread")
        except BaseException as e:
            errors.append(e)
    coopjit.matmul(big_a, big_b, plan=TWO)  # compiled before the thread starts: it only runs kernels
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    def child():
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child, 2-worker 512^3")
        check_close(coopjit.matmul(big_a, big_b, plan=TWO), ref, bound, "child, 2-worker 1024^3")
    forks = []
    for i in range(4):
        time.sleep(0.1 + 0.07 * i)
        forks.append(time.monotonic())
        in_child(child)
    stop.set()
    t.join()
    assert not errors, errors[0]
    during = sum(any(t0 < f < t1 for t0, t1 in calls) for f in forks)
    assert during >= 1, f"no fork landed during a kernel: forks {forks}, calls {calls}"
    print(f"{during} of {len(forks)} forks while the other thread ran a kernel")
    print("DONE")
    """, tmp_path=tmp_path)


def test_process_pool_executor_spawn_control(tmp_path):
    run_script(WARM + """
    import functools, multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    task = functools.partial(coopjit.matmul, plan=TWO)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as ex:
        c1, c2 = (f.result(timeout=CHILD_DEADLINE) for f in [ex.submit(task, A, B), ex.submit(task, B, A)])
    check_matmul(c1, A, B, "task 1")
    check_matmul(c2, B, A, "task 2")
    print("DONE")
    """, tmp_path=tmp_path)


def test_fork_with_the_disk_cache_disabled(tmp_path):
    run_script(WARM + """
    a = rng.standard_normal((96, 40)).astype(np.float32)
    b = rng.standard_normal((40, 120)).astype(np.float32)
    def child():
        check_matmul(coopjit.matmul(a, b, plan=TWO), a, b, "child, no disk cache")
    in_child(child)
    print("DONE")
    """, env_extra={"COOPJIT_CACHE": "0"}, tmp_path=tmp_path)


def test_grandchild_of_a_forked_child(tmp_path):
    # The child's fresh pool is itself forked from: the handlers run again in the child.
    run_script(WARM + """
    def grandchild():
        check_matmul(coopjit.matmul(B, A, plan=TWO), B, A, "grandchild")
    def child():
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child")
        in_child(grandchild)
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child, after its fork")
    in_child(child)
    print("DONE")
    """, tmp_path=tmp_path)


needs_intel_cpu = pytest.mark.skipif(
    intel_cpu_runtime() is None, reason="Intel's CPU OpenCL runtime is absent (pip install intel-opencl-rt)")

DEVICE_PRELUDE = """
    assert "opencl:0" in coopjit.devices(), coopjit.devices()
    x = rng.standard_normal((64, 48)).astype(np.float32)
    y = rng.standard_normal((48, 32)).astype(np.float32)
"""


@needs_intel_cpu
def test_device_opened_before_fork_is_a_clear_error_in_the_child(tmp_path):
    run_script(WARM + DEVICE_PRELUDE + """
    check_matmul(coopjit.matmul(x, y, device="opencl:0"), x, y, "parent on opencl:0")
    d = coopjit.empty((64, 48), np.float32, device="opencl:0")
    d[...] = x
    from spirv_kernels import AXPY_INDEX
    from coopjit.devices import Module
    axpy = Module.from_llvm(AXPY_INDEX, "opencl:0").kernel("axpy_index")
    v = coopjit.empty(64, np.float32, device="opencl:0")
    v[...] = 1.0
    axpy(v, v, np.float32(2.0), np.int64(64), global_size=64)
    assert np.array_equal(v, 2.0 + np.arange(64, dtype=np.float32))
    def child():
        errors, messages = [], []
        for what, call in [("matmul", lambda: coopjit.matmul(x, y, device="opencl:0")),
                           ("empty", lambda: coopjit.empty(8, np.float32, device="opencl:0")),
                           ("an inherited device array", lambda: coopjit.reduce(d, axis=1, device="opencl:0")),
                           ("an inherited kernel", lambda: axpy(v, v, np.float32(2.0), np.int64(64), global_size=64)),
                           ("a new module", lambda: Module.from_llvm(AXPY_INDEX, "opencl:0"))]:
            try:
                call()
            except coopjit.DeviceError as e:
                assert "fork" in str(e) and "opencl:0" in str(e), str(e)
                errors.append(what)
                messages.append(str(e))
        assert len(errors) == 5, errors
        # The inherited array is still host memory the child can read (a copy of the parent's).
        assert np.array_equal(d, x)
        # The CPU keeps working, and the device still lists.
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child, CPU after the device errors")
        assert "opencl:0" in coopjit.devices()
        return messages[0]
    msg = in_child(child)
    print("child's error:", msg)
    check_matmul(coopjit.matmul(x, y, device="opencl:0"), x, y, "parent on opencl:0 after the fork")
    print("DONE")
    """, tmp_path=tmp_path)


@needs_intel_cpu
def test_device_error_in_a_child_that_exits_normally(tmp_path):
    # A child that ends through sys.exit runs Python's finalization, which frees the parent's
    # device arrays it inherited: that must neither hang nor crash.
    run_script(WARM + DEVICE_PRELUDE + """
    d = coopjit.empty((64, 48), np.float32, device="opencl:0")
    d[...] = x
    check_matmul(coopjit.matmul(d, y, device="opencl:0"), x, y, "parent on opencl:0")
    pid = os.fork()
    if pid == 0:
        try:
            coopjit.matmul(x, y, device="opencl:0")
            code = 4
        except coopjit.DeviceError:
            code = 0
        del d
        import gc; gc.collect()
        sys.exit(code)
    end = time.monotonic() + CHILD_DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            raise SystemExit("HANG: the child did not exit")
        time.sleep(0.02)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the child ended with status {status}"
    print("DONE")
    """, tmp_path=tmp_path)


@needs_intel_cpu
def test_devices_and_info_in_a_child_of_a_parent_that_used_the_device(tmp_path):
    # `python -m coopjit info` and coopjit.devices() in a child whose parent listed and opened
    # opencl:0: the list and the properties are the parent's (discovered once per process line),
    # nothing waits for the parent's runtime.
    run_script(WARM + DEVICE_PRELUDE + """
    import contextlib, io
    from coopjit.__main__ import info
    check_matmul(coopjit.matmul(x, y, device="opencl:0"), x, y, "parent on opencl:0")
    listed, props = coopjit.devices(), coopjit.device_info("opencl:0")
    def child():
        assert coopjit.devices() == listed
        assert coopjit.device_info("opencl:0") == props
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            info()
        text = out.getvalue()
        assert "devices: cpu, opencl:0" in text and "opencl:0: " + props["device_name"] in text, text
        return text
    print(in_child(child))
    print("DONE")
    """, tmp_path=tmp_path)


@needs_intel_cpu
def test_python_m_coopjit_info_in_a_forked_child(tmp_path):
    # The command itself, run by a forked child (os.execv would start afresh: runpy keeps the fork).
    run_script(WARM + DEVICE_PRELUDE + """
    import runpy
    check_matmul(coopjit.matmul(x, y, device="opencl:0"), x, y, "parent on opencl:0")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.dup2(w, 1)
        sys.argv = ["coopjit", "info"]
        code = 0
        try:
            runpy.run_module("coopjit", run_name="__main__")
        except SystemExit as e:
            code = e.code or 0
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        os._exit(code)
    os.close(w)
    end = time.monotonic() + CHILD_DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > end:
            os.kill(pid, signal.SIGKILL)
            raise SystemExit("HANG: python -m coopjit info in the forked child")
        time.sleep(0.02)
    text = os.read(r, 1 << 20).decode()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, text)
    assert "devices: cpu, opencl:0" in text and "CPU: " in text, text
    print("DONE")
    """, tmp_path=tmp_path)


@needs_intel_cpu
def test_child_opens_a_device_its_parent_only_listed(tmp_path):
    # The parent listed the devices (the runtime loaded, no context): the child gets a fresh
    # context of its own and runs a kernel on it.
    run_script(WARM + DEVICE_PRELUDE + """
    from spirv_kernels import AXPY_INDEX
    from coopjit.devices import Module
    def child():
        assert "opencl:0" in coopjit.devices()
        v = coopjit.empty(100, np.float32, device="opencl:0")
        v[...] = np.linspace(-1, 1, 100, dtype=np.float32)
        want = 0.5 * v.astype(np.float64) + np.arange(100)
        Module.from_llvm(AXPY_INDEX, "opencl:0").kernel("axpy_index")(v, v, np.float32(0.5), np.int64(100), global_size=128)
        assert np.allclose(v, want, rtol=2e-7, atol=1e-5), np.abs(v - want).max()
        check_matmul(coopjit.matmul(A, B, plan=TWO), A, B, "child, CPU")
    in_child(child)
    print("DONE")
    """, tmp_path=tmp_path)


def test_fork_while_another_thread_holds_a_disk_cache_compile_lock(tmp_path):
    # Another thread compiles new SPIR-V modules back to back through the disk cache, each under
    # the key's compile lock (an flock on a .lock file). A child forked meanwhile must not keep a
    # copy of that descriptor: it would hold the parent's lock for as long as the child lives,
    # should the parent die. The child lists its descriptors.
    run_script("""
    from coopjit import spirv
    from spirv_kernels import AXPY_INDEX
    stop, spans, errors = threading.Event(), [], []
    def loop():
        i = 0
        try:
            while not stop.is_set():
                t0 = time.monotonic()
                spirv.compile(AXPY_INDEX + f"\\n; variant {i}\\n")  # new text: a new key, compiled and stored
                spans.append((t0, time.monotonic()))
                i += 1
        except BaseException as e:
            errors.append(e)
    def child():
        fds = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                pass
        locks = [p for p in fds.values() if p.endswith(".lock")]
        assert not locks, f"the child holds the parent's compile locks: {locks}"
        return len(fds)
    t = threading.Thread(target=loop, daemon=True)
    t.start()
    forks = []
    while len(spans) < 2 and t.is_alive():  # the first compiles (the backend's start) are done
        time.sleep(0.01)
    for i in range(8):
        time.sleep(0.013 * (i + 1))
        forks.append(time.monotonic())
        in_child(child)
    stop.set()
    t.join()
    assert not errors, errors[0]
    during = sum(any(t0 < f < t1 for t0, t1 in spans) for f in forks)
    assert during >= 1, f"no fork landed during a compile: forks {forks}, compiles {spans}"
    print(f"{during} of {len(forks)} forks while the other thread compiled")
    print("DONE")
    """, tmp_path=tmp_path)
