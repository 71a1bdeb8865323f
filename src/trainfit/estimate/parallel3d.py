"""Tensor x pipeline x context x expert x data parallelism (TP x PP x CP x EP x DP): memory and time per GPU.

Pure Python, no torch, no I/O. Issue 34. Everything here is per GPU of the most loaded pipeline stage, for one
optimizer step, and is meant to be composed with a per-GPU compute time that the caller supplies (trainfit's
data-parallel estimator on the rank's shard of the model: `benchmarks/parallel3d.py` shows the composition).

Sources, and where this module follows or departs from them:

* Activations: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
  (arXiv 2205.05198), section 4 and Table 2. Bytes per layer, 16-bit activations, dropout in the block:
  no parallelism s·b·h·(34 + 5·a·s/h); tensor parallel s·b·h·(10 + 24/t + 5·a·s/(h·t)); with sequence parallelism
  s·b·h/t·(34 + 5·a·s/h); selective recomputation drops the 5·a·s/h term (34·s·b·h/t with SP); full recomputation
  keeps the block input only, 2·s·b·h (Table 2's last row; /t with SP, which shards the input).
  The 10 are the tensors a TP rank keeps whole without SP (two LayerNorm inputs 4, two dropout masks 2, the inputs
  of the QKV and fc1 GEMMs 2+2); the 24 are the sharded ones (Q and K 4, V 2, the output projection's input 2,
  GeLU's input 8, fc2's input 8). This module writes the 24 per architecture: Q 2·a·d/h, K and V 4·g·d/h for g
  key/value heads, projection input 2·a·d/h, MLP 4·f/h (GeLU) or 6·f/h (SwiGLU: fc1's two halves and fc2's input,
  as Megatron's fused bias_swiglu saves them), which is exactly 24 for GPT (a·d = h, g = a, f = 4h).
  FlashAttention saves no s² tensor: flash_attention=True drops 5·a·s/h as selective recomputation does.
* In-flight micro-batches on the first stage: 1F1B holds min(pp, m) micro-batches of L/pp layers (Narayanan et al.
  2021, arXiv 2104.04473, section 2.2.1); Megatron's interleaved schedule holds L·(1 + (p-1)/(p·v)) layers' worth
  (`get_pp_rank_microbatches`: rank 0 warms up 2(p-1) + (v-1)·p chunks, plus the one in flight, of L/(p·v) layers
  each); ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", arXiv 2401.10241, section 2.1) keeps the peak of
  1F1B.
* Weights and optimizer states, and the activation total, follow Megatron-LM's own
  megatron/training/theoretical_memory_usage.py (read at commit d98e8a64). Differences, each on purpose:
  - CP: Megatron's estimator does not divide activations by cp and shards the distributed optimizer over
    `data_parallel_size`, which excludes cp; the distributed optimizer actually runs over the dp x cp group
    (DistributedDataParallel's `intra_dp_cp_group`), and CP splits every sequence activation by cp. Here: both.
  - Full recomputation: Megatron's estimator falls back to the no-SP selective formula for anything but
    SP + selective; here the 2·s·b·h row of Table 2 is used, plus one layer's full activations, rematerialised
    during that layer's backward (the working set Korthikanti's row leaves out).
  - SwiGLU: Megatron's activation formula keeps 4·f/h for the MLP; here 6·f/h (see above). For GPT both agree.
  - Position embeddings and biases: Megatron leaves them out (position_table=0, biases=False reproduce it).
  - Megatron applies the interleaved penalty also to the embedding-stage terms and divides them by t (kept).
* Time: ring collectives as nccl-tests' bus-bandwidth model: all-reduce 2(n-1)/n · bytes / bw, all-gather and
  reduce-scatter (n-1)/n · bytes / bw, all-to-all (n-1)/n · bytes / bw, point-to-point bytes / bw. Pipeline bubble
  (p-1)/(m·v) of the ideal time for 1F1B (v = 1) and interleaved (Narayanan et al. 2021, section 2.2); ZB-H1 cuts
  the bubble to (p-1)·(T_F + T_B - T_W) with T_W the weight-gradient pass (1/3 of 1F1B's when T_F = T_B = T_W).

Rank order: Megatron-Core's default "tp-cp-ep-dp-pp" (torchtitan's mesh pp, dp, cp, tp is the same from the
inside out): a group of size n whose members lie `stride` ranks apart stays inside a node when stride·n <= GPUs per
node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

from ..spec import pp_layout as pp_stages
from .layout_rules import Reason, layout_problems  # noqa: F401 - also parallel3d's names
from .recompute_modules import recomputed_coefficients  # noqa: F401 - also parallel3d's name

SCHEDULES = ("1f1b", "interleaved", "zb")
RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Arch:
    """The architecture numbers this module needs (field names as trainfit's ModelSpec; `arch_of` converts one).

    intermediate: the dense MLP width f (per expert for MoE); gated_mlp: SwiGLU-style (three matrices)."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    head_dim: int = 0  # 0: hidden // heads
    gated_mlp: bool = False
    tie_embeddings: bool = False
    num_experts: int = 0
    experts_per_tok: int = 0
    expert_groups: int = 0  # group-limited routing: experts in this many groups (0: none) ...
    group_topk: int = 0  # ... each token routed inside this many of them
    position_table: int = 0  # rows of a learned position-embedding table (0: rope / alibi)
    biases: bool = False  # a bias on every Linear
    layernorm: bool = True  # LayerNorm (weight and bias) rather than RMSNorm (weight only)
    dropout: bool = True  # dropout after attention and MLP (Korthikanti's masks)
    mla_latent: int = 0  # multi-latent attention: the query and key/value latents' width per token (0: no MLA)
    attention_params: float = 0.0  # one block's attention parameters where the model's own Linears say (MLA); 0: h·q..

    @property
    def d(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


@lru_cache(maxsize=1024)
def arch_of(m) -> Arch:
    """An Arch from a trainfit ModelSpec (duck-typed: no import of the spec package; memoised: a search asks often)."""
    from .params import mla_attention_params, mla_latent_width  # the model's own Linears (q_b / kv_a roles)

    return Arch(hidden=m.hidden, layers=m.layers, heads=m.heads, kv_heads=m.kv_heads, intermediate=m.intermediate,
                vocab=m.vocab, head_dim=m.head_dim, gated_mlp=m.gated_mlp, tie_embeddings=m.tie_embeddings,
                num_experts=m.num_experts, experts_per_tok=m.experts_per_tok,
                expert_groups=getattr(m, "expert_groups", 0), group_topk=getattr(m, "group_topk", 0),
                position_table=m.max_positions if m.position == "learned" else 0,
                biases=bool(m.qkv_bias or m.mlp_bias), layernorm=m.norm == "layernorm",
                dropout=bool(m.hidden_dropout or m.attention_dropout), mla_latent=mla_latent_width(m),
                attention_params=mla_attention_params(m))


DISPATCHERS = ("alltoall", "deepep", "hybridep")


@dataclass(frozen=True)
class Layout:
    """One layout. gpus = tp·pp·cp·dp; ep and etp (expert TP, 0: = tp) split the MoE layers' experts inside
    tp·cp·dp (Megatron-Core's "MoE parallel folding"). distributed_optimizer: Megatron's, ZeRO-1 over dp·cp.
    fsdp: ZeRO-3 / FSDP2 over dp·cp (torchtitan's dp_shard_cp mesh); not one of Megatron's options."""

    tp: int = 1
    pp: int = 1
    vpp: int = 1  # virtual stages (model chunks) per rank: 1 = plain 1F1B
    cp: int = 1
    ep: int = 1
    etp: int = 0
    dp: int = 1
    sequence_parallel: bool = False
    distributed_optimizer: bool = False
    schedule: str = "1f1b"
    fsdp: bool = False
    ep_overlap: bool = False  # Megatron-Core's --overlap-moe-expert-parallel-comm (+ --delay-wgrad-compute)
    dispatcher: str = "alltoall"  # the MoE token dispatcher: NCCL all-to-all, or the flex one over DeepEP / HybridEP
    # Megatron-Core's account_for_embedding / loss_in_pipeline_split: the embedding (the loss) counts as one layer
    # in the pipeline split, so the first (last) stage holds one decoder layer less (`stage_layers`)
    split_embedding: bool = False
    split_loss: bool = False
    # Megatron-Core's custom pipeline layout (pp_stages.parse): the virtual stages' layers; () = the even split
    pp_layout: tuple[str, ...] = ()
    timed_rank: int = -1  # the rank of a custom layout that is timed (-1: the one with the most blocks)

    def __post_init__(self):
        for name in ("tp", "pp", "vpp", "cp", "ep", "dp"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if isinstance(self.etp, bool) or not isinstance(self.etp, int) or self.etp < 0:
            raise ValueError(f"etp must be a whole number >= 0, got {self.etp!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}")
        if self.dispatcher not in DISPATCHERS:
            raise ValueError(f"dispatcher must be one of {', '.join(DISPATCHERS)}, got {self.dispatcher!r}")

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.cp * self.dp

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    @property
    def expert_dp(self) -> int:
        """Megatron-Core: expert_data_parallel_size = world / (etp · ep · pp)."""
        return max(1, self.tp * self.cp * self.dp // (self.expert_tp * self.ep))


# ---- validity: layout_rules.py (Reason, layout_problems) ------------------------------------------------------

# ---- parameters ----------------------------------------------------------------------------------------------------

def padded_vocab(vocab: int, tp: int, multiple: int = 128) -> int:
    """Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by (128) x tp."""
    step = max(1, multiple) * tp
    return math.ceil(vocab / step) * step


@dataclass(frozen=True)
class StageParams:
    """Parameters held by one GPU of a pipeline stage, by how they are sharded."""

    tp_sharded: float  # attention, dense MLP, word embedding / LM head: already divided by tp
    replicated: float  # norms, router, position table (and biases of row-parallel Linears)
    expert: float  # routed experts: already divided by etp·ep
    layers: int  # blocks on this stage

    @property
    def dense(self) -> float:
        return self.tp_sharded + self.replicated

    @property
    def total(self) -> float:
        return self.dense + self.expert


def layer_params(arch: Arch) -> dict[str, float]:
    """Parameters of one block by kind (Megatron's theoretical_memory_usage terms; biases when arch.biases)."""
    h, d = arch.hidden, arch.d
    q, kv = arch.heads * d, arch.kv_heads * d
    attention = arch.attention_params or h * q + 2 * h * kv + q * h + ((q + 2 * kv + h) if arch.biases else 0)
    mats = 3 if arch.gated_mlp else 2
    mlp = mats * h * arch.intermediate + ((arch.intermediate * (mats - 1) + h) if arch.biases else 0)
    norms = 2 * h * (2 if arch.layernorm else 1)
    if arch.is_moe:
        return {"attention": attention, "dense_mlp": 0.0, "experts": arch.num_experts * mlp,
                "replicated": norms + h * arch.num_experts}
    return {"attention": attention, "dense_mlp": mlp, "experts": 0.0, "replicated": norms}


def stage_layers(arch: Arch, layout: Layout, stage: str = "middle") -> int:
    """Blocks on a stage: ceil(L / pp) (an uneven split puts the remainder on some stages). With the embedding or
    the loss counted as a layer in the split (Megatron-Core's account_for_*_in_pipeline_split, TransformerConfig
    core_v0.16.1 L1436-1475: (L + 1 + 1) must divide by pp, and each rank's share by vpp), a middle stage holds
    n = (L + e + l) / pp blocks, the first n - e and the last n - l."""
    t = layout
    if t.pp_layout:  # a custom layout: the first and last rank's own, else the timed rank's (MTP included)
        loads = pp_stages.ranks(t.pp_layout, t.pp)
        return (loads[0] if stage == "first" else loads[-1] if stage == "last" else timed_rank(arch, t)).blocks
    if not (t.split_embedding or t.split_loss) or t.pp == 1:
        return math.ceil(arch.layers / t.pp)
    n = math.ceil((arch.layers + t.split_embedding + t.split_loss) / t.pp)
    return n - (t.split_embedding if stage == "first" else t.split_loss if stage == "last" else 0)


def timed_rank(arch: Arch, layout: Layout):
    """The rank of a custom layout that is timed: `layout.timed_rank`, else the one with the most blocks (and then
    output layers). The step's time is its slowest rank's: model_parallel.step_time times one of each kind."""
    loads = pp_stages.ranks(layout.pp_layout, layout.pp)
    if 0 <= layout.timed_rank < len(loads):
        return loads[layout.timed_rank]
    return max(loads, key=lambda r: (r.blocks, max(1, r.heads)))


def rank_kinds(arch: Arch, layout: Layout) -> list[int]:
    """One rank of each kind a custom layout has, by its blocks and its output layers (at least one): the ranks whose
    times may differ."""
    seen: dict[tuple[int, int], int] = {}
    for i, r in enumerate(pp_stages.ranks(layout.pp_layout, layout.pp)):
        seen.setdefault((r.blocks, max(1, r.heads)), i)
    return list(seen.values())


def stage_heads(arch: Arch, layout: Layout) -> int:
    """Output layers the timed stage runs: one (an even split's stage is timed with the head, as is a rank of a
    custom layout without one), or the timed rank's, the loss's and one per MTP layer."""
    return max(1, timed_rank(arch, layout).heads) if layout.pp_layout else 1


def stage_params(arch: Arch, layout: Layout, stage: str = "first", vocab_multiple: int = 128) -> StageParams:
    """Parameters on one GPU of the first or last pipeline stage. The first holds the word embedding (and a learned
    position table); the last the LM head and the final norm — when tied and pp > 1 the last stage still keeps its
    own copy of the embedding as the head (Megatron's shared word embedding). One stage holds both when pp = 1,
    the head once more only when untied."""
    if stage not in ("first", "last"):
        raise ValueError("stage must be 'first' or 'last'")
    lp = layer_params(arch)
    n = stage_layers(arch, layout, stage)
    vocab = padded_vocab(arch.vocab, layout.tp, vocab_multiple) * arch.hidden / layout.tp
    tp_sharded = n * (lp["attention"] + lp["dense_mlp"]) / layout.tp
    replicated = n * lp["replicated"]
    expert = n * lp["experts"] / (layout.expert_tp * layout.ep)
    first, last = stage == "first" or layout.pp == 1, stage == "last" or layout.pp == 1
    if first:
        tp_sharded += vocab
        replicated += arch.position_table * arch.hidden
    if last:
        replicated += arch.hidden * (2 if arch.layernorm else 1)
        if not (first and arch.tie_embeddings):
            tp_sharded += vocab
    mtp = pp_stages.ranks(layout.pp_layout, layout.pp)[0 if first and not last else -1].mtp if layout.pp_layout else 0
    if mtp:  # Megatron-Core's MTP layer: its block (counted in n), enorm and hnorm, the eh_proj Linear (2h -> h,
        # column-parallel) and its final norm; a rank without the embedding builds one for it (mtp_process)
        tp_sharded += mtp * 2 * arch.hidden * arch.hidden / layout.tp + (vocab if not first else 0)
        replicated += mtp * 3 * arch.hidden * (2 if arch.layernorm else 1)
    return StageParams(tp_sharded, replicated, expert, n)


# ---- memory --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Memory:
    """Bytes per GPU of one stage at its peak, by part."""

    parts: dict[str, float] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.parts.values())

    def part(self, prefix: str) -> float:
        return sum(v for k, v in self.parts.items() if k.split("/", 1)[0] == prefix)


def model_state_bytes(arch: Arch, layout: Layout, stage: str = "first", *, weight_bytes: float = 2,
                      grad_bytes: float = 4, state_bytes: float = 12, vocab_multiple: int = 128) -> dict[str, float]:
    """Weights, gradients and optimizer states on one GPU. Megatron mixed precision: 16-bit weights (2), fp32 main
    gradients (4), fp32 master weights and two Adam moments (12) = 18 bytes per parameter; the distributed optimizer
    shards the 12 over dp·cp (theoretical_memory_usage.py: 6 + 12/dp), experts' over the expert-data-parallel group.
    fsdp: gradients and states sharded too ((grad_bytes + state_bytes)/(dp·cp); FSDP2's sharded fp32 parameter is
    the "master"), plus the gathered 16-bit weights: the whole stage's with pp > 1 (torchtitan does not reshard
    after forward under PP), else two blocks (the one computing and the one prefetched); with pp > 1 also the
    stage's unsharded gradients, accumulated over the micro-batches (PyTorch's PipelineStage turns FSDP's
    gradient sync off until the last micro-batch's backward) in the reduce dtype, fp32 (grad_bytes): FSDP2's
    FSDPParam.to_accumulated_grad_if_needed upcasts each 16-bit gradient to reduce_dtype to accumulate it, and
    torchtitan's mixed_precision_reduce is float32 (job_config.py, 0.2.2)."""
    t = layout
    p = stage_params(arch, t, stage, vocab_multiple)
    dense_dp, expert_dp = t.dp * t.cp, t.expert_dp
    if t.fsdp:
        per_block = (p.total - _embedding_share(arch, t, p)) / max(1, p.layers)
        gathered = p.total if t.pp > 1 else min(p.total, 2 * per_block + _embedding_share(arch, t, p))
        out = {"weights/gathered": weight_bytes * gathered,
               "gradients/sharded": grad_bytes * (p.dense / dense_dp + p.expert / expert_dp),
               "optimizer/sharded": state_bytes * (p.dense / dense_dp + p.expert / expert_dp)}
        if t.pp > 1:  # torch.distributed.pipelining defers FSDP's reduce-scatter to the last micro-batch
            out["gradients/unsharded"] = grad_bytes * p.total  # (set_requires_gradient_sync): fp32 grads kept
        return out
    shard_d, shard_e = (dense_dp, expert_dp) if t.distributed_optimizer else (1, 1)
    return {"weights/params": weight_bytes * p.total,
            "gradients/main_grads": grad_bytes * p.total,
            "optimizer/states": state_bytes * (p.dense / shard_d + p.expert / shard_e)}


def _embedding_share(arch: Arch, layout: Layout, p: StageParams) -> float:
    """The embedding / head parameters of a stage (what is not in its blocks)."""
    lp = layer_params(arch)
    blocks = p.layers * ((lp["attention"] + lp["dense_mlp"]) / layout.tp + lp["replicated"]
                         + lp["experts"] / (layout.expert_tp * layout.ep))
    return max(0.0, p.total - blocks)


def layer_activation_coefficients(arch: Arch, seq_len: int, *, flash_attention: bool = False) -> tuple[float, float,
                                                                                                     float]:
    """Korthikanti et al. 2022 Table 2 per layer, as multiples of s·b·h bytes: (kept whole by each TP rank without SP,
    sharded by TP, the s² part 5·a·s/h). GPT (a·d = h, g = a, f = 4h, GeLU, dropout): (10, 24, 5·a·s/h)."""
    h, d = arch.hidden, arch.d
    masks = 2.0 if arch.dropout else 0.0
    whole = 4.0 + masks + 2.0 + 2.0  # LayerNorm inputs, dropout masks, QKV input, fc1 input
    q, kv = arch.heads * d / h, arch.kv_heads * d / h
    mlp = (6.0 if arch.gated_mlp else 4.0) * arch.intermediate / h
    if arch.is_moe:  # each token's k expert copies: the permuted input (2·k) and the experts' own activations;
        k = max(1, arch.experts_per_tok)  # fp32 router logits (4·E/h)
        mlp = k * (mlp + 2.0) + 4.0 * arch.num_experts / h
    sharded = 2.0 * q + 4.0 * kv + 2.0 * q + mlp
    s2 = 0.0 if flash_attention else (5.0 if arch.dropout else 4.0) * arch.heads * seq_len / h
    return whole, sharded, s2


def layer_activation_bytes(arch: Arch, layout: Layout, seq_len: int, micro_batch: int, *,
                           recompute: str = "none", flash_attention: bool = False,
                           modules: frozenset = frozenset()) -> float:
    """Bytes one block keeps for backward, one micro-batch, one GPU (Korthikanti Table 2, divided by cp: context
    parallelism splits every sequence-long tensor). recompute: none | selective (drops the s² part) | full (the
    block's input only, 2·s·b·h, /t with SP). modules: Megatron-Core's selective recompute modules beyond the
    attention core (`recomputed_coefficients`), with recompute selective."""
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}")
    t = layout
    sbh = seq_len * micro_batch * arch.hidden / t.cp
    sp = t.tp if t.sequence_parallel else 1
    if recompute == "full":
        return 2.0 * sbh / sp
    whole, sharded, s2 = layer_activation_coefficients(arch, seq_len, flash_attention=flash_attention)
    if recompute == "selective":
        s2 = 0.0
        if modules:
            whole, sharded = recomputed_coefficients(arch, whole, sharded, modules)
    return sbh * (whole / sp + sharded / t.tp + s2 / t.tp)


def in_flight_layers(arch: Arch, layout: Layout, micro_batches: int, stage: str = "first") -> float:
    """Layers' worth of one micro-batch's activations a stage holds at its peak. pp = 1: L. 1F1B and ZB-H1, first
    stage: min(pp, m) micro-batches of L/pp layers (the last stage: 1). Interleaved, first stage: Megatron's
    L·(1 + (p-1)/(p·v)) (theoretical_memory_usage.py; vp + p - 1 chunks of L/(p·v) layers in flight)."""
    t, n = layout, stage_layers(arch, layout)
    if t.pp == 1:
        return float(arch.layers)
    if stage == "last":
        return float(stage_layers(arch, t, "last"))
    if t.pp_layout:  # the first rank's own chunks as the schedule fills them (pp_stages.first_rank_in_flight)
        return pp_stages.first_rank_in_flight(t.pp_layout, t.pp, micro_batches)
    if t.split_embedding or t.split_loss:  # the first stage's own blocks, one fewer with the embedding counted
        n = stage_layers(arch, t, "first")
        if t.schedule == "interleaved":
            return n * t.pp * (1.0 + (t.pp - 1) / (t.pp * t.vpp))
    elif t.schedule == "interleaved":
        return arch.layers * (1.0 + (t.pp - 1) / (t.pp * t.vpp))
    return n * min(t.pp, max(1, micro_batches))


def in_flight_micro_batches(layout: Layout, micro_batches: int, stage: str = "first") -> float:
    """Micro-batches whose embedding-stage tensors the first stage holds (Megatron: pp, x the interleaved penalty)."""
    t = layout
    if t.pp == 1 or stage == "last":
        return 1.0
    if t.schedule == "interleaved":
        return t.pp * (1.0 + (t.pp - 1) / (t.pp * t.vpp))
    return float(min(t.pp, max(1, micro_batches)))


def activation_bytes(arch: Arch, layout: Layout, *, seq_len: int, micro_batch: int, micro_batches: int,
                     recompute: str = "selective", flash_attention: bool = False, stage: str = "first",
                     logits_bytes: float = 4.0, vocab_multiple: int = 128,
                     modules: frozenset = frozenset()) -> dict[str, float]:
    """Activations of one stage at its peak, by item. Embedding-stage items as Megatron counts them: token ids
    (8·s·b) and the embedding dropout mask (s·b·h), per micro-batch in flight, /t like the rest. The loss stage
    adds the LM head's input and the logits, 4·s·b·h/t + logits_bytes·s·b·V/t with V padded as Megatron pads it
    (Megatron: 4·s·b·h·(1 + V/h)/t: fp32 logits, vocab-parallel cross entropy). MoE: one layer's token-dispatch
    buffers (sent and received copies, 2·k·s·b·h·2/cp, /t with SP)."""
    t = layout
    tokens = seq_len * micro_batch / t.cp
    per_layer = layer_activation_bytes(arch, t, seq_len, micro_batch, recompute=recompute,
                                       flash_attention=flash_attention, modules=modules)
    out = {"activations/layers": per_layer * in_flight_layers(arch, t, micro_batches, stage)}
    if recompute == "full":
        out["activations/recompute_working_set"] = layer_activation_bytes(arch, t, seq_len, micro_batch,
                                                                          flash_attention=flash_attention)
    first = stage == "first" or t.pp == 1
    if first:
        emb = 8.0 * tokens + (tokens * arch.hidden if arch.dropout else 0.0)
        out["activations/embedding"] = emb * in_flight_micro_batches(t, micro_batches, stage) / t.tp
    if stage == "last" or t.pp == 1:
        vocab = padded_vocab(arch.vocab, t.tp, vocab_multiple)
        out["logits/head"] = 4.0 * tokens * arch.hidden / t.tp + logits_bytes * tokens * vocab / t.tp
        mtp = pp_stages.ranks(t.pp_layout, t.pp)[-1].mtp if t.pp_layout else 0
        if mtp:  # each MTP layer's own output layer and loss (its logits kept for its backward beside the main's)
            out["logits/mtp"] = mtp * out["logits/head"]
    if arch.is_moe:
        sp = t.tp if t.sequence_parallel else 1
        out["activations/moe_dispatch"] = 2.0 * 2.0 * max(1, arch.experts_per_tok) * tokens * arch.hidden / sp
    return out


def memory_per_gpu(arch: Arch, layout: Layout, *, seq_len: int, micro_batch: int, micro_batches: int,
                   recompute: str = "selective", flash_attention: bool = False, stage: str = "first",
                   weight_bytes: float = 2, grad_bytes: float = 4, state_bytes: float = 12,
                   logits_bytes: float = 4.0, vocab_multiple: int = 128, modules: frozenset = frozenset()) -> Memory:
    """Allocated bytes per GPU of one pipeline stage (default: the first, the most loaded one: all the in-flight
    micro-batches and the embedding). No allocator cache, CUDA context or NCCL buffers: the caller adds those."""
    parts = model_state_bytes(arch, layout, stage, weight_bytes=weight_bytes, grad_bytes=grad_bytes,
                              state_bytes=state_bytes, vocab_multiple=vocab_multiple)
    parts.update(activation_bytes(arch, layout, seq_len=seq_len, micro_batch=micro_batch,
                                  micro_batches=micro_batches, recompute=recompute, flash_attention=flash_attention,
                                  stage=stage, logits_bytes=logits_bytes, vocab_multiple=vocab_multiple,
                                  modules=modules))
    return Memory(parts)


def peak_memory_per_gpu(arch: Arch, layout: Layout, **kwargs) -> tuple[str, Memory]:
    """The larger of the first and the last stage (the last holds the logits; with pp = 1 they are one). Memoised:
    it does not depend on the GPU, which a plan search varies most (a Memory's parts are not to be changed)."""
    return _peak_memory_per_gpu(arch, layout, tuple(sorted(kwargs.items())))


@lru_cache(maxsize=16384)
def _peak_memory_per_gpu(arch: Arch, layout: Layout, given: tuple) -> tuple[str, Memory]:
    kwargs = dict(given)
    first = memory_per_gpu(arch, layout, stage="first", **kwargs)
    if layout.pp == 1:
        return "first", first
    last = memory_per_gpu(arch, layout, stage="last", **kwargs)
    return ("last", last) if last.total > first.total else ("first", first)


# ---- time ----------------------------------------------------------------------------------------------------------

def all_reduce_s(nbytes: float, n: int, bw: float) -> float:
    """Ring all-reduce: 2(n-1)/n · bytes / bus bandwidth (bytes/s)."""
    return 0.0 if n <= 1 else 2.0 * (n - 1) / n * nbytes / bw


def all_gather_s(nbytes: float, n: int, bw: float) -> float:
    """Ring all-gather or reduce-scatter of a `nbytes` (whole, unsharded) buffer: (n-1)/n · bytes / bw."""
    return 0.0 if n <= 1 else (n - 1) / n * nbytes / bw


reduce_scatter_s = all_gather_s
all_to_all_s = all_gather_s  # each GPU keeps 1/n of what it holds and sends the rest


def group_bandwidth(size: int, stride: int, gpus_per_node: int, intra: float, inter: float) -> float:
    """Bus bandwidth (bytes/s) of a group of `size` ranks `stride` apart: the intra-node link when the group stays in
    one node; when every member sits on another node, one NIC per GPU (`inter`, per GPU); a group with several
    members per node drives that many NICs, but never beyond the intra-node link."""
    if size <= 1 or stride * size <= gpus_per_node:
        return intra
    per_node = max(1, gpus_per_node // stride) if stride < gpus_per_node else 1
    return min(intra, inter * per_node)


@dataclass(frozen=True)
class Links:
    """Per-GPU bus bandwidths in bytes/s (efficiency already applied) and the node size."""

    intra: float
    inter: float
    gpus_per_node: int

    @classmethod
    def from_gbs(cls, intra_gbs: float, inter_gbs: float, gpus_per_node: int) -> "Links":
        return cls(intra_gbs * 1e9, inter_gbs * 1e9, gpus_per_node)

    def of(self, size: int, stride: int) -> float:
        return group_bandwidth(size, stride, self.gpus_per_node, self.intra, self.inter)


@dataclass(frozen=True)
class Overlap:
    """Fraction of each communication hidden behind compute (0: fully exposed). cp: fraction of the attention
    core's time the ring's KV exchange can hide behind (ring attention overlaps each step's transfer with the
    previous chunk's attention)."""

    tp: float = 0.0
    cp: float = 1.0
    ep: float = 0.0
    p2p: float = 0.0
    dp: float = 0.0


@dataclass
class StepParts:
    """Seconds per optimizer step by term; `total` sums them."""

    parts: dict[str, float] = field(default_factory=dict)

    def add(self, key: str, seconds: float) -> None:
        if seconds:
            self.parts[key] = self.parts.get(key, 0.0) + seconds

    @property
    def total(self) -> float:
        return sum(self.parts.values())


def tp_comm_per_layer_s(arch: Arch, layout: Layout, links: Links, seq_len: int, micro_batch: int, *,
                        recompute: str = "none", act_bytes: float = 2.0) -> float:
    """One block's TP collectives for one micro-batch, forward + backward (+ the recomputed forward): without SP two
    all-reduces of s·b·h forward and two backward (Megatron's f and g operators, Shoeybi et al. 2019); with SP each
    all-reduce becomes an all-gather plus a reduce-scatter, the same bytes. TP's group is innermost (stride 1)."""
    t = layout
    if t.tp == 1:
        return 0.0
    buf = seq_len * micro_batch * arch.hidden * act_bytes / t.cp
    bw = links.of(t.tp, 1)
    one = (all_gather_s(buf, t.tp, bw) + reduce_scatter_s(buf, t.tp, bw)) if t.sequence_parallel else \
        all_reduce_s(buf, t.tp, bw)
    passes = 2 + 2 + (2 if recompute == "full" else 0)
    return passes * one


def cp_comm_per_layer_s(arch: Arch, layout: Layout, links: Links, seq_len: int, micro_batch: int, *,
                        recompute: str = "none", act_bytes: float = 2.0) -> float:
    """One block's ring-attention exchange for one micro-batch (Liu et al. 2023 ring attention; Megatron's CP): cp-1
    point-to-point steps forward, each passing this rank's K and V chunk (2·b·s/cp·g·d/t, g/t at least one head)
    on; backward passes K, V and their gradients (twice forward); full recomputation runs the forward ring again.
    CP's group has stride tp."""
    t = layout
    if t.cp == 1:
        return 0.0
    kv_heads = max(1.0, arch.kv_heads / t.tp)
    chunk = 2.0 * micro_batch * seq_len / t.cp * kv_heads * arch.d * act_bytes
    step = chunk / links.of(t.cp, t.tp)
    return (t.cp - 1) * step * (1 + 2 + (1 if recompute == "full" else 0))


def ep_comm_per_layer_s(arch: Arch, layout: Layout, links: Links, seq_len: int, micro_batch: int, *,
                        recompute: str = "none", act_bytes: float = 2.0, moe_recompute: bool = False) -> float:
    """One MoE block's all-to-alls for one micro-batch: dispatch and combine forward, their two backward (+ the
    recomputed forward's two: full recomputation, or Megatron-Core's `moe` recompute module), `expert_a2a_s` each.
    EP's group has stride etp (Megatron-Core's expert grid tp-ep-dp-pp)."""
    if layout.ep == 1 or not arch.is_moe:
        return 0.0
    again = recompute == "full" or moe_recompute
    return expert_a2a_s(arch, layout, links, seq_len, micro_batch, act_bytes) * (4 + (2 if again else 0))


def remote_nodes_per_token(experts: int, top_k: int, nodes: int, groups: int = 0, group_topk: int = 0) -> float:
    """Expected number of other nodes a token's top-k experts sit on, the experts spread evenly over `nodes` nodes
    and chosen at random (the force-balanced routing of the published benchmarks: Megatron-Core's
    --moe-router-force-load-balancing replaces the router's logits with random ones, router.py, and then routes
    as usual). Without a group limit the k are chosen uniformly without repetition: each other node is missed with
    probability C(E - E/N, k) / C(E, k). With group-limited routing (moe_utils.group_limited_topk: `groups` equal
    groups of consecutive experts, the `group_topk` groups with the highest top-(k/group_topk) score sum kept)
    whose groups each fit inside one node (groups a multiple of nodes), a token reaches only the nodes of its
    chosen groups, each of which holds some of its k (its top scores chose it): a node of G/N groups is missed
    with probability C(G - G/N, g) / C(G, g). DeepSeek-V3's node-limited routing (8 groups, 4 per token) on 8
    nodes: 3.5 other nodes instead of 4.6."""
    if nodes <= 1:
        return 0.0
    if groups > 1 and 0 < group_topk < groups and groups % nodes == 0:
        per_node = groups // nodes
        miss = math.comb(groups - per_node, group_topk) / math.comb(groups, group_topk)
        return (nodes - 1) * (1.0 - miss)
    per_node = experts // nodes
    miss = math.comb(experts - per_node, top_k) / math.comb(experts, top_k) if experts >= top_k else 0.0
    return (nodes - 1) * (1.0 - miss)


def expert_a2a_s(arch: Arch, layout: Layout, links: Links, seq_len: int, micro_batch: int,
                 act_bytes: float = 2.0) -> float:
    """One dispatch (or combine) of a micro-batch's tokens on one rank (s·b/cp, /t with SP). NCCL's all-to-all
    (Megatron-Core's "alltoall" dispatcher) sends each of a token's k expert copies to its rank: k·tokens·h,
    `expert_all_to_all_s`. DeepEP and HybridEP ("flex") send a token once to each other node that holds one of its
    experts and fan it out over NVLink there (DeepEP README: forwarding from the NVLink to the RDMA domain;
    HybridEP: hierarchical dispatch), so the network carries tokens·h·`remote_nodes_per_token`; the node's link
    carries the k copies of the rank's own node and those it forwards; the slower of the two bounds it."""
    t = layout
    tokens = seq_len * micro_batch / t.cp / (t.tp if t.sequence_parallel else 1)
    k = max(1, arch.experts_per_tok)
    naive = tokens * k * arch.hidden * act_bytes
    gpn, stride = links.gpus_per_node, t.expert_tp
    if t.dispatcher == "alltoall" or stride * t.ep <= gpn:
        return expert_all_to_all_s(naive, t.ep, stride, links)
    members = max(1, gpn // stride) if stride < gpn else 1
    nodes = max(1, t.ep // members)
    cross = tokens * arch.hidden * act_bytes * remote_nodes_per_token(arch.num_experts, k, nodes, arch.expert_groups,
                                                                      arch.group_topk) / links.inter
    local = naive * (members - 1) / members / links.intra  # the copies for this node's other ranks, sent or forwarded
    return max(cross, local)


def ep_overlap_exposed_share(layout: Layout, one_a2a_s: float, attention_fwd_s: float, attention_bwd_s: float,
                             mlp_s: float, micro_batches: int) -> float:
    """The share of the expert all-to-all left exposed under Megatron-Core's EP overlap (--overlap-moe-expert-
    parallel-comm): its combined 1F1B schedule runs one micro-batch's layer forward beside another's layer backward
    (models/common/model_chunk_schedule_plan.py TransformerLayerSchedulePlan.run), in three phases whose streams
    run side by side:
        comm:    combine backward        | dispatch forward, dispatch backward      | combine forward
        compute: attention forward        | MoE backward (dgrad, wgrad), MoE forward | attention backward
    so per layer max(0, c - attention forward) + max(0, 2c - MoE forward and backward) + max(0, c - attention
    backward) is exposed, c one all-to-all (dispatch and combine move the same bytes). Micro-batches outside the
    combined phases run alone, all-to-alls exposed: the first forward and last backward without pipelining
    (pipeline_parallel/combined_1f1b.py), and with virtual stages the warm-up's forward-only chunks,
    2·(pp - 1) + (vpp - 1)·pp + 1 of the step's m·vpp (schedules.py: one more warm-up micro-batch with the
    overlap), and as many cool-down backward-only ones."""
    if not layout.ep_overlap or one_a2a_s <= 0:
        return 1.0
    exposed = (max(0.0, one_a2a_s - attention_fwd_s) + max(0.0, 2 * one_a2a_s - mlp_s)
               + max(0.0, one_a2a_s - attention_bwd_s)) / (4 * one_a2a_s)
    chunks = max(1, micro_batches) * layout.vpp
    alone = 1 if layout.pp == 1 else 2 * (layout.pp - 1) + (layout.vpp - 1) * layout.pp + 1
    alone = min(chunks, alone)
    return (alone + (chunks - alone) * exposed) / chunks


def expert_all_to_all_s(nbytes: float, size: int, stride: int, links: "Links") -> float:
    """One all-to-all of `nbytes` per GPU over a group of `size` ranks `stride` apart. Unlike a ring collective,
    whose inter-node hops are shared out among every NIC of the node, each GPU's own data for the other nodes leaves
    through its own NIC: of the (size-1)/size it sends, (size - m)/size crosses nodes (m members of the group per
    node) at the per-GPU network bandwidth, (m-1)/size stays on the node's link; the two run at once, the slower
    bounds it. A group inside one node is all_to_all_s over the intra-node link."""
    if size <= 1:
        return 0.0
    gpn = links.gpus_per_node
    if stride * size <= gpn:
        return all_to_all_s(nbytes, size, links.intra)
    members = max(1, gpn // stride) if stride < gpn else 1
    cross = nbytes * (size - members) / size / links.inter
    local = nbytes * (members - 1) / size / links.intra
    return max(cross, local)


def p2p_per_micro_batch_s(arch: Arch, layout: Layout, links: Links, seq_len: int, micro_batch: int, *,
                          act_bytes: float = 2.0) -> float:
    """Pipeline sends of one micro-batch on one rank: an activation forward and its gradient backward per model
    chunk (2·v), each s·b·h/cp, split across the TP ranks (Megatron's scatter-gather optimisation, Narayanan et
    al. 2021 section 4.1; with SP the tensor is sharded anyway). PP's group has stride tp·cp·dp."""
    t = layout
    if t.pp == 1:
        return 0.0
    msg = seq_len * micro_batch * arch.hidden * act_bytes / t.cp / t.tp
    return 2 * t.vpp * msg / links.of(t.pp, t.tp * t.cp * t.dp)


def dp_comm_s(arch: Arch, layout: Layout, links: Links, *, micro_batches: int, grad_bytes: float = 4.0,
              weight_bytes: float = 2.0, stage: str = "first") -> float:
    """Gradient synchronisation per optimizer step over dp·cp (CP ranks hold the same weights): all-reduce, or with
    the distributed optimizer reduce-scatter of gradients + all-gather of updated 16-bit weights; FSDP gathers the
    weights in forward and backward (once per step under PP, once per micro-batch otherwise) and reduce-scatters the
    gradients. Experts sync over their own data-parallel group. Stride of the dp·cp group: tp."""
    t = layout
    p = stage_params(arch, t, stage)
    out = 0.0
    for params, n, stride in ((p.dense, t.dp * t.cp, t.tp), (p.expert, t.expert_dp, t.expert_tp * t.ep)):
        if n <= 1 or not params:
            continue
        bw = links.of(n, stride)
        if t.fsdp:
            gathers = 1 if t.pp > 1 else 2 * max(1, micro_batches)
            reduces = 1 if t.pp > 1 else max(1, micro_batches)
            out += gathers * all_gather_s(weight_bytes * params, n, bw) + \
                reduces * reduce_scatter_s(grad_bytes * params, n, bw)
        elif t.distributed_optimizer:
            out += reduce_scatter_s(grad_bytes * params, n, bw) + all_gather_s(weight_bytes * params, n, bw)
        else:
            out += all_reduce_s(grad_bytes * params, n, bw)
    return out


def bubble_micro_batches(layout: Layout, micro_batches: int, *, wgrad_share: float = 0.5,
                         fwd_share: float = 1.0 / 3.0) -> float:
    """The bubble in units of one micro-batch's stage time (forward + backward = 1). 1F1B: p-1 (bubble fraction
    (p-1)/m); interleaved: (p-1)/v (Narayanan et al. 2021, section 2.2.2); ZB-H1 (Qi et al. 2024, section 2.1):
    (p-1)·(T_F + T_B - T_W), T_B the input-gradient and T_W the weight-gradient part of the backward. With
    F = fwd_share and W = wgrad_share·(1 - F): (p-1)·(F + (1 - F - W) - W) = (p-1)·(1 - 2W); equal F, B and W
    (F = 1/3, W = 1/3) give (p-1)/3, the paper's "one third of 1F1B's bubble"."""
    t = layout
    if t.pp == 1:
        return 0.0
    if t.schedule == "interleaved":
        return (t.pp - 1) / t.vpp
    if t.schedule == "zb":
        w = wgrad_share * (1.0 - fwd_share)
        return (t.pp - 1) * max(0.0, 1.0 - 2.0 * w)
    return float(t.pp - 1)


def step_time(arch: Arch, layout: Layout, links: Links, *, seq_len: int, micro_batch: int, micro_batches: int,
              compute_fwd_s: float, compute_bwd_s: float, recompute: str = "none", attention_share: float = 0.0,
              optimizer_s: float = 0.0, overhead_s: float = 0.0, overlap: Overlap = Overlap(),
              act_bytes: float = 2.0, grad_bytes: float = 4.0, wgrad_share: float = 0.5,
              moe_recompute: bool = False) -> StepParts:
    """Seconds of one optimizer step on the slowest stage. compute_fwd_s / compute_bwd_s: one micro-batch of the
    stage on one GPU (its L/pp blocks, sharded by tp and cp; recomputation inside the backward). Per micro-batch the
    stage takes compute + exposed TP, CP and EP collectives + exposed pipeline sends; the step runs m of them plus
    the bubble (`bubble_micro_batches`), then the exposed data-parallel sync, the optimizer and fixed overhead.
    attention_share: the attention core's share of the compute, the window CP's ring hides behind."""
    t, n = layout, stage_layers(arch, layout)
    kw = {"recompute": recompute, "act_bytes": act_bytes}
    per_mb = compute_fwd_s + compute_bwd_s
    tp = n * tp_comm_per_layer_s(arch, t, links, seq_len, micro_batch, **kw) * (1.0 - overlap.tp)
    window = overlap.cp * attention_share * per_mb / max(1, n)
    cp = n * max(0.0, cp_comm_per_layer_s(arch, t, links, seq_len, micro_batch, **kw) - window)
    ep = n * ep_comm_per_layer_s(arch, t, links, seq_len, micro_batch, moe_recompute=moe_recompute,
                                 **kw) * (1.0 - overlap.ep)
    p2p = p2p_per_micro_batch_s(arch, t, links, seq_len, micro_batch, act_bytes=act_bytes) * (1.0 - overlap.p2p)
    fwd_share = compute_fwd_s / per_mb if per_mb else 1.0 / 3.0
    slots = micro_batches + bubble_micro_batches(t, micro_batches, wgrad_share=wgrad_share, fwd_share=fwd_share)
    out = StepParts()
    out.add("compute", micro_batches * per_mb)
    out.add("pipeline/bubble", (slots - micro_batches) * (per_mb + tp + cp + ep))
    out.add("communication/tp", micro_batches * tp)
    out.add("communication/cp", micro_batches * cp)
    out.add("communication/ep", micro_batches * ep)
    out.add("communication/pp_p2p", slots * p2p)
    dp = dp_comm_s(arch, t, links, micro_batches=micro_batches, grad_bytes=grad_bytes, weight_bytes=act_bytes)
    out.add("communication/dp", dp * (1.0 - overlap.dp))
    out.add("optimizer", optimizer_s)
    out.add("overhead", overhead_s)
    return out


def tokens_per_s_per_gpu(layout: Layout, *, seq_len: int, micro_batch: int, micro_batches: int,
                         step_s: float) -> float:
    """Tokens one step trains (m·b·s per data-parallel rank, dp ranks) per second per GPU."""
    return micro_batches * micro_batch * seq_len * layout.dp / step_s / layout.gpus
