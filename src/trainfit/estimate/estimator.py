"""The data-parallel estimator: one configuration without tp / pp / cp / ep in, one Estimate out (memory per GPU,
FLOPs, step time, throughput, bottleneck), and the memory of an Estimate of any layout. Below model_parallel.py (which
runs it for one pipeline stage on one GPU) and core.py (run_estimate: either estimator, by the strategy).

Pure: no I/O, no printing, no torch. Everything it assumes is returned with the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from ..catalog.efficiency import Efficiencies, EfficiencyView, used_by
from ..errors import SpecError
from ..i18n import say
from ..spec.cluster import Cluster
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.choices import is_module_list, recompute_modules
from ..spec.training import (Attention, Fsdp, GradCkpt, Method, Offload, Optimizer, Precision, Strategy, Task,
                             TrainingSpec, stack_refuses)
from ..units import GiB
from .activations import SOFTCAP_SDPA_NOTE, attention_that_runs
from .flops import StepFlops, step_flops
from .memory import MemoryResult, host_offload_bytes
from .memos import data_parallel_memory
from .params import mla_latent_width
from .perf import StepTime, comm_time, compute_time, offload_time, optimizer_time
from .trainable import ParamSplit, split_params


@dataclass(frozen=True)
class Estimate:
    model: ModelSpec
    training: TrainingSpec
    strategy: Strategy
    cluster: Cluster
    split: ParamSplit
    flops: StepFlops
    time: StepTime
    efficiencies: dict  # the named values used for this GPU (shared by estimates of the same GPU)
    warnings: tuple[str, ...]
    table: Efficiencies  # what `memory` is computed with (on first use: the search rarely needs it)

    @cached_property
    def memory(self) -> MemoryResult:
        return memory_of(self.model, self.training, self.strategy, self.gpu, self.split, self.table)

    @property
    def host_memory_bytes(self) -> float:
        """Host RAM per node CPU offload needs (0 without offload)."""
        return host_offload_bytes(self.training, self.strategy, self.split)

    @property
    def assumptions(self) -> tuple[str, ...]:
        return (self.cluster.assumptions + self.memory.notes +
                tuple(_standing_assumptions(self.model, self.training, self.strategy)))

    @property
    def gpu(self):
        return self.cluster.gpu

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def step_time_s(self) -> float:
        return self.time.total

    @property
    def tokens_per_step(self) -> int:
        """Each data-parallel rank's micro-batches (model-parallel GPUs share theirs)."""
        t = self.training
        return t.useful_tokens_per_micro_batch * t.grad_accum * self.strategy.dp

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.strategy.gpus

    @property
    def mfu(self) -> float:
        """Model FLOPs (PaLM convention) per second per GPU over the dense peak of the training dtype."""
        peak = self.gpu.peak(_mfu_dtype(self.training.precision)) or self.gpu.peak("fp32")
        per_gpu = self.flops.model_flops * self.training.grad_accum / self.step_time_s / self.strategy.model_parallel
        return per_gpu * self.useful_share / peak

    @property
    def useful_share(self) -> float:
        """Share of the computed tokens that are data, not padding (1 for packed sequences)."""
        t = self.training
        return t.useful_tokens_per_micro_batch / t.for_time.tokens_per_micro_batch

    @property
    def bottleneck(self) -> str:
        bound = self.time.bound
        return max(bound, key=bound.get) if bound else "compute"


def _mfu_dtype(p: Precision) -> str:
    return {"fp32": "tf32"}.get(p.value, p.value)


def check_compatibility(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster) -> list[str]:
    """Errors for impossible combinations; returns warnings for risky ones."""
    return list(_compatibility(m, t, s, cluster.gpu))


