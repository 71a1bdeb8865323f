"""Engine and training configs consistent with the plan's numbers: DeepSpeed JSON, an Accelerate-format FSDP
YAML, and train_config.json (what train.py reads)."""

from __future__ import annotations

from typing import Any

from .common import Setup

# Decoder block class per model_type (the unit FSDP wraps), as named in transformers' modeling_*.py files.
LAYER_CLASSES = {
    "llama": "LlamaDecoderLayer", "mistral": "MistralDecoderLayer", "mixtral": "MixtralDecoderLayer",
    "qwen2": "Qwen2DecoderLayer", "qwen3": "Qwen3DecoderLayer", "gemma": "GemmaDecoderLayer",
    "gemma2": "Gemma2DecoderLayer", "phi3": "Phi3DecoderLayer", "phi": "PhiDecoderLayer", "gpt2": "GPT2Block",
    "gpt_neox": "GPTNeoXLayer", "falcon": "FalconDecoderLayer", "mpt": "MptBlock", "bert": "BertLayer",
    "roberta": "RobertaLayer", "chatglm": "GLMBlock", "baichuan": "DecoderLayer",
}

# Training hyper-parameters the plan does not decide; train_config.json holds them for the user to edit.
LEARNING_RATE = {"full": 1e-5, "freeze": 1e-5, "lora": 2e-4, "qlora": 2e-4}
LORA_ALPHA_PER_RANK = 2


