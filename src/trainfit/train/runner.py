#!/usr/bin/env python3
"""Training script written by `trainfit generate` (this file is copied verbatim as train.py; `trainfit bench` runs
the same code). Self-contained: the Python standard library plus torch, transformers, peft and, for DeepSpeed
plans, deepspeed.

    python train.py --config train_config.json --data data.jsonl            # one GPU
    torchrun --nproc_per_node 8 train.py --config train_config.json ...      # DDP, FSDP or DeepSpeed (see launch.sh)

Engines are PyTorch DDP, PyTorch FSDP2 (`fully_shard`) and DeepSpeed ZeRO, as train_config.json says; the loop
around them only feeds batches, accumulates gradients, logs tokens/s and peak memory, and checkpoints.
Data (JSONL or Parquet): `text` (pre-training / SFT on plain text), `messages` (chat SFT: the loss covers the
assistant turns), `prompt`/`chosen`/`rejected` (DPO), `text`/`label` (classification). How samples become
sequences is train_config.json's data_layout, the one trainfit estimated: packed (causal LM: concatenated and cut into
seq_len blocks), padded-batch (each micro-batch padded to its longest sample) or padded-max (every sample padded to
seq_len); samples longer than seq_len are cut.
"""

from __future__ import annotations

import argparse
import copy
import glob
import json
import math
import os
import random
import sys
import time
from contextlib import nullcontext

CONFIG_VERSION = 1
DEFAULT_OUTPUT_DIR = "output"
# The run's result in Hugging Face format, under the output directory, written at the end of training: LoRA / QLoRA
# runs write the PEFT adapter to ADAPTER_DIR, every run the model to serve (adapter merged in) to MERGED_DIR, which
# also holds ARTIFACT_FILE. `trainfit generate --serving` reads these names (its default --model-path is
# DEFAULT_OUTPUT_DIR/MERGED_DIR, and --from OUTPUT_DIR finds MERGED_DIR there).
ADAPTER_DIR, MERGED_DIR, ARTIFACT_FILE = "adapter", "merged", "trainfit_artifact.json"
ARTIFACT_VERSION = 1
REQUIRED_COLUMNS = {"sft": ({"text"}, {"messages"}), "pretrain": ({"text"},), "dpo": ({"prompt", "chosen", "rejected"},),
                    "classification": ({"text", "label"},)}


class SetupError(Exception):
    """A problem with the inputs, reported in one line before any training starts."""


# ---- configuration and inputs ----------------------------------------------------------------------------------

def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="trainfit training script")
    p.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "train_config.json"))
    p.add_argument("--data", help="training data: .jsonl / .json / .parquet file or a directory of them")
    p.add_argument("--synthetic", action="store_true", help="random tokens of exactly seq_len (benchmarks, tests)")
    p.add_argument("--model-path", help="local model directory or Hub id (default: the config's)")
    p.add_argument("--tokenizer", help="tokenizer directory or Hub id (default: the model's)")
    p.add_argument("--random-init", action="store_true", help="build the model from its config with random weights")
    p.add_argument("--output-dir", help="checkpoints and metrics (default: the config's)")
    p.add_argument("--max-steps", type=int, help="optimizer steps (default: from the dataset size and epochs)")
    p.add_argument("--warmup-steps", type=int, default=None, help="steps excluded from the throughput summary")
    p.add_argument("--save-steps", type=int, help="checkpoint every N steps (0: only at the end)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    p.add_argument("--no-final-model", action="store_true",
                   help=f"write only checkpoints: no {ADAPTER_DIR}/ and {MERGED_DIR}/ Hugging Face model at the end "
                        f"(also `final_model: false` in the config; --synthetic runs never write one)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--startup-timeout", type=float, default=None, metavar="SECONDS",
                   help=f"stop with an error naming the phase if no first step has finished after this long "
                        f"(default: $TRAINFIT_STARTUP_TIMEOUT or {DEFAULT_STARTUP_TIMEOUT_S}; 0: no bound)")
    p.add_argument("--clear-stale-locks", action="store_true",
                   default=os.environ.get("TRAINFIT_CLEAR_STALE_LOCKS") == "1",
                   help="remove JIT-extension build locks that no live process holds (left by an interrupted "
                        "DeepSpeed build) instead of stopping on them ($TRAINFIT_CLEAR_STALE_LOCKS=1)")
    return p.parse_args(argv)


def load_config(path: str) -> dict:
    if not os.path.isfile(path):
        raise SetupError(f"config not found: {path}")
    cfg = _json(_small_text(path, "config"), path)
    if not isinstance(cfg, dict):
        raise SetupError(f"{path}: not a train_config.json (a JSON object)")
    if cfg.get("config_version") != CONFIG_VERSION:
        raise SetupError(f"{path}: config_version {cfg.get('config_version')!r}, this script reads {CONFIG_VERSION}")
    return cfg


def _small_text(path: str, what: str, cap: int = 1024 * 1024) -> str:
    """A configuration file written by `trainfit generate`: its size checked before reading, strict UTF-8."""
    size = os.path.getsize(path)
    if size > cap:
        raise SetupError(f"{path}: {what} of {size:,} bytes, more than the {cap >> 20} MB such a file may be")
    with open(path, "rb") as fh:
        return _decode(fh.read(cap + 1), path, 0)


def data_files(path: str) -> list[str]:
    if os.path.isdir(path):
        files = sorted(f for ext in ("jsonl", "json", "parquet") for f in glob.glob(os.path.join(path, f"*.{ext}")))
    else:
        files = [path] if os.path.isfile(path) else []
    if not files:
        raise SetupError(f"training data not found: {path} (a .jsonl/.json/.parquet file or a directory of them)")
    return files


CHECK_BYTES = 8 * 1024 * 1024  # what a check of the data (limit=...) reads of each file at most
CHECK_LINES = 1000
MAX_DEPTH = 64  # nesting levels of a record: real rows (chat messages) use < 10


def _row_error(where: str, why: str) -> SetupError:
    return SetupError(f"{where}: {why}")


