"""Megatron-LM's `pretrain_gpt.py` arguments for a model-parallel plan (engine "megatron": tp / pp / cp / ep with
Megatron's own data parallelism and, with --zero 1, its distributed optimizer).

The argument names and choices are Megatron-LM's at tag core_v0.16.1 (megatron/training/arguments.py; the same
release as the megatron-core 0.16.1 wheel): tests/test_generate_3d.py parses what is written here with a parser
rebuilt from that file's declarations (tests/data/megatron_lm_args.json), since Megatron-LM's training code is not on
PyPI. The model's shape comes from its Hugging Face config; the data, tokenizer and checkpoint are placeholders the
user fills (shell variables: DATA, CHECKPOINT, MEGATRON_LM).
"""

from __future__ import annotations

from typing import Any

from ..errors import GenerateError
from ..spec.choices import MEGATRON_RECOMPUTE_MODULES, is_module_list, recompute_modules
from ..spec.pp_layout import mtp_layers, parse as parse_layout
from .common import Setup, one_line
from .configs import LEARNING_RATE, save_steps_for, steps_for

MEGATRON_REF = "core_v0.16.1"  # the Megatron-LM tag whose pretrain_gpt.py runs these arguments
MEGATRON_REPO = "https://github.com/NVIDIA/Megatron-LM.git"
MEGATRON_CORE = "0.16.1"  # the megatron-core wheel of the same release (requirements.txt)
# Hugging Face model types whose blocks Megatron's GPT model builds from arguments alone (RMSNorm, RoPE, SwiGLU,
# GQA; Mixtral / Qwen3-MoE experts): the decoder-only families the argument mapping below covers.
MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen3_moe")


def _cfg(setup: Setup) -> dict:
    return setup.model["hf_config"]


def num_experts(cfg: dict) -> int:
    return int(cfg.get("num_local_experts") or cfg.get("num_experts") or 0)


def model_problem(cfg: dict) -> str | None:
    """Why Megatron's GPT model cannot be built from this config's arguments, or None."""
    model_type = str(cfg.get("model_type") or "")
    if model_type not in MODEL_TYPES:
        return f"model type {model_type or '?'} (written for: {', '.join(MODEL_TYPES)})"
    if str(cfg.get("hidden_act") or "silu") != "silu":
        return f"activation {cfg.get('hidden_act')} (SwiGLU with SiLU only)"
    scaling = cfg.get("rope_scaling") or {}
    if scaling and (scaling.get("rope_type") or scaling.get("type")) != "llama3":
        return f"RoPE scaling {scaling.get('rope_type') or scaling.get('type')} (Llama 3.1's only)"
    if model_type == "mistral" and cfg.get("sliding_window"):
        return f"sliding-window attention ({cfg['sliding_window']} tokens)"
    if cfg.get("mlp_only_layers") or int(cfg.get("decoder_sparse_step") or 1) != 1:
        return "dense layers among the MoE layers"
    return None


def _shape_args(cfg: dict) -> list[str]:
    """The model's shape: Megatron's GPT model with Llama-style blocks."""
    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    args = ["--num-layers", str(cfg["num_hidden_layers"]), "--hidden-size", str(hidden),
            "--ffn-hidden-size", str(cfg["intermediate_size"]), "--num-attention-heads", str(heads)]
    if kv != heads:
        args += ["--group-query-attention", "--num-query-groups", str(kv)]
    if cfg.get("head_dim") and int(cfg["head_dim"]) != hidden // heads:
        args += ["--kv-channels", str(cfg["head_dim"])]
    args += ["--swiglu", "--normalization", "RMSNorm", "--norm-epsilon", repr(float(cfg.get("rms_norm_eps") or 1e-5)),
             "--position-embedding-type", "rope", "--rotary-base", str(int(float(cfg.get("rope_theta") or 10000))),
             "--disable-bias-linear", "--attention-dropout", "0.0", "--hidden-dropout", "0.0"]
    if cfg.get("rope_scaling"):
        args += ["--use-rope-scaling", "--rope-scaling-factor", repr(float(cfg["rope_scaling"].get("factor", 8.0)))]
    if cfg.get("model_type") == "qwen2":
        args.append("--add-qkv-bias")
    if str(cfg.get("model_type")).startswith("qwen3"):
        args.append("--qk-layernorm")
    if not cfg.get("tie_word_embeddings", False):
        args.append("--untie-embeddings-and-output-weights")
    return args


