"""torchtitan's TOML job config for a model-parallel plan (engine "torchtitan": FSDP2 with tp / pp / cp / ep).

Key names are torchtitan 0.2.2's (torchtitan/config/job_config.py: JobConfig), the last release whose job config is a
TOML file (`torchrun -m torchtitan.train --job.config_file ...`; 0.3.0 replaced it with Python config registries):
tests/test_generate_3d.py parses what is written here with that release's own ConfigManager. torchtitan trains its
own model definitions, so the plan's model must be one of its flavors (FLAVORS); the tokenizer / weights directory
and the dataset are placeholders the user fills.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import GenerateError
from .common import Setup
from .configs import LEARNING_RATE, save_steps_for, steps_for

TORCHTITAN_VERSION = "0.2.2"
CONFIG_FILE = "torchtitan.toml"
# torchtitan's model flavors (torchtitan/models/{llama3,qwen3}/__init__.py at v0.2.2) by the Hugging Face config's
# (model_type, layers, hidden size, attention heads, key-value heads)
FLAVORS = {
    ("llama", 32, 4096, 32, 8): ("llama3", "8B"), ("llama", 80, 8192, 64, 8): ("llama3", "70B"),
    ("llama", 126, 16384, 128, 8): ("llama3", "405B"),
    ("qwen3", 28, 1024, 16, 8): ("qwen3", "0.6B"), ("qwen3", 28, 2048, 16, 8): ("qwen3", "1.7B"),
    ("qwen3", 36, 2560, 32, 8): ("qwen3", "4B"), ("qwen3", 36, 4096, 32, 8): ("qwen3", "8B"),
    ("qwen3", 40, 5120, 40, 8): ("qwen3", "14B"), ("qwen3", 64, 5120, 64, 8): ("qwen3", "32B"),
    ("qwen3_moe", 48, 2048, 32, 4): ("qwen3", "30B-A3B"), ("qwen3_moe", 94, 4096, 64, 4): ("qwen3", "235B-A22B"),
}
LLAMA3_VOCAB = 128256  # torchtitan's llama3 flavors are Llama 3's (Llama 2 has the same shapes, another vocabulary)
_DTYPE = {"bf16": "bfloat16", "fp32": "float32"}
_SCHEDULE = {"1f1b": "1F1B", "interleaved": "Interleaved1F1B"}


def flavor(cfg: dict) -> tuple[str, str] | None:
    heads = int(cfg.get("num_attention_heads") or 0)
    key = (str(cfg.get("model_type") or ""), int(cfg.get("num_hidden_layers") or 0), int(cfg.get("hidden_size") or 0),
           heads, int(cfg.get("num_key_value_heads") or heads))
    found = FLAVORS.get(key)
    if found and found[0] == "llama3" and int(cfg.get("vocab_size") or 0) != LLAMA3_VOCAB:
        return None
    return found


def assets_path(setup: Setup) -> str:
    """Where the tokenizer and the Hugging Face weights go (torchtitan's scripts/download_hf_assets.py layout)."""
    hf_id = str(setup.model.get("hf_id") or setup.model["name"])
    return "./assets/hf/" + hf_id.rsplit("/", 1)[-1]


def _parallelism(setup: Setup) -> dict[str, Any]:
    st, cfg = setup.strategy, setup.model["hf_config"]
    tp, pp, cp, ep, vpp = (int(st.get(k) or 1) for k in ("tp", "pp", "cp", "ep", "vpp"))
    out: dict[str, Any] = {
        "data_parallel_replicate_degree": 1, "data_parallel_shard_degree": setup.world_size // (tp * pp * cp),
        "fsdp_reshard_after_forward": "default" if st.get("fsdp") == "full_shard" else "never",
        "tensor_parallel_degree": tp, "enable_async_tensor_parallel": False,
        "pipeline_parallel_degree": pp, "context_parallel_degree": cp, "expert_parallel_degree": ep,
        "expert_tensor_parallel_degree": int(st.get("etp") or 1)}  # torchtitan: 1 (its default) or tp
    if pp > 1:  # pp x vpp stages of equal layers, the split the plan priced (embeddings in the first, head in the last)
        out.update(pipeline_parallel_schedule=_SCHEDULE[str(st.get("pp_schedule") or "1f1b")],
                   pipeline_parallel_microbatch_size=int(st["micro_batch"]),
                   pipeline_parallel_layers_per_stage=int(cfg["num_hidden_layers"]) // (pp * vpp),
                   pipeline_parallel_first_stage_less_layers=0, pipeline_parallel_last_stage_less_layers=0)
    return out


def _activation_checkpoint(st: dict) -> dict[str, Any]:
    mode = str(st.get("grad_ckpt") or "none")
    out: dict[str, Any] = {"mode": mode}
    if mode == "selective":
        out["selective_ac_option"] = str(st.get("selective_ac") or "op")
    return out


def _checkpoint(setup: Setup) -> dict[str, Any]:
    out: dict[str, Any] = {"enable": True, "folder": "checkpoint", "interval": save_steps_for(setup),
                           "last_save_model_only": True, "last_save_in_hf": True, "export_dtype": "bfloat16"}
    if setup.workload["task"] != "pretrain":  # fine-tuning starts from the Hugging Face weights
        out.update(initial_load_path=assets_path(setup), initial_load_in_hf=True, initial_load_model_only=True)
    return out


def job_config(setup: Setup) -> dict[str, dict[str, Any]]:
    """The TOML's sections ({section: {key: value}}), torchtitan 0.2.2's JobConfig field names."""
    st, name = setup.strategy, flavor(setup.model["hf_config"])
    steps, pp = steps_for(setup), int(st.get("pp") or 1)
    mb, ga = int(st["micro_batch"]), int(st["grad_accum"])
    return {
        "job": {"dump_folder": "./outputs", "description": f"trainfit: {setup.model['name']} ({st['method']}, "
                                                           f"{st['task']})"},
        "metrics": {"log_freq": 10},
        "model": {"name": name[0], "flavor": name[1], "hf_assets_path": assets_path(setup)},
        "optimizer": {"name": "AdamW", "lr": LEARNING_RATE[st["method"]], "beta1": 0.9, "beta2": 0.95, "eps": 1e-8,
                      "weight_decay": 0.0},
        "lr_scheduler": {"warmup_steps": max(1, steps // 33), "decay_type": "cosine", "min_lr_factor": 0.1},
        # local_batch_size is a data-parallel rank's batch per optimizer step under PP (cut into micro-batches of
        # pipeline_parallel_microbatch_size); without PP one micro-batch, accumulated to global_batch_size
        "training": {"dataset": "c4", "local_batch_size": mb * ga if pp > 1 else mb,
                     "global_batch_size": int(st["global_batch"]), "seq_len": int(setup.workload["seq_len"]),
                     "max_norm": 1.0, "steps": steps, "mixed_precision_param": _DTYPE[st["precision"]],
                     "mixed_precision_reduce": "float32"},
        "parallelism": _parallelism(setup),
        "activation_checkpoint": _activation_checkpoint(st),
        "compile": {"enable": bool(st.get("torch_compile"))},
        "checkpoint": _checkpoint(setup),
    }


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string: JSON's escapes are TOML's
    raise TypeError(f"no TOML form for {value!r}")  # pragma: no cover - job_config holds scalars only


def toml_text(setup: Setup) -> str:
    lines = ["# Generated by `trainfit generate`: torchtitan job config for this plan (torchtitan "
             f"{TORCHTITAN_VERSION}: torchrun ... -m torchtitan.train --job.config_file {CONFIG_FILE})",
             "# Fill in: model.hf_assets_path (tokenizer + weights, scripts/download_hf_assets.py) and the dataset "
             "(training.dataset / --training.dataset_path: README)."]
    for section, values in job_config(setup).items():
        lines += ["", f"[{section}]"]
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"


def prelude(setup: Setup) -> list[str]:
    return []


def program(setup: Setup) -> str:
    """What torchrun runs, after --nproc_per_node: torchtitan's trainer with this config and the shell's paths."""
    return (f'-m torchtitan.train --job.config_file {CONFIG_FILE} --training.dataset_path "$DATA" '
            '--job.dump_folder "$OUTPUT_DIR"')


def requirements() -> list[str]:
    return [f"torchtitan=={TORCHTITAN_VERSION}  # its TOML job config (0.3 moved to Python config registries)",
            "torchdata>=0.8", "datasets>=2.21", "tokenizers", "tomli>=1.1", "tyro", "tensorboard", "einops"]


def check(setup: Setup) -> None:
    """What torchtitan 0.2.2 cannot run (i18n gen_e_3d_*)."""
    st, cfg = setup.strategy, setup.model["hf_config"]
    if flavor(cfg) is None:
        raise GenerateError("gen_e_3d_model", engine="torchtitan", model=setup.model["name"],
                            why="no torchtitan flavor has its shape (llama3 8B / 70B / 405B, qwen3 0.6B-32B, 30B-A3B, "
                                "235B-A22B)")
    sel = st.get("selective_ac")
    if st.get("grad_ckpt") == "selective" and (sel in (None, "attention")):
        raise GenerateError("gen_e_3d_selective", engine="torchtitan", policy=sel or "attention",
                            supported="op, N (every N-th layer)")
    if st["precision"] not in _DTYPE:
        raise GenerateError("gen_e_3d_precision", engine="torchtitan", precision=st["precision"],
                            supported="bf16, fp32")
    if int(st.get("tp") or 1) > 1 and st.get("sequence_parallel") is False:
        raise GenerateError("gen_e_3d_no_sp")
    ep = int(st.get("ep") or 1)
    experts = int(cfg.get("num_experts") or cfg.get("num_local_experts") or 0)
    if ep > 1 and (not experts or experts % ep):
        raise GenerateError("gen_e_3d_split", what=f"{experts} experts", by=f"ep {ep}")
    etp, tp = int(st.get("etp") or 1), int(st.get("tp") or 1)
    if etp not in (1, tp):  # torchtitan 0.2.2 (job_config.py): expert TP is either 1 or the TP degree
        raise GenerateError("gen_e_3d_etp", etp=etp, tp=tp)
    borrowed = setup.world_size // int(st.get("pp") or 1)  # EP borrows from the dp_shard x cp x tp ranks
    if ep > 1 and borrowed % ep:
        raise GenerateError("gen_e_3d_split", what=f"{borrowed} GPUs per pipeline stage", by=f"ep {ep}")
