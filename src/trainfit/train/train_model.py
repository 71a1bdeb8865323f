"""train.py's model: where the weights come from, the dtypes, the model built from its config or loaded from its
weights (QLoRA's 4-bit quantization included), the method applied (LoRA / QLoRA adapters with PEFT, freezing,
gradient checkpointing), selective checkpointing of the attention core, and DPO's reference model."""

from __future__ import annotations

import argparse
import copy
import sys

if __package__:  # trainfit.train.train_model
    from .train_common import SetupError, log
    from .train_launch import Dist
else:  # the generated job folder: train.py's modules side by side
    from train_common import SetupError, log
    from train_launch import Dist

__all__ = ["model_location", "compute_dtype", "attention_impl", "load_dtype", "build_model", "qlora_config",
           "apply_method", "selective_attention", "decoder_layers", "reference_model"]


def model_location(cfg: dict, args: argparse.Namespace, dist: "Dist | None" = None) -> str | None:
    """Where the weights come from: --model-path or the config's local path; else the Hub id, or for
    `model.source: modelscope` a local copy that ModelScope's snapshot_download makes (the first rank on each node
    downloads, the others wait and then find it in the cache). Hugging Face downloads honour HF_ENDPOINT (a mirror)."""
    local = args.model_path or cfg["model"].get("path")
    if local:
        return local
    if cfg["model"].get("source") != "modelscope":
        return cfg["model"].get("hf_id")
    repo = cfg["model"].get("modelscope_id") or cfg["model"].get("hf_id")
    try:
        from modelscope import snapshot_download
    except ImportError:
        raise SetupError("model.source is modelscope: pip install modelscope") from None
    import torch

    group = torch.distributed.is_available() and torch.distributed.is_initialized()
    first = dist is None or dist.local_rank == 0
    if not first and group:
        torch.distributed.barrier()
    path = snapshot_download(repo)
    if first and group:
        torch.distributed.barrier()
    return path


def compute_dtype(cfg: dict, dist: Dist):
    import torch

    name = cfg["precision"]
    if name == "fp32":
        return torch.float32
    if name == "fp16":
        return torch.float16
    if name == "bf16" and dist.cuda and not torch.cuda.is_bf16_supported():
        raise SetupError("this GPU has no bf16: regenerate the setup with --precision fp16")
    return torch.bfloat16


def attention_impl(cfg: dict, dist: Dist) -> str:
    want = cfg.get("attention", "sdpa")
    if want == "flash":
        try:
            import flash_attn  # noqa: F401
        except ImportError:
            want = "sdpa"
            log(dist, {"note": "flash-attn is not installed: using SDPA"})
        else:
            return "flash_attention_2" if dist.cuda else "sdpa"
    return {"flash": "flash_attention_2"}.get(want, want)


def load_dtype(cfg: dict, dist: Dist):
    """Storage dtype of the loaded weights: 16-bit frozen bases; fp32 trained weights where mixed precision needs
    fp32 masters (single GPU / DDP / FSDP); DeepSpeed converts the module itself."""
    import torch

    if cfg["precision"] == "fp32":
        return torch.float32
    if cfg["method"] in ("lora", "qlora"):
        return compute_dtype(cfg, dist)
    if cfg["engine"] == "deepspeed":
        return compute_dtype(cfg, dist)
    return torch.float32 if cfg.get("param_dtype", "fp32") == "fp32" else compute_dtype(cfg, dist)


