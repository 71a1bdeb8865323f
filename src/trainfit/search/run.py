"""The plan search: every offer x layout x method x strategy x checkpointing x micro-batch, evaluated by the
analytic estimator, kept or rejected with a counted reason.

Estimates are memoised on what they depend on (GPU model, links, GPU counts, workload): instance types that differ
only in CPU, RAM or price share one estimate, so the whole catalog is searched in well under a second.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import product

from ..catalog import get_gpu
from ..catalog.efficiency import Efficiencies, EfficiencyView
from ..errors import SpecError, sentence_of
from ..estimate.core import (Estimate, adapt_to_gpu, check_compatibility, memory_of, phases_asked, run_estimate,
                             view_agrees)
from ..estimate.hostram import LoadingRam, loading_ram_of
from ..estimate.memory import AffineMemory, usable_bytes
from ..estimate.memory_result import varlen_fraction_name
from ..estimate.params import count_params
from ..estimate.trainable import split_params
from ..spec.cluster import Cluster, cluster_for
from ..spec.model import ModelSpec
from ..spec.training import GradCkpt, Method, Offload, Strategy, TrainingSpec, combination_problem, stack_refuses
from ..units import GB, GiB, HOUR
from .cost import job_cost
from .interruption import SpotOverhead, spot_overhead
from .memory_fit import (CHECK_MICRO_BATCH, DirectMemory, FromMicroBatch, PiecewiseMemory, _agrees,  # noqa: F401
                         _direct_or_refused, _pieces)
from .reasons import Reason, Rejection
from .space import (Offer, checkpointing, engine_of, layouts, lighter_engines, methods, micro_batches, offers,
                    strategies)
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
        self.refusals: dict[tuple, SpecError | None] = {}  # by memory key: what refuses a layout not scanned
        self.one_node: dict[tuple, Strategy] = {}
        self.knowns: dict[str | None, bool] = {}
        self.gpu_limits: dict[str, tuple[float, float]] = {}
        self.scans: dict[tuple, list | SpecError] = {}  # _scan_micro_batches by memory key and batch
        self.shapes: dict[tuple, tuple] = {}  # memory fits shared by GPUs whose phases agree (_memory_model)
        self.loadings: dict[int, LoadingRam] = {}  # by id of an estimate of self.memo
        self.timings: dict[tuple, tuple] = {}  # _timing by (id of an estimate, spot provider or None)
        self._params: int | None = None

    @property
    def params(self) -> int:
        if self._params is None:
            self._params = count_params(self.model)
        return self._params

    def loading(self, e: Estimate) -> LoadingRam:
        """Host RAM per node while the generated train.py loads the model for this estimate's configuration."""
        t, s = e.training, e.strategy
        return loading_ram_of(self.params, t.method.value, t.precision.value, t.param_dtype, s.engine, s.zero_stage,
                              s.gpus_per_node, s.gpus, self.view(e.gpu), s.model_parallel)

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

    def _checked(self, t: TrainingSpec, s: Strategy, gpu):
        """(the workload as it runs on this GPU, its trainable split), or the SpecError that refuses the layout: every
        check a memory estimate makes, in its order (the layout's rules, the split, the engine's combination)."""
        t = self.adapted(t, gpu)
        check_compatibility(self.model, t, s, Cluster(gpu, "single", 0.0, "none", None))
        split = split_params(self.model, t, int(self.view(gpu)("freeze_trainable_layers")))
        problem = combination_problem(t.for_memory, s)
        if problem:
            raise SpecError(problem)
        return t, split

    def _memory(self, t: TrainingSpec, s: Strategy, gpu):
        t, split = self._checked(t, s, gpu)
        return memory_of(self.model, t, s, gpu, split, self.eff)

    def known(self, efficiencies: Efficiencies) -> bool:
        """_known, once per stack for this search (asked for every layout)."""
        hit = self.knowns.get(efficiencies.framework)
        if hit is None:
            hit = self.knowns[efficiencies.framework] = _known(efficiencies)
        return hit

    def on_one_node(self, s: Strategy, gpus: int) -> Strategy:
        """The layout on `gpus` GPUs of one node (memoised: a search asks each thousands of times)."""
        key = (s, gpus)
        hit = self.one_node.get(key)
        if hit is None:
            hit = self.one_node[key] = s.with_(gpus_per_node=gpus, nodes=1)
        return hit

    def pinned_micro_batch(self, w: Workload) -> int | None:
        """The micro-batch the request pins (None: searched), read once per search."""
        if not hasattr(self, "_pinned_mb"):
            self._pinned_mb = w.request.job_value("micro_batch")
        return self._pinned_mb

    def refusal(self, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu,
                accumulating: bool) -> SpecError | None:
        """The SpecError this layout's memory model would raise (its checks, `_checked`, on the same one-node layout),
        without estimating: what a layout set aside unscanned still reports (PRUNE_HEAVIER)."""
        key = (method, ckpt, s.zero_stage, s.fsdp, s.offload, s.gpus > 1, gpu.id, accumulating)
        if key not in self.refusals:
            self.refusals[key] = None
            try:
                self._checked(w.training(method, ckpt, 1, 2 if accumulating else 1),
                              self.on_one_node(s, 2 if s.gpus > 1 else 1), gpu)
            except SpecError as exc:
                self.refusals[key] = exc
        return self.refusals[key]

    def memory_direct(self, t: TrainingSpec, s: Strategy, gpu):
        """The memory of exactly this workload and layout (model-parallel layouts: memoised in estimate/)."""
        return self._memory(t, s, gpu)

    def memory_model(self, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu,
                     accumulating: bool) -> AffineMemory | DirectMemory | SpecError:
        """Device bytes as a function of micro-batch and GPU count for this method, strategy and GPU."""
        many = s.gpus > 1
        key = (method, ckpt, s.zero_stage, s.fsdp, s.offload, many, gpu.id, accumulating)
        hit = self.memory.get(key)
        if hit is None:
            try:
                hit = self._memory_model(w, method, ckpt, s, gpu, accumulating, many)
            except SpecError as exc:
                hit = exc
            self.memory[key] = hit
        return hit

    def _memory_model(self, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu, accumulating: bool,
                      many: bool) -> "AffineMemory | FromMicroBatch | DirectMemory":
        ga = 2 if accumulating else 1
        n, n2 = (2, 4) if many else (1, 1)

        def at(mb: int, gpus: int):
            return self._memory(w.training(method, ckpt, mb, ga), self.on_one_node(s, gpus), gpu)

        base = at(1, n)  # raises for a refused layout
        first = w.training(method, ckpt, 1, ga)
        if first.model_code == "litgpt":
            return DirectMemory(at, {(1, n): base.device})
        # variable-length batches: the allocator's reserve for varying shapes, a fraction of the peak phase's
        # activations and logits, each phase's affine like its total (AffineMemory.varying)
        vf = self.view(gpu)(varlen_fraction_name(first)) if first.variable_length else 0.0
        # A GPU whose phases at (1, n) are another GPU's (estimate/core.py shares them where the efficiency values
        # agree) takes that GPU's fit when its values agree at the fit's other points too: only the allocator,
        # context and NCCL terms (base) are its own (issue 36: one fit per kind of GPU, not per GPU)
        shape_key = (method, ckpt, s.zero_stage, s.fsdp, s.offload, many, accumulating, id(base.phases))
        shape = self.shapes.get(shape_key)
        if shape is not None and shape[0] is base.phases and view_agrees(self.view(gpu), shape[1]):
            hit = replace(shape[2], overhead_fraction=base.allocator_fraction,
                          constant=base.device - base.reserved + base.allocator_constant, varying_fraction=vf)
            asked = None
        else:
            more_b, more_n = at(2, n), at(1, n2) if many else None
            hit = AffineMemory.fit(base, more_b, more_n, 1, n, 2, n2, vf)
            asked = [phases_asked(r) for r in (base, more_b, more_n) if r is not None]
        # each moment is affine in the micro-batch, so the peak (their maximum) is convex in it: a fit that also holds
        # at CHECK_MICRO_BATCH holds at every micro-batch up to it. Where the largest moment of a phase changes
        # between micro-batches 1 and 2 (BERT-base full on 2 GPUs), it does not (below). Checked on every GPU whose
        # own terms may not be affine: the allocator's reserve for varying shapes and paged states.
        if asked is None and shape[3] and not base.paged and not first.variable_length:
            # the other GPU's fit was checked at CHECK_MICRO_BATCH with phases this GPU's values also give, and
            # without paged states or shape-varying reserve this GPU's own terms are affine in what they add to
            return hit
        check = _direct_or_refused(lambda: at(CHECK_MICRO_BATCH, n))
        agrees = _agrees(hit, check, n)
        if asked is not None and all(a is not None for a in asked):
            if check is not None:
                asked.append(phases_asked(check))
            checked = agrees and check is not None and asked[-1] is not None
            self.shapes[shape_key] = (base.phases, tuple(dict.fromkeys(x for a in asked if a for x in a)), hit,
                                      checked)
        if agrees:
            return hit
        # the largest moment of a phase changed between micro-batches 1 and 2 (BERT-base full on 2 GPUs): a fit
        # through 2 and 3 that also holds at CHECK_MICRO_BATCH is exact from 2 up (convex, equal at three points);
        # micro-batch 1 is estimated directly
        below = DirectMemory(at, {(1, n): base.device})
        if base.paged:  # managed memory stays resident while the GPU has room: not affine
            return below
        try:
            two, three = at(2, n), at(3, n)
            two_n = at(2, n2) if many else None
        except SpecError:
            return below
        later = AffineMemory.fit(two, three, two_n, 2, n, 3, n2, vf)
        if _agrees(later, check, n):
            return FromMicroBatch(2, later, below)
        return _pieces(at, n, n2 if many else None, vf, below)

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
    pinned_mp = _pinned_model_parallel(pins)
    for offer in offer_list:
        if pin_gpus is not None and offer.gpu_count < pin_gpus:
            res.candidates += 1
            res.rejected[Rejection.of(Reason.PINNED_LAYOUT, gpus=pin_gpus)] += 1
            continue
        # (GPUs, nodes, method, engine) -> the largest micro-batch kept on this offer so far (checkpointing runs from
        # none to full, engines from the least offloaded): a heavier one at no larger a micro-batch is slower and no
        # cheaper (PRUNE_HEAVIER)
        kept_by: dict[tuple, int] = {}
        for (gpus, nodes), method, ckpt in product(layouts(offer, max_nodes), methods(w.request), ckpts):
            if (pin_gpus is not None and gpus != pin_gpus) or (pin_nodes is not None and nodes != pin_nodes):
                continue
            parallel = model_parallel_strategies(est.params, model.layers, gpus, nodes, offer.gpu_count, method,
                                                 w.seq_len, pins, experts=model.num_experts)
            if not pinned_mp and _data_parallel_batch(res, gpus * nodes, w):
                cluster = est.cluster(offer, gpus, nodes)
                code = w.training(method, ckpt, 1, 1).model_code
                for s in pinned_strategies(gpus, nodes, pins):
                    refused = stack_refuses(code, method, ckpt, s, efficiencies.framework)
                    if refused:  # the stated stack's own scripts do not run it (plan --framework)
                        res.candidates += 1
                        res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=refused)] += 1
                        continue
                    lighter = [kept_by[k] for k in ((gpus, nodes, method, e) for e in lighter_engines(s))
                               if k in kept_by] if PRUNE_HEAVIER else None
                    kept = _search_micro_batches(res, est, offer, cluster, w, method, ckpt, s, efficiencies,
                                                 max(lighter) if lighter else None)
                    if kept is not None:
                        key = (gpus, nodes, method, engine_of(s))
                        kept_by[key] = max(kept, kept_by.get(key, 0))
            if pinned_mp and not parallel and method == Method.FULL and gpus == offer.gpu_count:
                res.candidates += 1  # the pinned tp x pp x cp does not divide these GPUs
                res.rejected[Rejection.of(Reason.LAYOUT, rule="gpu_count")] += 1
            for s in parallel:
                _search_model_parallel(res, est, offer, est.cluster(offer, gpus, nodes), w, method, ckpt, s,
                                       efficiencies)
    res.estimates = len(est.memo)
    res.seconds = time.perf_counter() - t0
    return res


