"""The Python API: strings and numbers in, typed specs built and validated, estimates out.

    >>> import trainfit
    >>> est = trainfit.estimate("qwen2-7b", "a10", method="lora", seq_len=2048, grad_ckpt="full")
    >>> est.fits, round(est.tokens_per_s)
"""

from __future__ import annotations

from typing import Any

from .catalog import get_gpu, get_instance, resolve_model
from .catalog.efficiency import Efficiencies, load_efficiencies, user_calibration_path  # noqa: F401
from .catalog.frameworks import with_framework
from .errors import SpecError
from .estimate.core import Estimate, run_estimate
from .spec.cluster import check_network_gbps, cluster_for
from .spec.model import ModelSpec
from .spec.job import API, through
from .spec.training import job_specs, strategy_spec, training_spec  # noqa: F401


def estimate(model: str | ModelSpec, gpu: str | None = None, *, instance: str | None = None,
             network_gbps: float | None = None, overrides: dict[str, Any] | None = None,
             calibration: str | None = None, efficiencies: Efficiencies | None = None, **job: Any) -> Estimate:
    """Estimate memory per GPU, step time and throughput of one training configuration.

    `job` holds the job's fields as keywords (method="lora", seq_len=4096, gpus=2, zero=3, ...): every field
    declared in trainfit/spec/job.py; `trainfit.job_fields()` lists them."""
    spec = model if isinstance(model, ModelSpec) else resolve_model(model)
    inst = get_instance(instance) if instance else None
    gpu_spec = get_gpu(gpu) if gpu else None
    if inst is not None:
        if not inst.gpu:
            raise SpecError(f"{inst.instance_type}: the catalog does not know its GPU")
        if gpu_spec is not None and gpu_spec.id != inst.gpu:
            raise SpecError(f"{inst.instance_type} carries {inst.gpu}, not {gpu_spec.id}")
        gpu_spec = get_gpu(inst.gpu)
    if gpu_spec is None:
        from .i18n import say

        raise SpecError(say("ei_give_gpu"))
    whole = inst is not None and job.get("gpus") is None and (inst.gpu_count or 1) > 1
    if whole:  # an instance is paid whole: its GPUs all train (data-parallel) unless --gpus says otherwise
        job = {**job, "gpus": inst.gpu_count}
    t, s, inputs = job_specs(spec, **job)
    if network_gbps is not None:
        check_network_gbps(network_gbps)
    eff = with_framework(efficiencies or load_efficiencies(overrides, calibration), inputs.get("framework"))
    default_net = eff.for_gpu(gpu_spec)("default_inter_node_gbps") if s.nodes > 1 else None
    cluster = cluster_for(gpu_spec, s.gpus_per_node, s.nodes, inst, network_gbps, default_net, catalog_network=True)
    if whole:
        from dataclasses import replace

        from .i18n import say

        cluster = replace(cluster, assumptions=cluster.assumptions + (
            say("es_whole_instance", n=inst.gpu_count, instance=inst.instance_type),))
    est = run_estimate(spec, t, s, cluster, eff)
    from .validated import note_for

    note = note_for(gpu_spec.id)  # said, not hidden: how far published runs on this GPU check the speed
    if note:
        from dataclasses import replace

        est = replace(est, warnings=(*est.warnings, note))
    return est


def job_fields(lang: str = "en") -> list[dict[str, Any]]:
    """The declared job fields: name, API keyword, CLI flag, default, range, choices and help."""
    from .spec.job import FIELDS

    return [{"name": f.name, "part": f.part, "keyword": f.keyword, "flag": f.cli_flag, "default": f.to_json(f.default),
             "low": f.low, "high": f.high, "unit": f.unit, "choices": list(f.choice_names() or []) or None,
             "doors": sorted(f.doors), "help": f.help_text(lang)} for f in FIELDS]


def _with_job_signature(fn):
    """Show the declared job keywords in help() and inspect.signature()."""
    import inspect

    sig = inspect.signature(fn)
    params = [p for p in sig.parameters.values() if p.kind != p.VAR_KEYWORD]
    params += [inspect.Parameter(f.keyword, inspect.Parameter.KEYWORD_ONLY, default=f.default)
               for f in through(API) if f.keyword not in sig.parameters]
    fn.__signature__ = sig.replace(parameters=params)
    return fn


_with_job_signature(estimate)
