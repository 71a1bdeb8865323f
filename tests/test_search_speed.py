"""Issue 36: what the plan search shares between candidates must not change a single number.

- core._memory takes a GPU's phases from another GPU whose efficiency values agree: the result must equal a fresh
  estimate_memory on that GPU, whatever GPU came first (hypothesis draws the jobs and the GPU order).
- The search scans the micro-batches of a (method, checkpointing, engine, GPUs, GPU) once for every instance with
  that GPU: the plan with the memo must equal the plan without it.
- Specs hash once (their hash is cached) and equal specs hash equal.
"""

from dataclasses import replace

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainfit.catalog import get_gpu, resolve_model
from trainfit.catalog.efficiency import Efficiencies, EfficiencyView
from trainfit.estimate import core
from trainfit.estimate.memory import estimate_memory
from trainfit.estimate.trainable import split_params
from trainfit.spec.cluster import cluster_for
from trainfit.spec.training import GradCkpt, Method, Strategy, TrainingSpec

GPUS = ("a10", "a100-sxm4-80gb", "h100-sxm", "l20", "t4", "v100-sxm2-32gb", "h20")


def _fresh(m, t, s, gpu, eff):
    split = split_params(m, t, int(eff.shared_view(gpu)("freeze_trainable_layers")))
    return estimate_memory(m, t.for_memory, s, gpu, split, EfficiencyView(eff, gpu))


def _cached(m, t, s, gpu, eff):
    split = split_params(m, t, int(eff.shared_view(gpu)("freeze_trainable_layers")))
    return core.memory_of(m, t, s, gpu, split, eff)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["qwen2-7b", "llama-3-8b", "bert-base-uncased", "qwen2.5-0.5b"]),
       method=st.sampled_from([Method.FULL, Method.LORA, Method.QLORA]),
       ckpt=st.sampled_from([GradCkpt.NONE, GradCkpt.FULL]),
       mb=st.sampled_from([1, 2, 8]), gpus=st.sampled_from([1, 4]), zero=st.sampled_from([0, 2, 3]),
       order=st.permutations(GPUS))
def test_phases_shared_between_gpus_equal_a_fresh_estimate(model, method, ckpt, mb, gpus, zero, order):
    m = resolve_model(model)
    eff = Efficiencies.default()
    core.clear_memos()
    task = "classification" if model.startswith("bert") else "sft"
    for gpu_id in order[:3]:
        gpu = get_gpu(gpu_id)
        precision = "bf16" if gpu.bf16_supported else "fp16"
        t = TrainingSpec(method=method, task=task, seq_len=512, micro_batch=mb, grad_accum=2, grad_ckpt=ckpt,
                         precision=precision, attention="sdpa")
        s = Strategy(gpus_per_node=gpus, nodes=1, zero_stage=zero if gpus > 1 else 0)
        got, want = _cached(m, t, s, gpu, eff), _fresh(m, t, s, gpu, eff)
        assert got.device == want.device and got.reserved == want.reserved and got.allocated == want.allocated
        assert [p.items for p in got.phases] == [p.items for p in want.phases]
        assert got.usable == want.usable and got.notes == want.notes


def test_phases_are_shared_only_when_the_values_agree():
    """A recorded value that the next GPU's view does not give: the cache must not hand those phases over."""
    m = resolve_model("qwen2-7b")
    eff = Efficiencies.default()
    t = TrainingSpec(method=Method.LORA, task="sft", seq_len=1024, micro_batch=2, grad_accum=1)
    s = Strategy()
    core.clear_memos()
    a100, h100 = get_gpu("a100-sxm4-80gb"), get_gpu("h100-sxm")
    _cached(m, t, s, a100, eff)
    key = next(iter(core._PHASES))
    asked, phased = core._PHASES[key][0]
    assert asked, "the phases read efficiency values"
    bogus = tuple(((n, link), v * 2 + 1.0) for (n, link), v in asked)
    core._PHASES[key] = [(bogus, replace(phased, phases=()))]  # phases no GPU could use
    got = _cached(m, t, s, h100, eff)
    assert got.phases and got.device == _fresh(m, t, s, h100, eff).device
    assert len(core._PHASES[key]) == 2


