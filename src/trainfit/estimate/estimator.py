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
from ..spec.cluster import Cluster
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import (Attention, Fsdp, Method, Offload, Optimizer, Precision, Strategy, Task,
                             TrainingSpec, stack_refuses)
from ..units import GiB
from .activations import SOFTCAP_SDPA_NOTE, attention_that_runs
from .flops import StepFlops, step_flops
from .memory import MemoryResult, host_offload_bytes
from .memos import data_parallel_memory
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
        raise SpecError(f"{gpu.name} has no bf16 support (compute capability {cc:g}); use --precision fp16")
    if t.precision == Precision.FP8 and not gpu.fp8_supported:
        raise SpecError(f"{gpu.name} has no FP8 tensor cores (FP8 needs Ada or Hopper); use --precision bf16")
    if t.attention == Attention.FLASH and cc and cc < 8.0:
        raise SpecError(f"FlashAttention-2 needs compute capability 8.0+ ({gpu.name} is {cc:g}); "
                        "use --attention sdpa (memory-efficient kernel)")
    if t.method == Method.QLORA and s.shards_params:
        warnings.append("QLoRA with ZeRO-3/FSDP needs bnb_4bit_quant_storage set to the compute dtype "
                        "(bitsandbytes >= 0.43); generated configs set it")
    if t.method == Method.QLORA and s.offload != Offload.NONE:
        warnings.append("offloading a 4-bit model is rarely worth it: the adapters' optimizer is tiny")
    if t.optimizer == Optimizer.ADAMW_8BIT and s.offload != Offload.NONE:
        raise SpecError("8-bit AdamW (bitsandbytes) runs on the GPU and cannot be offloaded; "
                        "use --optimizer adamw with --offload")
    if s.engine == "fsdp" and s.offload == Offload.OPTIMIZER:
        raise SpecError("FSDP offloads parameters and gradients together: use --offload all")
    if m.position == "learned" and t.seq_len > m.max_sequence:
        raise SpecError(f"{m.name} has learned positions for {m.max_sequence} tokens; --seq-len {t.seq_len} "
                        "is longer")
    if m.position == "rope" and m.max_positions and t.seq_len > m.max_positions:
        raise SpecError(f"--seq-len {t.seq_len} is longer than {m.name}'s {m.max_positions} positions "
                        "(max_position_embeddings); a context-extended model says so in its config.json "
                        "(rope_scaling and a larger max_position_embeddings): pass that config.json")
    if t.task == Task.CLASSIFICATION and t.attention == Attention.FLASH and m.is_encoder:
        warnings.append("BERT-style models have no FlashAttention-2 path in transformers; SDPA is used")
    if t.precision == Precision.FP16 and t.method == Method.FULL and s.engine in ("single", "ddp"):
        warnings.append("fp16 mixed precision needs loss scaling (the generated Trainer config enables it)")
    if s.engine == "fsdp" and t.precision == Precision.FP16:
        raise SpecError("trainfit's FSDP setups train in bf16 or fp32; on GPUs without bf16 (V100, T4) use DeepSpeed "
                        "ZeRO (--zero 1/2/3), which scales fp16 losses")
    if s.fsdp != Fsdp.NONE and t.method == Method.QLORA and s.offload != Offload.NONE:
        raise SpecError("QLoRA with FSDP CPU offload is not supported by bitsandbytes")
    return tuple(warnings)


