"""The tuning database: per problem and machine, the best plan coopjit.tune found, in the JSON file tuning.json of the cache directory.

Writes are atomic (temp file, fsync, rename) under a file lock, and merge with what other
processes stored meanwhile. A damaged file (truncated, not JSON, checksum mismatch, another
format) is ignored with a warning and rewritten by the next store: never fatal. A directory that
cannot be written (read-only, full, a path through a file) costs only the file: the tuned plans
are used in this process, with a warning. The plans of
this machine are handed to the core at import (or reload()); calls without an explicit plan
then use them (the core looks them up when it plans a problem, not on every call).
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
import time
import warnings

from . import _core

FORMAT = 1
FILE = "tuning.json"
LOCK_TIMEOUT_S = 10.0

_mu = threading.RLock()


def _after_fork_in_child() -> None:
    # A thread of the parent may have held the lock at the fork; it does not exist in the child.
    global _mu
    _mu = threading.RLock()


os.register_at_fork(after_in_child=_after_fork_in_child)
_entries: dict = {}  # the database as last read or written by this process
_machine: str | None = None


def path() -> str | None:
    """The database file, or None when the caches are disabled."""
    d = _core.cache_dir()
    return os.path.join(d, FILE) if d else None


def machine() -> str:
    """This machine's identity as tuned plans are keyed: CPU name, a hash of its features, the
    coopjit version."""
    global _machine
    if _machine is None:
        cpu = _core.cpu_info()
        feats = ",".join(("+" if v else "-") + k for k, v in sorted(cpu["features"].items()))
        _machine = f"{cpu['name']} features {hashlib.sha256(feats.encode()).hexdigest()[:12]} coopjit {_core.version}"
    return _machine


def key(signature: str, device: str = "cpu") -> str:
    """The database key of a problem: device, GEMM signature (dtype, shape, stride classes,
    beta, pool size), machine."""
    return f"{device} | {signature} | {machine()}"


def _checksum(entries: dict) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()


def _read(p: str | None, unreadable: dict | None = None) -> dict:
    """The entries of the file `p` ({} when there is none, or it is damaged); `unreadable` (a
    warning says why) when it exists but cannot be read."""
    if p is None:
        return {}
    try:
        with open(p, "rb") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except OSError as e:
        warnings.warn(f"coopjit: cannot read the tuning database {p}: {e}", RuntimeWarning, stacklevel=3)
        return {} if unreadable is None else unreadable
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format') if isinstance(doc, dict) else '?'} instead of {FORMAT}")
        entries = doc["entries"]
        if not isinstance(entries, dict) or doc.get("checksum") != _checksum(entries):
            raise ValueError("checksum mismatch")
        return entries
    except (ValueError, KeyError, TypeError, RecursionError) as e:
        # RecursionError: brackets nested deeper than the JSON decoder (or the checksum's encoder)
        # recurses; it ended the import of coopjit.
        warnings.warn(f"coopjit: ignoring the damaged tuning database {p} ({type(e).__name__}: {e}); the next "
                      f"tuning rewrites it",
                      RuntimeWarning, stacklevel=3)
        return {}


def _write(p: str, entries: dict) -> None:
    os.makedirs(os.path.dirname(p), exist_ok=True)
    tmp = f"{p}.{os.getpid()}.{threading.get_ident()}.tmp"
    data = json.dumps({"format": FORMAT, "checksum": _checksum(entries), "entries": entries}, indent=1,
                      sort_keys=True).encode()
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _write_or_warn(p: str | None, entries: dict) -> str | None:
    """Writes the database; p, or None (with a warning) when the caches are disabled or the
    directory refuses the file: the entries then live in this process only."""
    if p is None:
        return None
    try:
        _write(p, entries)
        return p
    except OSError as e:
        warnings.warn(f"coopjit: cannot write the tuning database {p} ({e}); the tuned plans are used in this "
                      f"process only", RuntimeWarning, stacklevel=3)
        return None


@contextlib.contextmanager
def _locked(p: str | None):
    """Holds the database's lock file (waits at most LOCK_TIMEOUT_S, then goes on unlocked; goes
    on unlocked at once where the lock file cannot be made: the write will not be made either)."""
    if p is None:
        yield
        return
    try:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        fd = os.open(p + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.01)
        yield
    finally:
        # Unlocked explicitly: closing releases an flock lock only when every copy of the
        # descriptor is closed, and a child forked meanwhile holds one.
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _apply(entries: dict) -> None:
    """Hands this machine's CPU plans to the core (replacing the ones it had)."""
    from ._kernel_args import _overrides

    _core.clear_tuned_plans()
    me = machine()
    for rec in entries.values():
        try:
            if rec["machine"] == me and rec["device"] == "cpu":
                _core.set_tuned_plan(rec["signature"], _overrides(rec["plan"]))
        except (KeyError, TypeError, ValueError):
            continue  # an entry this version cannot use: skipped, never fatal


