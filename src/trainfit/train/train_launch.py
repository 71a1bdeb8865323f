"""train.py's start-up: the process group (Dist) and the bounds on everything before the first step: the watchdog,
a launcher that died, stale JIT-extension build locks."""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

if __package__:  # trainfit.train.train_launch
    from .train_common import SetupError
else:  # the generated job folder: train.py's modules side by side
    from train_common import SetupError

__all__ = ["DEFAULT_STARTUP_TIMEOUT_S", "PHASE_HINTS", "Watchdog", "_LAUNCHER_WORDS", "_launcher_gone_at_start",
           "_terminate_group_members", "startup_timeout", "extension_locks", "lock_holders", "check_extension_locks",
           "extensions_root", "_free_port", "Dist"]


# ---- bounded start-up: watchdog, launcher death, stale JIT-extension locks -----------------------------------------

DEFAULT_STARTUP_TIMEOUT_S = 1200
PHASE_HINTS = {
    "import": "importing torch / transformers / deepspeed: a broken or very slow Python environment",
    "rendezvous": "waiting for every rank to join the process group: check MASTER_ADDR / MASTER_PORT, the network "
                  "between nodes and that every node was started",
    "data": "loading the tokenizer and the training data",
    "model build": "building or loading the model (a large checkpoint from slow storage, or a model hub that "
                   "cannot be reached)",
    "engine init": "initialising the training engine (DeepSpeed builds its ops on first use; FSDP sharding)",
    "first step": "the first training step (a collective that one rank never reached, or a very slow compile)",
    "final model": "gathering and writing the final Hugging Face model (adapter, merged weights)",
    "teardown": "the final barrier: another rank did not finish",
}


class Watchdog:
    """A daemon thread that bounds the phases before the first step (and the final teardown): if the first
    optimizer step has not finished `limit_s` seconds after start, the run stops with one line naming the phase it
    was stuck in, exit code 4. Under a launcher (torchrun, the DeepSpeed launcher) it also stops the rank when the
    launcher is gone, so no orphaned rank outlives its job; torchrun stops every other rank when one exits."""

    EXIT_CODE = 4

    def __init__(self, limit_s: float):
        import threading

        self.limit_s = limit_s
        self.phase = "import"
        self.deadline = time.monotonic() + limit_s if limit_s > 0 else None
        launched = bool(os.environ.get("TORCHELASTIC_RUN_ID")) or "LOCAL_RANK" in os.environ
        self.launcher = os.getppid() if launched else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trainfit-watchdog", daemon=True)
        self._thread.start()

    def enter(self, phase: str) -> None:
        self.phase = phase

    def started(self) -> None:
        """The first step finished: training is under way; stop bounding it (only the launcher check stays)."""
        self.phase, self.deadline = "training", None

    def tearing_down(self) -> None:
        self.phase = "teardown"
        if self.limit_s > 0:
            self.deadline = time.monotonic() + self.limit_s

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        if self.launcher is not None and _launcher_gone_at_start(self.launcher):
            # the launcher died before this rank got here: the rank was already reparented (to init or a subreaper)
            self._die(5, "the launcher that started this rank is gone; stopping this rank")
        while not self._stop.wait(0.5):
            if self.launcher is not None and os.getppid() != self.launcher:
                self._die(5, "the launcher that started this rank is gone; stopping this rank")
            if self.deadline is not None and time.monotonic() > self.deadline:
                what = "end of teardown" if self.phase == "teardown" else "first training step"
                self._die(self.EXIT_CODE, f"no {what} within {self.limit_s:g} s (--startup-timeout); stuck in phase "
                                          f"'{self.phase}': {PHASE_HINTS.get(self.phase, self.phase)}")

    @staticmethod
    def _die(code: int, message: str) -> None:
        rank = os.environ.get("RANK")
        try:  # the reader of stderr may be gone with the launcher: nothing here may stop the exit
            print(f"train.py: error: {'rank ' + rank + ': ' if rank else ''}{message}", file=sys.stderr, flush=True)
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        if os.getpgid(0) == os.getpid():  # a group of our own (as torchrun starts ranks): take build children too
            _terminate_group_members(os.getpid())
        os._exit(code)


_LAUNCHER_WORDS = (b"torchrun", b"torch.distributed", b"torch/distributed", b"accelerate", b"deepspeed", b"srun")


def _launcher_gone_at_start(parent: int) -> bool:
    """Whether the process this rank now reports as its parent cannot be the launcher that started it: torchrun's
    ranks (TORCHELASTIC_RUN_ID set) are children of the torchrun agent, so a parent that is no launcher means the
    agent died before this rank got here. Any other rank: only a parent of PID 1 that is not itself a launcher (in a
    container `torchrun ...` may be PID 1) says so. When /proc cannot be read, nothing is concluded."""
    if not os.environ.get("TORCHELASTIC_RUN_ID") and parent != 1:
        return False
    try:
        with open(f"/proc/{parent}/cmdline", "rb") as fh:
            cmdline = fh.read()
    except OSError:
        return False
    return not any(word in cmdline for word in _LAUNCHER_WORDS)


