"""What `generate` works from: a validated plan.json (or the same fields built from estimate flags)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from .. import userjson
import difflib

from ..errors import GenerateError

PLAN_VERSION = 1
_TOP_KEYS = {"trainfit_plan_version", "model", "workload", "choice", "alternatives"}
_CHOICE_KEYS = {"rank", "provider", "instance_type", "gpu", "gpus_per_node", "gpus_per_instance", "nodes", "strategy",
                "memory_gib", "gpu_memory_gib", "headroom_gib", "fits", "tokens_per_s", "tokens_per_s_per_gpu",
                "mfu", "step_time_s", "hours", "train_hours", "overhead_hours", "billed_hours", "cost", "currency",
                "price_per_hour", "price_currency", "price_billing", "region", "price_date", "price_unverified",
                "gpu_inferred", "interconnect", "inter_node", "bottleneck", "why",
                # price provenance and spot interruptions (optional; older plan files lack them)
                "price_age_days", "price_stale", "price_origin", "price_sources", "stock", "spot",
                # out-of-memory risk and the 80% bands of hours and cost (optional)
                "oom_risk", "uncertainty",
                # host RAM per node: loading the model, CPU offload, the instance's (optional)
                "host_ram_gib"}


@dataclass(frozen=True)
class Setup:
    """The chosen configuration, as generate needs it."""

    model: dict  # name, hf_id, source, hf_config
    workload: dict  # task, seq_len, global_batch, processed_tokens, epochs
    choice: dict  # provider/instance/gpu/gpus_per_node/nodes/strategy/plan numbers

    @property
    def strategy(self) -> dict:
        return self.choice["strategy"]

    @property
    def world_size(self) -> int:
        return int(self.choice["gpus_per_node"]) * int(self.choice["nodes"])


def _unknown(keys: set, allowed: set, where: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        close = difflib.get_close_matches(str(extra[0]).lower(), sorted(allowed), n=3, cutoff=0.5)
        if close:
            raise GenerateError("gen_e_plan_unknown_key_close", where=where, name=extra[0], close=", ".join(close))
        raise GenerateError("gen_e_plan_unknown_key", where=where, name=extra[0])


def load_plan(path: str) -> Setup:
    if not os.path.isfile(path):
        raise GenerateError("gen_e_plan_missing", path=path)
    doc = userjson.read(path, "plan.json")
    if not isinstance(doc, dict):
        raise GenerateError("gen_e_plan_not_object", path=path)
    version = doc.get("trainfit_plan_version")
    if version != PLAN_VERSION:
        raise GenerateError("gen_e_plan_version", path=path, version=version, expected=PLAN_VERSION)
    _unknown(set(doc), _TOP_KEYS, path)
    for key in ("model", "workload", "choice"):
        if not isinstance(doc.get(key), dict):
            raise GenerateError("gen_e_plan_key_missing", path=path, name=key)
    _unknown(set(doc["choice"]), _CHOICE_KEYS, f"{path} choice")
    if not isinstance(doc["choice"].get("strategy"), dict):
        raise GenerateError("gen_e_no_strategy", path=path)
    from ..report.estimate import STRATEGY_FIELDS

    _unknown(set(doc["choice"]["strategy"]), set(STRATEGY_FIELDS), f"{path} choice.strategy")
    if not doc["model"].get("hf_config"):
        raise GenerateError("gen_e_no_hf_config", path=path)
    return Setup(model=doc["model"], workload=doc["workload"], choice=doc["choice"])


def setup_from_estimate(est: Any, model_arg: str, processed_tokens: float) -> Setup:
    """A Setup from `trainfit generate --model ... --gpu ...` flags (no plan file)."""
    from ..catalog.models import all_models, local_config
    from ..report.estimate import config_dict, strategy_of

    c = config_dict(est)
    preset = all_models().get(est.model.name)
    hf_config = preset.hf_config if preset else local_config(model_arg)
    if hf_config is None:
        raise GenerateError("gen_e_needs_config", model=model_arg)
    strategy = strategy_of(est)
    if strategy["optimizer_in_backward"] and strategy["engine"] != "single":
        raise GenerateError("gen_e_oib")
    inst = est.cluster.instance
    choice = {"provider": inst.provider if inst else None, "instance_type": inst.instance_type if inst else None,
              "gpu": est.gpu.id, "gpus_per_node": est.strategy.gpus_per_node, "nodes": est.strategy.nodes,
              "strategy": strategy, "memory_gib": round(est.memory.device / 2**30, 2),
              "gpu_memory_gib": round(est.memory.usable / 2**30, 2), "fits": est.fits,
              "tokens_per_s": round(est.tokens_per_s, 1), "step_time_s": round(est.step_time_s, 4),
              "hours": round(processed_tokens / est.tokens_per_s / 3600, 3) if processed_tokens else None,
              "cost": None, "currency": None, "bottleneck": est.bottleneck,
              "interconnect": est.cluster.intra_link,
              "inter_node": est.cluster.inter_link if est.strategy.nodes > 1 else None}
    model = {"name": est.model.name, "hf_id": preset.hf_id if preset else None, "source": model_arg,
             "hf_config": hf_config}
    workload = {"task": c["task"], "seq_len": c["seq_len"], "global_batch": c["global_batch"],
                "processed_tokens": processed_tokens, "epochs": 1}
    return Setup(model=model, workload=workload, choice=choice)
