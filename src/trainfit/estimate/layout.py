"""A model-parallel layout (tp x pp x cp x ep x dp, issue 34) as the estimates take it: parallel3d's Layout of a
Strategy, one pipeline stage as a model of its own, and the layout's memory per GPU (parallel3d's peak with the
allocator, CUDA context and NCCL of the stage's own data-parallel memory estimate). Below estimator.py (an Estimate's
memory) and model_parallel.py (the layout's step time); model_parallel.py keeps these names too."""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

from ..catalog.efficiency import Efficiencies, recorded_cache
from ..i18n import say
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.choices import is_module_list, recompute_modules
from ..spec.pp_layout import parse as parse_layout
from ..spec.training import Attention, Fsdp, GradCkpt, Strategy, TrainingSpec
from . import parallel3d as p3
from .memory import MemoryResult, Phase
from .memos import data_parallel_memory

# Bytes per logit element (each GPU's vocabulary shard) at the loss's peak under torchtitan's TP, whose loss_parallel
# is on by default (job_config.py disable_loss_parallel = False, 0.2.2): its cross_entropy_loss casts the bf16 logits
# to fp32 (components/loss.py: pred.flatten(0, 1).float()) while the caller still holds them (2 + 4), and DTensor's
# parallel log-softmax (torch/distributed/tensor/parallel/loss.py _log_softmax) keeps the shifted logits (4) and
# their exp (4): 14 bytes in forward; in backward the saved fp32 log-probabilities (4), the incoming gradient (4),
# exp of the output (4) and the result (4) before its cast: 16, the larger.
TORCHTITAN_LOSS_PARALLEL_BYTES = 16.0


@lru_cache(maxsize=65536)
def layout_of(s: Strategy) -> p3.Layout:
    # expert TP not given: Megatron-Core's default is the TP size (0 here), torchtitan's 1
    etp = s.etp or (1 if s.engine == "torchtitan" else 0)
    return p3.Layout(tp=s.tp, pp=s.pp, vpp=s.vpp, cp=s.cp, ep=s.ep, etp=etp, dp=s.dp,
                     sequence_parallel=bool(s.sequence_parallel and s.tp > 1),
                     distributed_optimizer=s.zero_stage >= 1, schedule=s.pp_schedule, fsdp=s.fsdp != Fsdp.NONE,
                     ep_overlap=bool(s.ep_overlap), dispatcher=s.moe_dispatcher,
                     split_embedding=bool(s.pp_split_embedding), split_loss=bool(s.pp_split_loss),
                     pp_layout=parse_layout(s.pp_layout) if s.pp_layout else ())


def recompute_of(t: TrainingSpec) -> str:
    return {GradCkpt.FULL: "full", GradCkpt.SELECTIVE: "selective"}.get(t.grad_ckpt, "none")


def optimizer_bytes(t: TrainingSpec, s: Strategy) -> dict[str, float]:
    """Bytes per parameter of the gradients and the optimizer states where they differ from Megatron-LM's 4 and 12:
    its precision-aware optimizer as NVIDIA's DeepSeek-V3 recipes set it (Megatron-Bridge v0.1.0rc3
    recipes/deepseek/deepseek_v3.py L240-244: main grads, exp_avg and exp_avg_sq in bf16, main params fp32) keeps
    2-byte gradients and 2 + 2 bytes of moments; the fp32 master weights are Megatron's own 4 bytes under an fp8
    recipe other than delayed scaling (trainfit's fp8 is current scaling), else Transformer Engine's FusedAdam keeps
    only the 16 bits the bf16 weight does not already hold (store_param_remainders, on by default from TE 2.1:
    2 bytes). Megatron-LM core_v0.16.1 optimizer_config.py L187-199 and L355-385, optimizer/__init__.py L372-387."""
    if not s.precision_aware_optimizer:
        # Megatron-Core's DDP keeps its gradient buffer in the parameters' dtype without grad_reduce_in_fp32
        # (distributed_data_parallel.py core_v0.16.1 L147: grad_dtype = float if grad_reduce_in_fp32 else param.dtype)
        return {"grad_bytes": 2.0} if s.grad_reduce_bf16 else {}
    master = 4.0 if t.precision.value == "fp8" else 2.0
    return {"grad_bytes": 2.0, "state_bytes": master + 2.0 + 2.0}


def modules_of(t: TrainingSpec) -> frozenset:
    """Megatron-Core's recompute modules beyond the attention core that the job's selective policy names."""
    if t.grad_ckpt != GradCkpt.SELECTIVE or not is_module_list(t.selective_ac):
        return frozenset()
    return recompute_modules(t.selective_ac) - {"core_attn"}