def _record(obj, where: str) -> dict:
    """A data row: a JSON object, nested at most MAX_DEPTH levels (walked without recursion)."""
    if not isinstance(obj, dict):
        kind = {list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(type(obj), "a number")
        raise _row_error(where, f"a record must be a JSON object with the task's columns, not {kind}")
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _row_error(where, f"a record nested more than {MAX_DEPTH} levels deep")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return obj


def _decode(raw: bytes, f: str, offset: int, final: bool = True) -> str:
    """Strict UTF-8 without NUL bytes (a binary or Latin-1 file is an error naming the byte offset); final=False:
    `raw` is a head cut anywhere, a character split at its end is dropped."""
    import codecs

    nul = raw.find(b"\x00")
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(raw, final)
    except UnicodeDecodeError as exc:
        if 0 <= nul < exc.start:
            raise _row_error(f, f"a NUL byte at byte offset {offset + nul}: not a text file") from None
        raise _row_error(f, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte offset {offset + exc.start})") \
            from None
    if nul >= 0:
        raise _row_error(f, f"a NUL byte at byte offset {offset + nul}: not a text file")
    return text


def _json(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _row_error(where, f"not JSON ({exc.msg})") from None
    except RecursionError:
        raise _row_error(where, f"a record nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise _row_error(where, f"not JSON ({str(exc)[:120]})") from None


def _json_array_rows(fh, f: str, limit: int | None) -> list[dict]:
    """The records of a .json file holding one array; with `limit`, only the first `limit` of them, read from at
    most CHECK_BYTES of the file."""
    if limit is None:
        doc = _json(_decode(fh.read(), f, 0), f)
        if not isinstance(doc, list):
            raise _row_error(f, "a .json data file holds a list of records (or use JSON lines, .jsonl)")
        return [_record(r, f"{f}: record {i}") for i, r in enumerate(doc, 1)]
    head = fh.read(CHECK_BYTES)
    text = _decode(head, f, 0, final=len(head) < CHECK_BYTES)
    decoder, pos, rows = json.JSONDecoder(), text.index("[") + 1, []
    while len(rows) < limit:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos < len(text) and text[pos] == "]":
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            if len(head) >= CHECK_BYTES:
                raise _row_error(f, f"record {len(rows) + 1} is not complete within the first "
                                    f"{CHECK_BYTES >> 20} MB (records that large are not training samples)") from None
            raise _row_error(f, f"not JSON ({exc.msg})") from None
        except RecursionError:
            raise _row_error(f, f"a record nested more than {MAX_DEPTH} levels deep") from None
        rows.append(_record(obj, f"{f}: record {len(rows) + 1}"))
    return rows


def _json_lines_rows(fh, f: str, limit: int | None) -> list[dict]:
    """The records of a JSON-lines file, read line by line; with `limit`, at most CHECK_LINES lines and CHECK_BYTES
    bytes are read."""
    rows, offset = [], 0
    cap = CHECK_BYTES if limit else None
    for n, raw in enumerate(iter(lambda: fh.readline(cap + 1 if cap else -1), b""), 1):
        if cap is not None and (offset + len(raw) > cap or n > CHECK_LINES):
            if rows:
                break
            _decode(raw, f, offset, final=False)  # a binary file is named as one
            raise _row_error(f, f"no record in the first {CHECK_LINES} lines / {CHECK_BYTES >> 20} MB (one JSON "
                                f"object per line)")
        line = _decode(raw, f, offset)
        offset += len(raw)
        if line.strip():
            rows.append(_record(_json(line, f"{f}:{n}"), f"{f}:{n}"))
            if limit and len(rows) >= limit:
                break
    return rows


def read_rows(files: list[str], limit: int | None = None) -> list[dict]:
    """The records of the data files; with `limit` (the checks before training) only the first `limit`, read from a
    bounded head of each file (CHECK_BYTES / CHECK_LINES), whatever the file's size."""
    rows: list[dict] = []
    for f in files:
        if f.endswith(".parquet"):
            try:
                import pyarrow.parquet as pq
            except ImportError:
                raise SetupError("reading Parquet needs pyarrow (pip install pyarrow)") from None
            try:
                if limit:
                    batch = next(pq.ParquetFile(f).iter_batches(batch_size=limit - len(rows)), None)
                    part = batch.to_pylist() if batch is not None else []
                else:
                    part = pq.read_table(f).to_pylist()
            except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
                raise _row_error(f, f"not a Parquet file ({str(exc).splitlines()[0][:160]})") from None
            rows += [_record(r, f"{f}: row {i}") for i, r in enumerate(part, 1)]
        else:
            with open(f, "rb") as fh:
                first = fh.read(4096)
                fh.seek(0)
                if f.endswith(".json") and first.lstrip().startswith(b"["):
                    rows += _json_array_rows(fh, f, limit and limit - len(rows))
                else:
                    rows += _json_lines_rows(fh, f, limit and limit - len(rows))
        if limit and len(rows) >= limit:
            return rows[:limit]
    return rows


def check_columns(rows: list[dict], task: str, where: str) -> None:
    if not rows:
        raise SetupError(f"{where}: no rows")
    keys = set(rows[0])
    options = REQUIRED_COLUMNS[task]
    if not any(opt <= keys for opt in options):
        wanted = " or ".join("+".join(sorted(o)) for o in options)
        raise SetupError(f"{where}: task {task} needs columns {wanted}; found {', '.join(sorted(keys)) or 'none'}")


def validate_inputs(cfg: dict, args: argparse.Namespace) -> None:
    """Everything that can be checked without torch, before the model is loaded."""
    if not args.synthetic:
        path = args.data or cfg.get("data")
        if not path:
            raise SetupError("no training data: pass --data PATH (or --synthetic for a benchmark)")
        files = data_files(path)
        check_columns(read_rows(files, limit=1), cfg["task"], files[0])
    if cfg["engine"] == "deepspeed" and not os.path.isfile(_ds_config_path(cfg, args)):
        raise SetupError(f"DeepSpeed config not found: {_ds_config_path(cfg, args)}")
    if cfg["optimizer"].get("in_backward") and (cfg["engine"] != "single" or cfg["grad_accum"] != 1
                                                 or cfg["precision"] == "fp16"):
        raise SetupError("optimizer in backward runs on one GPU, with grad_accum 1 and without fp16 loss scaling")


def _ds_config_path(cfg: dict, args: argparse.Namespace) -> str:
    path = cfg.get("deepspeed_config", "ds_config.json")
    return path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(args.config)), path)


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


# ---- data -----------------------------------------------------------------------------------------------------

def model_location(cfg: dict, args: argparse.Namespace, dist: "Dist | None" = None) -> str | None:
    """Where the weights come from: --model-path or the config's local path; else the Hub id, or for
    `model.source: modelscope` a local copy that ModelScope's snapshot_download makes (the first rank on each node
    downloads, the others wait and then find it in the cache). Hugging Face downloads honour HF_ENDPOINT (a mirror)."""
    local = args.model_path or cfg["model"].get("path")
    if local:
        return local
    if cfg["model"].get("source") != "modelscope":
        return cfg["model"].get("hf_id")
    repo = cfg["model"].get("modelscope_id") or cfg["model"].get("hf_id")
    try:
        from modelscope import snapshot_download
    except ImportError:
        raise SetupError("model.source is modelscope: pip install modelscope") from None
    import torch

    group = torch.distributed.is_available() and torch.distributed.is_initialized()
    first = dist is None or dist.local_rank == 0
    if not first and group:
        torch.distributed.barrier()
    path = snapshot_download(repo)
    if first and group:
        torch.distributed.barrier()
    return path


def load_tokenizer(cfg: dict, args: argparse.Namespace, dist: "Dist | None" = None):
    from transformers import AutoTokenizer

    name = args.tokenizer or model_location(cfg, args, dist)
    if not name:
        raise SetupError("no tokenizer: pass --tokenizer or --model-path")
    tok = AutoTokenizer.from_pretrained(name)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    return tok


def _assistant_tokens(tok, messages: list[dict]) -> tuple[list[int], list[int]]:
    """Chat SFT: token ids, and labels that keep only what assistant turns add (-100 elsewhere)."""
    ids: list[int] = []
    labels: list[int] = []
    for i in range(len(messages)):
        upto = tok.apply_chat_template(messages[: i + 1], tokenize=True, add_generation_prompt=False)
        if hasattr(upto, "keys"):  # transformers 5 returns a BatchEncoding
            upto = upto["input_ids"]
        new = upto[len(ids):]
        ids = list(upto)
        labels += new if messages[i].get("role") == "assistant" else [-100] * len(new)
    return ids, labels


PACKED, PADDED_BATCH, PADDED_MAX = "packed", "padded-batch", "padded-max"


def data_layout(cfg: dict) -> str:
    """train_config.json's data_layout; a config written before it had one: what this script did then (causal LM
    packed, DPO and classification padded to seq_len)."""
    layout = cfg.get("data_layout") or (PACKED if cfg["task"] in ("sft", "pretrain") else PADDED_MAX)
    if layout not in (PACKED, PADDED_BATCH, PADDED_MAX):
        raise SetupError(f"data_layout {layout!r}: expected {PACKED}, {PADDED_BATCH} or {PADDED_MAX}")
    if layout == PACKED and cfg["task"] not in ("sft", "pretrain"):
        raise SetupError(f"data_layout packed: {cfg['task']} samples are not packed (use {PADDED_BATCH})")
    return layout


def pack(sequences, seq_len: int, pad_id: int) -> list[tuple[list[int], list[int]]]:
    """Concatenate (ids, labels) pairs and cut blocks of exactly seq_len tokens (the tail is padded)."""
    blocks, ids, labels = [], [], []
    for s_ids, s_labels in sequences:
        ids += s_ids
        labels += s_labels
        while len(ids) >= seq_len:
            blocks.append((ids[:seq_len], labels[:seq_len]))
            ids, labels = ids[seq_len:], labels[seq_len:]
    if ids:
        blocks.append((ids + [pad_id] * (seq_len - len(ids)), labels + [-100] * (seq_len - len(labels))))
    return blocks


def causal_examples(rows: list[dict], tok, seq_len: int, layout: str = PACKED) -> list[tuple[list[int], list[int]]]:
    eos = [tok.eos_token_id] if tok.eos_token_id is not None else []
    seqs = []
    for row in rows:
        if "messages" in row:
            ids, labels = _assistant_tokens(tok, row["messages"])
        else:
            ids = tok(row["text"], add_special_tokens=True)["input_ids"]
            labels = list(ids)
        seqs.append((ids + eos, labels + eos))
    if layout == PACKED:
        return pack(seqs, seq_len, tok.pad_token_id)
    width = seq_len if layout == PADDED_MAX else 0  # padded-batch: collate pads each micro-batch to its longest
    return [(_pad(ids[:seq_len], width, tok.pad_token_id), _pad(labels[:seq_len], width, -100)) for ids, labels in seqs]


def _pad(ids: list[int], width: int, value: int) -> list[int]:
    """`ids` right-padded with `value` to `width` (no-op when already that long)."""
    return ids + [value] * (width - len(ids))


def dpo_examples(rows: list[dict], tok, seq_len: int, layout: str = PADDED_MAX) -> list[dict]:
    width = seq_len if layout == PADDED_MAX else 0
    out = []
    for row in rows:
        prompt = tok(row["prompt"], add_special_tokens=True)["input_ids"]
        item = {}
        for side in ("chosen", "rejected"):
            answer = tok(row[side], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
            ids = (prompt + answer)[:seq_len]
            loss_mask = ([0] * len(prompt) + [1] * len(answer))[:seq_len]
            item[side] = (_pad(ids, width, tok.pad_token_id), _pad([1] * len(ids), width, 0), _pad(loss_mask, width, 0))
        out.append(item)
    return out


def classification_examples(rows: list[dict], tok, seq_len: int,
                            layout: str = PADDED_MAX) -> list[tuple[list[int], list[int], int]]:
    width = seq_len if layout == PADDED_MAX else 0
    out = []
    for row in rows:
        ids = tok(row["text"], add_special_tokens=True)["input_ids"][:seq_len]
        out.append((_pad(ids, width, tok.pad_token_id), _pad([1] * len(ids), width, 0), int(row["label"])))
    return out


def synthetic_examples(cfg: dict, n: int, seed: int) -> list:
    rng = random.Random(seed)
    vocab, seq = cfg["model"]["vocab_size"], cfg["seq_len"]
    task = cfg["task"]
    if task == "classification":
        return [([rng.randrange(vocab) for _ in range(seq)], [1] * seq, rng.randrange(cfg["num_labels"]))
                for _ in range(n)]
    if task == "dpo":
        half = seq // 2
        return [{side: ([rng.randrange(vocab) for _ in range(seq)], [1] * seq, [0] * half + [1] * (seq - half))
                 for side in ("chosen", "rejected")} for _ in range(n)]
    return [([rng.randrange(vocab) for _ in range(seq)],) * 2 for _ in range(n)]


def build_examples(cfg: dict, args: argparse.Namespace, needed: int, dist: "Dist | None" = None, tok=None) -> list:
    if args.synthetic:
        return synthetic_examples(cfg, needed, args.seed)
    tok = tok if tok is not None else load_tokenizer(cfg, args, dist)
    rows = read_rows(data_files(args.data or cfg["data"]))
    check_columns(rows, cfg["task"], args.data or cfg["data"])
    task, seq, layout = cfg["task"], cfg["seq_len"], data_layout(cfg)
    if task == "dpo":
        return dpo_examples(rows, tok, seq, layout)
    if task == "classification":
        return classification_examples(rows, tok, seq, layout)
    return causal_examples(rows, tok, seq, layout)


def batches(examples: list, dist: Dist, micro_batch: int, seed: int, pad_id: int = 0):
    """Endless shuffled micro-batches of this rank's share of the examples, each padded to its longest sample."""
    import torch

    mine = examples[dist.rank::dist.world] or examples
    rng = random.Random(seed + dist.rank)
    epoch = 0
    while True:
        order = list(range(len(mine)))
        rng.shuffle(order)
        for start in range(0, len(order) - micro_batch + 1, micro_batch) or [0]:
            chunk = [mine[i % len(mine)] for i in order[start:start + micro_batch]]
            while len(chunk) < micro_batch:
                chunk.append(mine[len(chunk) % len(mine)])
            yield collate(chunk, torch, pad_id), epoch
        epoch += 1


def collate(chunk: list, torch, pad_id: int = 0) -> dict:
    """A micro-batch as tensors, right-padded to its longest sample (samples of a packed or padded-max layout are
    all seq_len already); "tokens": the samples' own tokens, padding not counted."""
    first = chunk[0]

    def rows(seqs, value):
        width = max(len(x) for x in seqs)
        return torch.tensor([list(x) + [value] * (width - len(x)) for x in seqs])

    if isinstance(first, dict):  # DPO: chosen rows then rejected rows
        sides = [c["chosen"] for c in chunk] + [c["rejected"] for c in chunk]
        return {"input_ids": rows([s[0] for s in sides], pad_id), "attention_mask": rows([s[1] for s in sides], 0),
                "loss_mask": rows([s[2] for s in sides], 0), "tokens": sum(sum(s[1]) for s in sides)}
    if len(first) == 3:  # classification
        return {"input_ids": rows([c[0] for c in chunk], pad_id), "attention_mask": rows([c[1] for c in chunk], 0),
                "labels": torch.tensor([c[2] for c in chunk]), "tokens": sum(sum(c[1]) for c in chunk)}
    # causal LM: right padding needs no attention mask (no real token attends to a later one); padded labels -100
    return {"input_ids": rows([c[0] for c in chunk], pad_id), "labels": rows([c[1] for c in chunk], -100),
            "tokens": sum(len(c[0]) for c in chunk)}


# ---- model ----------------------------------------------------------------------------------------------------

def compute_dtype(cfg: dict, dist: Dist):
    import torch

    name = cfg["precision"]
    if name == "fp32":
        return torch.float32
    if name == "fp16":
        return torch.float16
    if name == "bf16" and dist.cuda and not torch.cuda.is_bf16_supported():
        raise SetupError("this GPU has no bf16: regenerate the setup with --precision fp16")
    return torch.bfloat16


def attention_impl(cfg: dict, dist: Dist) -> str:
    want = cfg.get("attention", "sdpa")
    if want == "flash":
        try:
            import flash_attn  # noqa: F401
        except ImportError:
            want = "sdpa"
            log(dist, {"note": "flash-attn is not installed: using SDPA"})
        else:
            return "flash_attention_2" if dist.cuda else "sdpa"
    return {"flash": "flash_attention_2"}.get(want, want)


def load_dtype(cfg: dict, dist: Dist):
    """Storage dtype of the loaded weights: 16-bit frozen bases; fp32 trained weights where mixed precision needs
    fp32 masters (single GPU / DDP / FSDP); DeepSpeed converts the module itself."""
    import torch

    if cfg["precision"] == "fp32":
        return torch.float32
    if cfg["method"] in ("lora", "qlora"):
        return compute_dtype(cfg, dist)
    if cfg["engine"] == "deepspeed":
        return compute_dtype(cfg, dist)
    return torch.float32 if cfg.get("param_dtype", "fp32") == "fp32" else compute_dtype(cfg, dist)


def build_model(cfg: dict, args: argparse.Namespace, dist: Dist):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    cls = AutoModelForSequenceClassification if cfg["task"] == "classification" else AutoModelForCausalLM
    extra = {"num_labels": cfg["num_labels"]} if cfg["task"] == "classification" else {}
    attn = attention_impl(cfg, dist)
    dtype = load_dtype(cfg, dist)
    quantization = qlora_config(cfg, dist) if cfg["method"] == "qlora" else None  # refuses without CUDA
    if args.random_init or cfg["model"].get("random_init"):
        # a deep copy: transformers standardises nested rope_scaling / rope_parameters in place
        hf_config = copy.deepcopy(cfg["model"]["hf_config"])
        hf_config.pop("architectures", None)
        conf = AutoConfig.for_model(**hf_config, **extra)
        conf._attn_implementation = attn
        torch.manual_seed(args.seed)
        # on one GPU (or DDP) initialise straight on the device: random init of billions of weights on a CPU is slow
        where = dist.device if dist.cuda and cfg["engine"] in ("single", "ddp") and quantization is None else "cpu"
        with torch.device(where):
            model = cls.from_config(conf, dtype=dtype)
        if quantization is not None:  # bitsandbytes quantizes while loading: round-trip the random weights
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)
                del model
                model = cls.from_pretrained(tmp, dtype=dtype, attn_implementation=attn,
                                            quantization_config=quantization, **extra)
    else:
        name = model_location(cfg, args, dist)
        kwargs = dict(dtype=dtype, attn_implementation=attn, **extra)
        if quantization is not None:
            kwargs["quantization_config"] = quantization
        if cfg["engine"] == "fsdp" and dist.world > 1 and quantization is None and not dist.main:
            # FSDP: only rank 0 reads the checkpoint; the others build an empty (meta-device) model that
            # load_from_rank0 fills with their shards after fully_shard
            conf = AutoConfig.from_pretrained(name, **extra)
            conf._attn_implementation = attn
            with torch.device("meta"):
                model = cls.from_config(conf, dtype=dtype)
        else:
            model = cls.from_pretrained(name, **kwargs)
        dist.rank0_load = cfg["engine"] == "fsdp" and dist.world > 1 and quantization is None
    if cfg["task"] == "classification" and model.config.pad_token_id is None:
        model.config.pad_token_id = model.config.eos_token_id or 0
    return apply_method(model, cfg, dist)


def qlora_config(cfg: dict, dist: Dist):
    if not dist.cuda:
        raise SetupError("QLoRA needs a CUDA GPU (bitsandbytes 4-bit kernels); use --method lora on this machine")
    import torch
    from transformers import BitsAndBytesConfig

    dtype = compute_dtype(cfg, dist)
    sharded = cfg["engine"] == "fsdp" or (cfg["engine"] == "deepspeed" and cfg.get("zero_stage") == 3)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_storage=dtype if sharded else torch.uint8)