def test_plan_is_the_same_with_and_without_the_micro_batch_memo(monkeypatch):
    from trainfit.plan import make_plan
    from trainfit.search import run as search_run
    from trainfit.spec.request import request_from_mapping

    def plan():
        req = request_from_mapping({"model": "qwen2-7b", "method": "lora", "dataset_tokens": "50M",
                                    "budget": 3000, "deadline": "48h"})
        p = make_plan(req, Efficiencies.default(), max_oom_risk=0.05)
        return ([(c.offer.instance.instance_type, c.estimate.training.micro_batch, c.hours, c.oom_risk)
                 for c in p.recommendations], dict(p.rejected), p.result.candidates,
                [(r.gpu, r.micro_batch, r.need, r.risk) for r in p.too_risky], dict(p.result.no_fit_by_gpu))

    with_memo = plan()

    class NoMemo(dict):
        def get(self, key, default=None):
            return default

    original = search_run._Estimator.__init__

    def init(self, *a, **k):
        original(self, *a, **k)
        self.scans, self.shapes = NoMemo(), NoMemo()

    monkeypatch.setattr(search_run._Estimator, "__init__", init)
    assert plan() == with_memo


def test_specs_hash_once_and_agree():
    a = TrainingSpec(method=Method.LORA, seq_len=2048, micro_batch=2)
    b = TrainingSpec(method=Method.LORA, seq_len=2048, micro_batch=2)
    assert a == b and hash(a) == hash(b) and a is not b
    assert "_hash" in a.__dict__  # cached on the instance
    assert hash(a.with_(micro_batch=4)) != hash(a) or a.with_(micro_batch=4) != a
    s = Strategy(gpus_per_node=4, zero_stage=2)
    assert hash(s) == hash(Strategy(gpus_per_node=4, zero_stage=2)) and "_hash" in s.__dict__
    c = cluster_for(get_gpu("a10"), 1, 1)
    assert c.gpu.id == "a10"


def test_gpus_of_one_kind_do_share_phases():
    """The speed-up is real: bf16 GPUs whose memory efficiencies agree build the phases once."""
    m = resolve_model("qwen2-7b")
    eff = Efficiencies.default()
    t = TrainingSpec(method=Method.LORA, task="sft", seq_len=1024, micro_batch=2, grad_accum=1)
    core.clear_memos()
    for gpu_id in ("a10", "a100-sxm4-80gb", "l20", "h20"):
        _cached(m, t, Strategy(), get_gpu(gpu_id), eff)
    assert sum(len(v) for v in core._PHASES.values()) < 4


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["qwen2-7b", "bert-base-uncased", "llama-3-8b"]),
       method=st.sampled_from([Method.FULL, Method.LORA, Method.QLORA]),
       ckpt=st.sampled_from([GradCkpt.NONE, GradCkpt.FULL]), zero=st.sampled_from([0, 2, 3]),
       accumulating=st.booleans(), order=st.permutations(GPUS))
def test_a_memory_fit_shared_between_gpus_equals_each_gpus_own(model, method, ckpt, zero, accumulating, order):
    """The search's memory model of a GPU taken from another GPU's fit gives the device bytes of that GPU's own fit
    (a fresh search state per GPU) at every micro-batch and GPU count."""
    from trainfit.search.run import _Estimator
    from trainfit.search.workload import resolve_workload
    from trainfit.spec.request import request_from_mapping

    m = resolve_model(model)
    eff = Efficiencies.default()
    task = "classification" if model.startswith("bert") else "sft"
    req = request_from_mapping({"model": model, "method": method.value, "task": task, "dataset_tokens": "10M",
                                "seq_len": 512})
    w = resolve_workload(req, m)
    s = Strategy(gpus_per_node=4, nodes=1, zero_stage=zero)
    shared = _Estimator(m, eff)
    for gpu_id in order:
        gpu = get_gpu(gpu_id)
        got = shared.memory_model(w, method, ckpt, s, gpu, accumulating)
        want = _Estimator(m, eff).memory_model(w, method, ckpt, s, gpu, accumulating)
        assert type(got) is type(want)
        if isinstance(want, Exception):
            assert str(got) == str(want)
            continue
        for mb in (1, 3, 16, 64):
            for n in (2, 4, 8):
                assert got.device(mb, n) == want.device(mb, n)
    assert shared.shapes, "some GPUs share a fit"