def build_model(cfg: dict, args: argparse.Namespace, dist: Dist):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    cls = AutoModelForSequenceClassification if cfg["task"] == "classification" else AutoModelForCausalLM
    extra = {"num_labels": cfg["num_labels"]} if cfg["task"] == "classification" else {}
    attn = attention_impl(cfg, dist)
    dtype = load_dtype(cfg, dist)
    quantization = qlora_config(cfg, dist) if cfg["method"] == "qlora" else None  # refuses without CUDA
    if args.random_init or cfg["model"].get("random_init"):
        # a deep copy: transformers standardises nested rope_scaling / rope_parameters in place
        hf_config = copy.deepcopy(cfg["model"]["hf_config"])
        hf_config.pop("architectures", None)
        conf = AutoConfig.for_model(**hf_config, **extra)
        conf._attn_implementation = attn
        torch.manual_seed(args.seed)
        # on one GPU (or DDP) initialise straight on the device: random init of billions of weights on a CPU is slow
        where = dist.device if dist.cuda and cfg["engine"] in ("single", "ddp") and quantization is None else "cpu"
        with torch.device(where):
            model = cls.from_config(conf, dtype=dtype)
        if quantization is not None:  # bitsandbytes quantizes while loading: round-trip the random weights
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)
                del model
                model = cls.from_pretrained(tmp, dtype=dtype, attn_implementation=attn,
                                            quantization_config=quantization, **extra)
    else:
        name = model_location(cfg, args, dist)
        kwargs = dict(dtype=dtype, attn_implementation=attn, **extra)
        if quantization is not None:
            kwargs["quantization_config"] = quantization
        if cfg["engine"] == "fsdp" and dist.world > 1 and quantization is None and not dist.main:
            # FSDP: only rank 0 reads the checkpoint; the others build an empty (meta-device) model that
            # load_from_rank0 fills with their shards after fully_shard
            conf = AutoConfig.from_pretrained(name, **extra)
            conf._attn_implementation = attn
            with torch.device("meta"):
                model = cls.from_config(conf, dtype=dtype)
        else:
            model = cls.from_pretrained(name, **kwargs)
        dist.rank0_load = cfg["engine"] == "fsdp" and dist.world > 1 and quantization is None
    if cfg["task"] == "classification" and model.config.pad_token_id is None:
        model.config.pad_token_id = model.config.eos_token_id or 0
    return apply_method(model, cfg, dist)


def qlora_config(cfg: dict, dist: Dist):
    if not dist.cuda:
        raise SetupError("QLoRA needs a CUDA GPU (bitsandbytes 4-bit kernels); use --method lora on this machine")
    import torch
    from transformers import BitsAndBytesConfig

    dtype = compute_dtype(cfg, dist)
    sharded = cfg["engine"] == "fsdp" or (cfg["engine"] == "deepspeed" and cfg.get("zero_stage") == 3)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype, bnb_4bit_quant_storage=dtype if sharded else torch.uint8)


def apply_method(model, cfg: dict, dist: Dist):
    if cfg.get("liger_kernel"):  # Liger's kernels patched into this instance, as HF Trainer's use_liger_kernel does
        from liger_kernel.transformers import _apply_liger_kernel_to_instance

        _apply_liger_kernel_to_instance(model=model)
    ckpt = cfg.get("grad_ckpt", "none")
    if ckpt == "full":  # whole blocks; selective checkpoints only the attention core (selective_attention, in train)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if ckpt != "none":
        model.config.use_cache = False
    method = cfg["method"]
    if method in ("lora", "qlora"):
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

        if method == "qlora":
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=ckpt == "full")
        lora = cfg["lora"]
        targets = lora["targets"]
        model = get_peft_model(model, LoraConfig(
            r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora.get("dropout", 0.0),
            target_modules="all-linear" if targets == ["all-linear"] else targets,
            modules_to_save=list(lora.get("modules_to_save") or []) or None,
            task_type="SEQ_CLS" if cfg["task"] == "classification" else "CAUSAL_LM"))
        if cfg.get("param_dtype", "fp32") == "bf16" and cfg["precision"] != "fp32":
            low = compute_dtype(cfg, dist)  # pure 16-bit training: adapters in the base dtype, as estimated
            for p in model.parameters():
                if p.requires_grad:
                    p.data = p.data.to(low)
        if ckpt == "full":  # as PEFT recipes and trainfit's trace do: the embeddings' output requires grad
            model.enable_input_require_grads()
    elif method == "freeze":
        blocks = decoder_layers(model)
        keep = cfg.get("freeze_trainable_layers", 2)
        for p in model.parameters():
            p.requires_grad_(False)
        for block in blocks[-keep:]:
            for p in block.parameters():
                p.requires_grad_(True)
        for name, p in model.named_parameters():
            if name.startswith(("score", "classifier")):
                p.requires_grad_(True)
    return model