def _data_parallel_batch(res: SearchResult, n: int, w: Workload) -> bool:
    """Whether n data-parallel GPUs keep the requested global batch exactly (GPUs x micro-batch x accumulation);
    counts the reason when not."""
    if n > w.global_batch:
        res.candidates += 1
        res.rejected[Rejection.of(Reason.MORE_GPUS_THAN_BATCH)] += 1
        return False
    if w.global_batch % n:
        res.candidates += 1
        res.rejected[Rejection.of(Reason.GPUS_DO_NOT_DIVIDE_BATCH)] += 1
        return False
    return True


_NO_FIT, _NO_FIT_HEADROOM = Rejection.of(Reason.NO_FIT), Rejection.of(Reason.NO_FIT_HEADROOM)
_OOM_RISK, _DOMINATED = Rejection.of(Reason.OOM_RISK), Rejection.of(Reason.DOMINATED_MICRO_BATCH)
_HEAVIER = Rejection.of(Reason.DOMINATED_HEAVIER)
# Heavier activation checkpointing or more CPU offload never makes a step faster at the same micro-batch (they only
# add work: forwards run again, the CPU's optimizer step and copies; tests/test_properties.py holds both), and time
# per token never rises with the micro-batch: so on an offer where a lighter setting of a layout kept micro-batch B,
# a heavier one whose largest fitting micro-batch is at most B is slower and no cheaper, and is set aside untimed
# (issue 36: prune before estimating). Where B is the largest micro-batch of all, its memory is not even scanned.
# False: every candidate is timed (the test that the plan's answers do not change).
PRUNE_HEAVIER = True