def _terminate_group_members(pgid: int) -> None:
    """SIGTERM every other process of process group `pgid` (e.g. a compiler a JIT build started)."""
    import signal

    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else []):
        if int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:
                os.kill(int(pid), signal.SIGTERM)
        except (OSError, IndexError, ValueError):
            continue


def startup_timeout(args: argparse.Namespace) -> float:
    if args.startup_timeout is not None:
        return args.startup_timeout
    raw = os.environ.get("TRAINFIT_STARTUP_TIMEOUT")
    try:
        return float(raw) if raw else DEFAULT_STARTUP_TIMEOUT_S
    except ValueError:
        raise SetupError(f"TRAINFIT_STARTUP_TIMEOUT={raw!r} is not a number of seconds") from None


def extension_locks(root: str) -> list[str]:
    """The lock files of PyTorch JIT-extension builds under `root` (<root>[/pyXY_cu/cpu]/<name>/lock)."""
    found = []
    for depth in ("*", os.path.join("*", "*")):
        found += glob.glob(os.path.join(root, depth, "lock"))
    return sorted(set(found))


def lock_holders(path: str) -> list[int] | None:
    """PIDs of live processes that hold `path` open (torch's FileBaton keeps the lock file open while it builds);
    None when some process could not be inspected, so staleness cannot be proven."""
    target = os.path.realpath(path)
    holders, unknown = [], False
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        except PermissionError:
            unknown = True
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == target:
                    holders.append(int(pid))
                    break
            except OSError:
                continue
    return None if unknown and not holders else holders


def check_extension_locks(root: str, clear: bool) -> None:
    """A build lock that no live process holds was left by an interrupted build; PyTorch's loader (used by
    DeepSpeed's JIT ops) would wait on it forever. Say so before anything waits, or remove it when asked."""
    if not os.path.isdir("/proc"):
        return  # no way to prove anything on this platform; the watchdog still bounds the wait
    for path in extension_locks(root):
        holders = lock_holders(path)
        if holders:
            print(f"train.py: note: process {holders[0]} is building {os.path.basename(os.path.dirname(path))}; "
                  f"waiting for it (lock {path})", file=sys.stderr, flush=True)
            continue
        if holders is None:
            print(f"train.py: note: cannot tell whether lock {path} is stale (other users' processes are not "
                  f"visible); if the run stops in 'engine init', remove it", file=sys.stderr, flush=True)
            continue
        if clear:
            try:
                os.remove(path)
            except FileNotFoundError:
                pass  # another rank removed it first
            print(f"train.py: removed stale lock {path} (held by no live process: an interrupted build left it)",
                  file=sys.stderr, flush=True)
            continue
        raise SetupError(f"stale JIT-extension lock {path}: held by no live process (an earlier build was "
                         f"interrupted) and DeepSpeed would wait on it forever; remove it (rm '{path}') or rerun "
                         f"with --clear-stale-locks")


def extensions_root() -> str:
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root:
        return root
    from torch.utils.cpp_extension import get_default_build_root

    return get_default_build_root()


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- distributed set-up ---------------------------------------------------------------------------------------

class Dist:
    def __init__(self, cfg: dict, args: argparse.Namespace):
        import torch

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        want_cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
        if want_cuda and not torch.cuda.is_available():
            raise SetupError("--device cuda but no CUDA GPU is visible")
        self.cuda = want_cuda
        self.device = torch.device(f"cuda:{self.local_rank}" if self.cuda else "cpu")
        if self.cuda:
            torch.cuda.set_device(self.device)
        backend = "nccl" if self.cuda else "gloo"
        if cfg["engine"] == "deepspeed":
            check_extension_locks(extensions_root(), args.clear_stale_locks)
            import deepspeed

            if not self.cuda:
                # On the CPU DeepSpeed JIT-builds a shared-memory all-reduce op (deepspeed_shm_comm) on first use,
                # a compile of its own that the gloo collectives do not need; its compatibility table is the switch.
                try:
                    import deepspeed.ops

                    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
                except (AttributeError, TypeError):
                    pass
            if "RANK" not in os.environ:  # `python train.py` on one GPU: a group of one (else DeepSpeed tries MPI)
                os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                                  MASTER_PORT=os.environ.get("MASTER_PORT") or str(_free_port()))
            deepspeed.init_distributed(dist_backend=backend)
        elif self.world > 1:
            torch.distributed.init_process_group(backend=backend)

    @property
    def main(self) -> bool:
        return self.rank == 0
