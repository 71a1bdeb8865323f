"""The step's moments and what turns their peak into device memory: a phase is the sum of its named items
("part/detail" -> bytes); the result adds the caching allocator's overhead (a fitted fraction and constant, more when
shapes vary from step to step), the CUDA context and NCCL's buffers (calibrated per GPU, catalog/efficiency.py).
The forward's dtypes (`regime_for`) are read here too: every term depends on them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from ..catalog.efficiency import EfficiencyView
from ..i18n import say
from ..spec.hardware import GpuSpec
from ..spec.training import Method, Precision, Strategy, TrainingSpec
from ..units import GiB
from .activations import Regime


PARTS = ("weights", "gradients", "optimizer", "activations", "logits", "other")


def _add(bucket: dict[str, float], key: str, value: float) -> None:
    if value:
        bucket[key] = bucket.get(key, 0.0) + value


@dataclass
class Phase:
    """One moment of the step: the sum of its component buckets ("part/detail" -> bytes)."""

    name: str
    components: tuple[dict[str, float], ...]
    total: float

    @cached_property
    def items(self) -> dict[str, float]:  # read by every GPU's finish (the phases are shared): merged once
        out: dict[str, float] = {}
        for component in self.components:
            for key, value in component.items():
                _add(out, key, value)
        return out

    def parts(self) -> dict[str, float]:
        out = {p: 0.0 for p in PARTS}
        for key, value in self.items.items():
            out[key.split("/", 1)[0]] += value
        return out

    @cached_property
    def varying(self) -> float:
        """The bytes whose shapes follow the batch's length: the activations and logits."""
        return sum(v for k, v in self.items.items() if k.startswith(("activations/", "logits/")))


@dataclass(frozen=True)
class MemoryResult:
    phases: tuple[Phase, ...]
    peak_phase: str
    allocated: float  # bytes, the allocator's live peak
    reserved: float  # allocated x (1 + allocator overhead)
    device: float  # reserved + CUDA context + NCCL buffers (what nvidia-smi shows)
    usable: float  # what the GPU offers the application
    overheads: tuple[tuple[str, float], ...]  # "other/..." items outside the allocator's live peak
    regime: Regime
    notes: tuple[str, ...]
    paged: float = 0.0  # optimizer states in CUDA managed memory: outside the allocator, evicted to host under pressure
    allocator_fraction: float = 0.0  # reserved = allocated x (1 + allocator_fraction) + allocator_constant
    allocator_constant: float = 0.0

    @property
    def fits(self) -> bool:
        """Paged states page out to host memory: they never make a job not fit."""
        resident = dict(self.overheads).get("optimizer/paged_states_resident", 0.0)
        return self.device - resident <= self.usable

    @cached_property
    def detail(self) -> dict[str, float]:
        """Every item of the peak phase ("part/detail" -> bytes), overheads included; sums to `device`."""
        peak = next(p for p in self.phases if p.name == self.peak_phase)
        out = dict(peak.items)  # the phase's own dict is shared (cached)
        out.update(self.overheads)
        return out

    @cached_property
    def parts(self) -> dict[str, float]:
        """The peak by part (weights, gradients, optimizer, activations, logits, other); sums to `device`."""
        out = {p: 0.0 for p in PARTS}
        for key, value in self.detail.items():
            out[key.split("/", 1)[0]] += value
        return out

    @cached_property
    def resident_states(self) -> float:
        """Bytes that stay on each GPU through the whole step once training runs: the model's weights as stored
        (shards, not gathered copies) and the optimizer's states and master weights (paged states excluded).
        No allocator counter of a run of this setup can read less."""
        return sum(v for k, v in self.detail.items()
                   if (k.startswith("weights/") and not k.startswith("weights/gathered"))
                   or k in ("optimizer/states", "optimizer/master_fp32"))

    def gib(self) -> dict[str, float]:
        out = {k: round(v / GiB, 3) for k, v in self.parts.items()}
        out["total"] = round(self.device / GiB, 3)
        return out


def _phase(name: str, components: tuple[dict[str, float], ...], totals: dict[int, float]) -> Phase:
    """A phase whose total adds the (precomputed, by id) totals of shared component buckets."""
    return Phase(name, components, sum(totals.get(id(c)) if id(c) in totals else sum(c.values())
                                       for c in components))