def _search_micro_batches(res: SearchResult, est: _Estimator, offer: Offer, cluster: Cluster, w: Workload,
                          method: Method, ckpt: GradCkpt, s: Strategy, efficiencies: Efficiencies,
                          lighter_kept: int | None = None) -> int | None:
    """The micro-batches of one layout on one offer: counted, the largest that fits timed and kept. Returns the
    micro-batch kept (None: none). `lighter_kept`: the largest micro-batch a lighter setting (checkpointing,
    offload) of this layout kept on this offer (see PRUNE_HEAVIER)."""
    per_gpu = math.ceil(w.global_batch / s.gpus)
    gpu = cluster.gpu
    pinned_mb = est.pinned_micro_batch(w)
    if pinned_mb is not None:
        if per_gpu % pinned_mb:
            res.candidates += 1
            res.rejected[Rejection.of(Reason.MICRO_BATCH_DOES_NOT_DIVIDE, micro_batch=pinned_mb)] += 1
            return None
        mbs = (pinned_mb,)
    else:
        mbs = micro_batches(per_gpu)
    if lighter_kept is not None and lighter_kept >= mbs[-1]:
        # what the scan would have found first: a layout its checks refuse is one incompatible candidate
        refused = next((r for r in (est.refusal(w, method, ckpt, s, gpu, True) if mbs[0] < per_gpu else None,
                                    est.refusal(w, method, ckpt, s, gpu, False)) if r is not None), None)
        if refused is not None:
            res.candidates += 1
            res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=sentence_of(refused))] += 1
            return None
        res.candidates += len(mbs)
        res.rejected[_HEAVIER] += len(mbs)
        return None
    key = (method, ckpt, s.zero_stage, s.fsdp, s.offload, s.gpus, gpu.id, per_gpu, mbs)
    summary = est.scans.get(key)
    if summary is None:
        scan = _scan_micro_batches(est, w, method, ckpt, s, gpu, per_gpu, mbs, res.max_oom_risk, efficiencies)
        summary = est.scans[key] = scan if isinstance(scan, SpecError) else _ScanSummary.of(scan, res.max_oom_risk)
    if isinstance(summary, SpecError):
        res.candidates += 1
        # the rule as raised (a sentence of the message table where it is one: worded in any language)
        res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=sentence_of(summary))] += 1
        return None
    summary.count(res, gpu.id, est.limits(gpu)[0])
    if summary.risky:
        known = est.known(efficiencies) if res.max_oom_risk is not None else False
        usable = est.limits(gpu)[0]
        for mb, need, risk in summary.risky:
            _note_risky(res, gpu.id, s, method, mb, need, usable, risk, known)
    res.candidates += len(mbs)
    if summary.best is None:
        return None
    if lighter_kept is not None and summary.best <= lighter_kept:
        res.rejected[_HEAVIER] += 1
        return None
    # Step time per token never rises with the micro-batch at a fixed global batch (fewer micro-steps, larger
    # GEMMs; tests/test_properties.py checks it), so only the largest micro-batch that fits needs a time estimate.
    kept = _keep(res, est, offer, w.training(method, ckpt, summary.best, math.ceil(per_gpu / summary.best)), s,
                 cluster, w, efficiencies, summary.best_risk)
    return summary.best if kept else None