def reload() -> None:
    """Reads the database again (after another process tuned, or the directory moved)."""
    global _entries
    with _mu:
        _entries = _read(path())
        _apply(_entries)


def entries() -> dict:
    """Every entry of the database as last read: key -> record."""
    with _mu:
        return dict(_entries)


def lookup(signature: str, device: str = "cpu") -> dict | None:
    """The record of a problem on this machine, or None."""
    with _mu:
        return _entries.get(key(signature, device))


def store(signature: str, device: str, plan: dict, record: dict) -> str | None:
    """Stores the tuned plan of a problem (merged with the file's other entries) and uses it in
    this process from now on; returns the database file (None when the caches are disabled, or
    with a warning when the file cannot be written)."""
    global _entries
    from ._kernel_args import _overrides

    rec = {**record, "signature": signature, "device": device, "machine": machine(), "plan": dict(plan)}
    p = path()
    with _mu, _locked(p):
        entries_now = _read(p, dict(_entries)) if p else dict(_entries)
        entries_now[key(signature, device)] = rec
        stored = _write_or_warn(p, entries_now)
        _entries = entries_now
        if device == "cpu":
            _core.set_tuned_plan(signature, _overrides(plan))
    return stored


def forget(signature: str, device: str = "cpu") -> bool:
    """Removes a problem's tuned plan (file and process); True when there was one."""
    global _entries
    p = path()
    with _mu, _locked(p):
        entries_now = _read(p, dict(_entries)) if p else dict(_entries)
        found = entries_now.pop(key(signature, device), None) is not None
        if found:
            _write_or_warn(p, entries_now)
        _entries = entries_now
        if device == "cpu":
            _core.set_tuned_plan(signature, {})
    return found


def clear() -> int:
    """Deletes the database; returns how many entries it had."""
    global _entries
    p = path()
    with _mu, _locked(p):
        n = len(_read(p, _entries)) if p else len(_entries)
        if p:
            try:
                os.unlink(p)
            except (FileNotFoundError, NotADirectoryError):  # no file (a path through a file: none either)
                pass
            except OSError as e:
                warnings.warn(f"coopjit: cannot delete the tuning database {p} ({e}); its plans are forgotten in "
                              f"this process only", RuntimeWarning, stacklevel=3)
        _entries = {}
        _core.clear_tuned_plans()
    return n


def merge(records: dict) -> int:
    """Merges entries tuned elsewhere (key -> record, as entries() lists them: another worker of
    a tuning sweep, keyed by its machine) into the database, and uses those of this machine from
    now on; returns how many entries were new or changed."""
    global _entries
    for k, rec in records.items():
        if not isinstance(k, str) or not isinstance(rec, dict) or not {"signature", "device", "machine",
                                                                      "plan"} <= set(rec):
            raise ValueError(f"merge: {k!r} is not a tuning database entry (key -> record with signature, device, "
                             f"machine and plan)")
        if k != f"{rec['device']} | {rec['signature']} | {rec['machine']}":
            raise ValueError(f"merge: the key {k!r} does not name its record's device, signature and machine")
    p = path()
    with _mu, _locked(p):
        entries_now = _read(p, dict(_entries)) if p else dict(_entries)
        changed = sum(entries_now.get(k) != rec for k, rec in records.items())
        entries_now.update(records)
        if changed:
            _write_or_warn(p, entries_now)
        _entries = entries_now
        _apply(entries_now)
    return changed
