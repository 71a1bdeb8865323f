"""What `generate` works from: a validated plan.json (or the same fields built from estimate flags)."""

from __future__ import annotations

from typing import Any

from ..errors import GenerateError
from .common import Setup


def require_generated_stack(setup: Setup) -> None:
    """generate writes trainfit's train.py, whose run is the reference stacks' (uncertainty.REFERENCE_STACKS: its own
    loop, or the Hugging Face Trainer's, over the same Transformers + PEFT code); numbers made for another stack
    (--framework litgpt, megatron, torchtitan, ...) are not that script's, and its layout may be one train.py's
    engines do not run the same way: refused, with what to do instead. A model-parallel plan (engine megatron /
    torchtitan) is launched with that stack's own program instead, and refused where the stack cannot run it."""
    from ..uncertainty import REFERENCE_STACKS
    from .stacks import STACK_NAMES, check_3d, check_framework, is_3d

    framework = setup.choice.get("framework")
    if is_3d(setup):  # a model-parallel plan: Megatron-LM's or torchtitan's own launch (generate/stacks.py)
        if not check_framework(setup):
            raise GenerateError("gen_e_3d_framework", framework=framework,
                                engine=STACK_NAMES[setup.strategy["engine"]], engine_key=setup.strategy["engine"])
        check_3d(setup)
        return
    if framework is not None and str(framework) not in REFERENCE_STACKS:
        raise GenerateError("gen_e_framework", framework=framework)


def load_plan(path: str) -> Setup:
    """A plan.json, read and checked by its home module (trainfit.planfile), as generate needs it."""
    from ..planfile import read_plan

    doc = read_plan(path)
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
              "inter_node": est.cluster.inter_link if est.strategy.nodes > 1 else None,
              "framework": est.table.framework}
    model = {"name": est.model.name, "hf_id": preset.hf_id if preset else None, "source": model_arg,
             "hf_config": hf_config}
    workload = {"task": c["task"], "seq_len": c["seq_len"], "global_batch": c["global_batch"],
                "processed_tokens": processed_tokens, "epochs": 1}
    return Setup(model=model, workload=workload, choice=choice)