@dataclass(frozen=True)
class _ScanSummary:
    """What a layout's micro-batch scan adds to a search, the same for every instance of its GPU (issue 36: counted
    once per scan, added per instance): micro-batches over the limit (and the least peak among them), those over the
    out-of-memory risk, those a larger fitting one dominates, and the largest that fits."""

    too_big: int
    least_too_big: float | None
    risky: tuple[tuple[int, float, float], ...]
    dominated: int
    best: int | None
    best_risk: float | None
    too_big_reason: Rejection

    @classmethod
    def of(cls, scan: list, max_oom_risk: float | None) -> "_ScanSummary":
        too_big, least, risky, dominated, best, best_risk = 0, None, [], 0, None, None
        for mb, need, risk in scan:
            if risk is _TOO_BIG:
                too_big += 1
                least = need if least is None or need < least else least
            elif risk is not None and risk > max_oom_risk:
                risky.append((mb, need, risk))
            else:
                dominated += best is not None
                best, best_risk = mb, risk
        return cls(too_big, least, tuple(risky), dominated, best, best_risk,
                   _NO_FIT if max_oom_risk is not None else _NO_FIT_HEADROOM)

    def count(self, res: SearchResult, gpu: str, usable: float) -> None:
        rejected = res.rejected
        if self.too_big:
            rejected[self.too_big_reason] += self.too_big
            prev = res.no_fit_by_gpu.get(gpu)
            if prev is None or self.least_too_big < prev[0]:
                res.no_fit_by_gpu[gpu] = (self.least_too_big, usable)
        if self.risky:
            rejected[_OOM_RISK] += len(self.risky)
        if self.dominated:
            rejected[_DOMINATED] += self.dominated