def adapt_to_gpu(t: TrainingSpec, gpu: GpuSpec) -> tuple[TrainingSpec, list[str]]:
    """Make a workload legal on this GPU: bf16 -> fp16 on Volta/Turing, FP8 -> bf16 before Ada/Hopper,
    FlashAttention -> SDPA before Ampere. Returns the changes as flags a user would type."""
    changes: list[str] = []
    if t.precision == Precision.BF16 and not gpu.bf16_supported:
        t = t.with_(precision=Precision.FP16)
        changes.append("--precision fp16 (no bf16 on this GPU)")
    if t.precision == Precision.FP8 and not gpu.fp8_supported:
        t = t.with_(precision=Precision.BF16 if gpu.bf16_supported else Precision.FP16)
        changes.append(f"--precision {t.precision.value} (no FP8 on this GPU)")
    if t.attention == Attention.FLASH and (gpu.compute_capability or 0) < 8.0:
        t = t.with_(attention=Attention.SDPA)
        changes.append("--attention sdpa (FlashAttention-2 needs Ampere+)")
    return t, changes


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
        warnings = (*warnings, f"CPU offload needs ~{host / GiB:,.0f} GiB of host RAM per node; "
                               f"{inst.instance_type} has {inst.ram_gib:g} GiB")
    framework = eff.eff.framework
    refused = stack_refuses(t.model_code, t.method, t.grad_ckpt, s, framework) if framework else None
    if refused:  # the layout the stated stack's own scripts do not run: plan --framework leaves it out
        warnings = (*warnings, f"{refused}: `plan --framework {framework}` does not offer this layout")
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
    head = (f"the routed experts alone take {per_gpu / GiB:,.0f} GiB per GPU in 16 bit, more than a "
            f"{cluster.gpu.memory_gb:g} GB GPU: ")
    if t.method == Method.FULL:
        return (head + "spread them with expert parallelism (--ep: each GPU holds a share of the experts, "
                "Megatron-Core) or shard them with ZeRO-3 / FSDP",)
    return (head + "shard them with ZeRO-3 / FSDP (expert parallelism is modelled for full training only)",)


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
        if t.param_dtype == "bf16":
            out.append(f"LoRA rank {t.lora_rank} on {','.join(t.lora_targets)}; adapters in bf16 (the stack trains "
                       "in pure 16-bit)")
        else:
            out.append(f"LoRA rank {t.lora_rank} on {','.join(t.lora_targets)}; adapters in fp32 (PEFT default)")
    if t.model_code == "litgpt":
        out.append("LitGPT's own model and loop (model_code litgpt): k and v repeated to every head, dropout 0.05 before "
                   "each adapter, head and loss in 128-token bf16 chunks, the previous step's logits alive into the "
                   "next forward")
    if t.method == Method.FREEZE:
        out.append("freeze: only the last blocks train (freeze_trainable_layers)")
    if t.task == Task.CLASSIFICATION:
        out.append(f"classification head with {t.num_labels} labels")
    if t.task == Task.DPO:
        out.append("DPO: micro-batch counts preference pairs (chosen + rejected = 2 sequences)")
    if t.optimizer.value in ("adamw", "sgd", "sgd-nomomentum") and s.engine != "deepspeed":
        out.append(f"optimizer_impl {t.optimizer_impl.value}: torch {t.optimizer.value} run as "
                   + {"fused": "one fused kernel (Hugging Face Trainer's default adamw_torch_fused, train.py)",
                      "foreach": "multi-tensor foreach ops (torch's own default on CUDA): one more state's worth "
                                 "of memory during the step",
                      "forloop": "a loop over tensors: intermediates of the largest tensor during the step"}[
                       t.optimizer_impl.value])
    if s.engine in ("single", "ddp") and t.method == Method.FULL and t.precision != Precision.FP32:
        out.append("full fine-tuning without DeepSpeed/FSDP keeps fp32 weights under autocast"
                   if t.param_dtype == "fp32" else "pure bf16: weights, gradients and AdamW states in bf16")
    return out


def _length_assumption(t: TrainingSpec) -> str:
    if not t.variable_length:
        if t.data_layout in (None, "packed"):
            return (f"sequences packed to exactly {t.seq_len} tokens (no padding)"
                    + (f"; {t.lengths_from}" if t.lengths_from else ""))
        return (f"samples padded ({t.data_layout}), lengths not given: memory and time at the longest, {t.seq_len} "
                "tokens (time an upper bound; --avg-len or --data gives them)")
    if t.data_layout == "padded-max" and t.avg_len:
        return (f"every sample padded to {t.seq_len} tokens (padded-max): memory and time at {t.seq_len} tokens "
                f"(mean sample {t.avg_len}; {1.0 - t.avg_len / t.seq_len:.0%} padding)"
                + (f"; lengths from {t.lengths_from}" if t.lengths_from else ""))
    if not t.avg_len:
        return (f"variable-length samples, mean length not given: memory and time at the longest, {t.seq_len} "
                "tokens (time an upper bound; --avg-len or --data gives it)")
    waste = 1.0 - t.avg_len / t.time_len
    return (f"variable-length samples padded to the longest of each micro-batch: memory at the longest, {t.seq_len} "
            f"tokens; time at {t.time_len} tokens per sequence (mean sample {t.avg_len}; {waste:.0%} padding)"
            + (f"; lengths from {t.lengths_from}" if t.lengths_from else ""))


def gib(x: float) -> float:
    return round(x / GiB, 3)
