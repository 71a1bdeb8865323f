"""train.py's data: the data files read (JSON lines, a JSON array or Parquet; strict UTF-8, bounded nesting, a
bounded head for the checks before training), tokenised per task (text, chat messages with the loss on the
assistant turns, DPO pairs, classification), laid out as train_config.json's data_layout says (packed, padded-batch,
padded-max), and fed as shuffled micro-batches of this rank's share."""

from __future__ import annotations

import argparse
import glob
import json
import os
import random

if __package__:  # trainfit.train.train_data
    from .train_common import SetupError
    from .train_launch import Dist
    from .train_model import model_location
else:  # the generated job folder: train.py's modules side by side
    from train_common import SetupError
    from train_launch import Dist
    from train_model import model_location

__all__ = ["REQUIRED_COLUMNS", "_small_text", "data_files", "CHECK_BYTES", "CHECK_LINES", "MAX_DEPTH", "_row_error",
           "_record", "_decode", "_json", "_json_array_rows", "_json_lines_rows", "read_rows", "check_columns",
           "load_tokenizer", "_assistant_tokens", "PACKED", "PADDED_BATCH", "PADDED_MAX", "data_layout", "pack",
           "causal_examples", "_pad", "dpo_examples", "classification_examples", "synthetic_examples",
           "build_examples", "batches", "collate", "tokens_per_step"]

REQUIRED_COLUMNS = {"sft": ({"text"}, {"messages"}), "pretrain": ({"text"},), "dpo": ({"prompt", "chosen", "rejected"},),
                    "classification": ({"text", "label"},)}


# ---- reading the data files ----------------------------------------------------------------------------------

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


# ---- tokenisation, layout, micro-batches ----------------------------------------------------------------------

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


def tokens_per_step(cfg: dict) -> int:
    """The samples' tokens an optimizer step trains on (processed_tokens count these): padded layouts take the mean
    sample per sequence (avg_len), packed sequences are full."""
    per_sequence = cfg["seq_len"] if data_layout(cfg) == PACKED else cfg.get("avg_len") or cfg["seq_len"]
    return int(cfg["global_batch"]) * int(per_sequence) * (2 if cfg["task"] == "dpo" else 1)
