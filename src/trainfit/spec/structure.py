"""The module structure of a model read from the real Hugging Face code (built on the meta device).

Torch-free records: `catalog/generic.py` fills them from a model built with transformers; `estimate/params.py`
serves them as the same inventory types (Tensor, Linear) the hand-written families produce. Blocks that differ
(dense-first MoE layers, sliding-window vs full attention, linear-attention layers of a hybrid) are kept as groups
of identical blocks.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor (or `count` identical ones, e.g. MoE experts).

    `share` is the fraction of the blocks that hold it (1 for a uniform stack): per-block sums then give the mean
    block, and `layers` times that mean is exact.
    """

    name: str  # e.g. "layers.self_attn.q_proj.weight"
    rows: int  # out features (or numel for 1-D)
    cols: int  # in features (1 for 1-D tensors)
    role: str  # embedding | position | norm | bias | linear | expert | router | head | other
    module: str = ""  # the Linear module name LoRA targets (e.g. "q_proj"), "" when not a Linear weight
    per_layer: bool = True
    count: int = 1  # identical copies (experts)
    share: float = 1.0

    @property
    def numel(self) -> int:
        n = self.rows * self.cols * self.count
        return n if self.share == 1.0 else n * self.share


@dataclass(frozen=True)
class Linear:
    """A Linear module in every layer (or in `share` of them): LoRA adds r * (in + out) parameters to it."""

    module: str  # HF attribute name (q_proj, c_attn, query_key_value, W_pack, ...)
    roles: tuple[str, ...]  # canonical roles it computes: ("q",) or ("q", "k", "v")
    in_features: int
    out_features: int
    bias: bool
    count: int = 1  # experts (stored as one fused 3-D tensor or a list of Linear modules)
    share: float = 1.0
    kind: str = ""  # "" | routed (a routed expert: top-k of `count` per token) | shared (an always-on expert)


@dataclass(frozen=True)
class BlockGroup:
    """`count` identical blocks."""

    count: int
    tensors: tuple[Tensor, ...]  # share 1 inside the group
    linears: tuple[Linear, ...]
    mixer: str  # attention | sliding_attention | mla | linear_attention | mamba | other
    window: int = 0  # sliding-window length (0 = full attention)
    moe: bool = False

    @property
    def params(self) -> int:
        return sum(t.rows * t.cols * t.count for t in self.tensors)


@dataclass(frozen=True)
class Structure:
    """Every parameter of the model, tied weights once: the blocks by group and the rest (embeddings, norms, head)."""

    groups: tuple[BlockGroup, ...]
    globals: tuple[Tensor, ...]  # outside the blocks, the LM head included (role head)
    config_hash: str
    model_class: str
    notes: tuple[str, ...] = ()
    pattern: tuple[int, ...] = ()  # the group index of each block, bottom to top
    # PEFT's renaming of v4 per-expert target names onto fused v5 parameters for this model type (old, new)
    peft_target_map: tuple[tuple[str, str], ...] = ()

    def trace_depths(self) -> tuple[int, int]:
        """Two depths whose difference is one repeat of the block pattern, with the pattern's head (e.g. the dense
        first layers of a MoE) inside both: traces at these depths extrapolate to the full stack (per repeat; a
        last, partial repeat is extrapolated pro rata). The shallowest such pair; (n, n) when only the full depth
        will do."""
        seq, n = self.pattern, len(self.pattern)
        best = (n, n)
        for period in range(1, 9):
            for head in range(0, n):
                if all(seq[i] == seq[i - period] for i in range(head + period, n)):
                    la = max(2, head + period)
                    if la + period < n and la + period < best[1]:
                        best = (la, la + period)
                    break  # a longer head with this period only traces deeper
        return best

    @property
    def layers(self) -> int:
        return sum(g.count for g in self.groups)

    @property
    def block_params(self) -> int:
        return sum(g.count * g.params for g in self.groups)

    def mean_tensors(self) -> tuple[Tensor, ...]:
        """The tensors of the mean block (each with the share of blocks that hold it)."""
        return tuple(_shared(t, g.count / self.layers) for g in self.groups for t in g.tensors)

    def mean_linears(self) -> tuple[Linear, ...]:
        return tuple(_shared(x, g.count / self.layers) for g in self.groups for x in g.linears)

    def blocks(self, start: int, stop: int) -> "Structure":
        """The structure of blocks start..stop-1 alone (a pipeline stage), globals kept: each group counted over
        that range of `pattern` (bottom to top). Without a pattern the groups are taken pro rata (each at least
        the blocks it can have: a rounded share, the total kept)."""
        from dataclasses import replace

        n = stop - start
        if not 0 <= start < stop <= self.layers:
            raise ValueError(f"blocks {start}..{stop} of a {self.layers}-block structure")
        if n == self.layers:
            return self
        if len(self.pattern) == self.layers:
            part = self.pattern[start:stop]
            kept = [i for i in range(len(self.groups)) if i in part]
            index = {old: new for new, old in enumerate(kept)}
            groups = tuple(replace(self.groups[i], count=part.count(i)) for i in kept)
            return replace(self, groups=groups, pattern=tuple(index[i] for i in part))
        counts = [g.count * n // self.layers for g in self.groups]
        rest = sorted(range(len(counts)), key=lambda i: -(self.groups[i].count * n % self.layers))
        for i in rest[:n - sum(counts)]:
            counts[i] += 1
        groups = tuple(replace(g, count=c) for g, c in zip(self.groups, counts) if c)
        return replace(self, groups=groups, pattern=())

    def mixers(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups:
            out[g.mixer] = out.get(g.mixer, 0) + g.count
        return out


def _shared(x, share: float):
    from dataclasses import replace

    return x if share == 1.0 else replace(x, share=share)


def structure_to_dict(s: Structure) -> dict:
    from dataclasses import asdict

    return asdict(s)


def structure_from_dict(d: dict) -> Structure:
    """The inverse of structure_to_dict (JSON lists back to tuples)."""
    groups = tuple(BlockGroup(g["count"], tuple(Tensor(**t) for t in g["tensors"]),
                              tuple(Linear(**{**x, "roles": tuple(x["roles"])}) for x in g["linears"]),
                              g["mixer"], g.get("window", 0), g.get("moe", False)) for g in d["groups"])
    return Structure(groups, tuple(Tensor(**t) for t in d["globals"]), d["config_hash"], d["model_class"],
                     tuple(d.get("notes", ())), tuple(d.get("pattern", ())),
                     tuple(tuple(x) for x in d.get("peft_target_map", ())))