def apply_method(model, cfg: dict, dist: Dist):
    ckpt = cfg.get("grad_ckpt", "none")
    if ckpt == "full":  # whole blocks; selective checkpoints only the attention core (selective_attention, in train)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if ckpt != "none":
        model.config.use_cache = False
    method = cfg["method"]
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if method == "qlora":
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=ckpt == "full")
        lora = cfg["lora"]
        targets = lora["targets"]
        model = get_peft_model(model, LoraConfig(
            r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora.get("dropout", 0.0),
            target_modules="all-linear" if targets == ["all-linear"] else targets,
            modules_to_save=list(lora.get("modules_to_save") or []) or None,
            task_type="SEQ_CLS" if cfg["task"] == "classification" else "CAUSAL_LM"))
        if cfg.get("param_dtype", "fp32") == "bf16" and cfg["precision"] != "fp32":
            low = compute_dtype(cfg, dist)  # pure 16-bit training: adapters in the base dtype, as estimated
            for p in model.parameters():
                if p.requires_grad:
                    p.data = p.data.to(low)
        if ckpt == "full":  # as PEFT recipes and trainfit's trace do: the embeddings' output requires grad
            model.enable_input_require_grads()
    elif method == "freeze":
        blocks = decoder_layers(model)
        keep = cfg.get("freeze_trainable_layers", 2)
        for p in model.parameters():
            p.requires_grad_(False)
        for block in blocks[-keep:]:
            for p in block.parameters():
                p.requires_grad_(True)
        for name, p in model.named_parameters():
            if name.startswith(("score", "classifier")):
                p.requires_grad_(True)
    return model