def steps_for(setup: Setup) -> int:
    from ..train.runner import tokens_per_step

    w, st = setup.workload, setup.strategy
    per_step = tokens_per_step({"global_batch": st["global_batch"], "seq_len": w["seq_len"], "task": w["task"],
                                "data_layout": st.get("data_layout"), "avg_len": st.get("avg_len")})
    tokens = float(w.get("processed_tokens") or 0)
    return max(1, -(-int(tokens) // per_step)) if tokens else 1000


def checkpoint_interval_h(setup: Setup) -> float:
    """Hours between checkpoints that the plan's cost assumes: the spot schedule's interval (Young's formula) when
    the plan priced spot interruptions, else the `checkpoint_interval_hours` efficiency value."""
    spot = setup.choice.get("spot")
    if isinstance(spot, dict) and spot.get("checkpoint_interval_hours"):
        return float(spot["checkpoint_interval_hours"])
    from ..catalog.efficiency import Efficiencies

    return float(Efficiencies.default().describe("checkpoint_interval_hours")["default"])


def save_steps_for(setup: Setup) -> int:
    """Optimizer steps between checkpoints: the plan's checkpoint interval over its estimated step time."""
    step_s = float(setup.choice.get("step_time_s") or 0)
    if step_s <= 0:
        return 500  # no step-time estimate in the plan: a fixed interval, as before
    return max(1, int(checkpoint_interval_h(setup) * 3600 / step_s))


def hidden_size(setup: Setup) -> int:
    cfg = setup.model["hf_config"]
    return int(cfg.get("hidden_size") or cfg.get("n_embd") or cfg.get("d_model") or 4096)


def deepspeed_config(setup: Setup) -> dict[str, Any]:
    """DeepSpeed ZeRO config whose batch sizes, stage, offload and precision are the plan's."""
    st = setup.strategy
    mb, ga, world = int(st["micro_batch"]), int(st["grad_accum"]), setup.world_size
    h = hidden_size(setup)
    zero: dict[str, Any] = {"stage": int(st["zero_stage"]), "overlap_comm": True, "contiguous_gradients": True,
                            "reduce_bucket_size": h * h}
    if zero["stage"] == 3:
        zero.update(stage3_prefetch_bucket_size=int(0.9 * h * h), stage3_param_persistence_threshold=10 * h,
                    stage3_gather_16bit_weights_on_model_save=True)
    else:
        zero["allgather_bucket_size"] = h * h
    if st["offload"] in ("optimizer", "all"):
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if st["offload"] == "all":
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    steps = steps_for(setup)
    cfg: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": mb,
        "gradient_accumulation_steps": ga,
        "train_batch_size": mb * ga * world,
        "gradient_clipping": 1.0,
        "zero_optimization": zero,
        "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": steps,
                                                           "warmup_num_steps": max(1, steps // 33)}},
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
    }
    if st["precision"] == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif st["precision"] == "fp16":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    if st["optimizer"] == "adamw":
        cfg["optimizer"] = {"type": "AdamW", "params": {"lr": LEARNING_RATE[st["method"]], "betas": [0.9, 0.95],
                                                        "eps": 1e-8, "weight_decay": 0.0}}
    return cfg


def accelerate_fsdp_config(setup: Setup) -> dict[str, Any]:
    """An Accelerate config file (FSDP2) with the plan's sharding, wrapping, precision and checkpointing; train.py
    applies the same settings with torch's fully_shard, `accelerate launch --config_file` can use it too."""
    st = setup.strategy
    model_type = str(setup.model["hf_config"].get("model_type", "")).lower()
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP",
        "num_machines": int(setup.choice["nodes"]),
        "num_processes": setup.world_size,
        "machine_rank": 0,
        "main_training_function": "main",
        "mixed_precision": "no" if st["precision"] == "fp32" else st["precision"],
        "use_cpu": False,
        "fsdp_config": {
            "fsdp_version": 2,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_transformer_layer_cls_to_wrap": LAYER_CLASSES.get(model_type, "DecoderLayer"),
            "fsdp_reshard_after_forward": st["fsdp"] == "full_shard",
            "fsdp_offload_params": st["offload"] == "all",
            # Accelerate's activation checkpointing wraps whole layers: full only. Selective (the attention core) has
            # no key here; train.py applies it itself (train_config.json `grad_ckpt`, runner.selective_attention)
            "fsdp_activation_checkpointing": st["grad_ckpt"] == "full",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
        },
    }


MODEL_SOURCES = ("hf", "modelscope", "local")


def model_weights(setup: Setup, source: str = "hf", path: str | None = None) -> dict[str, Any]:
    """Where train.py gets the weights: the Hugging Face Hub (HF_ENDPOINT may name a mirror), ModelScope
    (snapshot_download of `modelscope_id`, by default the same id), or a local directory."""
    from ..errors import GenerateError

    if source not in MODEL_SOURCES:
        raise GenerateError("gen_e_model_source", source=source, sources=", ".join(MODEL_SOURCES))
    if source == "local" and not path:
        raise GenerateError("gen_e_local_needs_path")
    if path and any(ord(ch) < 32 for ch in path):
        raise GenerateError("gen_e_path_control")
    hf_id = setup.model.get("hf_id")
    if source == "modelscope" and not hf_id and not path:
        raise GenerateError("gen_e_no_hub_id", model=setup.model["name"])
    return {"source": source, "path": path, "modelscope_id": hf_id if source == "modelscope" else None}


def train_config(setup: Setup, data: str | None, output_dir: str, engine_files: dict[str, str],
                 weights: dict[str, Any] | None = None) -> dict[str, Any]:
    """train_config.json: the plan's job (every declared field that passes the config door of spec/job.py, at its
    dotted path) and what train.py needs beside it (model, data, hyper-parameters the plan does not decide)."""
    from ..spec.job import CONFIG, put_config, through

    st, w, m = setup.strategy, setup.workload, setup.model
    from ..spec.training import require_runnable_checkpointing

    require_runnable_checkpointing(st.get("grad_ckpt"), st.get("selective_ac"), "train.py")
    hf = m["hf_config"]
    weights = weights or {"source": "hf", "path": None, "modelscope_id": None}
    rank = st.get("lora_rank") or 16
    out: dict[str, Any] = {
        "config_version": 1,
        "model": {"name": m["name"], "hf_id": m.get("hf_id"), "path": weights["path"], "source": weights["source"],
                  "modelscope_id": weights["modelscope_id"], "hf_config": hf,
                  "vocab_size": int(hf.get("padded_vocab_size") or hf.get("vocab_size")), "random_init": False},
        "global_batch": int(st["global_batch"]), "processed_tokens": w.get("processed_tokens"), "max_steps": None,
        "engine": st["engine"],
        "lora": {"alpha": LORA_ALPHA_PER_RANK * rank, "dropout": 0.0},
        "freeze_trainable_layers": int(st.get("freeze_trainable_layers") or 2), "dpo_beta": 0.1,
        "optimizer": {"lr": LEARNING_RATE[st["method"]], "betas": [0.9, 0.95], "weight_decay": 0.0,
                      "warmup_ratio": 0.03, "max_grad_norm": 1.0},
        "data": data, "output_dir": output_dir, "save_steps": save_steps_for(setup),
        "expected": {k: setup.choice.get(k) for k in ("gpu", "gpus_per_node", "nodes", "memory_gib", "tokens_per_s",
                                                     "tokens_per_s_per_gpu", "hours", "cost", "currency",
                                                     "bottleneck")},
    }
    for f in through(CONFIG):
        value = st.get(f.name, w.get(f.name))
        put_config(out, f.config_path, f.to_json(f.default) if value is None else value)
    out.update(engine_files)
    return out
