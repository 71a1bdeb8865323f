"""Sample lengths of variable-length data: how long a padded micro-batch is, and lengths read from a data file.

A micro-batch of b samples is padded to its longest. With the lengths known (--data FILE) its expected length is
exact for b samples drawn at random with replacement: E[max] = sum_i l_(i) ((i/n)^b - ((i-1)/n)^b) over the sorted
lengths. With only the mean known (--avg-len), lengths are taken as exponentially distributed with that mean (the
right-skewed shape of instruction data) and cut at the longest (--max-len): the expected maximum of b such lengths
is mean x H_b (H_b = 1 + 1/2 + ... + 1/b), at most the longest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import SpecError
from ..i18n import say

# Without the model's tokenizer a sample's tokens are counted from its text: English-like words (split on
# whitespace) x 4/3 (a common rule of thumb: a token is about 3/4 of an English word, OpenAI's tokenizer guide), and
# each CJK character as one token (whitespace does not separate Chinese or Japanese words).
TOKENS_PER_WORD = 4 / 3
TOKENS_PER_CJK_CHAR = 1.0
# A chat sample ({"messages": [...]}) is trained on through the model's chat template, which adds tokens around each
# turn beyond its role name and text: 4 in the common templates (ChatML, Qwen's: <|im_start|> role "\n" ...
# <|im_end|> "\n"; Llama 3's: <|start_header_id|> role <|end_header_id|> "\n\n" ... <|eot_id|>; Gemma's:
# <start_of_turn> role "\n" ... <end_of_turn> "\n"), and 1 per sample (a begin-of-text token). A default system
# prompt that some templates add when a conversation has none (Qwen2.5's, Llama 3.1's date header: 20-30 tokens) is
# counted only with the model's own tokenizer at hand.
CHAT_TOKENS_PER_MESSAGE = 4
CHAT_TOKENS_PER_SAMPLE = 1
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def expected_padded_len(avg_len: int, max_len: int, sequences: int) -> int:
    """Expected length of a micro-batch of `sequences` samples padded to its longest, from the mean alone."""
    harmonic = sum(1.0 / k for k in range(1, sequences + 1))
    return max(avg_len, min(max_len, round(avg_len * harmonic)))


def expected_max(lengths: list[int], sequences: int) -> float:
    """E[max of `sequences` lengths drawn at random with replacement] over the observed lengths."""
    xs = sorted(lengths)
    n = len(xs)
    return sum(x * (((i + 1) / n) ** sequences - (i / n) ** sequences) for i, x in enumerate(xs))


@dataclass(frozen=True)
class Lengths:
    """Sample lengths read from a data file (each cut at the longest allowed)."""
    lengths: tuple[int, ...]
    counted_by: str  # "tokenizer <name>" or "whitespace"

    @property
    def avg(self) -> int:
        return max(1, round(sum(self.lengths) / len(self.lengths)))

    @property
    def longest(self) -> int:
        return max(self.lengths)

    def padded(self, sequences: int) -> int:
        return max(self.avg, round(expected_max(list(self.lengths), sequences)))


READ_BYTES = 256 * 1024 * 1024  # lengths are a sample of the data: at most this much of the file is read
LINE_BYTES = 8 * 1024 * 1024  # a longer line is not a training sample


def _texts(path: str):
    """Each sample as (its text, its chat messages or None): a JSON object per line (its string values joined,
    nested lists and objects included) or, for other files, each non-empty line. Read line by line and bounded
    (READ_BYTES, LINE_BYTES); text must be UTF-8 without NUL bytes."""
    if path.lower().endswith(".json"):
        whole = _whole_json(path)
        if whole is not None:
            yield from whole
            return
    n, offset = 0, 0
    json_file = path.lower().endswith((".json", ".jsonl"))
    with open(path, "rb") as fh:
        for n, raw in enumerate(iter(lambda: fh.readline(LINE_BYTES + 1), b""), 1):
            nul = raw.find(b"\x00")
            if nul >= 0:
                raise SpecError(say("ei_data_nul", path=path, offset=offset + nul, line=n))
            if len(raw) > LINE_BYTES:
                raise SpecError(say("ei_data_long_line", path=path, line=n, mb=LINE_BYTES >> 20))
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise SpecError(say("ei_data_not_utf8", path=path, line=n, offset=offset + exc.start)) from None
            offset += len(raw)
            if offset > READ_BYTES:
                return
            if not line:
                continue
            if line[0] in "{[" or json_file:  # in a .json/.jsonl file every line is JSON (`null`, `3` hold no text)
                try:
                    yield _sample(json.loads(line))
                    continue
                except (ValueError, RecursionError):
                    pass
            yield line, None


WHOLE_JSON_BYTES = 16 * 1024 * 1024  # a .json file up to this size is parsed whole (its objects: ~10x in memory)


def _whole_json(path: str) -> list[tuple[str, list | None]] | None:
    """The samples of a .json file that holds one JSON document (a list of records: each its text; an object: one
    sample), or None to read it line by line (too large, or not one document: JSON lines under a .json name)."""
    import os

    if os.path.getsize(path) > WHOLE_JSON_BYTES:
        return None
    with open(path, "rb") as fh:
        raw = fh.read()
    if b"\x00" in raw:
        return None  # the line reader names the NUL byte's place
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return [_sample(item) for item in doc] if isinstance(doc, list) else [_sample(doc)]


def _sample(record) -> tuple[str, list | None]:
    """A JSON record's text and, for a chat sample ({"messages": [{"role", "content"}, ...]}), its messages."""
    messages = record.get("messages") if isinstance(record, dict) else None
    chat = messages if isinstance(messages, list) and messages and all(isinstance(m, dict) for m in messages) else None
    return " ".join(_strings(record)), chat