_TOO_BIG = object()  # a micro-batch whose predicted peak is over the limit (a scan's risk slot)


def _scan_micro_batches(est: _Estimator, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu,
                        per_gpu: int, mbs: tuple[int, ...], max_oom_risk: float | None,
                        efficiencies: Efficiencies) -> list | SpecError:
    """(micro-batch, predicted peak, risk of running out of memory or None, or _TOO_BIG over the limit) for each
    micro-batch of a layout on a GPU, or the SpecError that refuses the layout. What it depends on is the memory key
    (method, checkpointing, engine, GPUs, GPU model) and the batch: every instance of that GPU with that many GPUs
    shares it (issue 36: instance types differ in CPU, RAM and price, not in the GPU's memory)."""
    accumulating = est.memory_model(w, method, ckpt, s, gpu, True) if any(mb < per_gpu for mb in mbs) else None
    whole = est.memory_model(w, method, ckpt, s, gpu, False)
    for model in (accumulating, whole):
        if isinstance(model, SpecError):
            return model
    usable, limit = est.limits(gpu)
    risk_of = None
    if max_oom_risk is not None:
        limit = usable
        known = est.known(efficiencies)

        def risk_of(need: float) -> float:
            return 1.0 - (_bands().fit_probability(need, usable, method.value, "nvidia-smi", known) or 0.0)
    out = []
    n = s.gpus
    for mb in mbs:
        need = (whole if mb == per_gpu else accumulating).device(mb, n)
        out.append((mb, need, _TOO_BIG if need > limit else (risk_of(need) if risk_of else None)))
    return out