class selective_attention:
    """Selective activation checkpointing (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    Transformer Models", section 5; Megatron-LM's `--recompute-granularity selective`, which checkpoints its core
    attention: megatron/core/transformer/dot_product_attention.py `DotProductAttention`, "Region where selective
    activation recomputation is applied"): the attention core — from the rotated q, k and v to the attention output,
    GQA's repeat of k and v, the s x s scores, softmax and dropout included — runs under torch.utils.checkpoint
    (non-reentrant), so it saves only its inputs and recomputes the rest in its backward; the projections, norms and
    MLP are not recomputed. transformers has no selective mode (gradient_checkpointing_enable checkpoints whole
    blocks): inside this context the attention functions the model calls are wrapped — each modeling module's
    `eager_attention_forward` (looked up by name when called) and the entries of transformers'
    ALL_ATTENTION_FUNCTIONS the model's attention implementation names (sdpa, flash_attention_2, ...) — and
    restored on exit. Calls without grad (a DPO reference forward) run as they are. `calls` counts the checkpointed
    calls, so that a model whose attention bypasses these functions is noticed instead of running without any
    checkpointing. The one implementation: train.py uses it for `grad_ckpt: selective`, trainfit's trace
    (trace/tracer.py) imports it from here."""

    def __init__(self, model, enabled: bool = True) -> None:
        self.model, self.enabled, self.calls = model, enabled, 0
        self._patched: list = []

    def __enter__(self):
        if not self.enabled:
            return self
        try:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        except ImportError:
            raise SetupError("grad_ckpt selective needs transformers >= 4.48 (ALL_ATTENTION_FUNCTIONS)") from None
        modules = {sys.modules.get(type(m).__module__) for m in self.model.modules()} - {None}
        for module in modules:
            fn = getattr(module, "eager_attention_forward", None)
            if callable(fn):
                self._patched.append((module, fn))
                setattr(module, "eager_attention_forward", self._checkpointed(fn))
        names = {getattr(getattr(m, "config", None), "_attn_implementation", None) for m in self.model.modules()}
        self._interface, self._entries = ALL_ATTENTION_FUNCTIONS, []
        for name in sorted(n for n in names if isinstance(n, str) and n != "eager" and n in ALL_ATTENTION_FUNCTIONS):
            # a local override is put back, a class-wide entry is uncovered again (transformers < 4.50: a dict)
            local = name in getattr(ALL_ATTENTION_FUNCTIONS, "_local_mapping", ALL_ATTENTION_FUNCTIONS)
            self._entries.append((name, local, ALL_ATTENTION_FUNCTIONS[name]))
            ALL_ATTENTION_FUNCTIONS[name] = self._checkpointed(ALL_ATTENTION_FUNCTIONS[name])
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        for module, fn in self._patched:
            setattr(module, "eager_attention_forward", fn)
        for name, local, fn in self._entries:
            if local:
                self._interface[name] = fn
            else:
                del self._interface[name]
        self._patched, self._entries = [], []

    def _checkpointed(self, fn):
        import torch
        import torch.utils.checkpoint as ckpt

        def attention_recomputed_in_backward(module, query, key, value, attention_mask, *args, **kwargs):
            if not torch.is_grad_enabled():
                return fn(module, query, key, value, attention_mask, *args, **kwargs)
            self.calls += 1
            return ckpt.checkpoint(fn, module, query, key, value, attention_mask, *args, use_reentrant=False,
                                   **kwargs)

        return attention_recomputed_in_backward


def decoder_layers(model) -> list:
    import torch

    best = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > len(best):
            best = list(module)
    return best


def deepspeed_config(cfg: dict, args: argparse.Namespace, dist: Dist) -> dict:
    """ds_config.json as this run uses it (the same dict for zero.Init at build time and for the engine)."""
    with open(_ds_config_path(cfg, args), encoding="utf-8") as fh:
        ds_config = json.load(fh)
    if not dist.cuda:  # tests on CPU: torch's AdamW, no fused/CPU-Adam kernels to build
        if "optimizer" in ds_config:
            ds_config["optimizer"].setdefault("params", {})["torch_adam"] = True
        for key in ("bf16", "fp16"):
            ds_config.pop(key, None)
    return ds_config


# Under ZeRO-3 transformers builds the model inside deepspeed.zero.Init while an HfDeepSpeedConfig is alive (it is
# held through a weak reference, so it is kept here for the whole run): each rank then holds only its partition of
# every parameter, and from_pretrained loads the checkpoint shard by shard into the partitions, instead of every rank
# materialising the whole model in host memory first.
_ZERO3_CONFIG: list = []


