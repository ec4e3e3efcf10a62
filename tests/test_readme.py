"""Every ```python block of README.md runs as written, in order, in one namespace (as a reader pastes
them into one notebook), with a private cache directory. A block preceded by the line
`<!-- readme-test: requires DEVICE -->` runs only where that device exists (skipped, saying so,
elsewhere: hardware absent); ```sh blocks are shell commands and are not run here."""
import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
_BLOCK = re.compile(r"(?:<!-- readme-test: requires (?P<device>\S+) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks():
    text = README.read_text()
    out = []
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append((line, m.group("device"), m.group("code")))
    return out


def test_the_readme_has_python_blocks():
    assert len(blocks()) >= 8


def test_every_python_block_runs_as_written(tmp_path, monkeypatch):
    import coopjit

    monkeypatch.chdir(tmp_path)
    old_dir = coopjit.cache.info()["directory"]
    coopjit.cache.set_directory(str(tmp_path / "cache"))
    namespace = {"__name__": "__readme__"}
    skipped = []
    try:
        for line, device, code in blocks():
            if device and device not in coopjit.devices():
                skipped.append(f"line {line} (needs {device}: no such device here)")
                continue
            try:
                exec(compile(code, f"README.md:{line}", "exec"), namespace)
            except Exception as e:  # noqa: BLE001 - say which block failed
                pytest.fail(f"README.md block at line {line} raised {type(e).__name__}: {e}")
    finally:
        coopjit.cache.set_directory(old_dir or None)
    if skipped:
        print("skipped README blocks:", "; ".join(skipped))