def _keep(res: SearchResult, est: _Estimator, offer: Offer, t: TrainingSpec, s: Strategy, cluster: Cluster,
          w: Workload, efficiencies: Efficiencies, risk: float | None) -> bool:
    """The chosen micro-batch of a layout, timed and priced, kept unless the host's RAM cannot hold it (False)."""
    gpu, view = cluster.gpu, est.view(cluster.gpu)
    e = est(t, s, cluster)
    if isinstance(e, SpecError):  # a rule the time path checks beyond the memory's (the EP overlap's schedule, ...)
        res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=sentence_of(e))] += 1
        return False
    ram = offer.instance.ram_gib
    if s.offload != Offload.NONE and (not ram or e.host_memory_bytes > ram * GiB):
        res.rejected[Rejection.of(Reason.OFFLOAD_HOST_RAM)] += 1
        return False
    loading = est.loadings.get(id(e))  # per estimate (kept alive in est.memo), not per instance
    if loading is None:
        loading = est.loadings[id(e)] = est.loading(e)
    need = loading.per_node_bytes + e.host_memory_bytes  # offloaded states come on top of the loaded model
    if ram and need > ram * GiB:
        res.rejected[Rejection.of(Reason.HOST_RAM)] += 1
        prev = res.host_ram_short.get(gpu.id)
        if prev is None or need - ram * GiB < prev[0] - prev[1]:
            res.host_ram_short[gpu.id] = (need, ram * GiB)
        return False
    # the hours depend on the instance only through spot interruptions (by provider)
    tkey = (id(e), offer.instance.provider if offer.price.billing == "spot" else None)
    timing = est.timings.get(tkey)
    if timing is None:
        timing = est.timings[tkey] = _timing(e, w, view, offer, efficiencies)
    train_h, over_h, hours, spot = timing
    billed, cost = job_cost(offer, hours, s.nodes, efficiencies)
    res.fitting.append(Candidate(offer, e, hours, train_h, over_h, billed, cost, spot, risk, loading))
    return True


# Model parallelism (issue 34) is searched for full training of models this large (below it ZeRO-3 / FSDP data
# parallelism holds the states and needs no TP / PP), or for sequences this long (context parallelism).
MODEL_PARALLEL_MIN_PARAMS = 20e9
CONTEXT_PARALLEL_MIN_SEQ = 32768
_MP_AXES = ("tp", "pp", "cp", "ep", "vpp", "pp_schedule", "sequence_parallel", "etp", "moe_dispatcher", "ep_overlap",
            "precision_aware_optimizer", "pp_split_embedding", "pp_split_loss", "grad_reduce_bf16", "pp_layout")
