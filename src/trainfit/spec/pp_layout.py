"""Megatron-Core's custom pipeline layout (`--pipeline-model-parallel-layout`, job field pp_layout): which layers each
virtual pipeline stage holds, read as Megatron-Core reads it, and what each pipeline rank then carries.

The notation (megatron/core/transformer/pipeline_parallel_layer_layout.py, core_v0.16.1,
PipelineParallelLayerLayout.parse_str_to_list): stages are separated by "|"; E is the embedding, L the loss (the
output layer and its loss), t a decoder layer, m a multi-token-prediction (MTP) layer; "(...)*n" and "x*n" repeat;
commas are cosmetic. NVIDIA's DeepSeek-V3 recipe on H100 writes "Et|(tt|)*30mL" (Megatron-Bridge v0.1.0rc3
scripts/performance/run_script.py L72): 32 stages for pp 8 x vpp 4. Stage k belongs to pipeline rank k mod pp, as
its (k div pp)-th model chunk (the constructor's 1D-to-2D conversion), so the number of stages divided by pp is the
virtual pipeline size (arguments.py sets it so). The rules are validate_layer_layout's: E first and once, L last
and once, as many t as the model has decoder layers, MTP layers after every decoder layer, in the last chunk of
their rank, all in one chunk, never in a chunk of the first rank but its last.

Pure: no torch, no other trainfit module (the spec checks a layout's form, estimate/ what it holds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

LAYER_CHARS = "ELtm"
MAX_TEXT = 2000  # characters of a layout as given
MAX_LAYERS = 100_000  # layers of a layout once its repetitions are written out (a hostile "(t)*999999999" stops here)


class LayoutSyntaxError(ValueError):
    """A layout string that cannot be read; `key` names the sentence of the message table (i18n), `values` fill it."""

    def __init__(self, key: str, **values):
        super().__init__(key)
        self.key, self.values = key, values


@lru_cache(maxsize=256)
def parse(text: str) -> tuple[str, ...]:
    """The virtual stages of a layout string, each the characters of its layers in order: Megatron-Core's
    parse_str_to_list (commas dropped, "(...)*n" then "x*n" written out), bounded in size."""
    if not isinstance(text, str) or not text.strip():
        raise LayoutSyntaxError("ec_pp_layout_empty")
    if len(text) > MAX_TEXT:
        raise LayoutSyntaxError("ec_pp_layout_long", n=len(text), limit=MAX_TEXT)
    s = text.strip().replace(",", "")

    def unroll(match: re.Match) -> str:
        body, times = match.group(1), int(match.group(2))
        if len(body) * times > MAX_LAYERS:
            raise LayoutSyntaxError("ec_pp_layout_long", n=len(body) * times, limit=MAX_LAYERS)
        return body * times

    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        s = re.sub(pattern, unroll, s)
        if len(s) > MAX_LAYERS:
            raise LayoutSyntaxError("ec_pp_layout_long", n=len(s), limit=MAX_LAYERS)
    bad = sorted({c for c in s if c not in LAYER_CHARS + "|"})
    if bad:
        raise LayoutSyntaxError("ec_pp_layout_chars", chars=" ".join(bad))
    return tuple(s.split("|"))


@dataclass(frozen=True)
class Rank:
    """What one pipeline rank holds: its decoder and MTP layers, whether it holds the embedding and the loss, and
    the layers (decoder and MTP) of each of its model chunks in order."""

    decoders: int
    mtp: int
    embedding: bool
    loss: bool
    chunks: tuple[int, ...]

    @property
    def blocks(self) -> int:
        return self.decoders + self.mtp

    @property
    def heads(self) -> int:
        """Output layers it runs: the loss's and one per MTP layer (each MTP layer computes its own logits)."""
        return int(self.loss) + self.mtp


@lru_cache(maxsize=1024)
def ranks(stages: tuple[str, ...], pp: int) -> tuple[Rank, ...]:
    """The ranks' loads (stage k on rank k mod pp; its chunks in stage order)."""
    v = max(1, len(stages) // pp)
    out = []
    for r in range(pp):
        own = [stages[k * pp + r] for k in range(v) if k * pp + r < len(stages)]
        text = "".join(own)
        out.append(Rank(decoders=text.count("t"), mtp=text.count("m"), embedding="E" in text, loss="L" in text,
                        chunks=tuple(c.count("t") + c.count("m") for c in own)))
    return tuple(out)


def problem(stages: tuple[str, ...], pp: int, layers: int) -> tuple[str, dict] | None:
    """The first rule of Megatron-Core's a layout breaks for a model of `layers` decoder layers on pp ranks, as (key
    of the message table, its values); None: it runs."""
    if len(stages) % pp:
        return "ec_pp_layout_stages", {"stages": len(stages), "pp": pp}
    flat = "".join(stages)  # layer-id order: the stages as written
    if not flat or flat[0] != "E" or flat.count("E") != 1:
        return "ec_pp_layout_embedding", {}
    if flat[-1] != "L" or flat.count("L") != 1:
        return "ec_pp_layout_loss", {}
    if flat.count("t") != layers:
        return "ec_pp_layout_layers", {"given": flat.count("t"), "layers": layers}
    if "m" in flat:
        v = len(stages) // pp
        if "t" in flat[flat.index("m"):]:
            return "ec_pp_layout_mtp", {}
        holding = [k for k, st in enumerate(stages) if "m" in st]
        if len(holding) != 1 or holding[0] // pp != v - 1:  # one chunk, the last of its rank (so never rank 0's
            return "ec_pp_layout_mtp", {}  # earlier chunks)
    return None


def mtp_layers(stages: tuple[str, ...]) -> int:
    return sum(st.count("m") for st in stages)


@lru_cache(maxsize=4096)
def first_rank_in_flight(stages: tuple[str, ...], pp: int, micro_batches: int) -> float:
    """Layers' worth of one micro-batch's activations pipeline rank 0 holds when its first backward starts. One
    chunk per rank (1F1B): min(pp, m) micro-batches of its layers. Interleaved: Megatron-Core's warm-up of
    2·(pp - 1) + (v - 1)·pp chunk forwards plus the one in flight (schedules.py get_pp_rank_microbatches, rank 0),
    no more than the step's m·v, chunk (k div pp) mod v taking forward k (get_model_chunk_id): with chunks of equal
    size and m·v at least that, Megatron's L·(1 + (p - 1)/(p·v))."""
    rank = ranks(stages, pp)[0]
    v, m = len(rank.chunks), max(1, micro_batches)
    if v == 1:
        return float(min(pp, m) * rank.chunks[0])
    forwards = min(2 * (pp - 1) + (v - 1) * pp + 1, m * v)
    return float(sum(rank.chunks[(k // pp) % v] for k in range(forwards)))