def stage_training(t: TrainingSpec, s: Strategy | None = None) -> TrainingSpec:
    """One micro-batch of the job as the stage's data-parallel estimate takes it: a policy of Megatron's recompute
    modules becomes the attention core's selective checkpointing when it names core_attn, else none (the modules'
    recomputation is parallel3d's and model_parallel's, not the data-parallel estimator's). A layout Megatron runs
    takes Megatron-Core's loss where the stack named none of its own (memory_loss.megatron_loss_items)."""
    t1 = t.per_micro_batch
    if s is not None and s.engine == "megatron" and t1.loss_impl == "hf":
        t1 = t1.with_(loss_impl="megatron")
    if not modules_of(t):
        return t1
    if "core_attn" in recompute_modules(t.selective_ac):
        return t1.with_(selective_ac="attention")
    return t1.with_(grad_ckpt=GradCkpt.NONE, selective_ac="attention")


def stage_model(m: ModelSpec, s: Strategy, layout: p3.Layout | None = None) -> ModelSpec:
    """One pipeline stage as a model: ceil(L / pp) blocks (the busiest stage), embedding and head kept. A model
    read from its code keeps the structure of the last stage's blocks (the top ceil(L / pp): e.g. DeepSeek-V3's
    dense first layers are not among them), so its per-block FLOPs and parameters are the stage's own.

    Under expert parallelism a GPU holds num_experts / ep routed experts, each 1 / etp of its width, and the stage's
    times are divided by tp (model_parallel.step_time): so the stage at full width holds num_experts · tp / (ep ·
    etp) of them (`expert_shards` = ep · etp / tp), whose GEMMs read those weights only and get tokens · top-k /
    that many rows each (Megatron-Core's dispatcher sends a token's k copies to the experts' ranks)."""
    shards = 1.0
    if m.is_moe and s.ep > 1:
        etp = layout_of(s).expert_tp
        shards = s.ep * etp / s.tp
    if s.pp == 1 and shards == 1.0:
        return m
    # a middle stage's blocks (parallel3d.stage_layers: one more than ceil(L / pp) can hold with the embedding or the
    # loss counted in the split; a custom layout's timed rank, `layout`)
    return _stage_of(m, p3.stage_layers(p3.arch_of(m), layout or layout_of(s)), shards)


@lru_cache(maxsize=4096)
def _stage_of(m: ModelSpec, layers: int, expert_shards: float = 1.0) -> ModelSpec:
    # one object per stage size: its hash is computed once
    if layers == m.layers:
        return replace(m, expert_shards=expert_shards)
    structure = m.structure.blocks(m.layers - layers, m.layers) if m.structure is not None else None
    return replace(m, layers=layers, structure=structure, expert_shards=expert_shards)


def memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, efficiencies: Efficiencies) -> MemoryResult:
    return _memory(m, t, s, gpu, efficiencies)


@recorded_cache(maxsize=4096)
def _memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, efficiencies: Efficiencies) -> MemoryResult:
    """parallel3d's peak bytes per GPU, with the allocator, CUDA context and NCCL of the stage's own memory estimate
    (one GPU, one micro-batch)."""
    from .trainable import split_params

    layout = layout_of(s)
    eff = efficiencies.shared_view(gpu)
    sm, t1 = stage_model(m, s), stage_training(t, s)
    stage = data_parallel_memory(sm, t1, Strategy(gpus_per_node=1, nodes=1), gpu,
                                 split_params(sm, t1, int(eff("freeze_trainable_layers"))), efficiencies)
    tt = t.for_memory
    tokens = tt.sequences_per_micro_batch * tt.seq_len
    logits_bytes = stage.parts.get("logits", 0.0) / (tokens * m.vocab) or 4.0
    if s.engine == "torchtitan" and s.tp > 1:
        logits_bytes = TORCHTITAN_LOSS_PARALLEL_BYTES
    which, peak = p3.peak_memory_per_gpu(p3.arch_of(m), layout, seq_len=tt.seq_len,
                                         micro_batch=tt.sequences_per_micro_batch, micro_batches=t.grad_accum,
                                         recompute=recompute_of(t), flash_attention=t.attention != Attention.EAGER,
                                         logits_bytes=logits_bytes, modules=modules_of(t), **optimizer_bytes(t, s))
    allocated = peak.total
    reserved = allocated * (1 + stage.allocator_fraction) + stage.allocator_constant
    device = reserved + (stage.device - stage.reserved)
    overheads = (("other/allocator_cache", reserved - allocated), ("other/cuda_context_and_nccl", device - reserved))
    note = say("es_pp_stage_memory", which=say(f"es_w_{which}"), layout=s.label())  # which: first | last
    # the first stage's peak: the first backward begins with every in-flight micro-batch's activations held (1F1B)
    return MemoryResult(phases=(Phase("backward_start", (dict(peak.parts),), allocated),), peak_phase="backward_start",
                        allocated=allocated, reserved=reserved, device=device, usable=stage.usable,
                        overheads=overheads, regime=stage.regime, notes=(note,),
                        allocator_fraction=stage.allocator_fraction, allocator_constant=stage.allocator_constant)