def activate_zero3(cfg: dict, args: argparse.Namespace, dist: Dist) -> bool:
    """Make the DeepSpeed ZeRO-3 config active before the model is built; True if it was."""
    if cfg["engine"] != "deepspeed" or int(cfg.get("zero_stage") or 0) != 3:
        return False
    from transformers.integrations import HfDeepSpeedConfig

    _ZERO3_CONFIG[:] = [HfDeepSpeedConfig(deepspeed_config(cfg, args, dist))]
    return True


def local_parameters(model) -> dict:
    """What this rank holds right after the model is built: its own elements vs the model's (checks zero.Init)."""
    local = total = 0
    for p in model.parameters():
        if hasattr(p, "ds_tensor"):  # ZeRO-3 partitioned: p itself is empty, ds_tensor is this rank's slice
            local += p.ds_tensor.numel()
            total += p.ds_numel
        else:
            n = p.to_local().numel() if hasattr(p, "to_local") else p.numel()
            local += n
            total += p.numel()
    return {"loaded_local_params": local, "loaded_total_params": total}


def wrap_engine(model, cfg: dict, args: argparse.Namespace, dist: Dist, steps: int):
    """(model to call, optimizer or None for DeepSpeed, scheduler or None, DeepSpeed engine or None)."""
    import torch

    if cfg["engine"] == "deepspeed":
        import deepspeed

        ds_config = deepspeed_config(cfg, args, dist)
        client_optimizer = None
        if "optimizer" not in ds_config:  # 8-bit AdamW, Adafactor, SGD: built here, stepped by DeepSpeed
            client_optimizer = make_optimizer(model, cfg)
        engine, _, _, scheduler = deepspeed.initialize(
            model=model, optimizer=client_optimizer,
            model_parameters=[p for p in model.parameters() if p.requires_grad], config=ds_config)
        return engine, None, scheduler, engine
    rank0_load = getattr(dist, "rank0_load", False)
    if not rank0_load or dist.main:
        model.to(dist.device)
    if cfg["engine"] == "fsdp":
        full = model.state_dict() if rank0_load and dist.main else None
        model = shard_fsdp(model, cfg, args, dist)
        if rank0_load:
            load_from_rank0(model, full, dist)
            del full
    elif cfg["engine"] == "ddp" and dist.world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[dist.local_rank] if dist.cuda else None)
    if args.compile:
        model = torch.compile(model)
    optimizer = make_optimizer(model, cfg)
    return model, optimizer, make_scheduler(optimizer, cfg, steps), None


def fsdp_settings(cfg: dict, args: argparse.Namespace) -> dict:
    """The `fsdp_config` section of the Accelerate-format YAML that `trainfit generate` wrote."""
    import yaml

    path = cfg.get("fsdp_config", "accelerate_config.yaml")
    path = path if os.path.isabs(path) else os.path.join(os.path.dirname(os.path.abspath(args.config)), path)
    if not os.path.isfile(path):
        raise SetupError(f"FSDP config not found: {path}")
    class _NoAliases(yaml.SafeLoader):  # a 300-byte "billion laughs" file would take gigabytes
        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise SetupError(f"{path}: YAML anchors and aliases are not accepted "
                                 f"(line {event.start_mark.line + 1})")
            return super().compose_node(parent, index)

    text = _small_text(path, "FSDP config")
    try:
        doc = yaml.load(text, Loader=_NoAliases) or {}  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise SetupError(f"{path}: not valid YAML ({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(doc, dict):
        doc = {}
    if doc.get("distributed_type") != "FSDP" or not isinstance(doc.get("fsdp_config"), dict):
        raise SetupError(f"{path}: not an FSDP config (distributed_type: FSDP with an fsdp_config section)")
    return doc["fsdp_config"]


def shard_fsdp(model, cfg: dict, args: argparse.Namespace, dist: Dist):
    """FSDP2 (fully_shard): each decoder layer is a unit, then the root; on GPUs the compute dtype gathers
    parameters and gradients are reduced in fp32 (MixedPrecisionPolicy)."""
    import torch
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    fsdp = fsdp_settings(cfg, args)
    kwargs = {}
    if dist.cuda and cfg["precision"] != "fp32":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=compute_dtype(cfg, dist), reduce_dtype=torch.float32)
    if fsdp.get("fsdp_offload_params"):
        kwargs["offload_policy"] = CPUOffloadPolicy()
    reshard = bool(fsdp.get("fsdp_reshard_after_forward", True))
    for layer in decoder_layers(model):
        fully_shard(layer, reshard_after_forward=reshard, **kwargs)
    fully_shard(model, reshard_after_forward=reshard, **kwargs)
    return model


def load_from_rank0(model, full: dict | None, dist: Dist) -> None:
    """Fill the sharded model from rank 0's full state dict: each rank receives only its shards
    (torch.distributed.checkpoint's set_model_state_dict, broadcast_from_rank0); buffers, which FSDP does not shard
    and which may not be in the state dict (RoPE's inv_freq), are broadcast whole."""
    import torch
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    if not dist.main:
        model.to_empty(device=dist.device)
    set_model_state_dict(model, full if dist.main else {},
                         options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))
    for buf in model.buffers():
        torch.distributed.broadcast(buf, src=0)


class InBackward:
    """Optimizer in backward (torchtune's optimizer_in_bwd): one optimizer per parameter, stepped by a hook as soon
    as that parameter's gradient is accumulated, which then frees the gradient; no full set of gradients ever
    exists. step() and zero_grad() are no-ops for the loop; there is no global gradient clipping."""

    def __init__(self, params: list, make):
        self.optimizers = [make([p]) for p in params]
        self._by_param = {p: o for p, o in zip(params, self.optimizers)}
        for p in params:
            p.register_post_accumulate_grad_hook(self._step)

    def _step(self, param) -> None:
        opt = self._by_param[param]
        opt.step()
        opt.zero_grad(set_to_none=True)

    def step(self) -> None:
        pass

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass

    def state_dict(self) -> dict:
        return {str(i): o.state_dict() for i, o in enumerate(self.optimizers)}

    def load_state_dict(self, state: dict) -> None:
        for i, o in enumerate(self.optimizers):
            o.load_state_dict(state[str(i)])


class InBackwardScheduler:
    """The learning-rate schedule of every per-parameter optimizer, stepped together."""

    def __init__(self, optimizer: InBackward, make):
        self.schedulers = [make(o) for o in optimizer.optimizers]

    def step(self) -> None:
        for s in self.schedulers:
            s.step()

    def state_dict(self) -> dict:
        return {str(i): s.state_dict() for i, s in enumerate(self.schedulers)}

    def load_state_dict(self, state: dict) -> None:
        for i, s in enumerate(self.schedulers):
            s.load_state_dict(state[str(i)])


def make_optimizer(model, cfg: dict):
    params = [p for p in model.parameters() if p.requires_grad]
    if cfg["optimizer"].get("in_backward"):
        return InBackward(params, lambda group: _optimizer_for(group, cfg))
    return _optimizer_for(params, cfg)


def _optimizer_for(params: list, cfg: dict):
    import torch

    opt = cfg["optimizer"]
    name, lr, wd = opt["name"], opt["lr"], opt.get("weight_decay", 0.0)
    if opt.get("paged"):
        if not any(p.is_cuda for p in params):
            raise SetupError("paged optimizers (bitsandbytes) need a CUDA GPU")
        import bitsandbytes as bnb

        if name == "adamw":
            return bnb.optim.PagedAdamW(params, lr=lr, betas=tuple(opt.get("betas", (0.9, 0.95))), weight_decay=wd)
        if name == "adamw-8bit":
            return bnb.optim.PagedAdamW8bit(params, lr=lr, weight_decay=wd)
        raise SetupError(f"no paged version of optimizer {name!r}")
    # torch's AdamW / SGD in the implementation the estimate assumed (optimizer_impl; fused only on CUDA)
    impl = opt.get("impl", "fused")
    kernel = ({"fused": True} if any(p.is_cuda for p in params) else {}) if impl == "fused" else \
        {"foreach": impl == "foreach"}
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=tuple(opt.get("betas", (0.9, 0.95))), weight_decay=wd,
                                 **kernel)
    if name == "adamw-8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=lr, weight_decay=wd)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=lr, relative_step=False, scale_parameter=False, weight_decay=wd)
    if name in ("sgd", "sgd-nomomentum"):
        return torch.optim.SGD(params, lr=lr, momentum=0.9 if name == "sgd" else 0.0, weight_decay=wd, **kernel)
    raise SetupError(f"optimizer {name!r} is not supported by this script")


