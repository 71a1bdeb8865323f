"""plan.json, the file `trainfit plan --out` writes and `trainfit generate --plan` reads: its one home module (format
version, keys, writing, reading and checking)."""

from __future__ import annotations

import json
import os

from . import userjson
import difflib

from .errors import GenerateError, SpecError, sentence_of
from .i18n import say

VERSION = 1
TOP_KEYS = {"trainfit_plan_version", "model", "workload", "choice", "alternatives"}
CHOICE_KEYS = {"rank", "provider", "instance_type", "gpu", "gpus_per_node", "gpus_per_instance", "nodes", "strategy",
              "memory_gib", "gpu_memory_gib", "headroom_gib", "fits", "tokens_per_s", "tokens_per_s_per_gpu",
              "mfu", "step_time_s", "hours", "train_hours", "overhead_hours", "billed_hours", "cost", "currency",
              "price_per_hour", "price_currency", "price_billing", "region", "price_date", "price_unverified",
              "gpu_inferred", "interconnect", "inter_node", "bottleneck", "why",
              # price provenance and spot interruptions (optional; older plan files lack them)
              "price_age_days", "price_stale", "price_origin", "price_sources", "stock", "spot",
              # out-of-memory risk and the 80% bands of hours and cost (optional)
              "oom_risk", "uncertainty",
              # host RAM per node: loading the model, CPU offload, the instance's (optional)
              "host_ram_gib",
              # the training stack the numbers are for (plan --framework; optional, null when not stated)
              "framework"}


def write_plan_doc(doc: dict, out_dir: str) -> str:
    """Write `doc` (report.plan.plan_file) as OUT_DIR/plan.json, atomically; returns the path."""
    from .safe_write import write_text_atomic

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "plan.json")
    # a temporary file unique to this process, renamed into place: concurrent `plan --out DIR` runs each succeed and
    # leave one complete plan.json (the last one's), never a half-written one or another run's leftover .tmp
    return write_text_atomic(path, json.dumps(doc, ensure_ascii=False, indent=2) + "\n")


def _unknown(keys: set, allowed: set, where: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        close = difflib.get_close_matches(str(extra[0]).lower(), sorted(allowed), n=3, cutoff=0.5)
        if close:
            raise GenerateError("gen_e_plan_unknown_key_close", where=where, name=extra[0], close=", ".join(close))
        raise GenerateError("gen_e_plan_unknown_key", where=where, name=extra[0])


def read_plan(path: str) -> dict:
    """plan.json -> its document, checked: version, keys, and the job's values through the declaration."""
    if not os.path.isfile(path):
        raise GenerateError("gen_e_plan_missing", path=path)
    doc = userjson.read(path, "plan.json")
    if not isinstance(doc, dict):
        raise GenerateError("gen_e_plan_not_object", path=path)
    version = doc.get("trainfit_plan_version")
    if version != VERSION:
        raise GenerateError("gen_e_plan_version", path=path, version=version, expected=VERSION)
    _unknown(set(doc), TOP_KEYS, path)
    for key in ("model", "workload", "choice"):
        if not isinstance(doc.get(key), dict):
            raise GenerateError("gen_e_plan_key_missing", path=path, name=key)
    _unknown(set(doc["choice"]), CHOICE_KEYS, f"{path} choice")
    if not isinstance(doc["choice"].get("strategy"), dict):
        raise GenerateError("gen_e_no_strategy", path=path)
    from .report.estimate import STRATEGY_FIELDS

    _unknown(set(doc["choice"]["strategy"]), set(STRATEGY_FIELDS), f"{path} choice.strategy")
    _check_values(doc["choice"], path)
    if not doc["model"].get("hf_config"):
        raise GenerateError("gen_e_no_hf_config", path=path)
    return doc


# Job fields added after plan.json version 1 was first written, each with a default that means what a plan.json
# without it meant: the data layout train.py then took for the task (None), and data parallelism alone.
ADDED_FIELDS = ("data_layout", "tp", "pp", "vpp", "pp_schedule", "cp", "ep", "etp", "sequence_parallel",
                "moe_dispatcher", "ep_overlap", "precision_aware_optimizer",
                "pp_split_embedding", "pp_split_loss", "grad_reduce_bf16", "pp_layout")


def _check_values(choice: dict, path: str) -> None:
    """The job's values in a plan.json, checked as every other door checks them (spec/job.py): a hand-edited
    micro-batch 0, ZeRO stage 7, 3.5 GPUs per node or an unknown GPU is one clear error, not a broken setup."""
    from .catalog import get_gpu
    from .spec.job import BY_NAME, PLAN, through
    from .spec.training import Strategy, TrainingSpec

    strategy = choice["strategy"]
    for name in ADDED_FIELDS:  # a plan.json written before these fields existed: their defaults, what it meant
        strategy.setdefault(name, BY_NAME[name].to_json(BY_NAME[name].default))
    training, spread = {}, {}
    for f in through(PLAN):
        value = strategy.get(f.name)
        if value is None:
            continue
        try:
            (training if f.part == "training" else spread)[f.name] = f.convert(value)
        except SpecError as exc:
            raise SpecError(say("ec_plan_strategy_field", path=path, field=f.name, message=sentence_of(exc))) from None
    for name in ("gpus_per_node", "nodes"):
        if choice.get(name) is None:
            raise SpecError(say("ec_plan_choice_missing", path=path, name=name))
        try:
            spread[name] = BY_NAME[name].convert(choice[name])
        except SpecError as exc:
            raise SpecError(say("ec_plan_choice_field", path=path, field=name, message=sentence_of(exc))) from None
    try:
        TrainingSpec(**training)
        engine = Strategy(**spread).engine
        if training.get("lora_targets"):  # names the estimate knows (q_proj, all-linear, ...), as every door checks
            from .estimate.trainable import lora_roles

            lora_roles(tuple(training["lora_targets"]))
    except SpecError as exc:
        raise SpecError(say("ec_plan_strategy", path=path, message=sentence_of(exc))) from None
    if strategy.setdefault("engine", engine) != engine:  # derived from zero_stage, fsdp and the GPU count
        raise SpecError(say("ec_plan_engine_disagrees", path=path, engine=strategy["engine"], expected=engine))
    strategy.setdefault("freeze_trainable_layers", None)
    from .report.estimate import STRATEGY_FIELDS

    missing = [name for name in STRATEGY_FIELDS if name not in strategy and name != "global_batch"]
    if missing:  # plan.json lists every field of the job (trainfit writes them all); a hand edit dropped these
        raise SpecError(say("ec_plan_strategy_missing", path=path, names=", ".join(map(repr, missing))))
    if not isinstance(choice.get("gpu"), str):
        raise SpecError(say("ec_plan_gpu_needed", path=path))
    get_gpu(choice["gpu"])
    batch = strategy.get("global_batch")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise SpecError(say("ec_plan_global_batch_positive", path=path, batch=batch))
    ranks = Strategy(**spread).dp  # the data-parallel ranks: each takes micro_batch x grad_accum per step
    mb, accum = training.get("micro_batch"), training.get("grad_accum")
    if batch is None and mb and accum:
        strategy["global_batch"] = batch = mb * accum * ranks
    if batch is not None and mb and accum and batch != mb * accum * ranks:
        raise SpecError(say("ec_plan_global_batch_product", path=path, batch=batch, mb=mb, accum=accum, ranks=ranks,
                               total=mb * accum * ranks))
    if "fits" in choice and not isinstance(choice["fits"], bool):
        raise SpecError(say("ec_plan_fits_bool", path=path, value=choice["fits"]))
