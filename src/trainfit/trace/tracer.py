"""Tier 2: the real Hugging Face / PEFT code, one training step, under FakeTensorMode + MemTracker.

No GPU and no weights: tensors are fake (shapes and dtypes only) on the CPU device; MemTracker (a private PyTorch
API, torch.distributed._tools.mem_tracker) counts every storage by category. Peaks are recorded per moment of the
step — forward, backward of the head, backward of each block, optimizer step — so a trace of 2 and 3 blocks
extrapolates exactly to L blocks: every moment's bytes are linear in the number of blocks.

Covered: one GPU's view of full / LoRA / freeze training with the dtypes train.py uses (fp32 weights under autocast
for full training, a 16-bit base with fp32 adapters for LoRA), gradient checkpointing (full: whole blocks, as
transformers does it; selective: the attention core only, train/runner.py `selective_attention`), SDPA or eager
attention, the steady-state step (optimizer states exist), the optimizer stepped after backward or in it
(`InBackward`: then each tensor steps inside the backward moment that produced its gradient, and there is no
optimizer moment), and DPO as TRL's DPOTrainer computes its loss (`dpo_loss`: chosen and rejected in one batch, a
reference forward under no_grad, the logged metrics). Not covered: sharding (ZeRO / FSDP: the analytic model's
sharded terms are reported beside the trace), DDP buckets, QLoRA's 4-bit storage (traced as LoRA on a 16-bit base,
weights then corrected analytically), the CUDA context and allocator caching.
"""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

# selective checkpointing: the attention core under torch.utils.checkpoint, the one implementation train.py runs
from ..train.runner import selective_attention  # noqa: F401  (the runner imports no torch at module level)
from ..i18n import say

ROUTING_NOTE = say("va_tr_routing")
_BALANCED = "trainfit_balanced"