def make_scheduler(optimizer, cfg: dict, steps: int):
    import torch

    if isinstance(optimizer, InBackward):
        return InBackwardScheduler(optimizer, lambda o: make_scheduler(o, cfg, steps))
    warm = max(1, int(cfg["optimizer"].get("warmup_ratio", 0.03) * steps))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warm) / max(1, steps - warm))))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


# ---- training -------------------------------------------------------------------------------------------------

def token_logps(logits, input_ids, loss_mask):
    """Sum of log-probabilities of the masked (answer) tokens, per sequence."""
    import torch

    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    picked = logp.gather(-1, input_ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (picked * loss_mask[:, 1:]).sum(-1)


def dpo_loss(model, batch: dict, cfg: dict, reference):
    """Direct Preference Optimization (Rafailov et al. 2023, eq. 7): -log σ(β[(π_c - π_r) - (ref_c - ref_r)])."""
    import torch

    beta = cfg.get("dpo_beta", 0.1)
    ids, mask, loss_mask = batch["input_ids"], batch["attention_mask"], batch["loss_mask"]
    n = ids.shape[0] // 2
    with torch.no_grad():
        if reference is None:  # LoRA: the base model with adapters switched off is the reference
            inner = model.module if hasattr(model, "module") else model
            with inner.disable_adapter():
                ref = token_logps(model(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
        else:
            ref = token_logps(reference(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
    pol = token_logps(model(input_ids=ids, attention_mask=mask).logits, ids, loss_mask)
    margin = (pol[:n] - pol[n:]) - (ref[:n] - ref[n:])
    return -torch.nn.functional.logsigmoid(beta * margin).mean()


def micro_step_loss(model, batch: dict, cfg: dict, reference):
    if cfg["task"] == "dpo":
        return dpo_loss(model, batch, cfg, reference)
    return model(**batch).loss


def autocast(cfg: dict, dist: Dist):
    """torch.autocast for mixed precision where the engine does not handle it (DeepSpeed and FSDP do)."""
    import torch

    if cfg["precision"] == "fp32" or cfg["engine"] in ("deepspeed", "fsdp"):
        return nullcontext()
    return torch.autocast(dist.device.type, dtype=compute_dtype(cfg, dist))


def grad_scaler(cfg: dict, dist: Dist):
    """fp16 needs loss scaling (DeepSpeed does its own); bf16 and fp32 get a disabled scaler."""
    import torch

    enabled = cfg["precision"] == "fp16" and cfg["engine"] in ("single", "ddp")
    return torch.amp.GradScaler(dist.device.type, enabled=enabled)


def no_sync(model, cfg: dict, last: bool):
    """Skip gradient synchronisation on all but the last micro-batch of a step."""
    if last:
        return nullcontext()
    if cfg["engine"] == "ddp" and hasattr(model, "no_sync"):
        return model.no_sync()
    if cfg["engine"] == "fsdp" and hasattr(model, "set_requires_gradient_sync"):
        model.set_requires_gradient_sync(False)
    return nullcontext()


def memory_gib(dist: Dist) -> dict:
    import torch

    if dist.cuda:
        return {"peak_memory_gib": torch.cuda.max_memory_allocated(dist.device) / 2**30,
                "peak_reserved_gib": torch.cuda.max_memory_reserved(dist.device) / 2**30, "memory_kind": "allocated"}
    import resource

    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return {"peak_memory_gib": rss_kib / 2**20, "memory_kind": "cpu-rss"}


def log(dist: Dist, record: dict, path: str | None = None) -> None:
    if not dist.main:
        return
    line = json.dumps(record, sort_keys=True)
    print(line, flush=True)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def total_steps(cfg: dict, args: argparse.Namespace) -> int:
    if args.max_steps:
        return args.max_steps
    if cfg.get("max_steps"):
        return int(cfg["max_steps"])
    return max(1, math.ceil(cfg["processed_tokens"] / tokens_per_step(cfg)))


def tokens_per_step(cfg: dict) -> int:
    """The samples' tokens an optimizer step trains on (processed_tokens count these): padded layouts take the mean
    sample per sequence (avg_len), packed sequences are full."""
    per_sequence = cfg["seq_len"] if data_layout(cfg) == PACKED else cfg.get("avg_len") or cfg["seq_len"]
    return int(cfg["global_batch"]) * int(per_sequence) * (2 if cfg["task"] == "dpo" else 1)


def train(cfg: dict, args: argparse.Namespace, watchdog: Watchdog | None = None) -> dict:
    """Run training; returns the summary (also logged as the last JSON line)."""
    phase = watchdog.enter if watchdog else (lambda name: None)
    phase("import")
    try:
        import torch
        import transformers  # noqa: F401  (imported here so that a slow or broken import is named as such)
    except ImportError as exc:
        raise SetupError(f"{exc.name or exc} is not installed: pip install -r requirements.txt (torch, transformers, "
                         f"peft{', deepspeed' if cfg['engine'] == 'deepspeed' else ''})") from None

    phase("rendezvous")
    dist = Dist(cfg, args)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    out_dir = args.output_dir or cfg.get("output_dir") or DEFAULT_OUTPUT_DIR
    os.makedirs(out_dir, exist_ok=True)
    metrics_path = os.path.join(out_dir, "metrics.jsonl")
    steps = total_steps(cfg, args)
    mb, ga = cfg["micro_batch"], cfg["grad_accum"]
    phase("data")
    tok = None if args.synthetic else load_tokenizer(cfg, args, dist)  # also saved beside the final model
    examples = build_examples(cfg, args, needed=max(2 * mb * dist.world, 8), dist=dist, tok=tok)
    phase("model build")
    activate_zero3(cfg, args, dist)
    model = build_model(cfg, args, dist)
    loaded = local_parameters(model)
    reference = reference_model(model, cfg, dist)
    # grad_ckpt selective: the attention core checkpointed (entered around the loop; apply_method did the rest)
    selective = selective_attention(model, cfg.get("grad_ckpt") == "selective")
    phase("engine init")
    model, optimizer, scheduler, engine = wrap_engine(model, cfg, args, dist, steps)
    start = load_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist) if args.resume else 0
    phase("first step")
    feed = batches(examples, dist, mb, args.seed + start, tok.pad_token_id if tok is not None else 0)
    warmup = args.warmup_steps if args.warmup_steps is not None else min(2, max(0, steps - start - 1))
    scaler = grad_scaler(cfg, dist)
    history = []
    save_every = args.save_steps if args.save_steps is not None else cfg.get("save_steps", 0)
    with selective:
        for step in range(start, steps):
            t0 = _sync_time(dist)
            loss_sum, seen = 0.0, 0
            for micro in range(ga):
                batch, epoch = next(feed)
                seen += batch.pop("tokens")
                batch = {k: v.to(dist.device) for k, v in batch.items()}
                with no_sync(model, cfg, micro == ga - 1), autocast(cfg, dist):
                    loss = micro_step_loss(model, batch, cfg, reference)
                if engine is not None:
                    engine.backward(loss)
                    engine.step()
                else:
                    if cfg["engine"] == "fsdp" and micro == ga - 1 and hasattr(model, "set_requires_gradient_sync"):
                        model.set_requires_gradient_sync(True)
                    scaler.scale(loss / ga).backward()
                loss_sum += float(loss.detach())
                if selective.enabled and selective.calls == 0:
                    raise SetupError("grad_ckpt selective: this model's attention does not go through transformers' "
                                     "attention functions, so nothing was checkpointed; use grad_ckpt full or none")
            if isinstance(optimizer, InBackward):  # stepped inside backward; nothing to clip or step here
                scheduler.step()
            elif engine is None:
                scaler.unscale_(optimizer)
                torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad],
                                               cfg["optimizer"].get("max_grad_norm", 1.0))
                scaler.step(optimizer)
                scaler.update()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
            seconds = _sync_time(dist) - t0
            tokens = seen * dist.world  # this rank's samples' tokens (padding not counted) x the ranks
            record = {"step": step + 1, "loss": loss_sum / ga, "step_time_s": seconds, "tokens_per_s": tokens / seconds,
                      "tokens_per_s_per_gpu": tokens / seconds / dist.world, "epoch": epoch, **memory_gib(dist)}
            if not math.isfinite(record["loss"]):
                raise SetupError(f"loss is {record['loss']} at step {step + 1}")
            history.append(record)
            log(dist, record, metrics_path)
            if watchdog and len(history) == 1:
                watchdog.started()
            if save_every and (step + 1) % save_every == 0 and step + 1 < steps:
                save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, step + 1)
    save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, steps)
    summary = summarize(history, warmup, dist, cfg)
    summary["parameters"] = sharding_of(model)
    summary.update(loaded)
    summary["trainable_params"] = sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
    if final_model_wanted(cfg, args):
        phase("final model")
        summary["final_model"] = save_final_model(cfg, args, out_dir, model, engine, tok, dist, steps)
    log(dist, summary, metrics_path)
    if watchdog:
        watchdog.tearing_down()
    if dist.world > 1 and torch.distributed.is_initialized():
        torch.distributed.barrier()  # every rank done with its checkpoint and log before the group goes away
        torch.distributed.destroy_process_group()
    return summary