def test_an_estimates_efficiencies_are_its_own_whatever_ran_before():
    """An estimate reports the efficiency values it asked (memoised inner work included), not every value asked on
    its GPU so far: the same request gives the same report before and after other estimates (a long-lived web
    server found otherwise: tests/test_ui.py's concurrent requests)."""
    import trainfit

    core.clear_memos()
    job = dict(method="lora", seq_len=1024, micro_batch=2)
    cold = trainfit.estimate("qwen2-7b", "a10", **job).efficiencies
    trainfit.estimate("qwen2-7b", "a10", gpus=4, zero=3, offload="optimizer", method="full", seq_len=1024)
    warm = trainfit.estimate("qwen2-7b", "a10", **job).efficiencies
    assert warm == cold and "matmul_efficiency" in warm and "memory_bandwidth_efficiency" in warm
    assert "allocator_overhead_fraction" in warm and "framework_logits_factor" in warm  # memory's, computed lazily
    assert not any(k.startswith("comm_efficiency") or k.startswith("cpu_adam") for k in warm)  # one GPU, no offload


def test_a_memoised_result_first_computed_outside_a_recording_still_reports_what_it_asked():
    """recorded_cache: the search fills the cache with no recording open; an estimate asking the same call later
    still records the values it read (learnt by running it once under the recording), and each later hit replays
    them."""
    from trainfit.catalog.efficiency import recorded_cache, recording, used_by

    view = Efficiencies.default().shared_view(get_gpu("a10"))
    runs = []

    @recorded_cache(maxsize=8)
    def reads(x):
        runs.append(x)
        return view("matmul_efficiency") * x

    assert reads(2) == reads(2) and runs == [2]  # no recording: the plain cache
    for _ in range(2):
        with recording() as keys:
            assert reads(2) == 2 * view.used["matmul_efficiency"]["value"]
        assert list(used_by(view, keys)) == ["matmul_efficiency"]
    assert runs == [2, 2]  # run once more to learn what it asks, then replayed from the record
    reads.cache_clear()
    with recording() as keys:
        reads(2)
    assert runs == [2, 2, 2] and list(used_by(view, keys)) == ["matmul_efficiency"]


@pytest.mark.parametrize("request_doc", [
    {"model": "bert-base-uncased", "task": "classification", "method": "full", "samples": "100k", "avg_len": 256},
    {"model": "qwen2-7b", "method": "auto", "dataset_tokens": "200M", "budget": 3000, "deadline": "48h"},
    # eager attention: none, selective and full checkpointing; spot prices (interruptions), fastest first
    {"model": "qwen2.5-0.5b", "method": "lora", "dataset_tokens": "50M", "attention": "eager", "pricing": "spot",
     "provider": "all", "usd_cny": 7.1, "objective": "fastest"},
])
def test_pruning_heavier_settings_changes_no_answer(monkeypatch, request_doc):
    """Issue 36's pruning (search/run.py PRUNE_HEAVIER) sets candidates aside untimed: every answer of
    the plan (recommendations, their why, the Pareto front, why each other GPU lost, what binds, the layouts too
    risky) must be what timing all of them gives; only the counts move, into the new reason, and the candidates
    counted stay the same."""
    from trainfit.plan import make_plan
    from trainfit.report.plan import plan_dict
    from trainfit.search import run as search_run
    from trainfit.search.reasons import Reason, Rejection
    from trainfit.spec.request import request_from_mapping

    def plan():
        p = make_plan(request_from_mapping(dict(request_doc)), Efficiencies.default(), max_oom_risk=0.05)
        doc = plan_dict(p)
        counts = doc.pop("rejected")
        for k in ("rejected_reasons", "search"):
            doc.pop(k)
        return doc, counts, p.result.candidates, len(p.result.fitting), p.result.rejected

    pruned, pruned_counts, candidates, fitting, searched = plan()
    monkeypatch.setattr(search_run, "PRUNE_HEAVIER", False)
    full, full_counts, all_candidates, all_fitting, all_searched = plan()
    assert pruned == full
    assert candidates == all_candidates
    # a layout set aside unscanned still reports what refuses it, as the scan would have
    assert {k: v for k, v in searched.items() if k.reason == Reason.INCOMPATIBLE} == \
        {k: v for k, v in all_searched.items() if k.reason == Reason.INCOMPATIBLE}
    set_aside = {k: v for k, v in pruned_counts.items() if k not in full_counts}
    assert len(set_aside) == 1 and next(iter(set_aside.values())) > 0  # it did prune, under its own reason
    # what the pruned search sets aside was fitting, or set aside by the search for another reason, in the full one
    others = sum(v for k, v in searched.items() if k.reason != Reason.DOMINATED_HEAVIER)
    assert searched[Rejection.of(Reason.DOMINATED_HEAVIER)] == \
        sum(all_searched.values()) - others + all_fitting - fitting
