"""Predict measured serving runs (data/validation/serving_dev.jsonl, shared/validation/SERVING_SCHEMA.md) and report
the error per metric: KV capacity, throughput, TTFT, TPOT. A case that cannot be predicted is skipped with a
counted reason, never a crash."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from typing import Any

from ..catalog import get_gpu
from ..errors import TrainfitError
from ..i18n import say
from ..catalog.models import spec_from_config
from ..spec.model import ModelSpec
from . import engine_lmdeploy as lmd
from .estimate import ServingEstimate, estimate
from .spec import ServingSpec
from .workload import case_workload

# the case's weight_dtype -> trainfit's weight format. GPTQ 8-bit is read as int8: one byte per weight plus scales
# (its group-128 scales are 1/64 byte per weight more than int8's per-channel ones; stated in the report)
WEIGHT_DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp8": "fp8", "int8": "int8", "gptq-int8": "int8",
                 "awq-int4": "awq", "awq": "awq", "gptq-int4": "gptq", "gptq": "gptq"}
# metric -> the measured fields compared, first present wins
METRICS = {"kv_capacity": ("kv_cache_tokens", "max_concurrency", "kv_cache_gib"),
           "throughput": ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s"),
           "ttft": ("ttft_ms",), "tpot": ("tpot_ms",)}


class Skip(Exception):
    """The counted reason a case is not predicted."""

    @property
    def reason(self) -> str:
        """The reason as it was given (a sentence of the message table stays one: str() would copy its English)."""
        return self.args[0] if self.args and isinstance(self.args[0], str) else str(self)


@dataclass
class Row:
    id: str
    source: str
    gpu: str
    engine: str
    weights: str
    predicted: dict[str, float] = field(default_factory=dict)
    measured: dict[str, float] = field(default_factory=dict)
    error: dict[str, float] = field(default_factory=dict)
    excluded: dict[str, tuple[float, str]] = field(default_factory=dict)  # metric -> (error, why it cannot hold)
    kv_short: bool = False  # the run served, though the predicted KV cache is below its max_model_len

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "gpu": self.gpu, "engine": self.engine, "weights": self.weights,
                "predicted": self.predicted, "measured": self.measured,
                "error": {k: round(v, 4) for k, v in self.error.items()},
                "excluded": {k: {"error": round(e, 4), "reason": why} for k, (e, why) in self.excluded.items()}}


def is_serving(case: dict) -> bool:
    return isinstance(case, dict) and case.get("kind") == "serving"


def _model(case: dict) -> ModelSpec:
    hf = {k: v for k, v in ((case.get("model") or {}).get("hf_config") or {}).items() if v is not None}
    if not hf.get("hidden_size"):
        raise Skip(say("va_skip_arch"))
    try:  # a hand-written family, else the generic reader (a structure template, or transformers' own code)
        return spec_from_config(hf, name=str(case["model"].get("name", "case")))
    except TrainfitError:
        raise Skip(say("va_skip_type_or_config")) from None


def _spec(case: dict, m: ModelSpec) -> tuple[ServingSpec, int | None]:
    sv = case.get("serving") or {}
    fmt = WEIGHT_DTYPES.get(str((case.get("model") or {}).get("weight_dtype") or "bf16").lower())
    if fmt is None:
        raise Skip(say("va_skip_weights"))
    if sv.get("engine") not in ("vllm", "sglang", "trtllm", "tensorrt-llm", "lmdeploy"):
        raise Skip(say("va_skip_engine"))
    if (sv.get("pp") or 1) != 1:
        raise Skip(say("va_skip_pp"))
    max_len = sv.get("max_model_len")
    if max_len is None and sv.get("input_len") and sv.get("output_len"):
        # not stated: the run served its requests, so at least input + output (trainfit's default when larger)
        max_len = max(int(sv["input_len"]) + int(sv["output_len"]), min(8192, m.max_positions or 8192))
    rate = sv.get("request_rate")
    rate = math.inf if rate in ("inf", math.inf) else rate
    conc = sv.get("concurrency") if rate is None else None
    workload = case_workload(sv)  # "dataset": ShareGPT-like, or uniform for vLLM's random dataset
    if workload is None:
        raise Skip(say("va_skip_varlen"))
    try:
        version = sv.get("engine_version") or str(sv.get("engine_version_inferred") or "").split(" ")[0]
        spec = ServingSpec(engine=sv["engine"], engine_version=version, weights=fmt,
                           kv_cache_dtype="fp8" if str(sv.get("kv_cache_dtype", "auto")).startswith("fp8") else "auto",
                           gpu_memory_utilization=sv.get("gpu_memory_utilization"), max_model_len=max_len,
                           max_num_seqs=sv.get("max_num_seqs"), max_num_batched_tokens=sv.get("max_num_batched_tokens"),
                           tp=int(sv.get("tp") or 1), input_len=int(sv.get("input_len") or 1),
                           output_len=int(sv.get("output_len") or 1), concurrency=conc, request_rate=rate,
                           cuda_graphs=sv.get("cuda_graphs", True) is not False,
                           block_size=int(sv["block_size"]) if sv.get("block_size") else None,
                           sampler=sv.get("sampler"),
                           custom_all_reduce=sv.get("custom_all_reduce"), workload=workload[0],
                           range_ratio=workload[1], prefix_caching=sv.get("prefix_caching"),
                           mamba_ssm_cache_dtype=sv.get("mamba_ssm_cache_dtype") or "auto")
        if spec.engine == "lmdeploy":  # quant_policy, backend, cache_max_entry_count (engine_lmdeploy.case_fields)
            spec = replace(spec, **lmd.case_fields(sv))
    except TrainfitError:
        raise Skip(say("va_skip_serving")) from None
    return spec, sv.get("num_prompts")


def predict_case(case: dict, overrides=None) -> ServingEstimate:
    m = _model(case)
    spec, prompts = _spec(case, m)
    if spec.max_model_len and m.max_positions and spec.max_model_len > m.max_positions:
        m = replace(m, max_positions=spec.max_model_len)  # the run stretched the context (RoPE scaling)
    try:
        gpu = get_gpu(str((case.get("hardware") or {}).get("gpu")))
    except TrainfitError:
        raise Skip(say("va_skip_gpu")) from None
    served = any(isinstance((case.get("measured") or {}).get(k), (int, float))
                 for k in ("output_tokens_per_s", "total_tokens_per_s", "requests_per_s", "ttft_ms", "tpot_ms"))
    return estimate(m, gpu, spec, overrides=overrides, num_prompts=prompts, served=served)


def _predicted(est: ServingEstimate) -> dict[str, float]:
    out = {"kv_cache_tokens": est.memory.kv_tokens, "max_concurrency": est.memory.max_concurrency,
           "kv_cache_gib": est.memory.kv_budget / 2**30}
    load = est.load
    if load:
        s = est.spec
        out.update(output_tokens_per_s=load.output_tokens_per_s, requests_per_s=load.requests_per_s,
                   total_tokens_per_s=load.requests_per_s * (s.input_len + s.output_len),
                   ttft_ms=load.ttft_s * 1e3, tpot_ms=load.tpot_s * 1e3)
    return out


def compare(case: dict, est: ServingEstimate) -> Row:
    meas = {k: v for k, v in (case.get("measured") or {}).items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0}
    row = Row(str(case.get("id")), str(case.get("source", "")).split(" ")[0], est.gpu.id, est.spec.engine,
              est.spec.weights, kv_short=bool(est.reasons) and est.load is not None)
    pred = _predicted(est)
    for metric, keys in METRICS.items():
        key = next((k for k in keys if k in meas and k in pred), None)
        if key:
            row.measured[key], row.predicted[key] = meas[key], round(pred[key], 3)
            error = abs(pred[key] - meas[key]) / meas[key]
            why = _impossible_ttft(est, meas[key]) if metric == "ttft" else None
            if why:
                row.excluded[metric] = (error, why)
            else:
                row.error[metric] = error
    return row


def _impossible_ttft(est: ServingEstimate, ttft_ms: float) -> str | None:
    """A measured TTFT below the prompt's FLOPs at the GPU's dense peak cannot be a full prefill (prefix-cache
    hits, or a prompt shorter than stated): left out of the TTFT statistics, listed with the reason."""
    from .speed import prefill_floor_s

    floor = prefill_floor_s(est.model, est.spec, est.cluster, est.spec.input_len) * 1e3
    if ttft_ms >= floor:
        return None
    return say("va_sv_ttft", ttft=ttft_ms, floor=floor, tokens=est.spec.input_len)


def _stats(values: list[tuple[Row, float]]) -> dict[str, Any]:
    if not values:
        return {"n": 0, "mape": None, "max_ape": None}
    worst = max(values, key=lambda x: x[1])
    return {"n": len(values), "mape": round(sum(e for _, e in values) / len(values), 4),
            "max_ape": round(worst[1], 4), "worst_case": worst[0].id}


def _metric(rows: list[Row], metric: str) -> dict[str, Any]:
    values = [(r, r.error[metric]) for r in rows if metric in r.error]
    out = _stats(values)
    for attr in ("gpu", "engine", "weights", "source"):
        groups: dict[str, list] = defaultdict(list)
        for r, e in values:
            groups[getattr(r, attr)].append((r, e))
        out[f"by_{attr}"] = {g: {k: v for k, v in _stats(vs).items() if k != "worst_case"}
                             for g, vs in sorted(groups.items())}
    return out


def validate(cases: list[dict], overrides=None) -> dict[str, Any]:
    rows, skipped = [], Counter()
    for case in cases:
        try:
            row = compare(case, predict_case(case, overrides))
            if not row.error and not row.excluded:
                raise Skip(say("va_skip_nothing_fits"))
            rows.append(row)
        except Skip as exc:
            skipped[exc.reason] += 1
        except (TrainfitError, KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            skipped[say("va_skip_could_not", error=type(exc).__name__)] += 1
    doc = {"cases": len(cases), "predicted": len(rows), "skipped": dict(skipped.most_common())}
    doc.update({metric: _metric(rows, metric) for metric in METRICS})
    doc["served_with_predicted_kv_short"] = [r.id for r in rows if r.kv_short]
    doc["excluded"] = [{"id": r.id, "metric": k, "error": round(e, 4), "reason": why}
                       for r in rows for k, (e, why) in r.excluded.items()]
    doc["notes"] = [say(key) for key in ("va_sv_note_kv", "va_sv_note_version", "va_sv_note_throughput",
                                         "va_sv_note_gptq", "va_sv_note_fields", "va_sv_note_served", "va_note_errors")]
    doc["rows"] = [r.to_dict() for r in rows]
    return doc