def reference_model(model, cfg: dict, dist: Dist):
    """DPO with full or freeze training keeps a frozen copy as the reference; LoRA reuses the base."""
    if cfg["task"] != "dpo" or cfg["method"] in ("lora", "qlora"):
        return None
    import copy

    ref = copy.deepcopy(model).to(dist.device)
    ref.requires_grad_(False)
    return ref.eval()


def _sync_time(dist: Dist) -> float:
    import torch

    if dist.cuda:
        torch.cuda.synchronize(dist.device)
    return time.perf_counter()


def summarize(history: list[dict], warmup: int, dist: Dist, cfg: dict) -> dict:
    timed = history[warmup:] or history
    seconds = sum(r["step_time_s"] for r in timed)
    tokens = sum(r["tokens_per_s"] * r["step_time_s"] for r in timed)
    return {"summary": True, "steps": len(history), "timed_steps": len(timed), "warmup_steps": len(history) - len(timed),
            "final_loss": history[-1]["loss"] if history else None, "step_time_s": seconds / max(1, len(timed)),
            "tokens_per_s": tokens / seconds if seconds else None,
            "tokens_per_s_per_gpu": tokens / seconds / dist.world if seconds else None,
            "world_size": dist.world, "device": "cuda" if dist.cuda else "cpu", "engine": cfg["engine"],
            **memory_gib(dist)}


def sharding_of(model) -> str:
    """What wraps the parameters: 'dtensor' under FSDP2, 'plain' otherwise (recorded for checks)."""
    first = next(iter(model.parameters()), None)
    return "dtensor" if type(first).__name__ == "DTensor" or type(getattr(first, "data", None)).__name__ == "DTensor" \
        else "plain"


# ---- checkpoints ----------------------------------------------------------------------------------------------

def _ckpt_dir(out_dir: str) -> str:
    return os.path.join(out_dir, "checkpoint")


def save_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist, step: int) -> None:
    import torch

    path = _ckpt_dir(out_dir)
    if engine is not None:
        engine.save_checkpoint(path, tag=f"step{step}", client_state={"step": step})
        return
    if cfg["engine"] == "fsdp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=os.path.join(path, f"step{step}"))
        if dist.main:
            _write_latest(path, step)
        return
    if not dist.main:
        return
    inner = model.module if hasattr(model, "module") else model
    os.makedirs(path, exist_ok=True)
    trainable = {k: v for k, v in inner.state_dict().items()} if cfg["method"] == "full" else \
        {n: p.detach() for n, p in inner.named_parameters() if p.requires_grad}
    torch.save({"model": trainable, "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "step": step}, os.path.join(path, f"step{step}.pt"))
    _write_latest(path, step)


def _write_latest(path: str, step: int) -> None:
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "latest_step"), "w", encoding="utf-8") as fh:
        fh.write(str(step))


def load_checkpoint(cfg, out_dir, model, optimizer, scheduler, engine, dist) -> int:
    import torch

    path = _ckpt_dir(out_dir)
    if engine is not None:
        _, client = engine.load_checkpoint(path)
        return int((client or {}).get("step", 0))
    marker = os.path.join(path, "latest_step")
    if not os.path.isfile(marker):
        raise SetupError(f"--resume: no checkpoint in {path}")
    with open(marker, encoding="utf-8") as fh:
        step = int(fh.read().strip())
    if cfg["engine"] == "fsdp":
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=os.path.join(path, f"step{step}"))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        for _ in range(step):
            scheduler.step()
        return step
    state = torch.load(os.path.join(path, f"step{step}.pt"), map_location=dist.device, weights_only=False)
    inner = model.module if hasattr(model, "module") else model
    inner.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


# ---- the final model: Hugging Face format, what serving reads ------------------------------------------------------

def final_model_wanted(cfg: dict, args: argparse.Namespace) -> bool:
    """A run writes its final model unless told not to; a --synthetic run (benchmarks: random tokens) never does."""
    return not (getattr(args, "no_final_model", False) or args.synthetic or cfg.get("final_model") is False)


def final_dtype(cfg: dict, dist: Dist):
    """The merged weights' dtype: the training compute dtype (bf16 / fp16); fp32 only for an fp32 run."""
    import torch

    return torch.float32 if cfg["precision"] == "fp32" else compute_dtype(cfg, dist)


def _unwrapped(model):
    """The model inside DDP, a DeepSpeed engine and torch.compile (a PeftModel for LoRA, else the HF model)."""
    import torch

    while True:
        if hasattr(model, "_orig_mod"):
            model = model._orig_mod
        elif isinstance(model, torch.nn.parallel.DistributedDataParallel) or type(model).__name__ == "DeepSpeedEngine":
            model = model.module
        else:
            return model


def _sharded(cfg: dict, engine) -> bool:
    """Whether no rank holds the whole model: FSDP, or DeepSpeed ZeRO-3 (partitioned parameters)."""
    if cfg["engine"] == "fsdp":
        return True
    return engine is not None and bool(engine.zero_optimization_partition_weights())


def _gathered_state(cfg: dict, model, engine, trainable_only: bool) -> dict | None:
    """The full state dict of a sharded model, on rank 0's CPU (None on the other ranks); every rank calls this.
    FSDP: torch.distributed.checkpoint's get_model_state_dict with full_state_dict + cpu_offload (only rank 0
    receives it); ZeRO-3: the engine's layer-by-layer 16-bit consolidation (what save_16bit_model writes).
    `trainable_only`: the trained parameters alone (a QLoRA adapter)."""
    if cfg["engine"] == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(_unwrapped(model), options=StateDictOptions(
            full_state_dict=True, cpu_offload=True, ignore_frozen_params=trainable_only))
    return engine._zero3_consolidated_16bit_state_dict(exclude_frozen_parameters=trainable_only)


def _model_class(cfg: dict):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    return AutoModelForSequenceClassification if cfg["task"] == "classification" else AutoModelForCausalLM


def _zero3_off() -> None:
    """Rank 0 builds plain CPU models after training: transformers must no longer build them inside zero.Init."""
    _ZERO3_CONFIG.clear()
    try:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()
    except ImportError:
        pass


def _cpu_copy(cfg: dict, live, state: dict):
    """Rank 0: a plain CPU model built like the trained one (PEFT-wrapped for LoRA) holding the gathered weights
    (`state`); the buffers no state dict carries (RoPE's inv_freq) are taken from the live model, which FSDP and
    ZeRO-3 do not shard."""
    import torch

    _zero3_off()
    peft = hasattr(live, "peft_config")
    base = live.get_base_model() if peft else live
    with torch.device("meta"):
        model = _model_class(cfg).from_config(copy.deepcopy(base.config))
        if peft:
            from peft import get_peft_model

            model = get_peft_model(model, copy.deepcopy(live.peft_config["default"]))
    model.load_state_dict(state, strict=False, assign=True)
    live_buffers = dict(live.named_buffers())
    for name, buf in list(model.named_buffers()):
        if buf.is_meta and name in live_buffers:
            owner, _, attr = name.rpartition(".")
            model.get_submodule(owner)._buffers[attr] = live_buffers[name].detach().to("cpu", copy=True)
    missing = [n for n, p in [*model.named_parameters(), *model.named_buffers()] if p.is_meta]
    if missing:
        raise SetupError(f"final model: {missing[0]} is not in the gathered weights")
    if getattr(base.config, "tie_word_embeddings", False):
        (model.get_base_model() if peft else model).tie_weights()
    return model


