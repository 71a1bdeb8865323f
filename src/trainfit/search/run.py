"""The plan search: every offer x layout x method x strategy x checkpointing x micro-batch, evaluated by the
analytic estimator, kept or rejected with a counted reason.

Estimates are memoised on what they depend on (GPU model, links, GPU counts, workload): instance types that differ
only in CPU, RAM or price share one estimate, so the whole catalog is searched in well under a second.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field
from itertools import product

from ..catalog import get_gpu
from ..catalog.efficiency import Efficiencies, EfficiencyView
from ..errors import SpecError
from ..estimate.core import Estimate, adapt_to_gpu, check_compatibility, memory_of, run_estimate
from ..estimate.hostram import LoadingRam, loading_ram_of
from ..estimate.memory import AffineMemory, usable_bytes
from ..estimate.params import count_params
from ..estimate.trainable import split_params
from ..spec.cluster import Cluster, cluster_for
from ..spec.model import ModelSpec
from ..spec.training import GradCkpt, Method, Offload, Strategy, TrainingSpec, stack_refuses
from ..units import GB, GiB, HOUR
from .cost import job_cost
from .interruption import SpotOverhead, spot_overhead
from .reasons import Reason, Rejection
from .space import Offer, checkpointing, layouts, methods, micro_batches, offers, strategies
from .workload import Workload

# Rejection reasons the search counts (report/ and i18n.notes word them in the user's language).


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration that fits in memory (with the plan's headroom)."""

    offer: Offer
    estimate: Estimate
    hours: float  # wall clock: training + start-up + checkpoints
    train_hours: float
    overhead_hours: float
    billed_hours: float
    cost: float  # in the request's currency
    spot: SpotOverhead | None = None  # interruptions and the checkpoint interval, on spot prices
    oom_risk: float | None = None  # probability the peak exceeds usable memory (None: judged by the flat headroom)
    loading: LoadingRam | None = None  # host RAM per node that loading the model needs (estimate.hostram)

    @property
    def nodes(self) -> int:
        return self.estimate.strategy.nodes

    @property
    def key(self) -> tuple:
        s = self.estimate.strategy
        return (self.offer.instance.key, s.gpus_per_node, s.nodes, self.estimate.training.method)


@dataclass
class SearchResult:
    fitting: list[Candidate] = field(default_factory=list)
    rejected: Counter = field(default_factory=Counter)
    skipped_offers: Counter = field(default_factory=Counter)
    candidates: int = 0
    estimates: int = 0
    seconds: float = 0.0
    offers: list[Offer] = field(default_factory=list)
    no_fit_by_gpu: dict[str, tuple[float, float]] = field(default_factory=dict)  # GPU -> (smallest need, usable)
    # (GPU, GPUs, nodes, method) -> the least risky option rejected because its OOM risk exceeds the limit
    too_risky: dict[tuple, "RiskyOption"] = field(default_factory=dict)
    max_oom_risk: float | None = None
    # GPU -> (smallest host RAM per node that loading needs, the RAM of that instance), bytes: options rejected for it
    host_ram_short: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class RiskyOption:
    """An option that fits by the point estimate (or nearly) but runs out of memory with more than the accepted
    probability; `safe_need` is the predicted peak at which its risk would be acceptable."""
    gpu: str
    gpus: int
    nodes: int
    method: str
    micro_batch: int
    strategy: str
    need: float  # predicted peak, bytes
    usable: float
    risk: float
    safe_need: float | None


