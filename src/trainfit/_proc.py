"""Child processes that cannot outlive their caller.

A training run is a tree: torchrun starts every rank in a session of its own, DeepSpeed starts compilers, so
killing one process (or one process group) leaves the rest orphaned. Every process started here carries a tag in
its environment (`TRAINFIT_PROC_TAG`), which all its descendants inherit whatever session they move to; when the run
ends, times out or is interrupted, every process that carries the tag is stopped (SIGTERM, then SIGKILL after a
grace period). The direct child also dies with its parent (Linux `PR_SET_PDEATHSIG`), so even a SIGKILL of the caller
takes torchrun down, and the generated train.py stops a rank whose launcher is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid

TAG_VAR = "TRAINFIT_PROC_TAG"
_PR_SET_PDEATHSIG = 1

try:  # loaded before any fork: the child only calls into it
    import ctypes

    _LIBC = ctypes.CDLL(None, use_errno=True) if os.path.isdir("/proc") else None
except (ImportError, OSError):  # pragma: no cover - not Linux
    _LIBC = None


def _die_with_parent() -> None:
    die_with_parent(signal.SIGKILL)


def die_with_parent(sig: int) -> None:
    """This process gets `sig` when its parent dies (Linux; nothing elsewhere)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(sig))


def _environ(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read()
    except OSError:
        return b""


def tagged(var: str, value: str | None = None, exclude: set[int] | None = None) -> list[int]:
    """Live processes whose environment has `var` (set to `value`, when given)."""
    if not os.path.isdir("/proc"):
        return []
    exclude = (exclude or set()) | {os.getpid()}
    needle = f"{var}={value}".encode() if value is not None else f"{var}=".encode()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) in exclude:
            continue
        env = _environ(pid)
        if any(entry.startswith(needle) and (value is None or entry == needle) for entry in env.split(b"\0")):
            found.append(int(pid))
    return found


def stop_tagged(var: str, value: str | None = None, grace_s: float = 5.0, exclude: set[int] | None = None) -> list[int]:
    """Stop every live process tagged so (SIGTERM, SIGKILL after `grace_s`); returns the PIDs that were alive."""
    pids = tagged(var, value, exclude)
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        alive = [p for p in pids if _alive(p)]
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + wait
        while time.monotonic() < end and any(_alive(p) for p in alive):
            time.sleep(0.05)
    return pids


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run(cmd: list[str], timeout: float, env: dict | None = None, cwd: str | None = None,
        grace_s: float = 5.0) -> subprocess.CompletedProcess:
    """subprocess.run(capture_output=True, text=True) whose whole process tree is gone when it returns or raises
    (timeout: subprocess.TimeoutExpired with the output so far; Ctrl-C: KeyboardInterrupt, tree stopped)."""
    tag = uuid.uuid4().hex
    env = dict(os.environ if env is None else env)
    env[TAG_VAR] = tag
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True, preexec_fn=_die_with_parent if _LIBC is not None else None)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_tagged(TAG_VAR, tag, grace_s)
        out, err = proc.communicate()
        raise subprocess.TimeoutExpired(cmd, timeout, out, err) from None
    except BaseException:
        stop_tagged(TAG_VAR, tag, grace_s)
        proc.kill()
        proc.wait()
        raise
    done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    # whatever the tree left behind (a rank orphaned by its launcher) is stopped too, and named on the result
    done.leftovers = [pid for pid in stop_tagged(TAG_VAR, tag, grace_s) if pid != proc.pid]
    return done