@lru_cache(maxsize=65536)
def _compatibility(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec) -> tuple[str, ...]:
    warnings: list[str] = []
    cc = gpu.compute_capability or 0.0
    if t.precision == Precision.BF16 and not gpu.bf16_supported:
        raise SpecError(say("pl_rule_no_bf16", gpu=gpu.name, cc=cc))  # a sentence of the table (errors.sentence_of)
    if t.precision == Precision.FP8 and not gpu.fp8_supported:
        raise SpecError(say("pl_rule_no_fp8", gpu=gpu.name))
    if t.attention == Attention.FLASH and cc and cc < 8.0:
        raise SpecError(say("pl_rule_flash", gpu=gpu.name, cc=cc))
    if t.method == Method.QLORA and s.shards_params:
        warnings.append(say("es_qlora_quant_storage"))
    if t.method == Method.QLORA and s.offload != Offload.NONE:
        warnings.append(say("es_qlora_offload"))
    if t.optimizer == Optimizer.ADAMW_8BIT and s.offload != Offload.NONE:
        raise SpecError(say("pl_rule_adamw8bit_offload"))
    if s.engine == "fsdp" and s.offload == Offload.OPTIMIZER:
        raise SpecError(say("pl_rule_fsdp_offload"))
    if m.position == "learned" and t.seq_len > m.max_sequence:
        raise SpecError(say("ei_learned_positions", model=m.name, positions=m.max_sequence, seq=t.seq_len))
    if m.position == "rope" and m.max_positions and t.seq_len > m.max_positions:
        raise SpecError(say("ei_seq_len_too_long", seq=t.seq_len, model=m.name, positions=m.max_positions,
                            rest=say("ei_seq_len_rope_mpe")))
    if t.task == Task.CLASSIFICATION and t.attention == Attention.FLASH and m.is_encoder:
        warnings.append(say("es_bert_flash"))
    if t.precision == Precision.FP16 and t.method == Method.FULL and s.engine in ("single", "ddp"):
        warnings.append(say("es_fp16_loss_scaling"))
    if s.engine == "fsdp" and t.precision == Precision.FP16:
        raise SpecError(say("pl_rule_fsdp_fp16"))
    if t.grad_ckpt == GradCkpt.SELECTIVE and is_module_list(t.selective_ac):
        _check_recompute_modules(m, t, s)
    if s.fsdp != Fsdp.NONE and t.method == Method.QLORA and s.offload != Offload.NONE:
        raise SpecError(say("pl_rule_qlora_fsdp_offload"))
    return tuple(warnings)


def adapt_to_gpu(t: TrainingSpec, gpu: GpuSpec) -> tuple[TrainingSpec, list[str]]:
    """Make a workload legal on this GPU: bf16 -> fp16 on Volta/Turing, FP8 -> bf16 before Ada/Hopper,
    FlashAttention -> SDPA before Ampere. Returns the changes as flags a user would type."""
    changes: list[str] = []
    if t.precision == Precision.BF16 and not gpu.bf16_supported:
        t = t.with_(precision=Precision.FP16)
        changes.append(say("es_adapt_fp16"))
    if t.precision == Precision.FP8 and not gpu.fp8_supported:
        t = t.with_(precision=Precision.BF16 if gpu.bf16_supported else Precision.FP16)
        changes.append(say("es_adapt_fp8", precision=t.precision.value))
    if t.attention == Attention.FLASH and (gpu.compute_capability or 0) < 8.0:
        t = t.with_(attention=Attention.SDPA)
        changes.append(say("es_adapt_sdpa"))
    return t, changes


def _check_recompute_modules(m: ModelSpec, t: TrainingSpec, s: Strategy) -> None:
    """Megatron-Core's recompute modules run on its own layouts only (tp / pp / cp / ep without FSDP); mla_up_proj
    needs multi-latent attention, as Megatron's TransformerConfig checks (transformer_config.py L1969-1972)."""
    if s.engine != "megatron":
        raise SpecError(say("pl_rule_recompute_modules", policy=t.selective_ac))
    if "mla_up_proj" in recompute_modules(t.selective_ac) and not mla_latent_width(m):
        raise SpecError(say("pl_rule_recompute_mla", model=m.name))


def data_parallel_estimate(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                           warnings, keys: set | None = None) -> Estimate:
    """The estimate of a data-parallel configuration on one efficiency view; `warnings`: check_compatibility's."""
    split = split_params(m, t, int(eff("freeze_trainable_layers")))
    ran = attention_that_runs(m, t)  # soft-capped attention logits: eager runs where SDPA is asked for
    if ran is not t:
        warnings = [*warnings, SOFTCAP_SDPA_NOTE]
    tt = ran.for_time  # variable-length data: micro-batches computed at their padded length
    flops = step_flops(m, tt, split)
    st = StepTime()
    fwd, bwd = compute_time(m, tt, s, split, flops, cluster, eff, st)
    optimizer_time(m, tt, s, split, cluster, eff, st)
    comm_time(m, tt, s, split, cluster, eff, fwd, bwd, st)
    offload_time(tt, s, split, cluster, eff, st)
    st.add("overhead/step", eff("step_overhead_s"), "overhead")
    host = host_offload_bytes(t, s, split)
    inst = cluster.instance
    if host and inst is not None and inst.ram_gib and host > inst.ram_gib * GiB:
        warnings = (*warnings, say("es_offload_host_ram", need=host / GiB, instance=inst.instance_type,
                                   ram=inst.ram_gib))
    framework = eff.eff.framework
    refused = stack_refuses(t.model_code, t.method, t.grad_ckpt, s, framework) if framework else None
    if refused:  # the layout the stated stack's own scripts do not run: plan --framework leaves it out
        warnings = (*warnings, say("pl_stack_warning", rule=refused, framework=framework))
    warnings = (*warnings, *_expert_warning(m, t, s, cluster), *(m.structure.notes if m.structure is not None else ()))
    return Estimate(m, t, s, cluster, split, flops, st, _used(eff, keys), tuple(warnings), eff.eff)


