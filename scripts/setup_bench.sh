#!/usr/bin/env bash
# Installs the benchmark-only Python packages (PyTorch 2.13.0, CPU; matplotlib; scipy for the GELU of NumPy's column) into $PYTHON when
# they are missing; re-running it is quick (it checks, then skips). The tests do not need them.
set -euo pipefail
PY=${PYTHON:-python3}

if ! $PY - <<'PYEOF'
import importlib.metadata as md, sys
def version(name):
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None
ok = (version("torch") or "").split("+")[0] == "2.13.0" and version("matplotlib") is not None and version("scipy") is not None
sys.exit(0 if ok else 1)
PYEOF
then
  echo "setup_bench: pip install torch==2.13.0 matplotlib scipy"
  $PY -m pip install -q torch==2.13.0 matplotlib scipy
fi