@dataclass(frozen=True)
class AffineMemory:
    """Device memory as a function of micro-batch b and data-parallel GPUs n, for one method, strategy and GPU.

    Every item of every phase is a constant (unsharded states, buffers), proportional to the tokens of a micro-batch
    (activations, loss buffers) or divided by the GPUs it is sharded over (ZeRO/FSDP states), so each phase total
    is exactly p(b, n) = a + c·b + s/n for a fixed engine (one GPU, or two and more); the allocator overhead is a
    fixed fraction plus a constant, and the CUDA context and NCCL buffers constants. Three estimates fit it; the
    search then tests every micro-batch and GPU count for the price of those three. `tests/test_search.py` checks it
    against direct estimates.

    Variable-length batches add the allocator's reserve for shapes that change (`varying_shapes_reserve`): a
    fraction of the activations and logits of the peak phase, each phase's share affine in b and 1/n the same way,
    so the device memory is the peak phase's total plus that fraction of the same phase's varying bytes — exact,
    though not convex in b (the peak phase can change).
    """

    intercepts: tuple[float, ...]
    per_micro_batch: tuple[float, ...]
    per_inverse_gpus: tuple[float, ...]
    overhead_fraction: float
    constant: float
    # variable-length batches: each phase's varying bytes (activations, logits) a + c·b + s/n, and the fraction of
    # the peak phase's the allocator reserves beyond them (0: fixed shapes)
    varying: tuple[tuple[float, float, float], ...] = ()
    varying_fraction: float = 0.0

    @classmethod
    def fit(cls, base: "MemoryResult", more_batch: "MemoryResult", more_gpus: "MemoryResult | None",
            b: int, n: int, b2: int, n2: int, varying_fraction: float = 0.0) -> "AffineMemory":
        """From estimates at (b, n), (b2, n) and (b, n2)."""
        def affine(values) -> tuple[tuple[float, float, float], ...]:
            out = []
            for a, m, g in values:
                per_b = (m - a) / (b2 - b)
                per_n = 0.0 if g is None else (a - g) / (1 / n - 1 / n2)
                out.append((a - per_b * b - per_n / n, per_b, per_n))
            return tuple(out)

        gpus = more_gpus.phases if more_gpus is not None else (None,) * len(base.phases)
        totals = affine((a.total, m.total, None if g is None else g.total)
                        for a, m, g in zip(base.phases, more_batch.phases, gpus))
        varying = affine((varying_bytes(a), varying_bytes(m), None if g is None else varying_bytes(g))
                         for a, m, g in zip(base.phases, more_batch.phases, gpus)) if varying_fraction else ()
        return cls(tuple(x[0] for x in totals), tuple(x[1] for x in totals), tuple(x[2] for x in totals),
                   base.allocator_fraction, base.device - base.reserved + base.allocator_constant,
                   varying, varying_fraction)

    def phase_totals(self, micro_batch: int, gpus: int) -> list[float]:
        return [a + c * micro_batch + s / gpus
                for a, c, s in zip(self.intercepts, self.per_micro_batch, self.per_inverse_gpus)]

    def device(self, micro_batch: int, gpus: int) -> float:
        if not self.varying_fraction:
            allocated = max(a + c * micro_batch + s / gpus
                            for a, c, s in zip(self.intercepts, self.per_micro_batch, self.per_inverse_gpus))
            return allocated * (1.0 + self.overhead_fraction) + self.constant
        totals = self.phase_totals(micro_batch, gpus)
        peak = max(range(len(totals)), key=totals.__getitem__)  # the first largest, as _finish takes it
        a, c, s = self.varying[peak]
        return totals[peak] * (1.0 + self.overhead_fraction) + self.constant + \
            self.varying_fraction * (a + c * micro_batch + s / gpus)


def regime_for(t: TrainingSpec, s: Strategy) -> Regime:
    """Dtypes of the forward pass, as the generated training code runs it; whose code runs it (LitGPT's or
    transformers')."""
    r = _regime(t, s)
    if t.model_code == "litgpt":
        return replace(r, litgpt=True)
    return replace(r, lora_dropout=True) if t.is_peft and t.lora_dropout > 0 else r