def _balanced_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """A fused-experts forward for transformers' ExpertsInterface whose shapes do not depend on the routing: the
    tokens x top-k rows are split evenly over the experts (the expected share under a balanced router; padded to
    ceil(rows / experts) per expert) and multiplied by all experts' weights in one batched matmul, so each 3-D
    weight gets one gradient, as with transformers' default grouped_mm kernel."""
    import torch
    import torch.nn.functional as F

    k, tokens, hidden = top_k_index.size(-1), hidden_states.size(0), hidden_states.size(-1)
    rows = hidden_states.repeat_interleave(k, dim=0)
    experts, total = self.num_experts, rows.size(0)
    per = -(-total // experts)
    x = F.pad(rows, (0, 0, 0, per * experts - total)).view(experts, per, hidden)
    first = "gate_up_proj" if self.has_gate else "up_proj"
    for name in (first, "down_proj"):
        w = getattr(self, name)
        x = torch.bmm(x, w if self.is_transposed else w.transpose(1, 2))
        if self.has_bias:
            x = x + getattr(self, f"{name}_bias").unsqueeze(1)
        if name == first:
            x = self._apply_gate(x) if self.has_gate else self.act_fn(x)
    if getattr(self, "has_post_expert_norm", False):
        x = self.post_expert_norm(x)
    out = x.reshape(experts * per, -1)[:total] * top_k_weights.reshape(-1, 1).to(x.dtype)
    return out.view(tokens, k, hidden).sum(dim=1).to(hidden_states.dtype)


def _register_balanced() -> bool:
    try:
        from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    except ImportError:
        return False
    ALL_EXPERTS_FUNCTIONS.register(_BALANCED, _balanced_experts_forward)
    return True

CATEGORIES = ("Parameter", "Buffer", "Gradient", "Activation", "Temp", "Optstate", "Other")


@dataclass
class Moment:
    name: str
    total: int = 0
    snapshot: dict[str, int] = field(default_factory=dict)


def _require_torch():
    try:
        import torch  # noqa: F401
        from torch.distributed._tools.mem_tracker import MemTracker  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        from ..errors import MissingDependency

        raise MissingDependency(f"trace needs torch and transformers (pip install 'trainfit[torch]'): {exc}") from None


def _tracker_class():
    from torch.distributed._tools.mem_tracker import _TOTAL_KEY, MemTracker

    class PhaseTracker(MemTracker):
        """MemTracker that also keeps the peak of each named moment of the step."""

        def __init__(self) -> None:
            super().__init__()
            self.phase = "setup"
            self.moments: dict[str, Moment] = {}
            self._skipped: set[int] = set()

        quiet = False  # a second forward through the same modules (DPO's reference with adapters disabled)

        def _pre_fw_hook(self, module, inputs) -> None:  # noqa: ANN001 - private torch API
            # MemTracker's per-module stats refuse a second forward through a module in one step (its counts go on);
            # a module the step had not run yet (PEFT's original lm_head beside its modules_to_save copy) is taken
            if self.quiet and module in self.memory_tracking:
                self._skipped.add(id(module))
                return
            super()._pre_fw_hook(module, inputs)

        def _post_fw_hook(self, module, inputs, outputs) -> None:  # noqa: ANN001
            if id(module) in self._skipped:
                self._skipped.discard(id(module))
                return
            super()._post_fw_hook(module, inputs, outputs)

        def _update_peak_stats(self, peak_state) -> None:  # noqa: ANN001 - private torch API
            super()._update_peak_stats(peak_state)
            for snap in self._curr_mem_snap.values():
                total = snap[_TOTAL_KEY]
                m = self.moments.setdefault(self.phase, Moment(self.phase))
                if total > m.total:
                    m.total = total
                    m.snapshot = {str(k.value if hasattr(k, "value") else k): v for k, v in deepcopy(snap).items()}

    return PhaseTracker


class _NoHandle:
    def remove(self) -> None:
        pass


def _skip_frozen_grad_hooks(tracker, model) -> None:
    """MemTracker registers gradient hooks on every parameter; frozen ones refuse hooks. Pre-fill its table."""
    for p in model.parameters():
        if not p.requires_grad:
            tracker._param_to_grad_hook_handles[p] = (_NoHandle(), _NoHandle())


@dataclass(frozen=True)
class TraceConfig:
    hf_config: dict
    layers: int
    method: str  # full | lora | qlora | freeze
    task: str  # sft | pretrain | dpo | classification
    seq_len: int
    micro_batch: int
    precision: str  # bf16 | fp16 | fp32
    param_dtype: str
    grad_ckpt: str  # none | selective | full
    attention: str  # sdpa | eager | flash (traced as sdpa)
    lora_rank: int
    lora_targets: tuple[str, ...]
    num_labels: int
    freeze_trainable_layers: int
    optimizer: str
    modules_to_save: tuple[str, ...] = ()
    depths: tuple[int, int] | None = None  # the two traced depths (default 2 and 3); see Structure.trace_depths
    balanced_routing: bool = False  # MoE: route the expected top-k share of tokens to each expert (see _balanced)
    optimizer_impl: str = "fused"  # torch AdamW/SGD: foreach | fused | forloop
    # one optimizer per parameter, stepped and zeroed by a post-accumulate-grad hook (torchtune's optimizer_in_bwd)
    optimizer_in_backward: bool = False
    lora_dropout: float = 0.0  # PEFT LoraConfig lora_dropout: each adapter's own dropout (its 1-byte mask is saved)


def _build(cfg: TraceConfig):
    """The model under FakeTensorMode: built on the meta device (PEFT applied there), then materialised as fake."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSequenceClassification

    from ..catalog.generic import hf_config_object, model_class_for, with_layers

    classification = cfg.task == "classification"
    hf = with_layers(cfg.hf_config, cfg.layers)
    if classification:
        hf["num_labels"] = cfg.num_labels
    conf = hf_config_object(hf)
    conf._attn_implementation = "eager" if cfg.attention == "eager" else "sdpa"
    cls = AutoModelForSequenceClassification if classification else model_class_for(conf)
    concrete = cls._model_mapping[type(conf)] if type(conf) in cls._model_mapping else None
    if cfg.balanced_routing and concrete is not None and concrete._can_set_experts_implementation() and \
            _register_balanced():
        conf._experts_implementation = _BALANCED  # no data-dependent loop over experts (see ROUTING_NOTE)
    if concrete is not None and not getattr(concrete, "_supports_sdpa", True):
        conf._attn_implementation = "eager"  # the model has only its eager attention (e.g. BLOOM, gpt-oss)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[cfg.precision]
    peft_method = cfg.method in ("lora", "qlora")
    dtype = low if peft_method or cfg.param_dtype == "bf16" else torch.float32
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        model = cls.from_config(conf, dtype=dtype)
        if cfg.grad_ckpt == "full":  # whole blocks; selective checkpoints the attention core (selective_attention)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            model.config.use_cache = False
        if peft_method:
            from peft import LoraConfig, get_peft_model

            targets = "all-linear" if list(cfg.lora_targets) == ["all-linear"] else list(cfg.lora_targets)
            model = get_peft_model(model, LoraConfig(r=cfg.lora_rank, target_modules=targets,
                                                     lora_dropout=cfg.lora_dropout,
                                                     modules_to_save=list(cfg.modules_to_save) or None,
                                                     task_type="SEQ_CLS" if classification else "CAUSAL_LM"))
            if cfg.param_dtype == "bf16":  # pure 16-bit training: adapters in the base dtype
                for p in model.parameters():
                    if p.requires_grad:
                        p.data = p.data.to(low)
            if cfg.grad_ckpt == "full":
                model.enable_input_require_grads()
        elif cfg.method == "freeze":
            _freeze(model, cfg.freeze_trainable_layers)
    return model, low


def _freeze(model, keep: int) -> None:
    import torch

    blocks = max((m for m in model.modules() if isinstance(m, torch.nn.ModuleList)), key=len)
    for p in model.parameters():
        p.requires_grad_(False)
    for block in list(blocks)[-keep:]:
        for p in block.parameters():
            p.requires_grad_(True)
    for name, p in model.named_parameters():
        if name.startswith(("score", "classifier")):
            p.requires_grad_(True)


def _blocks(model) -> list:
    import torch

    return list(max((m for m in model.modules() if isinstance(m, torch.nn.ModuleList)), key=len))


@contextmanager
def _grad_hooks_released():
    """MemTracker's module tracker hooks the inputs and outputs of every module that require grad (torch's
    register_multi_grad_hook) and never removes the hooks. Each hook's closure holds the autograd nodes of the tensors
    it watches, and a non-leaf tensor's hooks live on its own node: node -> hooks -> closure -> node, a cycle through
    C++ that Python's collector cannot free. So every step's hooked nodes stay alive, and with them the nodes below
    them down to the leaves — the embeddings' output, which transformers makes require grad under gradient
    checkpointing (`enable_input_require_grads`), with its gradient (traced: a freeze fine-tune with frozen
    embeddings carried two hidden-sized fp32 tensors a step into the next step's backward and optimizer step, and 33
    closures a step were never freed; none without the tracker). A training loop holds no such hooks: yields a
    function, called after each backward, that empties the hook tables the tracker filled in that step."""
    from torch.distributed._tools import mod_tracker

    tables: list = []
    register = mod_tracker.register_multi_grad_hook

    def recording(tensors, fn, *args, **kwargs):
        handle = register(tensors, fn, *args, **kwargs)
        tables.extend(t._backward_hooks for t in tensors if t._backward_hooks is not None)
        return handle

    def release() -> None:
        for table in tables:
            table.clear()
        tables.clear()

    mod_tracker.register_multi_grad_hook = recording
    try:
        yield release
    finally:
        mod_tracker.register_multi_grad_hook = register


def trace_step(cfg: TraceConfig) -> dict[str, Moment]:
    """Peak bytes of each moment of a steady-state training step (the second of two)."""
    _require_torch()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    tracker_cls = _tracker_class()
    with FakeTensorMode(allow_non_fake_inputs=True):
        model, low = _build(cfg)
        _materialize(model)
        _init_buffers(model)
        params = [p for p in model.parameters() if p.requires_grad]
        reference = _dpo_reference(cfg) if cfg.task == "dpo" else None
        tracker = tracker_cls()
        _skip_frozen_grad_hooks(tracker, model)
        if reference is not None:
            _skip_frozen_grad_hooks(tracker, reference)
        externals = (reference,) if reference is not None else ()
        if cfg.optimizer_in_backward:
            opt = InBackward(params, lambda group: _optimizer(cfg, group))
            tracker.track_external(model, *externals, *opt.optimizers)
        else:
            opt = _optimizer(cfg, params)
            tracker.track_external(model, *externals, opt)
        batch = _batch(cfg, model)
        _phase_hooks(tracker, model, opt)
        with tracker, as_a_gpu_run(), selective_attention(model, cfg.grad_ckpt == "selective"), \
                _grad_hooks_released() as release:
            for step in range(2):
                if step == 1:  # the steady state: optimizer states now exist
                    tracker.moments.clear()
                    tracker.reset_mod_stats()
                tracker.phase = "forward"
                if cfg.task == "dpo":
                    loss = dpo_loss(model, reference, batch, low, cfg.precision != "fp32", tracker=tracker)
                else:
                    loss = forward_loss(model, batch, low, cfg.precision != "fp32")
                if step == 0 and cfg.optimizer_in_backward:
                    # after MemTracker's own gradient hooks, installed as each module first runs forward: they must
                    # see (and file as a gradient) each gradient before its step frees it
                    opt.register_hooks()
                tracker.phase = "backward:head"
                loss.backward()
                del loss
                release()
                if not cfg.optimizer_in_backward:  # in backward: each parameter stepped in its block's moment
                    tracker.phase = "optimizer"
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                tracker.phase = "idle"
    return dict(tracker.moments)


class InBackward:
    """Optimizer in backward as torchtune runs it (torchtune/training/memory.py `register_optim_in_bwd_hooks`, the
    pattern of PyTorch's tutorial "How to save memory by fusing the optimizer step into the backward pass"): one
    optimizer per trainable parameter, stepped and its gradient set to None by a post-accumulate-grad hook as soon
    as that gradient is accumulated, so no full set of gradients ever exists (trainfit's runner: train/runner.py
    `InBackward`). The training loop calls no step: each parameter's step runs inside the backward moment that
    produced its gradient (a block's parameters in that block's moment, the output head's at the head's, the input
    embedding's in the bottom block's), so the trace has no separate optimizer moment."""

    def __init__(self, params: list, make) -> None:
        self.params = params
        self.optimizers = [make([p]) for p in params]
        self._by_param = dict(zip(params, self.optimizers))

    def register_hooks(self) -> None:
        for p in self.params:
            p.register_post_accumulate_grad_hook(self._step)

    def _step(self, param) -> None:
        opt = self._by_param[param]
        opt.step()
        opt.zero_grad(set_to_none=True)


def forward_loss(model, batch: dict[str, Any], low, autocast: bool):
    """The loss of one forward as a training loop runs it: no KV cache, and the model's outputs (logits) dropped as
    soon as the loss is taken (HF Trainer's compute_loss keeps only the loss)."""
    import torch

    with torch.autocast("cpu", dtype=low, enabled=autocast):
        outputs = model(**batch, use_cache=False)
        loss = outputs.loss
    del outputs
    return loss


def _dpo_reference(cfg: TraceConfig):
    """DPO's frozen reference model for full and freeze fine-tuning (TRL's DPOTrainer loads a second copy with the
    policy's own init kwargs, hence its dtype, and never checkpoints it: trl/trainer/dpo_trainer.py v1.9.0, the
    `if ref_model is None:` branch of __init__); None for LoRA/QLoRA, whose reference is the base with its adapters
    disabled."""
    from dataclasses import replace

    if cfg.method in ("lora", "qlora"):
        return None
    reference, _ = _build(replace(cfg, method="full", grad_ckpt="none"))
    reference.requires_grad_(False)
    reference.eval()
    _materialize(reference)
    _init_buffers(reference)
    return reference


def _model_forward(model, kwargs: dict[str, Any], low, autocast: bool):
    """A forward as accelerate runs it for Trainer (accelerate 1.x `Accelerator.prepare_model` with native AMP): the
    model's forward under autocast, its 16-bit outputs converted to fp32 after it (`convert_outputs_to_fp32`); the
    16-bit logits are then dropped."""
    import torch

    with torch.autocast("cpu", dtype=low, enabled=autocast):
        outputs = model(**kwargs)
    logits = outputs.logits
    del outputs
    return logits.float() if autocast and logits.dtype in (torch.float16, torch.bfloat16) else logits


def selective_log_softmax(logits, index):
    """TRL's `selective_log_softmax` (trl/trainer/utils.py v1.9.0): log_softmax + gather, the fp32 branch (accelerate
    hands fp32 logits over) with its per-row logsumexp loop; the 16-bit branch for logits that stayed 16-bit."""
    import torch
    import torch.nn.functional as F

    index = index.unsqueeze(-1)
    if logits.dtype in (torch.float32, torch.float64):
        selected_logits = torch.gather(logits, dim=-1, index=index)
        logsumexp_values = torch.stack([torch.logsumexp(lg, dim=-1) for lg in logits])
        per_token_logps = selected_logits - logsumexp_values.unsqueeze(-1)
    else:
        rows = []
        for row_logits, row_labels in zip(logits, index, strict=True):
            rows.append(F.log_softmax(row_logits, dim=-1).gather(dim=-1, index=row_labels))
        per_token_logps = torch.stack(rows)
    return per_token_logps.squeeze(-1)


def _entropy_from_logits(logits, chunk_size: int = 128):
    """TRL's `entropy_from_logits` (trl/trainer/utils.py v1.9.0): the logits flattened to (N, V) — a copy, since the
    shifted logits are not contiguous — and the entropy taken 128 rows at a time."""
    import torch
    import torch.nn.functional as F

    flat_logits = logits.reshape(-1, logits.shape[-1])
    entropies = []
    for chunk in flat_logits.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)
        entropies.append(-(torch.exp(logps) * logps).sum(-1))
    return torch.cat(entropies).reshape(logits.shape[:-1])


def dpo_loss(model, reference, batch: dict[str, Any], low, autocast: bool, beta: float = 0.1, tracker=None):
    """One DPO micro-step's loss as TRL's DPOTrainer computes it with its defaults (trl v1.9.0,
    trl/trainer/dpo_trainer.py `DPOTrainer._compute_loss`, lines 1329-1655; DPOConfig: loss_type ["sigmoid"],
    f_divergence_type "reverse_kl", ld_alpha None, use_weighting False, precompute_ref_log_probs False, padding_free
    False (disabled in v1.9 anyway), no logits_to_keep; max_length 1024 truncates each prompt + completion, which the
    traced seq_len stands for). Chosen and rejected are one batch of 2 x micro-batch rows (DataCollatorForPreference);
    the policy forward runs first, then the reference forward under no_grad (PEFT: the same model with its adapters
    disabled, `use_adapter(model, None)`; full / freeze: the separate frozen reference model), gradient checkpointing
    switched off for it (`disable_gradient_checkpointing`). Then the logged metrics, which touch the logits: the
    entropy (`entropy_from_logits`, a flattened copy of the shifted logits), the mean chosen / rejected logit over
    completion tokens (a boolean-mask copy: traced as if every token were a completion token — fake tensors cannot
    index by a mask — an upper bound that comes after the entropy's twice-larger copy is freed) and the chosen
    token accuracy. The model outputs (both logits) are dropped when the loss returns."""
    import torch
    import torch.nn.functional as F

    kwargs = {"input_ids": batch["input_ids"], "use_cache": False}
    # the attention mask is all ones (every sequence fills seq_len): a GPU run drops it (transformers'
    # masking_utils finds no padding) and SDPA runs causal; fake tensors cannot read it, so it is not passed
    logits = _model_forward(model, kwargs, low, autocast)
    input_ids, completion_mask = batch["input_ids"], batch["completion_mask"]
    shift_logits = logits[..., :-1, :]
    shift_labels = input_ids[..., 1:]
    shift_completion_mask = completion_mask[..., 1:]
    per_token_logps = selective_log_softmax(shift_logits, shift_labels)
    per_token_logps[shift_completion_mask == 0] = 0.0
    logps = per_token_logps.sum(dim=1)
    chosen_logps, rejected_logps = logps.chunk(2, dim=0)

    if tracker is not None and reference is None:
        tracker.quiet = True
    with torch.no_grad(), _no_checkpointing(model):
        if reference is None:
            with model.disable_adapter():
                ref_logits = _model_forward(model, kwargs, low, autocast)
        else:
            ref_logits = _model_forward(reference, kwargs, low, autocast)
    if tracker is not None:
        tracker.quiet = False
    with torch.no_grad():
        ref_shift_logits = ref_logits[..., :-1, :]
        ref_per_token_logps = selective_log_softmax(ref_shift_logits, shift_labels)
        ref_per_token_logps[shift_completion_mask == 0] = 0.0
        ref_logps = ref_per_token_logps.sum(dim=1)
        ref_chosen_logps, ref_rejected_logps = ref_logps.chunk(2, dim=0)

    chosen_logratios = chosen_logps - ref_chosen_logps
    rejected_logratios = rejected_logps - ref_rejected_logps
    delta_score = chosen_logratios - rejected_logratios
    loss = 0.0
    loss = loss + (-F.logsigmoid(beta * delta_score)).mean() * 1.0

    # the logged metrics (no gradient): entropy, mean logits of chosen and rejected, token accuracy, rewards
    per_token_entropy = _entropy_from_logits(shift_logits.detach())
    entropy_sum = (per_token_entropy * shift_completion_mask).sum()
    chosen_logits, rejected_logits = shift_logits.detach().chunk(2, dim=0)
    chosen_mask, rejected_mask = shift_completion_mask.chunk(2, dim=0)
    total_chosen_logits = chosen_logits.clone(memory_format=torch.contiguous_format).mean(-1).sum()
    total_rejected_logits = rejected_logits.clone(memory_format=torch.contiguous_format).mean(-1).sum()
    predictions = chosen_logits.argmax(dim=-1)
    correct_tokens = ((predictions == shift_labels[: len(shift_labels) // 2]) & chosen_mask.bool()).sum()
    margins = beta * chosen_logratios.detach() - beta * rejected_logratios.detach()
    del per_token_entropy, entropy_sum, total_chosen_logits, total_rejected_logits, predictions, correct_tokens, margins
    del logits, shift_logits, ref_logits, ref_shift_logits, chosen_logits, rejected_logits
    return loss


class _no_checkpointing:
    """TRL's `disable_gradient_checkpointing` (trl/models/utils.py v1.9.0) around the reference forward."""

    def __init__(self, model) -> None:
        self.model = model
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers 5 renames it is_activation_checkpointing
            self.was = bool(getattr(model, "is_gradient_checkpointing", False))

    def __enter__(self):
        if self.was:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.model.gradient_checkpointing_disable()
        return self

    def __exit__(self, *exc) -> None:
        if self.was:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


class as_a_gpu_run:
    """Make transformers take the attention path a real run takes on unpacked, unpadded batches.

    transformers decides between SDPA's `is_causal` (no mask; GQA through `enable_gqa`) and an explicit causal mask
    (with K/V repeated to every head) by reading the batch: `masking_utils.find_packed_sequence_indices` looks at the
    position ids for packed sequences. Under FakeTensorMode it cannot read values (`is_tracing` is true for fake
    tensors), so it assumes a packed batch and builds the mask. The traced batch is one unpacked sequence per row,
    which is what a real run finds: say so explicitly.
    """

    def __enter__(self):
        import torch.nn.functional as F
        from transformers import masking_utils

        self._module = masking_utils
        self._saved = masking_utils.find_packed_sequence_indices
        masking_utils.find_packed_sequence_indices = _not_packed
        self._functional, self._sdpa, self._dropout = F, F.scaled_dot_product_attention, F.dropout
        F.scaled_dot_product_attention = _gpu_kernel_sdpa(self._sdpa)
        F.dropout = _gpu_kernel_dropout(self._dropout)
        return self

    def __exit__(self, *exc) -> None:
        self._module.find_packed_sequence_indices = self._saved
        self._functional.scaled_dot_product_attention = self._sdpa
        self._functional.dropout = self._dropout


def _gpu_kernel_dropout(dropout):
    """Dropout as CUDA runs it: the fused native_dropout kernel, which saves a 1-byte mask for backward (aten
    Dropout.cpp `is_fused_kernel_acceptable`: a CUDA tensor, 0 < p < 1), where the CPU decomposes it into a multiply
    by a noise tensor of the input's dtype, saved instead (nn.Dropout calls F.dropout: PEFT's lora_dropout, the
    models' own dropout)."""
    import torch

    def dropout_as_on_a_gpu(input, p=0.5, training=True, inplace=False):
        if not training or not 0.0 < p < 1.0 or inplace or input.numel() == 0:
            return dropout(input, p, training, inplace)
        return torch.native_dropout(input, p, True)[0]

    return dropout_as_on_a_gpu


SDPA_NOTE = say("va_tr_sdpa")


def _gpu_kernel_sdpa(sdpa):
    """SDPA as a GPU dispatches it. Unequal q/k and v head dims (MLA: 192 and 128) rule out the flash kernel on
    every device; CUDA then takes the memory-efficient kernel (torch/csrc/.../sdp_utils.cpp, check_head_dim_size_
    flash / _mem_efficient), but the CPU has no such kernel and falls back to the math path (an s x s matrix per
    head, saved for backward). Fake tensors run the memory-efficient kernel's meta function on the CPU."""
    import torch

    def sdpa_as_on_a_gpu(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                         enable_gqa=False):
        if query.shape[-1] == value.shape[-1] or query.shape[-3] != key.shape[-3] or query.dim() != 4 or \
                (attn_mask is not None and attn_mask.dtype == torch.bool):
            return sdpa(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, enable_gqa=enable_gqa)
        out = torch.ops.aten._scaled_dot_product_efficient_attention(
            query, key, value, attn_mask, query.requires_grad or key.requires_grad or value.requires_grad,
            dropout_p, is_causal, scale=scale)
        return out[0]

    return sdpa_as_on_a_gpu


def _not_packed(position_ids):  # noqa: ARG001 - the traced batches are never packed
    return None


def _materialize(model) -> None:
    """Meta tensors -> fake CPU tensors, in place. (nn.Module.to_empty swaps tensors, which fails for tensors
    FakeTensorMode has seen: "Couldn't swap Linear.weight".) Shared (tied) parameters stay shared."""
    import torch

    done: dict[int, torch.Tensor] = {}
    for module in model.modules():
        for name, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) not in done:
                done[id(p)] = torch.nn.Parameter(torch.empty_like(p, device="cpu"), requires_grad=p.requires_grad)
            module._parameters[name] = done[id(p)]
        for name, b in list(module._buffers.items()):
            if b is not None and b.is_meta:
                module._buffers[name] = torch.empty_like(b, device="cpu")


def _init_buffers(model) -> None:
    """to_empty leaves buffers uninitialised; rotary tables must exist (values do not matter for memory)."""
    for module in model.modules():
        if hasattr(module, "inv_freq") and hasattr(module, "rope_init_fn"):
            try:
                inv_freq, _ = module.rope_init_fn(module.config, None)
                module.register_buffer("inv_freq", inv_freq, persistent=False)
            except Exception:  # noqa: BLE001 - keep the empty buffer
                pass


def _optimizer(cfg: TraceConfig, params):
    """The optimizer and implementation of the spec: torch's AdamW / SGD as foreach (multi-tensor), fused or
    for-loop; transformers' Adafactor (factored second moments, as Trainer's `adafactor`)."""
    import torch

    impl = {"foreach": {"foreach": True}, "fused": {"fused": True}, "forloop": {"foreach": False}}[cfg.optimizer_impl]
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.9, **impl)
    if cfg.optimizer == "sgd-nomomentum":
        return torch.optim.SGD(params, lr=1e-4, momentum=0.0, **impl)
    if cfg.optimizer == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-4, scale_parameter=False, relative_step=False, warmup_init=False)
    return torch.optim.AdamW(params, lr=1e-4, **impl)


def _batch(cfg: TraceConfig, model) -> dict[str, Any]:
    import torch

    vocab = model.config.vocab_size if hasattr(model, "config") else cfg.hf_config["vocab_size"]
    ids = torch.randint(0, vocab, (cfg.micro_batch, cfg.seq_len))
    if cfg.task == "classification":
        return {"input_ids": ids, "labels": torch.zeros(cfg.micro_batch, dtype=torch.long)}
    if cfg.task == "dpo":  # TRL's DataCollatorForPreference: chosen rows, then rejected rows, each seq_len tokens
        pairs = torch.randint(0, vocab, (2 * cfg.micro_batch, cfg.seq_len))
        completion = torch.ones(2 * cfg.micro_batch, cfg.seq_len, dtype=torch.long)
        return {"input_ids": pairs, "attention_mask": torch.ones_like(completion), "completion_mask": completion}
    return {"input_ids": ids, "labels": ids}


def _phase_hooks(tracker, model, opt) -> None:
    blocks = _blocks(model)
    for idx, block in enumerate(blocks):
        block.register_full_backward_pre_hook(lambda *_, i=idx: setattr(tracker, "phase", f"backward:block{i}"))