class _Estimator:
    """Memoised estimates; one efficiency view per GPU model."""

    def __init__(self, model: ModelSpec, efficiencies: Efficiencies):
        self.model = model
        self.eff = efficiencies
        self.memo: dict[tuple, Estimate | SpecError] = {}
        self.clusters: dict[tuple, Cluster] = {}
        self.adaptations: dict[tuple, TrainingSpec] = {}
        self.memory: dict[tuple, AffineMemory | SpecError] = {}
        self.gpu_limits: dict[str, tuple[float, float]] = {}
        self._params: int | None = None

    def loading(self, e: Estimate) -> LoadingRam:
        """Host RAM per node while the generated train.py loads the model for this estimate's configuration."""
        if self._params is None:
            self._params = count_params(self.model)
        t, s = e.training, e.strategy
        return loading_ram_of(self._params, t.method.value, t.precision.value, t.param_dtype, s.engine, s.zero_stage,
                              s.gpus_per_node, s.gpus, self.view(e.gpu))

    def adapted(self, t: TrainingSpec, gpu) -> TrainingSpec:
        """The workload as it must run on this GPU (fp16 where there is no bf16, ...)."""
        key = (t, gpu.id)
        hit = self.adaptations.get(key)
        if hit is None:
            hit = self.adaptations[key] = adapt_to_gpu(t, gpu)[0]
        return hit

    def view(self, gpu) -> EfficiencyView:
        return self.eff.shared_view(gpu)

    def limits(self, gpu) -> tuple[float, float]:
        """(usable bytes, the plan's limit after its safety headroom) for this GPU."""
        hit = self.gpu_limits.get(gpu.id)
        if hit is None:
            view = self.view(gpu)
            usable = usable_bytes(gpu, view)
            hit = self.gpu_limits[gpu.id] = (usable, usable * (1.0 - view("plan_memory_headroom_fraction")))
        return hit

    def cluster(self, offer: Offer, gpus: int, nodes: int) -> Cluster:
        inst = offer.instance
        key = (inst.key, gpus, nodes)
        c = self.clusters.get(key)
        if c is None:
            c = self.clusters[key] = cluster_for(get_gpu(inst.gpu), gpus, nodes, inst)
        return c

    def _memory(self, t: TrainingSpec, s: Strategy, gpu):
        t = self.adapted(t, gpu)
        check_compatibility(self.model, t, s, Cluster(gpu, "single", 0.0, "none", None))
        split = split_params(self.model, t, int(self.view(gpu)("freeze_trainable_layers")))
        return memory_of(self.model, t, s, gpu, split, self.eff)

    def memory_model(self, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu,
                     accumulating: bool) -> AffineMemory | DirectMemory | SpecError:
        """Device bytes as a function of micro-batch and GPU count for this method, strategy and GPU."""
        many = s.gpus > 1
        key = (method, ckpt, s.zero_stage, s.fsdp, s.offload, many, gpu.id, accumulating)
        hit = self.memory.get(key)
        if hit is None:
            ga = 2 if accumulating else 1
            n, n2 = (2, 4) if many else (1, 1)

            def at(mb: int, gpus: int):
                return self._memory(w.training(method, ckpt, mb, ga), s.with_(gpus_per_node=gpus, nodes=1), gpu)

            try:
                if w.training(method, ckpt, 1, ga).model_code == "litgpt":
                    hit = DirectMemory(at, {(1, n): at(1, n).device})  # at(1, n) raises for a refused layout
                else:
                    hit = AffineMemory.fit(at(1, n), at(2, n), at(1, n2) if many else None, 1, n, 2, n2)
                    # each moment is affine in the micro-batch, so the peak (their maximum) is convex in it: a fit
                    # that also holds at CHECK_MICRO_BATCH holds at every micro-batch up to it. Where the largest
                    # moment of a phase changes between micro-batches 1 and 2 (BERT-base full on 2 GPUs), it does
                    # not, and the search estimates directly.
                    if not _agrees(hit.device(CHECK_MICRO_BATCH, n), lambda: at(CHECK_MICRO_BATCH, n).device):
                        hit = DirectMemory(at, {(1, n): at(1, n).device})
            except SpecError as exc:
                hit = exc
            self.memory[key] = hit
        return hit

    def __call__(self, t: TrainingSpec, s: Strategy, cluster: Cluster) -> Estimate | SpecError:
        t = self.adapted(t, cluster.gpu)
        # what the estimate depends on: links only when GPUs talk, host cores only for CPU-Adam
        cores = cluster.host_cores if s.offload != Offload.NONE else None
        intra = (cluster.intra_link, cluster.intra_bytes_per_s) if s.gpus > 1 else None
        inter = (cluster.inter_link, cluster.inter_bytes_per_s) if s.nodes > 1 else None
        key = (t, s, cluster.gpu.id, intra, inter, cores)
        hit = self.memo.get(key)
        if hit is None:
            try:
                hit = run_estimate(self.model, t, s, cluster, self.eff, self.view(cluster.gpu))
            except SpecError as exc:
                hit = exc
            self.memo[key] = hit
        return hit