def _strings(obj) -> list[str]:
    """The strings inside a JSON value, in order (walked without recursion: a line may nest ~1000 deep)."""
    out, stack = [], [obj]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, dict):
            stack.extend(reversed(list(node.values())))
        elif isinstance(node, list):
            stack.extend(reversed(node))
    return out


def count_tokens(text: str) -> int:
    cjk = len(_CJK.findall(text))
    words = len(_CJK.sub(" ", text).split())
    return max(1, round(words * TOKENS_PER_WORD + cjk * TOKENS_PER_CJK_CHAR))


def read_lengths(path: str, max_len: int, tokenizer=None, limit: int = 200_000) -> Lengths:
    """Lengths of the first `limit` samples of a data file, cut at max_len; `tokenizer`: a callable text -> token
    count (the model's tokenizer), else the whitespace count above."""
    import os

    if not os.path.isfile(path):
        raise SpecError(say("ei_data_no_file", path=path))
    count = tokenizer or count_tokens
    out, textless = [], 0
    for text, chat in _texts(path):
        if not text.strip():  # a JSON value without a string in it ({"a": 1}, [1, 2], null) is not a sample
            textless += 1
            continue
        out.append(min(max_len, max(1, int(_chat_count(tokenizer, chat) or count(text) + _template_tokens(chat)))))
        if len(out) >= limit:
            break
    if not out and textless:
        raise SpecError(say("ei_data_no_text", path=path, n=textless))
    if not out:
        raise SpecError(say("ei_data_no_samples", path=path))
    return Lengths(tuple(out), "tokenizer" if tokenizer else "whitespace")


def _template_tokens(chat: list | None) -> int:
    """Tokens a chat template adds to a sample's text (CHAT_TOKENS_PER_MESSAGE), 0 for plain text."""
    return 0 if chat is None else CHAT_TOKENS_PER_MESSAGE * len(chat) + CHAT_TOKENS_PER_SAMPLE


def _chat_count(tokenizer, chat: list | None) -> int | None:
    """A chat sample's tokens through the model's own chat template (the tokenizer's `chat` counter), else None."""
    counter = getattr(tokenizer, "chat", None)
    if chat is None or counter is None:
        return None
    try:
        return int(counter(chat))
    except Exception:  # noqa: BLE001 - a template that refuses these messages: the text count with the constants
        return None


def variable_lengths(seq_len: int, avg_len: int | None, data: str | None, sequences: int, model=None) -> dict:
    """TrainingSpec fields of variable-length data: {} for packed sequences (neither avg_len nor data); with --data
    also "longest" (the longest sample the data holds, where memory is taken)."""
    if avg_len is None and data is None:
        return {}
    if avg_len is not None and data is not None:
        raise SpecError(say("ei_avg_len_and_data"))
    if data is None:
        if isinstance(avg_len, bool) or not isinstance(avg_len, int) or not 1 <= avg_len <= seq_len:
            raise SpecError(say("ei_avg_len_range", seq_len=seq_len, value=avg_len))
        return {"variable_length": True, "avg_len": avg_len, "lengths_from": say("es_len_avg_exp")}
    tok = _local_tokenizer(model)
    lengths = read_lengths(data, seq_len, tok)
    how = say("es_tok_model") if tok else say("es_tok_whitespace", per_word=TOKENS_PER_WORD,
                                              per_cjk=TOKENS_PER_CJK_CHAR)
    return {"variable_length": True, "avg_len": lengths.avg, "padded_len": lengths.padded(sequences),
            "longest": lengths.longest,
            "lengths_from": say("es_len_data", path=data, n=len(lengths.lengths), longest=lengths.longest, how=how)}


def _local_tokenizer(model):
    """A token counter from the model's own tokenizer when its files are on this machine (a model directory),
    else None (no download)."""
    import os

    path = str(getattr(model, "source", "") or "") if model is not None else ""
    if os.path.isfile(path):
        path = os.path.dirname(path) or "."
    if not path or not any(os.path.isfile(os.path.join(path, f)) for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except Exception:  # noqa: BLE001 - no usable tokenizer: the whitespace count, said so
        return None
    return _TokenCounter(tok)


class _TokenCounter:
    """text -> tokens with the model's tokenizer; `chat` (messages -> tokens through its chat template) when it has
    one."""

    def __init__(self, tok):
        self.tok = tok
        if getattr(tok, "chat_template", None):
            self.chat = self._chat

    def __call__(self, text: str) -> int:
        return len(self.tok(text, add_special_tokens=True)["input_ids"])

    def _chat(self, messages: list) -> int:
        ids = self.tok.apply_chat_template(messages, tokenize=True)
        return len(ids["input_ids"] if hasattr(ids, "keys") else ids)