def _used(eff: EfficiencyView, keys: set | None) -> dict:
    return eff.used if keys is None else used_by(eff, keys)


def _expert_warning(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster) -> tuple[str, ...]:
    """Under data parallelism alone: say so when the routed experts alone outgrow what one GPU holds, and what
    spreads them (expert parallelism, a model-parallel layout of its own, or ZeRO-3 / FSDP)."""
    if not m.is_moe:
        return ()
    from .params import layer_tensors

    experts = m.layers * sum(x.numel for x in layer_tensors(m) if x.role == "expert")
    per_gpu = 2.0 * experts / (s.gpus if s.shards_params else 1)  # 16-bit weights
    if per_gpu <= cluster.gpu.memory_bytes:
        return ()
    key = "es_experts_ep" if t.method == Method.FULL else "es_experts_zero3"  # expert parallelism: full training
    return (say(key, gib=per_gpu / GiB, gb=cluster.gpu.memory_gb),)


def memory_of(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, split: ParamSplit,
              efficiencies: Efficiencies) -> MemoryResult:
    """Memory only (the search's first, cheap test)."""
    if s.is_3d:
        from .layout import memory

        return memory(m, t, s, gpu, efficiencies)
    return data_parallel_memory(m, t, s, gpu, split, efficiencies)


def _standing_assumptions(m: ModelSpec, t: TrainingSpec, s: Strategy) -> list[str]:
    out = [_length_assumption(t)]
    if t.method in (Method.LORA, Method.QLORA):
        out.append(say("es_lora_bf16" if t.param_dtype == "bf16" else "es_lora_peft", rank=t.lora_rank,
                       targets=",".join(t.lora_targets)))
    if t.model_code == "litgpt":
        out.append(say("es_litgpt_code"))
    if t.method == Method.FREEZE:
        out.append(say("es_freeze"))
    if t.task == Task.CLASSIFICATION:
        out.append(say("es_cls_head", n=t.num_labels))
    if t.task == Task.DPO:
        out.append(say("es_dpo_pairs"))
    if t.optimizer.value in ("adamw", "sgd", "sgd-nomomentum") and s.engine != "deepspeed":
        out.append(say(f"es_opt_{t.optimizer_impl.value}", opt=t.optimizer.value))  # fused, foreach, forloop
    if s.engine in ("single", "ddp") and t.method == Method.FULL and t.precision != Precision.FP32:
        out.append(say("es_full_fp32_autocast" if t.param_dtype == "fp32" else "es_pure_bf16"))
    return out


def _length_assumption(t: TrainingSpec) -> str:
    if not t.variable_length:
        if t.data_layout in (None, "packed"):
            return (say("es_len_packed_from", n=t.seq_len, src=t.lengths_from) if t.lengths_from
                    else say("es_len_packed", n=t.seq_len))
        return say("es_len_padded_unknown", layout=t.data_layout, n=t.seq_len)
    src = {"src": t.lengths_from} if t.lengths_from else {}  # "; lengths from ..." where known
    tail = "_from" if t.lengths_from else ""
    if t.data_layout == "padded-max" and t.avg_len:
        return say("es_len_padded_max" + tail, n=t.seq_len, avg=t.avg_len, waste=1.0 - t.avg_len / t.seq_len, **src)
    if not t.avg_len:
        return say("es_len_varlen_unknown", n=t.seq_len)
    return say("es_len_varlen" + tail, n=t.seq_len, p=t.time_len, avg=t.avg_len, waste=1.0 - t.avg_len / t.time_len,
               **src)


def gib(x: float) -> float:
    return round(x / GiB, 3)