CHECK_MICRO_BATCH = 64  # the affine memory fit is checked here (exact up to it: the peak is convex in the micro-batch)


def _agrees(fitted: float, direct) -> bool:
    """Whether the affine fit equals the direct estimate (to rounding); a direct estimate the layout refuses there
    says nothing about smaller micro-batches."""
    try:
        value = direct()
    except SpecError:
        return True
    return abs(fitted - value) <= 1e-9 * max(abs(value), 1.0)


class DirectMemory:
    """Device bytes by a direct estimate at each micro-batch and GPU count, memoised: for a training stack whose memory
    is not affine in the micro-batch, so that three estimates cannot stand for all of them (LitGPT: its loss copies
    the shifted logits only when a micro-batch holds more than one sequence, memory.litgpt_logits_items). A layout the
    estimate refuses needs infinite memory."""

    def __init__(self, at, seen: dict[tuple[int, int], float]) -> None:  # noqa: ANN001 - at(mb, gpus) -> MemoryResult
        self._at = at
        self._seen = dict(seen)

    def device(self, micro_batch: int, gpus: int) -> float:
        key = (micro_batch, gpus)
        hit = self._seen.get(key)
        if hit is None:
            try:
                hit = self._at(micro_batch, gpus).device
            except SpecError:
                hit = math.inf
            self._seen[key] = hit
        return hit


def _timing(est: Estimate, w: Workload, view: EfficiencyView, offer: Offer,
            eff: Efficiencies) -> tuple[float, float, float, SpotOverhead | None]:
    """(training hours, overhead hours, total hours, spot interruptions or None) for the whole job."""
    train_h = w.processed_tokens / est.tokens_per_s / HOUR
    split = est.split
    state_bytes = split.trainable * 16 + (split.frozen * 2 if est.training.method == Method.FULL else 0)
    one_ckpt_h = state_bytes / (view("checkpoint_write_gbytes_per_s") * GB * est.strategy.nodes) / HOUR
    if offer.price.billing == "spot":
        provider = offer.instance.provider
        spot = spot_overhead(train_h, one_ckpt_h, _by_provider(eff, "spot_mtbi_hours", provider),
                             est.strategy.nodes, _by_provider(eff, "spot_restart_hours", provider))
        overhead = view("startup_hours") + spot.overhead_h
        return train_h, overhead, train_h + overhead, spot
    n_ckpt = max(1, math.ceil(train_h / view("checkpoint_interval_hours")))
    overhead = view("startup_hours") + n_ckpt * one_ckpt_h
    return train_h, overhead, train_h + overhead, None


def _by_provider(eff: Efficiencies, name: str, provider: str) -> float:
    entry = eff.describe(name)
    return float(entry.get("by_provider", {}).get(provider, entry["default"]))