# switches only Megatron's model-parallel layouts run: pinned on, data parallelism alone is not searched
_MEGATRON_ONLY = ("ep_overlap", "precision_aware_optimizer", "pp_split_embedding", "pp_split_loss", "grad_reduce_bf16",
                  "pp_layout")


def _pinned_model_parallel(pins: dict) -> bool:
    """The request pins a model-parallel layout (tp, pp, cp or ep above 1, or a switch only such a layout runs):
    data parallelism alone is not searched."""
    return any((pins.get(k) or 1) > 1 for k in ("tp", "pp", "cp", "ep")) or any(pins.get(k) for k in _MEGATRON_ONLY)


def model_parallel_strategies(params: int, layers: int, gpus: int, nodes: int, per_instance: int, method: Method,
                              seq_len: int, pins: dict, experts: int = 0) -> tuple[Strategy, ...]:
    """The tp x pp x cp (x ep) layouts searched on whole instances (Megatron-LM's distributed optimizer, ZeRO-1,
    unless pinned otherwise): those the request pins, else, for full training of a large model or long sequences,
    tp among the node's divisors up to 8, pp in powers of two up to 16 and the layers, cp for long sequences, and
    for a mixture of experts ep in powers of two that divide its experts (the layout rules then set aside those
    that do not fold into the GPUs, with their reasons)."""
    if method != Method.FULL or gpus != per_instance:
        return ()
    given = {k: pins[k] for k in _MP_AXES if pins.get(k) is not None}
    if not _pinned_model_parallel(pins):
        if any(k in given for k in ("tp", "pp", "cp", "ep")) or (params < MODEL_PARALLEL_MIN_PARAMS
                                                                 and seq_len < CONTEXT_PARALLEL_MIN_SEQ):
            return ()
    return _layouts(gpus, nodes, layers, seq_len >= CONTEXT_PARALLEL_MIN_SEQ, tuple(sorted(given.items())),
                    pins.get("zero_stage"), pins.get("fsdp"), experts)