def _moe_args(cfg: dict, st: dict | None = None) -> list[str]:
    experts = num_experts(cfg)
    if not experts:
        return []
    dispatcher = str((st or {}).get("moe_dispatcher") or "alltoall")
    route = ["--moe-token-dispatcher-type", "alltoall"] if dispatcher == "alltoall" else \
        ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", dispatcher]
    args = ["--num-experts", str(experts), "--moe-router-topk", str(cfg["num_experts_per_tok"]),
            "--moe-grouped-gemm", *route,
            "--moe-router-load-balancing-type", "aux_loss",
            "--moe-aux-loss-coeff", repr(float(cfg.get("router_aux_loss_coef") or 0.01))]
    if cfg.get("moe_intermediate_size"):
        args += ["--moe-ffn-hidden-size", str(cfg["moe_intermediate_size"])]
    return args


def _parallel_args(st: dict) -> list[str]:
    tp, pp, cp, ep, vpp = (int(st.get(k) or 1) for k in ("tp", "pp", "cp", "ep", "vpp"))
    args = ["--tensor-model-parallel-size", str(tp), "--pipeline-model-parallel-size", str(pp),
            "--context-parallel-size", str(cp), "--expert-model-parallel-size", str(ep)]
    if st.get("etp"):  # Megatron-Core's default is the tensor parallel size
        args += ["--expert-tensor-parallel-size", str(int(st["etp"]))]
    if tp > 1 and st.get("sequence_parallel", True):
        args.append("--sequence-parallel")
    if int(st.get("zero_stage") or 0) == 1:
        args.append("--use-distributed-optimizer")
    if st.get("ep_overlap") and ep > 1:  # the combined 1F1B schedule; delayed weight gradients give it more to hide
        args += ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"]
    if st.get("pp_layout"):  # the layers of each virtual stage as given; MTP layers in it are switched on
        args += ["--pipeline-model-parallel-layout", str(st["pp_layout"])]
        mtp = mtp_layers(parse_layout(str(st["pp_layout"])))
        if mtp:
            args += ["--mtp-num-layers", str(mtp)]
    if st.get("pp_split_embedding"):  # the embedding counted as a layer in the pipeline split
        args.append("--account-for-embedding-in-pipeline-split")
    if st.get("pp_split_loss"):
        args.append("--account-for-loss-in-pipeline-split")
    if st.get("grad_reduce_bf16") and not st.get("precision_aware_optimizer"):  # a bf16 gradient buffer
        args.append("--grad-reduce-in-bf16")
    if st.get("precision_aware_optimizer"):  # bf16 main gradients and Adam moments, fp32 master weights
        args += ["--use-precision-aware-optimizer", "--main-grads-dtype", "bf16", "--exp-avg-dtype", "bf16",
                 "--exp-avg-sq-dtype", "bf16"]
    return args