def search(model: ModelSpec, w: Workload, efficiencies: Efficiencies, offer_list: list[Offer] | None = None,
           skipped: Counter | None = None, max_oom_risk: float | None = None) -> SearchResult:
    """Every candidate, kept or rejected. `max_oom_risk`: the accepted probability of running out of memory
    (trainfit.uncertainty's cross-validated residuals) instead of the flat plan_memory_headroom_fraction."""
    t0 = time.perf_counter()
    res = SearchResult(max_oom_risk=max_oom_risk if _bands() is not None else None)
    if offer_list is None:
        offer_list, skipped = offers(w.request)
    res.offers = offer_list
    res.skipped_offers = skipped or Counter()
    est = _Estimator(model, efficiencies)
    pins = dict(w.request.job)  # the layout fields the request gives are kept; the others are searched
    pin_gpus, pin_nodes, pin_ckpt = pins.get("gpus_per_node"), pins.get("nodes"), pins.get("grad_ckpt")
    max_nodes = max(w.request.max_nodes, pin_nodes or 1)
    ckpts = [pin_ckpt] if pin_ckpt is not None else checkpointing(w.request.attention)
    for offer in offer_list:
        if pin_gpus is not None and offer.gpu_count < pin_gpus:
            res.candidates += 1
            res.rejected[Rejection.of(Reason.PINNED_LAYOUT, gpus=pin_gpus)] += 1
            continue
        for (gpus, nodes), method, ckpt in product(layouts(offer, max_nodes), methods(w.request), ckpts):
            if (pin_gpus is not None and gpus != pin_gpus) or (pin_nodes is not None and nodes != pin_nodes):
                continue
            n = gpus * nodes
            if n > w.global_batch:
                res.candidates += 1
                res.rejected[Rejection.of(Reason.MORE_GPUS_THAN_BATCH)] += 1
                continue
            if w.global_batch % n:  # the requested global batch is kept exactly: GPUs x micro-batch x accumulation
                res.candidates += 1
                res.rejected[Rejection.of(Reason.GPUS_DO_NOT_DIVIDE_BATCH)] += 1
                continue
            cluster = est.cluster(offer, gpus, nodes)
            code = w.training(method, ckpt, 1, 1).model_code
            for s in pinned_strategies(gpus, nodes, pins):
                refused = stack_refuses(code, method, ckpt, s, efficiencies.framework)
                if refused:  # the stated stack's own scripts do not run it (plan --framework)
                    res.candidates += 1
                    res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=refused)] += 1
                    continue
                _search_micro_batches(res, est, offer, cluster, w, method, ckpt, s, efficiencies)
    res.estimates = len(est.memo)
    res.seconds = time.perf_counter() - t0
    return res


_NO_FIT, _NO_FIT_HEADROOM = Rejection.of(Reason.NO_FIT), Rejection.of(Reason.NO_FIT_HEADROOM)
_OOM_RISK, _DOMINATED = Rejection.of(Reason.OOM_RISK), Rejection.of(Reason.DOMINATED_MICRO_BATCH)


def _search_micro_batches(res: SearchResult, est: _Estimator, offer: Offer, cluster: Cluster, w: Workload,
                          method: Method, ckpt: GradCkpt, s: Strategy, efficiencies: Efficiencies) -> None:
    per_gpu = math.ceil(w.global_batch / s.gpus)
    gpu = cluster.gpu
    mbs = micro_batches(per_gpu)
    pinned_mb = w.request.job_value("micro_batch")
    if pinned_mb is not None:
        if per_gpu % pinned_mb:
            res.candidates += 1
            res.rejected[Rejection.of(Reason.MICRO_BATCH_DOES_NOT_DIVIDE, micro_batch=pinned_mb)] += 1
            return
        mbs = (pinned_mb,)
    accumulating = est.memory_model(w, method, ckpt, s, gpu, True) if any(mb < per_gpu for mb in mbs) else None
    whole = est.memory_model(w, method, ckpt, s, gpu, False)
    for model in (accumulating, whole):
        if isinstance(model, SpecError):
            res.candidates += 1
            res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=str(model))] += 1
            return
    view = est.view(gpu)
    usable, limit = est.limits(gpu)
    best = None
    n = s.gpus
    rejected = res.rejected
    risk_of, known = None, False
    if res.max_oom_risk is not None:
        limit = usable
        known = _known(efficiencies)

        def risk_of(need: float) -> float:
            return 1.0 - (_bands().fit_probability(need, usable, method.value, "nvidia-smi", known) or 0.0)
    best_risk = None
    for mb in mbs:
        need = (whole if mb == per_gpu else accumulating).device(mb, n)
        if need > limit:
            rejected[_NO_FIT if risk_of else _NO_FIT_HEADROOM] += 1
            prev = res.no_fit_by_gpu.get(gpu.id)
            if prev is None or need < prev[0]:
                res.no_fit_by_gpu[gpu.id] = (need, usable)
            continue
        risk = risk_of(need) if risk_of else None
        if risk is not None and risk > res.max_oom_risk:
            rejected[_OOM_RISK] += 1
            _note_risky(res, gpu.id, s, method, mb, need, usable, risk, known)
            continue
        if best is not None:
            rejected[_DOMINATED] += 1
        best, best_risk = mb, risk
    res.candidates += len(mbs)
    if best is None:
        return
    # Step time per token never rises with the micro-batch at a fixed global batch (fewer micro-steps, larger
    # GEMMs; tests/test_properties.py checks it), so only the largest micro-batch that fits needs a time estimate.
    e = est(w.training(method, ckpt, best, math.ceil(per_gpu / best)), s, cluster)
    ram = offer.instance.ram_gib
    if s.offload != Offload.NONE and (not ram or e.host_memory_bytes > ram * GiB):
        res.rejected[Rejection.of(Reason.OFFLOAD_HOST_RAM)] += 1
        return
    loading = est.loading(e)
    need = loading.per_node_bytes + e.host_memory_bytes  # offloaded states come on top of the loaded model
    if ram and need > ram * GiB:
        res.rejected[Rejection.of(Reason.HOST_RAM)] += 1
        prev = res.host_ram_short.get(gpu.id)
        if prev is None or need - ram * GiB < prev[0] - prev[1]:
            res.host_ram_short[gpu.id] = (need, ram * GiB)
        return
    train_h, over_h, hours, spot = _timing(e, w, view, offer, efficiencies)
    billed, cost = job_cost(offer, hours, s.nodes, efficiencies)
    res.fitting.append(Candidate(offer, e, hours, train_h, over_h, billed, cost, spot, best_risk, loading))


