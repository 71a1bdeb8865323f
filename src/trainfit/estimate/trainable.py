"""Which parameters train: full, LoRA, QLoRA or freeze, and the exact counts each method gives.

LoRA (Hu et al. 2021) adds A (r x in) and B (out x r) to each targeted Linear: r * (in + out) parameters. PEFT's
`all-linear` targets every Linear inside the blocks (not the output head); MoE expert weights in transformers 5 are
fused 3-D tensors, not Linear modules, so LoRA leaves them alone. For sequence classification PEFT trains the new
head in full (`modules_to_save`).

QLoRA (Dettmers et al. 2023, section 2): the frozen Linear weights of the blocks are stored as 4-bit NormalFloat with
blocksize 64; double quantization stores the absmax constants in 8 bits with one fp32 constant per 256 blocks:
4 + 8/64 + 32/(64*256) = 4.127 bits per parameter. Embeddings, norms and the output head stay in 16 bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..errors import SpecError
from ..spec.model import ModelSpec
from ..spec.training import GradCkpt, Method, Task, TrainingSpec
from .activations import Trainable
from .params import Tensor, count_params, global_tensors, layer_linears, layer_params, layer_tensors

NF4_BITS_PER_PARAM = 4 + 8 / 64 + 32 / (64 * 256)  # QLoRA paper, section 2 (double quantization)
NF4_BYTES_PER_PARAM = NF4_BITS_PER_PARAM / 8
# NF4 without double quantization (an fp32 absmax per 64-weight block): LitGPT's `--quantize bnb.nf4`, the
# config_hub's setting ('bnb.nf4-dq' is the double-quantized one; Lightning's BitsandbytesPrecision modes)
NF4_SINGLE_QUANT_BYTES_PER_PARAM = (4 + 32 / 64) / 8

_ROLE_ALIASES = {
    "q": "q", "q_proj": "q", "query": "q", "k": "k", "k_proj": "k", "key": "k", "v": "v", "v_proj": "v",
    "value": "v", "o": "o", "o_proj": "o", "out_proj": "o", "dense": "o", "gate": "gate", "gate_proj": "gate",
    "w1": "gate", "up": "up", "up_proj": "up", "w3": "up", "fc1": "up", "c_fc": "up", "down": "down",
    "down_proj": "down", "w2": "down", "fc2": "down", "dense_4h_to_h": "down",
}
_FUSED = {"c_attn": ("q", "k", "v"), "query_key_value": ("q", "k", "v"), "w_pack": ("q", "k", "v"),
          "wqkv": ("q", "k", "v"), "qkv_proj": ("q", "k", "v"), "gate_up_proj": ("gate", "up"),
          "dense_h_to_4h": ("gate", "up")}
ALL_ROLES = frozenset({"q", "k", "v", "o", "gate", "up", "down"})


def head_for(m: ModelSpec, task: Task) -> str:
    """Which output head the training task puts on the model."""
    if task == Task.CLASSIFICATION:
        return "classification"
    if m.is_encoder:
        if task == Task.DPO:
            raise SpecError(f"{m.name} is an encoder model: DPO needs a causal language model")
        return "mlm"
    return "lm"


OUTSIDE_BLOCKS = {"lm_head": "head", "output": "head", "embed_tokens": "embed", "wte": "embed",
                  "word_embeddings": "embed"}  # LoRA targets outside the blocks (PEFT adapts them too)


def saves_output_head(t: TrainingSpec) -> bool:
    """Whether LoRA training also trains the output head in full (modules_to_save; PEFT unties a tied one)."""
    return t.is_peft and "lm_head" in t.modules_to_save


def lora_roles(targets: tuple[str, ...]) -> frozenset[str]:
    """Canonical roles ('q', 'v', ..., 'head', 'embed') from user/PEFT target names."""
    roles: set[str] = set()
    for name in targets:
        key = name.strip().lower()
        if key in OUTSIDE_BLOCKS:
            roles.add(OUTSIDE_BLOCKS[key])
        elif key in ("all-linear", "all", "all_linear"):
            roles.update(ALL_ROLES)
        elif key in _FUSED:
            roles.update(_FUSED[key])
        elif key in _ROLE_ALIASES:
            roles.add(_ROLE_ALIASES[key])
        else:
            from ..i18n import say

            raise SpecError(say("ei_unknown_lora_target", name=name))
    return frozenset(roles)


@dataclass(frozen=True)
class ParamSplit:
    """Parameter counts for one training method (whole model, before sharding)."""

    total: int  # the model with its task head, before adapters
    trainable: int  # incl. adapters and a trainable head
    frozen: int
    adapters: int
    quantized: int  # frozen parameters stored as NF4 (QLoRA)
    trainable_blocks: int  # blocks whose parameters (or adapters) train
    lowest_trainable_block: int  # blocks below this index run no backward
    trainable_tensors: tuple[Tensor, ...]  # for Adafactor's factored states (per block and global, not multiplied)
    block_trainable: Trainable
    saved: int = 0  # of `trainable`: embedding / output-head copies PEFT trains in full (modules_to_save)

    @property
    def all_params(self) -> int:
        return self.total + self.adapters + self.saved

    def __hash__(self) -> int:  # a memo key of every estimate, with a long tuple of tensors: hashed once
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.total, self.trainable, self.frozen, self.adapters, self.quantized,
                           self.trainable_blocks, self.lowest_trainable_block, self.trainable_tensors,
                           self.block_trainable, self.saved))
            object.__setattr__(self, "_hash", cached)
        return cached


def generic_lora(m: ModelSpec, targets: tuple[str, ...], rank: int) -> tuple[float, float, frozenset[str]]:
    """LoRA on a read structure, as PEFT 0.21 applies it to the transformers 5 module tree: (adapter parameters per
    mean block, elements of fused expert tensors PEFT merges with their adapters per mean block, canonical roles of
    the adapted Linear modules).

    Targets match Linear modules by their last name (`all-linear`: every Linear in the blocks). For MoE types whose
    v4 per-expert Linears became fused 3-D tensors, PEFT renames the old target names onto the fused parameters
    (`Structure.peft_target_map`, read from PEFT: e.g. gate_proj/up_proj -> gate_up_proj with rank 2r, down_proj ->
    down_proj, gate -> the router's weight) — so no Linear module with those names (dense-first MLPs, shared experts)
    keeps an adapter. Each wrapped expert tensor gets rank x experts: A (rE x in), B (out x rE)."""
    mapping = dict(m.structure.peft_target_map)
    linears = layer_linears(m)
    leaf = {lin.module: lin.module.rsplit(".", 1)[-1] for lin in linears}
    names, params, modules = _target_names(m, targets)
    total = merged = 0.0
    roles: set[str] = set()
    for lin in linears:
        name = leaf[lin.module]
        if lin.count > 1 and name in params:
            fused = max(1, sum(1 for old, new in mapping.items() if new == name and old in names))
            total += rank * fused * lin.count * (lin.in_features + lin.out_features) * lin.share
            merged += lin.in_features * lin.out_features * lin.count * lin.share
        elif lin.count == 1 and name in modules:
            total += rank * (lin.in_features + lin.out_features) * lin.share
            roles |= set(lin.roles)
    routers = {new for new in params if new.endswith(".weight")}  # a router module's weight (not an nn.Linear)
    for x in layer_tensors(m):
        if x.role == "router" and any(x.name.endswith(r) for r in routers):
            total += rank * (x.rows + x.cols) * x.share
    return total, merged, frozenset(roles)


def _target_names(m: ModelSpec, targets: tuple[str, ...]) -> tuple[set[str], set[str], set[str]]:
    """(target names, fused expert parameters PEFT wraps for them, Linear module names they adapt)."""
    mapping = dict(m.structure.peft_target_map)
    linears = layer_linears(m)
    leaf = {lin.module: lin.module.rsplit(".", 1)[-1] for lin in linears}
    if any(x.strip().lower() in ("all-linear", "all", "all_linear") for x in targets):
        names = {leaf[lin.module] for lin in linears if lin.count == 1} | set(mapping)
    else:
        names = {x.strip() for x in targets}
        aliases = {_ROLE_ALIASES.get(x.lower()) for x in names} | {r for x in names for r in _FUSED.get(x.lower(), ())}
        names |= {leaf[lin.module] for lin in linears if lin.count == 1 and set(lin.roles) & aliases}
    return names, {mapping[n] for n in names if n in mapping}, names - set(mapping)


def wrapped_experts(m: ModelSpec, targets: tuple[str, ...], group) -> list:
    """The fused expert Linears of a structure group PEFT wraps (and merges with their adapters) for the targets."""
    if m.structure is None:
        return []
    _, params, _ = _target_names(m, targets)
    return [x for x in group.linears if x.count > 1 and x.module.rsplit(".", 1)[-1] in params]


def _wrapped_roles(m: ModelSpec, targets: tuple[str, ...]) -> frozenset[str]:
    if m.structure is None:
        return frozenset()
    return frozenset(r for g in m.structure.groups for x in wrapped_experts(m, targets, g) for r in x.roles)


def adapter_params_per_block(m: ModelSpec, roles: frozenset[str], rank: int, all_linear: bool = False,
                             named: tuple[str, ...] = ()) -> int:
    """LoRA parameters added to one block.

    Fused MoE experts (transformers 5 stores them as 3-D tensors) are wrapped by PEFT 0.21 under `all-linear`
    with rank r per expert: gate_up gets A (2rE x h) and B (2f x 2rE), down gets A (rE x f) and B (h x rE); the
    router (a Linear, h -> E) gets an ordinary adapter. `tests/test_params_oracle.py` checks this against PEFT.
    """
    if m.structure is not None:
        return generic_lora(m, named, rank)[0]
    total = 0
    for lin in layer_linears(m):
        if lin.count > 1:
            continue
        if roles & set(lin.roles):
            total += rank * (lin.in_features + lin.out_features)
    if m.is_moe and all_linear:
        e, h, f = m.num_experts, m.hidden, m.intermediate
        total += 2 * rank * e * (h + 2 * f) + rank * e * (f + h) + rank * (h + e)
    return total


def split_params(m: ModelSpec, t: TrainingSpec, freeze_layers: int = 2) -> ParamSplit:
    """Trainable / frozen / quantized parameter counts for the method (memoised: the search calls it often)."""
    # checkpointing matters to a freeze fine-tune only (which blocks run a backward)
    ckpt = t.grad_ckpt if t.method == Method.FREEZE else GradCkpt.NONE
    return _split(m, t.method, t.task, t.lora_rank, t.lora_targets, freeze_layers, t.modules_to_save, ckpt)


@lru_cache(maxsize=2048)
def _split(m: ModelSpec, method: Method, task: Task, lora_rank: int, lora_targets: tuple[str, ...],
           freeze_layers: int, modules_to_save: tuple[str, ...] = (), grad_ckpt: GradCkpt = GradCkpt.NONE) -> ParamSplit:
    t = TrainingSpec(method=method, task=task, lora_rank=lora_rank, lora_targets=lora_targets,
                     modules_to_save=modules_to_save, grad_ckpt=grad_ckpt)
    head = head_for(m, t.task)
    total = count_params(m, head)
    head_tensors = tuple(x for x in global_tensors(m, head) if x.name.startswith(("classifier", "score", "pooler")))
    # PEFT's SEQ_CLS trains the new classifier in full (modules_to_save); BERT's pooler is not part of it.
    peft_head = tuple(x for x in head_tensors if not x.name.startswith("pooler"))
    head_params = sum(x.numel for x in head_tensors) if t.task == Task.CLASSIFICATION else 0
    block = layer_params(m)
    if t.method == Method.FULL:
        tensors = layer_tensors(m) + global_tensors(m, head)
        return ParamSplit(total, total, 0, 0, 0, m.layers, 0, tensors,
                          Trainable(ALL_ROLES, frozenset(), True))
    if t.method == Method.FREEZE:
        k = min(max(1, freeze_layers), m.layers)
        trainable = k * block + head_params
        # transformers' gradient_checkpointing_enable makes the embeddings' output require grad (5.x: every model
        # whose input is input_ids, `enable_input_require_grads`; LLaMA-Factory does the same for any fine-tune), so
        # under full checkpointing the backward runs down through the frozen blocks too — recomputed, input
        # gradients only — and each keeps its checkpointed input (traced: a frozen block's checkpoint input was
        # missing, -2.9 %)
        lowest = 0 if t.grad_ckpt == GradCkpt.FULL else m.layers - k
        return ParamSplit(total, trainable, total - trainable, 0, 0, k, lowest, layer_tensors(m) + head_tensors,
                          Trainable(ALL_ROLES, frozenset(), True))
    all_linear = any(x.lower() in ("all-linear", "all", "all_linear") for x in t.lora_targets)
    merged = 0.0
    if m.structure is not None:
        named = frozenset(OUTSIDE_BLOCKS[x.strip().lower()] for x in t.lora_targets
                          if x.strip().lower() in OUTSIDE_BLOCKS)
        per_block, merged, roles = generic_lora(m, t.lora_targets, t.lora_rank)
        outside = named if head == "lm" else frozenset()
        if not per_block and not outside:
            _no_lora_match(m)
    else:
        named = lora_roles(t.lora_targets)
        roles = frozenset(r for r in named if any(r in lin.roles and lin.count == 1 for lin in layer_linears(m)))
        outside = named & {"head", "embed"} if head == "lm" else frozenset()
        if not roles and not outside:
            _no_lora_match(m)
        per_block = adapter_params_per_block(m, roles, t.lora_rank, all_linear)
    adapters = round(m.layers * per_block)
    # the output head (Linear: A r x h, B V x r) and the embedding (lora_embedding_A r x V, B h x r)
    adapters += len(outside) * t.lora_rank * (m.hidden + m.vocab)
    if all_linear and t.task == Task.CLASSIFICATION and m.is_encoder and m.model_type != "roberta":
        adapters += t.lora_rank * 2 * m.hidden  # `all-linear` also adapts BERT's pooler (a Linear outside the head)
    head_train = sum(x.numel for x in peft_head) if t.task == Task.CLASSIFICATION else 0
    # embeddings / output head trained in full beside the adapters (PEFT modules_to_save): PEFT trains a copy and
    # keeps the original module frozen beside it, so the frozen count does not shrink; each named module gets its
    # own copy, tied or not (PEFT 0.21)
    saved = len(t.modules_to_save) * m.vocab * m.hidden if head == "lm" else 0
    quantized = 0
    if t.method == Method.QLORA:
        quantized = round(m.layers * sum(x.numel for x in layer_tensors(m) if x.role == "linear"))  # nn.Linear only
    # PEFT's two parameters per adapted Linear: lora_A (r x in) and lora_B (out x r)
    adapter_tensors = tuple(x for lin in layer_linears(m) if roles & set(lin.roles) and lin.count == 1
                            for x in (Tensor(f"lora_A.{lin.module}", t.lora_rank, lin.in_features, "adapter"),
                                      Tensor(f"lora_B.{lin.module}", lin.out_features, t.lora_rank, "adapter")))
    return ParamSplit(total, adapters + head_train + saved, total - head_train, adapters, quantized, m.layers, 0,
                      adapter_tensors + (peft_head if t.task == Task.CLASSIFICATION else ()),
                      Trainable(frozenset(), roles, False, lora_rank=t.lora_rank, merged_expert_elements=merged,
                                wrapped_expert_roles=_wrapped_roles(m, t.lora_targets)),
                      saved)


def adafactor_state_bytes(m: ModelSpec, split: ParamSplit, trainable_blocks: int) -> float:
    """Adafactor without momentum (HF default beta1=None): fp32 row and column second-moment factors per matrix."""
    total = 0.0
    for x in split.trainable_tensors:
        size = 4 * (x.rows + x.cols) * x.count if x.cols > 1 else 4 * x.rows * x.count
        total += size * (trainable_blocks if x.per_layer else 1)
    return total


# bitsandbytes' 8-bit blockwise optimizers (Optimizer2State.init_state, bitsandbytes 0.50.2): a tensor of at least
# `min_8bit_size` elements keeps each of its two states as one byte per element with an fp32 absmax per block of 256
# (2048 before bitsandbytes 0.44, PR #1365); a smaller one keeps two fp32 states. Two 256-entry fp32 quantization
# maps are shared by all tensors.
BNB_BLOCK = 256
BNB_MIN_8BIT_SIZE = 4096


def _bnb_8bit_tensor_bytes(n: int) -> float:
    if n < BNB_MIN_8BIT_SIZE:
        return 8.0 * n
    return 2.0 * n + 2 * 4.0 * -(-n // BNB_BLOCK)


def adamw_8bit_state_bytes(split: ParamSplit, trainable_blocks: int, vocab_hidden: int = 0) -> float:
    """Two 8-bit states of bitsandbytes' AdamW8bit, per trainable tensor (a MoE projection's experts one 3-D tensor);
    trainable parameters no tensor describes (adapters outside the blocks, modules_to_save copies of `vocab_hidden`
    elements each) as large tensors."""
    total, covered = 2 * 4.0 * BNB_BLOCK, 0
    for x in split.trainable_tensors:
        blocks = trainable_blocks if x.per_layer else 1
        if x.role == "expert":
            sizes = [x.rows * x.cols * x.count]
        else:
            sizes = [x.rows * x.cols] * x.count
        for n in sizes:
            total += blocks * _bnb_8bit_tensor_bytes(n)
            covered += blocks * n
    for _ in range(round(split.saved / vocab_hidden) if vocab_hidden and split.saved else 0):
        total += _bnb_8bit_tensor_bytes(vocab_hidden)
        covered += vocab_hidden
    rest = max(0, split.trainable - covered)
    return total + 2.0 * rest + 2 * 4.0 * rest / BNB_BLOCK


def _no_lora_match(m: ModelSpec) -> None:
    """The error when no LoRA target names a Linear of the model: the Linears it has, or that it has none."""
    from ..i18n import say

    names = sorted({x.module.rsplit(".", 1)[-1] for x in layer_linears(m)})
    if not names:
        raise SpecError(say("ei_lora_no_linear", model=m.name))
    raise SpecError(say("ei_lora_no_match", model=m.name, examples=", ".join(names[:6])))