def _vpp_args(setup: Setup) -> list[str]:
    st = setup.strategy
    pp, vpp = int(st.get("pp") or 1), int(st.get("vpp") or 1)
    if vpp == 1 or st.get("pp_layout"):  # a custom layout sets the virtual stages (Megatron-LM: one or the other)
        return []
    # the embedding and the loss count as layers here when the split accounts for them (Megatron-LM arguments.py)
    layers = int(_cfg(setup)["num_hidden_layers"]) + bool(st.get("pp_split_embedding")) + bool(st.get("pp_split_loss"))
    return ["--num-layers-per-virtual-pipeline-stage", str(layers // (pp * vpp))]


def _recompute_args(grad_ckpt: str, policy: str | None = None) -> list[str]:
    if grad_ckpt == "selective" and is_module_list(policy):  # Megatron-Core's recompute modules, as named
        return ["--recompute-granularity", "selective", "--recompute-modules", *sorted(recompute_modules(policy))]
    if grad_ckpt == "selective":  # the attention core (Megatron's default recompute module, core_attn)
        return ["--recompute-activations", "--recompute-granularity", "selective"]
    if grad_ckpt == "full":  # every layer's input kept, the whole layer run again
        return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    return []


def _training_args(setup: Setup) -> list[str]:
    st, cfg = setup.strategy, _cfg(setup)
    steps, lr = steps_for(setup), LEARNING_RATE[st["method"]]
    seq = int(setup.workload["seq_len"])
    args = ["--seq-length", str(seq), "--max-position-embeddings", str(max(seq, int(cfg.get("max_position_embeddings")
                                                                                     or seq))),
            "--micro-batch-size", str(st["micro_batch"]), "--global-batch-size", str(st["global_batch"]),
            "--train-iters", str(steps), "--lr", f"{lr:g}", "--min-lr", f"{lr / 10:g}", "--lr-decay-style", "cosine",
            "--lr-warmup-iters", str(max(1, steps // 33)), "--weight-decay", "0.0", "--clip-grad", "1.0",
            "--adam-beta1", "0.9", "--adam-beta2", "0.95", "--optimizer", "adam"]
    precision = st["precision"]
    if precision in ("bf16", "fp16"):
        args.append(f"--{precision}")
    return args + _recompute_args(str(st.get("grad_ckpt") or "none"), st.get("selective_ac"))


def _io_args(setup: Setup) -> list[str]:
    """Tokenizer, logging and checkpoint cadence; the paths come from the shell (command_args)."""
    tokenizer = setup.model.get("hf_id") or setup.model.get("source") or setup.model["name"]
    return ["--tokenizer-type", "HuggingFaceTokenizer", "--tokenizer-model", str(tokenizer),
            "--split", "100,0,0", "--eval-iters", "0", "--log-interval", "10",
            "--save-interval", str(save_steps_for(setup)), "--ckpt-format", "torch_dist"]


def megatron_args(setup: Setup) -> list[str]:
    """pretrain_gpt.py's arguments for the plan, without the paths (data, checkpoints) the shell supplies."""
    cfg = _cfg(setup)
    return [*_parallel_args(setup.strategy), *_vpp_args(setup), *_shape_args(cfg), *_moe_args(cfg, setup.strategy),
            *_training_args(setup), *_io_args(setup)]


def path_args(setup: Setup) -> str:
    """The shell's part of the command line: the data prefix, where checkpoints go, the starting weights."""
    text = '--data-path "$DATA" --save "$OUTPUT_DIR"'
    if setup.workload["task"] != "pretrain":  # fine-tuning starts from the model converted to Megatron's format
        text += ' --load "$CHECKPOINT" --finetune'
    return text


def args_file(setup: Setup) -> str:
    """megatron_args.sh: the arguments as a bash array every node's command expands ("${MEGATRON_ARGS[@]}")."""
    st = setup.strategy
    lines = ["# Generated by `trainfit generate`: Megatron-LM pretrain_gpt.py arguments for this plan",
             f"#   {one_line(setup.model['name'])} · tp {st.get('tp', 1)} · pp {st.get('pp', 1)} · vpp "
             f"{st.get('vpp', 1)} · cp {st.get('cp', 1)} · ep {st.get('ep', 1)} · {setup.world_size} GPUs",
             f"# Megatron-LM {MEGATRON_REF} (megatron/training/arguments.py); sourced by launch.sh and the "
             "scheduler specs.", "MEGATRON_ARGS=("]
    args = megatron_args(setup)
    i = 0
    while i < len(args):  # one option per line, with its value
        j = i + 1
        while j < len(args) and not args[j].startswith("--"):
            j += 1
        lines.append("  " + " ".join(_quote(a) for a in args[i:j]))
        i = j
    return "\n".join([*lines, ")"]) + "\n"


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def prelude(setup: Setup) -> list[str]:
    """Shell lines each node runs before torchrun: Megatron-LM's code (a node-local clone unless MEGATRON_LM names
    one), its arguments, and the environment its tensor / context parallelism asserts (validate_args)."""
    lines = ["source megatron_args.sh", f"export CUDA_DEVICE_MAX_CONNECTIONS={_max_connections(setup.strategy)}",
             f"MEGATRON_LM=${{MEGATRON_LM:-/tmp/Megatron-LM-{MEGATRON_REF}}}",
             f'if [ ! -f "$MEGATRON_LM/pretrain_gpt.py" ]; then git clone --depth 1 --branch {MEGATRON_REF} '
             f'{MEGATRON_REPO} "$MEGATRON_LM"; fi']
    if setup.workload["task"] != "pretrain":
        lines.append('CHECKPOINT=${CHECKPOINT:?set CHECKPOINT to the model converted to Megatron format (README)}')
    return lines


def _max_connections(st: dict) -> int:
    """CUDA_DEVICE_MAX_CONNECTIONS: 1 for tensor / context parallelism (validate_args asserts it on Hopper and
    before); the expert all-to-all overlap wants more streams in flight (validate_args warns that it needs "a larger
    CUDA_DEVICE_MAX_CONNECTIONS"): 32 without TP / CP, else 8, as Megatron-Bridge's H100 Qwen3-235B recipe with TP 2
    sets it."""
    overlap = bool(st.get("ep_overlap")) and int(st.get("ep") or 1) > 1
    tp_or_cp = int(st.get("tp") or 1) > 1 or int(st.get("cp") or 1) > 1
    if not overlap:
        return 1
    return 8 if tp_or_cp else 32


def program(setup: Setup) -> str:
    """What torchrun runs, after --nproc_per_node."""
    return f'"$MEGATRON_LM/pretrain_gpt.py" "${{MEGATRON_ARGS[@]}}" {path_args(setup)}'


def requirements() -> list[str]:
    return [f"megatron-core=={MEGATRON_CORE}  # Megatron-LM {MEGATRON_REF}'s core (pretrain_gpt.py from its clone)",
            "transformers  # the Hugging Face tokenizer (--tokenizer-type HuggingFaceTokenizer)",
            "# transformer-engine[pytorch]  # Megatron's default --transformer-impl; in NVIDIA's PyTorch containers",
            "# flash-attn, apex: optional, as Megatron-LM's README describes"]


def check(setup: Setup) -> None:
    """Layouts and models this Megatron-LM launch cannot run: refused with one line (i18n gen_e_3d_*)."""
    cfg, st = _cfg(setup), setup.strategy
    problem = model_problem(cfg)
    if problem:
        raise GenerateError("gen_e_3d_model", engine="Megatron-LM", model=setup.model["name"], why=problem)
    sel = st.get("selective_ac")
    if st.get("grad_ckpt") == "selective" and sel not in (None, "attention") and not is_module_list(sel):
        raise GenerateError("gen_e_3d_selective", engine="Megatron-LM", policy=sel,
                            supported="attention, " + " / ".join(MEGATRON_RECOMPUTE_MODULES))
    if st["precision"] not in ("bf16", "fp16", "fp32"):
        raise GenerateError("gen_e_3d_precision", engine="Megatron-LM", precision=st["precision"],
                            supported="bf16, fp16, fp32")
    _check_sizes(setup, cfg, st)


def _check_sizes(setup: Setup, cfg: dict, st: dict[str, Any]) -> None:
    """What Megatron-LM's validate_args and model construction assert about the sizes."""
    tp, cp, ep = (int(st.get(k) or 1) for k in ("tp", "cp", "ep"))
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    if heads % tp or kv % tp:
        raise GenerateError("gen_e_3d_split", what=f"{heads} attention heads / {kv} key-value heads", by=f"tp {tp}")
    if int(setup.workload["seq_len"]) % (2 * cp):
        raise GenerateError("gen_e_3d_split", what=f"sequence length {setup.workload['seq_len']}",
                            by=f"2 x cp {cp} (load-balanced context parallelism)")
    experts = num_experts(cfg)
    if ep > 1 and (not experts or experts % ep):
        raise GenerateError("gen_e_3d_split", what=f"{experts} experts", by=f"ep {ep}")
    etp = int(st.get("etp") or tp)  # expert tensor parallelism is tp by default
    group = ep * etp * int(st.get("pp") or 1)  # Megatron-Core: world size divisible by etp x ep x pp
    if setup.world_size % group:
        raise GenerateError("gen_e_3d_split", what=f"{setup.world_size} GPUs", by=f"ep {ep} x etp {etp} x pp")