class selective_attention:
    """Selective activation checkpointing (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    Transformer Models", section 5; Megatron-LM's `--recompute-granularity selective`, which checkpoints its core
    attention: megatron/core/transformer/dot_product_attention.py `DotProductAttention`, "Region where selective
    activation recomputation is applied"): the attention core — from the rotated q, k and v to the attention output,
    GQA's repeat of k and v, the s x s scores, softmax and dropout included — runs under torch.utils.checkpoint
    (non-reentrant), so it saves only its inputs and recomputes the rest in its backward; the projections, norms and
    MLP are not recomputed. transformers has no selective mode (gradient_checkpointing_enable checkpoints whole
    blocks): inside this context the attention functions the model calls are wrapped — each modeling module's
    `eager_attention_forward` (looked up by name when called) and the entries of transformers'
    ALL_ATTENTION_FUNCTIONS the model's attention implementation names (sdpa, flash_attention_2, ...) — and
    restored on exit. Calls without grad (a DPO reference forward) run as they are. `calls` counts the checkpointed
    calls, so that a model whose attention bypasses these functions is noticed instead of running without any
    checkpointing. The one implementation: train.py uses it for `grad_ckpt: selective`, trainfit's trace
    (trace/tracer.py) imports it from here."""

    def __init__(self, model, enabled: bool = True) -> None:
        self.model, self.enabled, self.calls = model, enabled, 0
        self._patched: list = []

    def __enter__(self):
        if not self.enabled:
            return self
        try:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        except ImportError:
            raise SetupError("grad_ckpt selective needs transformers >= 4.48 (ALL_ATTENTION_FUNCTIONS)") from None
        modules = {sys.modules.get(type(m).__module__) for m in self.model.modules()} - {None}
        for module in modules:
            fn = getattr(module, "eager_attention_forward", None)
            if callable(fn):
                self._patched.append((module, fn))
                setattr(module, "eager_attention_forward", self._checkpointed(fn))
        names = {getattr(getattr(m, "config", None), "_attn_implementation", None) for m in self.model.modules()}
        self._interface, self._entries = ALL_ATTENTION_FUNCTIONS, []
        for name in sorted(n for n in names if isinstance(n, str) and n != "eager" and n in ALL_ATTENTION_FUNCTIONS):
            # a local override is put back, a class-wide entry is uncovered again (transformers < 4.50: a dict)
            local = name in getattr(ALL_ATTENTION_FUNCTIONS, "_local_mapping", ALL_ATTENTION_FUNCTIONS)
            self._entries.append((name, local, ALL_ATTENTION_FUNCTIONS[name]))
            ALL_ATTENTION_FUNCTIONS[name] = self._checkpointed(ALL_ATTENTION_FUNCTIONS[name])
        return self

    def __exit__(self, *exc) -> None:
        if not self.enabled:
            return
        for module, fn in self._patched:
            setattr(module, "eager_attention_forward", fn)
        for name, local, fn in self._entries:
            if local:
                self._interface[name] = fn
            else:
                del self._interface[name]
        self._patched, self._entries = [], []

    def _checkpointed(self, fn):
        import torch
        import torch.utils.checkpoint as ckpt

        def attention_recomputed_in_backward(module, query, key, value, attention_mask, *args, **kwargs):
            if not torch.is_grad_enabled():
                return fn(module, query, key, value, attention_mask, *args, **kwargs)
            self.calls += 1
            return ckpt.checkpoint(fn, module, query, key, value, attention_mask, *args, use_reentrant=False,
                                   **kwargs)

        return attention_recomputed_in_backward


def decoder_layers(model) -> list:
    import torch

    best = []
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > len(best):
            best = list(module)
    return best


def reference_model(model, cfg: dict, dist: Dist):
    """DPO with full or freeze training keeps a frozen copy as the reference; LoRA reuses the base."""
    if cfg["task"] != "dpo" or cfg["method"] in ("lora", "qlora"):
        return None
    import copy

    ref = copy.deepcopy(model).to(dist.device)
    ref.requires_grad_(False)
    return ref.eval()