@lru_cache(maxsize=4096)
def _layouts(gpus: int, nodes: int, layers: int, long: bool, given: tuple, zero, fsdp,
             experts: int = 0) -> tuple[Strategy, ...]:
    fixed = dict(given)
    tps = [fixed["tp"]] if "tp" in fixed else [t for t in (1, 2, 4, 8) if gpus % t == 0]
    pps = [fixed["pp"]] if "pp" in fixed else [p for p in (1, 2, 4, 8, 16) if p <= layers]
    cps = [fixed["cp"]] if "cp" in fixed else ([1, 2, 4, 8] if long else [1])
    eps = [fixed["ep"]] if "ep" in fixed else [1] + [e for e in (2, 4, 8, 16, 32, 64)
                                                     if experts and experts % e == 0 and e <= gpus * nodes]
    rest = {k: v for k, v in fixed.items() if k not in ("tp", "pp", "cp", "ep")}
    sharding = {"zero_stage": 1 if zero is None and fsdp is None else (zero or 0)}
    if fsdp is not None:
        sharding["fsdp"] = fsdp
    out = []
    for tp, pp, cp, ep in product(tps, pps, cps, eps):
        if tp * pp * cp == 1 and ep == 1 or (gpus * nodes) % (tp * pp * cp) or (gpus * nodes // pp) % ep:
            continue
        try:
            out.append(Strategy(gpus_per_node=gpus, nodes=nodes, tp=tp, pp=pp, cp=cp, ep=ep, **rest, **sharding))
        except SpecError:  # a pinned combination no stack runs (ZeRO-3 with tp, ...)
            continue
    return tuple(out)


def _search_model_parallel(res: SearchResult, est: _Estimator, offer: Offer, cluster: Cluster, w: Workload,
                           method: Method, ckpt: GradCkpt, s: Strategy, efficiencies: Efficiencies) -> None:
    """One tp x pp x cp layout: the micro-batches that keep the global batch and fill the pipeline, ascending until
    one does not fit (memory grows with the micro-batch), the largest that fits timed."""
    from ..estimate.model_parallel import layout_of
    from ..estimate.parallel3d import arch_of, layout_problems

    res.candidates += 1
    problems = layout_problems(arch_of(est.model), layout_of(s), s.gpus_per_node, gpus=s.gpus, seq_len=w.seq_len)
    if problems:
        res.rejected[Rejection.of(Reason.LAYOUT, rule=problems[0].value)] += 1
        return
    if w.global_batch % s.dp:
        res.rejected[Rejection.of(Reason.GPUS_DO_NOT_DIVIDE_BATCH)] += 1
        return
    per_dp = w.global_batch // s.dp
    pinned_mb = w.request.job_value("micro_batch")
    mbs = [mb for mb in micro_batches(per_dp) if per_dp // mb >= s.pp and pinned_mb in (None, mb)]
    if not mbs:
        res.rejected[Rejection.of(Reason.LAYOUT, rule="few_micro_batches")] += 1
        return
    key = (method, ckpt, s, cluster.gpu.id, per_dp, tuple(mbs))
    scan = est.scans.get(key)
    if scan is None:
        scan = est.scans[key] = _scan_model_parallel(est, w, method, ckpt, s, cluster.gpu, per_dp, mbs,
                                                     res.max_oom_risk, efficiencies)
    fitting = []
    for t, outcome, risk in scan:
        if isinstance(outcome, SpecError):
            res.rejected[Rejection.of(Reason.INCOMPATIBLE, rule=str(outcome))] += 1
            return
        if outcome is _TOO_BIG:
            res.rejected[_NO_FIT if risk is None else _OOM_RISK] += 1
            break
        fitting.append((t, risk))
    if fitting:
        best, best_risk = _fastest_of_pipeline(est, fitting, s, cluster)
        _keep(res, est, offer, best, s, cluster, w, efficiencies, best_risk)


def _fastest_of_pipeline(est: _Estimator, fitting: list[tuple], s: Strategy, cluster: Cluster) -> tuple:
    """(training, risk) of the micro-batch a layout keeps: the largest that fits, except under pipeline parallelism,
    whose bubble (pp - 1 stages idle while the first micro-batches fill it) shrinks as the micro-batches get more and
    smaller, so a smaller one can be faster: there every fitting micro-batch is timed and the fastest kept."""
    if s.pp == 1 or len(fitting) == 1:
        return fitting[-1]
    timed = [(e.tokens_per_s, i) for i, (t, _) in enumerate(fitting)
             if not isinstance(e := est(t, s, cluster), SpecError)]
    return fitting[max(timed)[1]] if timed else fitting[-1]


def _scan_model_parallel(est: _Estimator, w: Workload, method: Method, ckpt: GradCkpt, s: Strategy, gpu, per_dp: int,
                         mbs: list[int], max_oom_risk: float | None, efficiencies: Efficiencies) -> list[tuple]:
    """(training, predicted peak | _TOO_BIG | the SpecError, risk) for the micro-batches of a model-parallel layout
    on a GPU, ascending until one does not fit or is refused: what every instance of that GPU and layout shares."""
    usable, limit = est.limits(gpu)
    known = _known(efficiencies)
    out: list[tuple] = []
    for mb in mbs:
        t = w.training(method, ckpt, mb, per_dp // mb)
        try:
            need = est.memory_direct(t, s, gpu).device
        except SpecError as exc:
            out.append((t, exc, None))
            break
        risk = (1.0 - (_bands().fit_probability(need, usable, method.value, "nvidia-smi", known) or 0.0)
                if max_oom_risk is not None else None)
        if need > (usable if risk is not None else limit) or (risk is not None and risk > max_oom_risk):
            out.append((t, _TOO_BIG, risk))
            break
        out.append((t, need, risk))
    return out


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