def pinned_strategies(gpus: int, nodes: int, pins: dict) -> tuple[Strategy, ...]:
    """The sharding strategies searched for a layout, narrowed to what the request pins (zero_stage, fsdp, offload);
    a pinned combination the search does not try on its own (ZeRO-1 with optimizer offload) is tried as given."""
    names = [n for n in ("zero_stage", "fsdp", "offload") if pins.get(n) is not None]
    if not names:
        return strategies(gpus, nodes)
    kept = tuple(s for s in strategies(gpus, nodes) if all(getattr(s, n) == pins[n] for n in names))
    if kept:
        return kept
    try:
        return (Strategy(gpus_per_node=gpus, nodes=nodes, **{n: pins[n] for n in names}),)
    except SpecError:  # a pinned combination no engine runs: nothing on this layout
        return ()


def _known(efficiencies: Efficiencies) -> bool:
    """Whether the stated training stack (plan --framework) has been seen by the calibration: its narrower band."""
    from ..uncertainty import framework_known

    return framework_known(efficiencies.framework)


def _bands():
    from ..uncertainty import shipped_bands

    return shipped_bands()


def _note_risky(res: SearchResult, gpu: str, s: Strategy, method: Method, mb: int, need: float, usable: float,
                risk: float, known: bool = False) -> None:
    """Keep the least risky rejected option per (GPU, GPUs, nodes, method), with the peak that would be safe."""
    key = (gpu, s.gpus_per_node, s.nodes, method.value)
    prev = res.too_risky.get(key)
    if prev is not None and prev.risk <= risk:
        return
    res.too_risky[key] = RiskyOption(gpu, s.gpus_per_node, s.nodes, method.value, mb, s.label(), need, usable,
                                     risk, safe_need(usable, method.value, res.max_oom_risk, known))


def safe_need(usable: float, method: str, max_risk: float, known: bool = False) -> float | None:
    """The predicted peak whose out-of-memory risk is `max_risk`: usable / exp(the (1 - max_risk) residual)."""
    res = _bands().residuals("memory", method, "nvidia-smi", known)
    return None if res is None else usable / math.exp(res.quantile(1.0 - max_risk))


def headroom_gib(c: Candidate) -> float:
    return (c.estimate.memory.usable - c.estimate.memory.device) / GiB