def _regime(t: TrainingSpec, s: Strategy) -> Regime:
    act = 4 if t.precision == Precision.FP32 else 2
    if t.precision == Precision.FP32:
        return Regime(act=4, weight=4, autocast=False)
    if t.method in (Method.LORA, Method.QLORA):
        keeps = t.method == Method.QLORA and t.kbit_keeps_inputs
        if t.param_dtype == "bf16":  # pure 16-bit stacks (torchtune, LitGPT bf16-true): 16-bit adapters, no autocast
            return Regime(act=act, weight=2, autocast=False, adapter=2, kbit_keeps_inputs=keeps)
        # 16-bit base, fp32 adapters, Trainer's autocast; QLoRA through PEFT: fp32 hidden states
        return Regime(act=act, weight=2, autocast=True, kbit_upcast=t.method == Method.QLORA and t.kbit_fp32_upcast,
                      kbit_keeps_inputs=keeps)
    if s.engine == "deepspeed":
        return Regime(act=act, weight=2, autocast=False)  # DeepSpeed runs a bf16/fp16 module, no autocast
    if s.engine == "fsdp":
        return Regime(act=act, weight=2, autocast=True)  # FSDP mixed precision gathers params in bf16
    return Regime(act=act, weight=4 if t.param_dtype == "fp32" else 2, autocast=True)


def usable_bytes(gpu: GpuSpec, eff: EfficiencyView) -> float:
    return gpu.memory_bytes * (1.0 - eff("memory_reserved_fraction")) * (1.0 - eff("fit_headroom_fraction"))


def varying_shapes_reserve(peak: Phase, t: TrainingSpec | None, eff: EfficiencyView) -> tuple[float, str | None]:
    """The caching allocator's extra reserve when shapes change from step to step (variable-length batches): blocks
    cached for one length cannot serve a longer one, so memory reserved grows beyond memory allocated. A named share
    of the activations and logits at the peak (what changes shape); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
    grows segments in place and keeps a smaller one. Not in allocated memory."""
    if t is None or not t.variable_length:
        return 0.0, None
    name = varlen_fraction_name(t)
    extra = eff(name) * varying_bytes(peak)
    return extra, say("es_allocator_varlen", gib=extra / GiB, name=name, frac=eff(name))


def varlen_fraction_name(t: TrainingSpec) -> str:
    """The efficiency value naming the share of varying bytes the allocator keeps beyond them."""
    return "allocator_varlen_expandable_fraction" if t.expandable_segments else "allocator_varlen_fraction"


def varying_bytes(phase: Phase) -> float:
    """The bytes of a phase whose shapes follow the batch's length: its activations and logits."""
    return phase.varying


def _finish(phases: tuple[Phase, ...], gpu: GpuSpec, eff: EfficiencyView, s: Strategy, r: Regime,
            notes: list[str], paged: float = 0.0, t: TrainingSpec | None = None) -> MemoryResult:
    peak = max(phases, key=lambda p: p.total)
    allocated = peak.total
    fraction, constant = eff("allocator_overhead_fraction"), eff("allocator_overhead_gib") * GiB
    varlen, note = varying_shapes_reserve(peak, t, eff)
    if note:
        notes = [*notes, note]
    overhead = allocated * fraction + constant + varlen
    context = eff("cuda_context_gib") * GiB
    nccl = eff("nccl_buffers_gib") * GiB if s.gpus > 1 else 0.0
    overheads = [("other/allocator_overhead", overhead - varlen), ("other/cuda_context", context)]
    if varlen:
        overheads.append(("other/allocator_varying_shapes", varlen))
    if nccl:
        overheads.append(("other/nccl_buffers", nccl))
    usable = usable_bytes(gpu, eff)
    device = allocated + overhead + context + nccl
    resident = min(paged, max(0.0, usable - device))  # managed memory stays on the GPU while it has room
    if resident:
        overheads.append(("optimizer/paged_states_resident", resident))
    return MemoryResult(phases=phases, peak_phase=peak.name, allocated=allocated, reserved=allocated + overhead,
                        device=device + resident, usable=usable, overheads=tuple(overheads), regime=r,
                        notes=tuple(notes), paged=paged, allocator_fraction=fraction, allocator_constant=constant)