def _available_ram() -> int | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _elements(p) -> int:
    """A parameter's element count: the unpacked shape of a bitsandbytes 4-bit weight, ZeRO-3's full size."""
    state = getattr(p, "quant_state", None)
    if state is not None and getattr(state, "shape", None) is not None:
        return int(math.prod(state.shape))
    return int(getattr(p, "ds_numel", p.numel()))


def _publish(path: str, write) -> None:
    """Write a directory under a temporary name, then put it in place: `trainfit generate --serving --from` never
    finds a half-written model, and an earlier run's (before --resume) is replaced whole."""
    import shutil

    tmp = f"{path}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.replace(tmp, path)


def _long_wait_group(dist: Dist):
    """A gloo group with a long timeout for the other ranks to wait in while rank 0 writes the model (a large one
    takes longer than the default group's timeout, NCCL's 10 minutes); None for a single process."""
    import datetime

    import torch

    if dist.world == 1 or not torch.distributed.is_initialized():
        return None
    return torch.distributed.new_group(backend="gloo", timeout=datetime.timedelta(hours=6))


def save_final_model(cfg: dict, args: argparse.Namespace, out_dir: str, model, engine, tok, dist: Dist,
                     step: int) -> dict:
    """After the last checkpoint: the run's model in Hugging Face format under `out_dir`, which serving reads.
    LoRA / QLoRA: the PEFT adapter (save_pretrained: adapter_config.json + adapter_model.safetensors) in
    ADAPTER_DIR, and the model with the adapter merged in (merge_and_unload) in MERGED_DIR; full / freeze: the model
    in MERGED_DIR. Merged weights are safetensors in the training dtype (final_dtype); the tokenizer, when the run
    loaded one, is saved beside both; MERGED_DIR/ARTIFACT_FILE says what it is. Under FSDP and ZeRO-3 the full
    weights are gathered to rank 0 first (every rank takes part), only rank 0 writes, and the others wait.
    QLoRA: merging into the 4-bit base would give a 4-bit model, so rank 0 reloads the base in 16-bit on the CPU
    and applies the saved adapter; when the host has too little free memory for that, or the base was random
    (--random-init), only the adapter is written and the artefact file (in ADAPTER_DIR) says why.
    Returns {"adapter": path or None, "merged": path or None} (the same on every rank)."""
    import torch

    lora = cfg["method"] in ("lora", "qlora")
    qlora = cfg["method"] == "qlora"
    live = _unwrapped(engine if engine is not None else model)
    sharded = _sharded(cfg, engine)
    random_init = bool(args.random_init or cfg["model"].get("random_init"))
    # where the base weights came from (every rank: a ModelScope download synchronises the ranks)
    base_location = None if random_init else model_location(cfg, args, dist)
    group = _long_wait_group(dist)
    state = _gathered_state(cfg, model, engine, trainable_only=qlora) if sharded else None
    adapter_dir, merged_dir = os.path.join(out_dir, ADAPTER_DIR), os.path.join(out_dir, MERGED_DIR)
    dtype = final_dtype(cfg, dist)
    result = {"adapter": adapter_dir if lora else None, "merged": merged_dir}
    note = None
    if qlora:
        need = sum(_elements(p) for p in live.parameters()) * torch.tensor([], dtype=dtype).element_size()
        free = _available_ram()
        if random_init:
            note = "the base model was random (--random-init): nothing to merge the adapter into"
        elif free is not None and need * 1.2 > free:
            note = (f"merging needs the base model in {str(dtype).split('.')[-1]} on the CPU ({need / 2**30:.1f} GiB) "
                    f"and this host has {free / 2**30:.1f} GiB free: merge the adapter on a machine with more memory "
                    f"(PeftModel.from_pretrained(base, adapter).merge_and_unload())")
        if note:
            result["merged"] = None
    if dist.main:
        def describe(merged: bool) -> dict:
            return {"trainfit_artifact": ARTIFACT_VERSION, "method": cfg["method"], "task": cfg["task"],
                    "base_model": {"name": cfg["model"].get("name"), "hf_id": cfg["model"].get("hf_id"),
                                   "location": base_location, "random_init": random_init},
                    "dtype": str(dtype).split(".")[-1], "step": step, "engine": cfg["engine"],
                    "adapter": ADAPTER_DIR if lora else None, "merged": MERGED_DIR if merged else None,
                    "note": note, "serve": "trainfit generate --serving --from OUTPUT_DIR (this run's --output-dir) "
                                           "reads the merged model here"}

        def write_tokenizer(path: str) -> None:
            if tok is not None:
                tok.save_pretrained(path)

        if state is not None and not qlora:
            live = _cpu_copy(cfg, live, state)
            state = None
        if lora:
            def write_adapter(path: str) -> None:
                live.save_pretrained(path, **({"state_dict": state} if state is not None else {}))
                write_tokenizer(path)
                if result["merged"] is None:
                    _write_artifact(path, describe(False))

            _publish(adapter_dir, write_adapter)
        if result["merged"] is not None:
            if qlora:  # the base again in 16-bit, on the CPU, with the saved adapter
                from peft import PeftModel

                _zero3_off()
                base = _model_class(cfg).from_pretrained(base_location, dtype=dtype, **(
                    {"num_labels": cfg["num_labels"]} if cfg["task"] == "classification" else {}))
                merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload(safe_merge=True)
            elif lora:
                merged = live.merge_and_unload(safe_merge=True)
            else:
                merged = live
            merged.to(dtype)
            merged.config.use_cache = True  # training switched it off for gradient checkpointing

            def write_merged(path: str) -> None:
                merged.save_pretrained(path)
                write_tokenizer(path)
                _write_artifact(path, describe(True))

            _publish(merged_dir, write_merged)
        elif os.path.isdir(merged_dir):  # an earlier run's merged model is not this run's: serving must not find it
            import shutil

            shutil.rmtree(merged_dir)
        where = result["merged"] or result["adapter"]
        print(f"train.py: wrote the final model to {where}" + (f" (adapter: {adapter_dir})" if lora else "")
              + (f"; not merged: {note}" if note else f"; serve it: trainfit generate --serving --from {out_dir}"),
              file=sys.stderr, flush=True)
    if group is not None:
        torch.distributed.barrier(group=group)  # the others wait (long timeout) while rank 0 writes
    return result


def _write_artifact(path: str, doc: dict) -> None:
    with open(os.path.join(path, ARTIFACT_FILE), "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2, sort_keys=True)
        fh.write("\n")


def _is_oom(exc: BaseException) -> bool:
    return type(exc).__name__ in ("OutOfMemoryError", "OutOfMemoryError_") or "out of memory" in str(exc).lower()


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        watchdog = Watchdog(startup_timeout(args))
        cfg = load_config(args.config)
        validate_inputs(cfg, args)
        train(cfg, args, watchdog)
        watchdog.stop()
    except SetupError as exc:
        print(f"train.py: error: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, MemoryError) as exc:
        if not _is_oom(exc):
            raise
        # an out-of-memory is a result (benchmarks search for the largest micro-batch that fits)
        print(json.dumps({"summary": True, "oom": True, "error": str(exc).splitlines()[0][:300]}), flush=True)
        print(f"train.py: error: out of memory: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    code = main()
    # Everything this run writes (checkpoint, metrics, summary) is closed by now. Interpreter teardown is skipped:
    # two-process gloo runs on the CPU have died there with "terminate called without an active exception" (a
    # C++ thread destroyed at exit) after finishing, which torchrun reports as a failed job.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
