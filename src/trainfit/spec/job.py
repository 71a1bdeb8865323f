"""The one declaration of a training job's fields: what is trained (TrainingSpec) and how it is spread (Strategy).

Each field is declared once here, with its type or choices, default, valid range, unit, help in English and Chinese,
and the doors it passes: the CLI flags of every job command, the Python API's keyword arguments, the plan request
(YAML/TOML and `plan`'s flags), plan.json's `choice.strategy`, the generated train_config.json and the validation-case
reader. Everything below is derived from `FIELDS`: the TrainingSpec and Strategy dataclasses (spec/training.py),
`cli.common.add_workload_flags`, `api.estimate`'s keywords, `PlanRequest.job`, `report.estimate.config_dict`, and
`generate.configs.train_config`. A field added here appears in all of them with no other edit (tests/test_job_fields.py
checks that on a copy of the package with a dummy field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Any, Callable

from ..errors import SpecError, did_you_mean
from ..i18n import say
from .choices import (ALL_LINEAR, Attention, Fsdp, GradCkpt, Method, Offload, Optimizer, OptimizerImpl, Precision,
                      Task, parse_saved_modules, parse_selective_ac, parse_targets)

# The doors a field can pass.
CLI = "cli"  # a flag of estimate / compare / trace / bench / generate
API = "api"  # a keyword of trainfit.estimate / compare / training_spec
REQUEST = "request"  # a key of a plan request file and a flag of `plan` (fields the search does not decide)
PLAN = "plan"  # a key of plan.json's choice.strategy
CONFIG = "config"  # a key of the train_config.json that `generate` writes (dotted path)
CASE = "case"  # a key of a validation case's "training" object (../shared/validation/SCHEMA.md): read by
#                `validate`, written by `bench`
ALL_DOORS = frozenset({CLI, API, REQUEST, PLAN, CONFIG, CASE})


@dataclass(frozen=True)
class JobField:
    name: str  # attribute of TrainingSpec / Strategy, API keyword, plan.json key
    part: str  # "training" | "strategy"
    kind: Any  # int | float | bool | str | "names" (a tuple of names) | an Enum class
    default: Any
    help: str
    help_zh: str
    low: float | None = None  # valid range of numbers (inclusive)
    high: float | None = None
    unit: str | None = None
    choices: tuple[str, ...] | None = None  # for kind str
    doors: frozenset = ALL_DOORS
    flag: str | None = None  # CLI flag when not --name-with-dashes
    api: str | None = None  # API keyword when not the name
    config: str | None = None  # dotted train_config.json path when not the name
    relevant: Callable[[Any], bool] | None = None  # when the value means something (else plan.json shows null)
    parse: Callable[[Any], Any] | None = None  # text / list -> value (default: by kind)
    metavar: str | None = None
    optional: bool = False  # None is a value ("not known / not used"), not only "not given"

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def keyword(self) -> str:
        return self.api or self.name

    @property
    def config_path(self) -> str:
        return self.config or self.name

    def help_text(self, lang: str = "en") -> str:
        text = self.help_zh if lang == "zh" else self.help
        if self.kind is bool:
            return text
        default = self.to_json(self.default) if self.default is not None else None
        if isinstance(default, list):
            default = ",".join(default)
        choices = self.choice_names()
        parts = []
        if choices:
            parts.append(" | ".join(choices))
        if default not in (None, ""):
            parts.append(("默认 " if lang == "zh" else "default ") + str(default))
        if self.unit:
            parts.append(("单位 " if lang == "zh" else "unit: ") + self.unit)
        return f"{text} ({'; '.join(parts)})" if parts else text

    def choice_names(self) -> tuple[str, ...] | None:
        if isinstance(self.kind, type) and issubclass(self.kind, Enum):
            return tuple(m.value for m in self.kind)
        return self.choices

    def convert(self, value: Any) -> Any:
        """A user's value (text from a flag or file, or a Python value) -> the spec's value, checked (SpecError)."""
        what = self.cli_flag.lstrip("-")
        if self.parse is not None:
            return self.parse(value)
        if isinstance(self.kind, type) and issubclass(self.kind, Enum):
            if value is None:
                return self.default
            if not isinstance(value, (str, Enum)):
                raise SpecError(say("ei_name_text", what=what, type=type(value).__name__, value=value))
            return self.kind.parse(value, what)
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in ("true", "yes", "1", "on"):
                return True
            if text in ("false", "no", "0", "off"):
                return False
            raise SpecError(say("ei_bool", what=what, value=value))
        if self.kind in (int, float):
            if isinstance(value, bool) or value is None:
                raise SpecError(say("ei_number", what=what, value=value))
            try:
                number = float(value) if not isinstance(value, (int, float)) else value
            except (TypeError, ValueError):
                number = _typed_tokens(self, value)  # '4k', '2,048': a length as people write it (issue 33)
            if not math.isfinite(number):
                raise SpecError(say("ei_finite", what=what, value=value))
            if self.kind is int:
                if number != int(number):
                    raise SpecError(say("ei_integer", what=what, value=value))
                number = int(number)
            self.check_range(number)
            return number
        if self.kind is str:
            if not isinstance(value, str):
                raise SpecError(say("ei_text", what=what, type=type(value).__name__, value=value))
            if self.choices and value not in self.choices:
                raise SpecError(say("ei_invalid_choice", what=what, value=value, choices=", ".join(self.choices),
                                    dym=did_you_mean(value, self.choices)))
            return value
        raise SpecError(f"{what}: cannot read {value!r}")

    def check_range(self, number: float) -> None:
        what = self.cli_flag.lstrip("-")
        if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
            key = "ei_int_in_range" if self.kind is int else "ei_number_in_range"
            raise SpecError(say(key, what=what, low=_num(self.low), high=_num(self.high), value=number))

    def check(self, value: Any) -> None:
        """A value already converted (a constructor argument): its type and range. Called for every field of every
        spec made (the search and the calibration make hundreds of thousands): the message is built only to fail."""
        if value is None and self.optional:
            return
        kind = self.kind
        if kind is int and not isinstance(value, bool) and isinstance(value, int) and \
                (self.low is None or value >= self.low) and (self.high is None or value <= self.high):
            return
        if (kind is bool and isinstance(value, bool)) or (kind is str and (not self.choices or value in self.choices)) \
                or (kind not in (int, float, bool, str)):  # Enum and name fields: their parse checked them
            return
        what = self.cli_flag.lstrip("-")
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise SpecError(say("ei_int_in_range", what=what, low=_num(self.low), high=_num(self.high),
                                    value=value))
            self.check_range(value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise SpecError(say("ei_finite", what=what, value=value))
            self.check_range(value)
        elif self.kind is bool and not isinstance(value, bool):
            raise SpecError(say("ei_bool", what=what, value=value))
        elif self.kind is str and self.choices and value not in self.choices:
            raise SpecError(say("ei_invalid_choice", what=what, value=value, choices=", ".join(self.choices), dym=""))

    @staticmethod
    def to_json(value: Any) -> Any:
        if isinstance(value, Enum):
            return value.value
        if isinstance(value, tuple):
            return list(value)
        return value


# Token lengths as people type them (issue 33): a longest length the way model cards write context ("4k context"),
# so k and M are powers of two ('4k' 4096, '32k' 32768, '128k' 131072); a mean length is a count ('1.5k' 1500).
_POWER_OF_TWO_LENGTHS = ("seq_len", "max_len")


def _typed_tokens(f: JobField, value: Any) -> float:
    what = f.cli_flag.lstrip("-")
    if f.unit != "tokens" or not isinstance(value, str):
        raise SpecError(say("ei_number", what=what, value=value))
    from ..units import parse_count, parse_seq_len

    binary = f.name in _POWER_OF_TWO_LENGTHS
    try:
        return (parse_seq_len if binary else parse_count)(value)
    except SpecError:
        examples = "2048, 4k = 4096, 32k = 32768" if binary else "900, 1.5k = 1500"
        raise SpecError(say("ei_tokens", what=what, value=value, examples=examples)) from None


def _num(x: float | None) -> str:
    return "" if x is None else str(int(x)) if float(x).is_integer() else f"{x:g}"


def _peft(t) -> bool:
    return t.method in (Method.LORA, Method.QLORA)


def _varlen(t) -> bool:
    return t.variable_length


def _classification(t) -> bool:
    return t.task == Task.CLASSIFICATION


def _framework(value: Any) -> str | None:
    from ..catalog.frameworks import check_framework, framework_defaults

    if value is not None:  # another spelling of a stack (frameworks.yaml aliases: llamafactory, swift, ms_swift)
        key = str(value).strip().lower()
        value = next((name for name, d in framework_defaults().items() if key in (d.get("aliases") or ())), value)
    return check_framework(value)


PACKED, PADDED_BATCH, PADDED_MAX = "packed", "padded-batch", "padded-max"
DATA_LAYOUTS = (PACKED, PADDED_BATCH, PADDED_MAX)
_LAYOUT_SPELLINGS = {"pack": PACKED, "packing": PACKED, "padded": PADDED_BATCH, "padded_batch": PADDED_BATCH,
                     "pad-batch": PADDED_BATCH, "dynamic": PADDED_BATCH, "longest": PADDED_BATCH,
                     "padded_max": PADDED_MAX, "max_length": PADDED_MAX, "max-length": PADDED_MAX,
                     "pad-max": PADDED_MAX}


def _data_layout(value: Any) -> str | None:
    """packed | padded-batch | padded-max (also as tokenizers and stacks say it: padding='longest' / 'max_length',
    packing); None stays None (resolved from the task and the lengths)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise SpecError(say("ei_data_layout", choices=", ".join(DATA_LAYOUTS), value=value, dym=""))
    key = value.strip().lower()
    key = _LAYOUT_SPELLINGS.get(key, key)
    if key not in DATA_LAYOUTS:
        raise SpecError(say("ei_data_layout", choices=", ".join(DATA_LAYOUTS), value=value,
                            dym=did_you_mean(key, DATA_LAYOUTS)))
    return key


def _pp_layout(value: Any) -> str | None:
    """A custom pipeline layout as given (spaces trimmed), its form checked (spec/pp_layout.parse); None stays None."""
    from .pp_layout import LayoutSyntaxError, parse

    if value is None:
        return None
    if not isinstance(value, str):
        raise SpecError(say("ec_pp_layout_empty"))
    try:
        parse(value.strip())
    except LayoutSyntaxError as exc:
        raise SpecError(say(exc.key, **exc.values)) from None
    return value.strip()


def _zero(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool):
        raise SpecError(say("ei_zero", value=value))
    try:
        stage = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise SpecError(say("ei_zero", value=value)) from None
    if stage not in (0, 1, 2, 3):
        raise SpecError(say("ei_zero_stage", value=value))
    return stage


_T, _S, _I = "training", "strategy", "input"
_NOT_SEARCHED = ALL_DOORS  # a field the user gives and every door passes
_SEARCHED = ALL_DOORS - {REQUEST}  # decided by `plan`'s search: not a request key
_SPREAD = _SEARCHED - {CASE}  # strategy fields: a case states them in its own "parallel" object
# searched by `plan` unless the request gives them (then fixed: given = pinned, absent = searched)
_PINNABLE = ALL_DOORS
_PINNABLE_SPREAD = _SPREAD | {REQUEST}

FIELDS: tuple[JobField, ...] = (
    # --- what is trained -------------------------------------------------------------------------------------------
    JobField("method", _T, Method, Method.FULL, "training method", "训练方法", doors=_SEARCHED),
    JobField("task", _T, Task, Task.SFT, "training objective (classification for encoders when not given)",
             "训练目标（未给出时编码器模型默认 classification）"),
    JobField("seq_len", _T, int, 2048, "tokens per sequence (capped at the model's positions, e.g. 512 for BERT): "
             "2048, or 4k = 4096, 32k = 32768, 128k = 131072 (k is 1024 here, as in '4k context')",
             "每条序列的 token 数（不超过模型的位置数，如 BERT 为 512）：2048，或 4k = 4096、32k = 32768、128k = 131072"
             "（此处 k 为 1024，即“4k 上下文”的写法）", low=1, high=2_097_152, unit="tokens"),
    JobField("micro_batch", _T, int, 1, "sequences per GPU per forward/backward (DPO: preference pairs)",
             "每张 GPU 每次前向/反向的序列数（DPO：偏好对）", low=1, high=65_536, doors=_PINNABLE),
    JobField("grad_accum", _T, int, 1, "gradient accumulation steps", "梯度累积步数", low=1, high=65_536,
             doors=_SEARCHED),
    JobField("precision", _T, Precision, Precision.BF16, "compute precision", "计算精度"),
    JobField("param_dtype", _T, str, "fp32",
             "storage dtype of trained weights without DeepSpeed: fp32 (mixed precision) or bf16 (pure)",
             "不用 DeepSpeed 时可训练权重的存储精度：fp32（混合精度）或 bf16（纯 bf16）", choices=("fp32", "bf16")),
    JobField("optimizer", _T, Optimizer, Optimizer.ADAMW, "optimizer", "优化器", config="optimizer.name"),
    JobField("optimizer_impl", _T, OptimizerImpl, OptimizerImpl.FUSED,
             "how torch runs AdamW/SGD: fused (Hugging Face Trainer's default, train.py), foreach (torch's own "
             "default on CUDA: one more state's worth of memory in the step) or forloop",
             "torch 运行 AdamW/SGD 的方式：fused（Hugging Face Trainer 与 train.py 的默认）、foreach（CUDA 上 torch "
             "自身的默认：更新时多占一份状态大小的显存）或 forloop", config="optimizer.impl"),
    JobField("grad_ckpt", _T, GradCkpt, GradCkpt.NONE, "activation (gradient) checkpointing", "激活（梯度）检查点",
             doors=_PINNABLE),
    JobField("selective_ac", _T, str, "attention", "what --grad-ckpt selective recomputes: attention (the attention "
             "core: Megatron-LM's recompute-granularity selective, train.py), op (torchtitan's per-op policy: matmul "
             "and attention outputs kept except every second matmul's, everything else recomputed; torchtitan's "
             "default), N (every N-th block checkpointed in full, the others kept: torchtitan's and torchtune's "
             "selective layer option, e.g. 2) or Megatron-Core's recompute modules on a tp / pp / cp / ep layout, "
             "comma-separated (core_attn, layernorm, mla_up_proj, mlp, moe, moe_act, shared_experts: "
             "--recompute-modules)", "--grad-ckpt selective 重算的部分：attention（注意力核心：Megatron-LM "
             "的 recompute-granularity selective、train.py）、op（torchtitan 的按算子策略：保留矩阵乘与注意力的输出，"
             "但每隔一个矩阵乘重算，其余算子全部重算；torchtitan 的默认）、N（每 N 个块中一个整块检查点，其余保留：torchtitan "
             "与 torchtune 的按层选择，如 2）或 tp / pp / cp / ep 布局上 Megatron-Core 的重算模块，用逗号分隔（core_attn、"
             "layernorm、mla_up_proj、mlp、moe、moe_act、shared_experts：即 --recompute-modules）",
             parse=parse_selective_ac, relevant=lambda t: t.grad_ckpt == GradCkpt.SELECTIVE, metavar="POLICY",
             doors=frozenset({CLI, API, REQUEST, PLAN, CASE})),
    JobField("attention", _T, Attention, Attention.SDPA, "attention kernel", "注意力实现"),
    JobField("lora_rank", _T, int, 16, "LoRA rank", "LoRA 秩", low=1, high=65_536, relevant=_peft,
             config="lora.rank"),
    JobField("lora_targets", _T, "names", ALL_LINEAR, "LoRA target modules: all-linear or a comma list such as "
             "q_proj,v_proj", "LoRA 作用的模块：all-linear 或逗号分隔的列表，如 q_proj,v_proj", relevant=_peft,
             parse=parse_targets, config="lora.targets", metavar="NAMES"),
    JobField("lora_dropout", _T, float, 0.0, "LoRA dropout before each adapter (PEFT LoraConfig lora_dropout; 0 is "
             "PEFT's default, QwenLM/Qwen finetune.py and LitGPT use 0.05): a dropout kernel and its traffic per adapted "
             "Linear, forward and backward (step time; its 1-byte mask is not counted in memory on the Hugging Face "
             "path)", "每个适配器前的 LoRA dropout（PEFT LoraConfig 的 lora_dropout；PEFT 默认 0，QwenLM/Qwen 的 "
             "finetune.py 与 LitGPT 用 0.05）：每个被适配的 Linear 前向、反向各多一个 dropout 内核及其访存（计入步时；"
             "Hugging Face 路径的显存不计其 1 字节掩码）", low=0.0, high=0.99, relevant=_peft, config="lora.dropout",
             doors=ALL_DOORS - {CASE}),
    JobField("modules_to_save", _T, "names", (), "LoRA: modules trained in full beside the adapters, e.g. "
             "embed_tokens,lm_head (PEFT modules_to_save)", "LoRA：在适配器之外全量训练的模块，如 embed_tokens,lm_head"
             "（PEFT modules_to_save）", relevant=_peft, parse=parse_saved_modules, config="lora.modules_to_save",
             metavar="NAMES"),
    JobField("num_labels", _T, int, 2, "classes for --task classification", "--task classification 的类别数",
             low=1, high=1_000_000, relevant=_classification, doors=ALL_DOORS - {CASE}),
    JobField("optimizer_in_backward", _T, bool, False, "step each parameter as soon as its gradient is ready, "
             "freeing it (torchtune optimizer_in_bwd; needs --grad-accum 1)",
             "每个参数的梯度一就绪就更新并释放（torchtune optimizer_in_bwd；需要 --grad-accum 1）",
             config="optimizer.in_backward", doors=ALL_DOORS - {CASE}),
    JobField("torch_compile", _T, bool, False, "the model runs under torch.compile (Inductor fuses the elementwise "
             "work around the matmuls): forward and backward time x compile_time_factor (efficiency.yaml; torchtitan's "
             "measured 0.86, fitted on compiled runs); memory as eager", "模型在 torch.compile 下运行（Inductor 融合矩阵乘"
             "周围的逐元素运算）：前向与反向时间乘以 compile_time_factor（efficiency.yaml；torchtitan 实测 0.86，"
             "按编译运行拟合）；显存按 eager 计", doors=frozenset({API})),
    JobField("liger_kernel", _T, bool, False, "Liger kernels on the model (HF TrainingArguments use_liger_kernel, "
             "ms-swift --use_liger_kernel, LLaMA-Factory enable_liger_kernel): its fused linear cross-entropy computes "
             "the output head and the loss in row chunks and the head's gradients in the forward, so the vocabulary-"
             "sized logits never exist (memory); its fused RMSNorm / SwiGLU / RoPE are counted as the eager model's",
             "在模型上启用 Liger 内核（HF TrainingArguments 的 use_liger_kernel、ms-swift 的 --use_liger_kernel、"
             "LLaMA-Factory 的 enable_liger_kernel）：其融合线性交叉熵按行分块计算输出头与损失，并在前向中算出输出头"
             "的梯度，词表大小的 logits 从不生成（显存）；其融合 RMSNorm / SwiGLU / RoPE 按 eager 模型计",
             doors=ALL_DOORS - {CASE}),
    JobField("paged_optimizer", _T, bool, False, "bitsandbytes paged optimizer states (CUDA managed memory, paged "
             "out to host under pressure)", "bitsandbytes 分页优化器状态（CUDA 统一内存，显存紧张时换出到主机）",
             config="optimizer.paged", doors=ALL_DOORS - {CASE}),
    # Properties of the training stack, not choices a user makes on the command line: set by `validate` from a
    # case's framework (frameworks.yaml) and open to the API.
    JobField("kbit_fp32_upcast", _T, bool, True, "QLoRA through PEFT's prepare_model_for_kbit_training: every "
             "parameter that is not 4-bit is cast to fp32 (stacks that do not call it and GPTQ bases keep 16 bit)",
             "经 PEFT 的 prepare_model_for_kbit_training 的 QLoRA：非 4 位参数均转为 fp32", doors=frozenset({API})),
    JobField("kbit_keeps_inputs", _T, bool, False, "QLoRA on bitsandbytes before 0.43.2: its 4-bit matmul kept "
             "every Linear's input alive for backward (fixed by bitsandbytes PR #1270)",
             "bitsandbytes 0.43.2 之前的 QLoRA：4 位矩阵乘为反向保留每个 Linear 的输入（bitsandbytes PR #1270 修复）",
             doors=frozenset({API})),
    JobField("model_code", _T, str, "hf", "whose model and training-loop code runs the step: Hugging Face "
             "transformers + PEFT (hf), or LitGPT's GPT, its LoRA layers and its finetune loop (litgpt: k and v "
             "repeated to every head, dropout before each adapter, the output head and loss in 128-token bf16 chunks, "
             "the previous step's logits alive into the next forward)",
             "运行训练步的模型与循环代码：Hugging Face transformers + PEFT（hf），或 LitGPT 的 GPT、LoRA 层与微调循环"
             "（litgpt：k、v 复制到每个头，每个适配器前有 dropout，输出头与损失按 128 个 token 的 bf16 分块计算，"
             "上一步的 logits 存活到下一次前向）", choices=("hf", "litgpt"), doors=frozenset({API})),
    JobField("gptq_base", _T, bool, False, "QLoRA on a GPTQ int4 base (auto-gptq QuantLinear without the exllama "
             "kernel, e.g. the Qwen README's Q-LoRA on *-Int4 checkpoints): each forward unpacks the int4 weights with "
             "torch ops before a 16-bit matmul, and backward reuses the unpacked weight",
             "基于 GPTQ int4 底座的 QLoRA（auto-gptq 的 QuantLinear，不用 exllama 内核，如 Qwen README 在 *-Int4 "
             "模型上的 Q-LoRA）：每次前向用 torch 算子解包 int4 权重后做 16 位矩阵乘，反向复用解包后的权重",
             doors=frozenset({API})),
    JobField("triton_attention", _T, bool, False, "the fused attention kernel is FlashAttention in Triton "
             "(flash_attn_triton.py, llm-foundry's attn_impl='triton'), slower than FlashAttention-2 (efficiency.yaml "
             "triton_attention_forward_slowdown / _backward_slowdown)",
             "融合注意力内核为 Triton 版 FlashAttention（flash_attn_triton.py，llm-foundry 的 attn_impl='triton'），"
             "比 FlashAttention-2 慢（efficiency.yaml 的 triton_attention_forward_slowdown / _backward_slowdown）",
             doors=frozenset({API})),
    JobField("fused_softmax", _T, bool, False, "eager attention's scale, causal mask and softmax run as one kernel on "
             "16-bit scores (Megatron-LM's masked-softmax fusion, its default), not as transformers' separate ops",
             "eager 注意力的缩放、因果掩码与 softmax 合为一个 16 位内核（Megatron-LM 默认的 masked-softmax fusion），"
             "而非 transformers 的分步算子", doors=frozenset({API})),
    JobField("offload_activations", _T, bool, False, "the tensors blocks save for backward (under full "
             "checkpointing: each block's input) are copied to host memory and brought back one block ahead of its "
             "backward (Unsloth's use_gradient_checkpointing='unsloth', torchtune's enable_activation_offloading)",
             "各层为反向保存的张量（全量检查点时即各层输入）卸载到主机内存，反向前提前一层取回（Unsloth 的 "
             "use_gradient_checkpointing='unsloth'，torchtune 的 enable_activation_offloading）",
             doors=frozenset({API})),
    # Variable-length data (not packed): each micro-batch is padded to its longest sample, so shapes change from step
    # to step. seq_len is then the longest sample (memory is taken there), avg_len the mean sample length (the tokens
    # that count), padded_len the expected length a micro-batch is padded to (time is taken there; spec/lengths.py).
    JobField("avg_len", _T, int, None, "variable-length data: mean tokens per sample (900, 1.5k = 1500); time is "
             "taken at micro-batches padded to their longest sample, throughput counts these tokens, not the padding",
             "变长数据：每条样本的平均 token 数（900，1.5k = 1500）；时间按补齐到各 micro-batch 最长样本计算，吞吐只计这些 "
             "token、不计填充",
             low=1, high=2_097_152, unit="tokens", optional=True, metavar="TOKENS", relevant=_varlen,
             doors=frozenset({CLI, API, PLAN, CONFIG})),
    JobField("variable_length", _T, bool, False, "samples padded per micro-batch instead of packed (set by "
             "--avg-len / --data)", "样本按 micro-batch 补齐而非打包（由 --avg-len / --data 设定）",
             doors=frozenset({API, PLAN})),
    JobField("padded_len", _T, int, None, "expected length a micro-batch is padded to (from --data, else from "
             "--avg-len)", "micro-batch 补齐后的期望长度（来自 --data，否则由 --avg-len 推出）", low=1,
             high=2_097_152, unit="tokens", optional=True, relevant=_varlen, doors=frozenset({API, PLAN})),
    # How samples become the sequences a step computes (issue 33: one answer for estimate, plan and train.py):
    # resolved in spec/training.py resolve_data_layout, run by train.py (train/runner.py build_examples / collate).
    JobField("data_layout", _T, str, None, "how samples become sequences: packed (concatenated and cut into "
             "seq-len blocks, no padding), padded-batch (each micro-batch padded to its longest sample: the "
             "default of TRL, LLaMA-Factory, ms-swift and torchtune) or padded-max (every sample padded to seq-len). "
             "Default: padded-batch when --avg-len / --data give the lengths or for DPO and classification, else "
             "packed",
             "样本如何组成序列：packed（拼接后按 seq-len 切块，无填充）、padded-batch（每个 micro-batch 补齐到其最长"
             "样本：TRL、LLaMA-Factory、ms-swift、torchtune 的默认）或 padded-max（每条样本补齐到 seq-len）。默认："
             "给了 --avg-len / --data 或为 DPO、分类任务时为 padded-batch，否则为 packed",
             choices=DATA_LAYOUTS, optional=True, parse=lambda v: _data_layout(v),
             doors=frozenset({CLI, API, REQUEST, PLAN, CONFIG})),
    JobField("expandable_segments", _T, bool, False, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: less memory "
             "reserved when shapes vary", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True：形状变化时预留显存更少",
             doors=frozenset({CLI, API, PLAN, REQUEST})),
    # --- what the job is resolved from, not stored in a spec: the training stack and the data's lengths ----------
    JobField("framework", _I, str, None, "your training stack (frameworks.yaml names such as hf-trainer, "
             "llama-factory, ms-swift, torchtune, or 'other'): its defaults, fitted factors and error band (default: "
             "unstated, the wider band of any stack)",
             "你的训练框架（frameworks.yaml 中的名称，如 hf-trainer、llama-factory、ms-swift、torchtune，或 other）：采用其"
             "默认值、拟合系数和误差带（默认：未说明，取更宽的误差带）",
             optional=True, parse=lambda v: _framework(v), doors=frozenset({CLI, API, REQUEST})),
    JobField("max_len", _I, int, None, "variable-length data: the longest sample (truncation length; the same as "
             "--seq-len, 4k = 4096): memory is taken there",
             "变长数据：最长样本（截断长度；与 --seq-len 相同，4k = 4096）：显存按此计算",
             low=1, high=2_097_152, unit="tokens", optional=True, metavar="TOKENS", doors=frozenset({CLI, API})),
    JobField("data", _I, str, None, "JSON lines (or one sample per line) whose sample lengths give the mean, the "
             "longest and the padding: counted with the model's tokenizer when its files are local, else whitespace "
             "words x 4/3 (CJK characters x 1)", "JSON lines（或每行一条样本）文件，由样本长度得出平均、最长和填充："
             "模型的分词器文件在本地时用它计数，否则按空白分词 × 4/3（中日韩字符 × 1）", optional=True,
             metavar="FILE", doors=frozenset({CLI, API})),
    # --- how it is spread ------------------------------------------------------------------------------------------
    JobField("gpus_per_node", _S, int, 1, "GPUs per node", "每个节点的 GPU 数", low=1, high=64, flag="--gpus",
             api="gpus", doors=frozenset({CLI, API, REQUEST})),
    JobField("nodes", _S, int, 1, "nodes", "节点数", low=1, high=4096, doors=frozenset({CLI, API, REQUEST})),
    JobField("zero_stage", _S, int, 0, "DeepSpeed ZeRO stage 0-3 (0: plain PyTorch / DDP)",
             "DeepSpeed ZeRO 阶段 0-3（0：普通 PyTorch / DDP）", low=0, high=3, flag="--zero", api="zero",
             parse=_zero, doors=_PINNABLE_SPREAD, relevant=lambda s: s.fsdp == Fsdp.NONE),
    JobField("fsdp", _S, Fsdp, Fsdp.NONE, "PyTorch FSDP sharding", "PyTorch FSDP 切分方式", doors=_PINNABLE_SPREAD,
             parse=Fsdp.parse, relevant=lambda s: s.fsdp != Fsdp.NONE),
    JobField("offload", _S, Offload, Offload.NONE, "offload to host memory (DeepSpeed ZeRO / FSDP)",
             "卸载到主机内存（DeepSpeed ZeRO / FSDP）", doors=_PINNABLE_SPREAD),
    # --- model parallelism (issue 34): Megatron-LM / Megatron-Core and torchtitan layouts, estimated by
    # estimate/parallel3d.py. GPUs = tp x pp x cp x dp; data parallelism is what is left.
    JobField("tp", _S, int, 1, "tensor parallel size: each layer's matrices split across this many GPUs of one node "
             "(Megatron-LM --tensor-model-parallel-size, torchtitan tensor_parallel_degree)",
             "张量并行规模：每层矩阵切分到同一节点的这么多 GPU 上（Megatron-LM --tensor-model-parallel-size，torchtitan "
             "tensor_parallel_degree）", low=1, high=64, doors=_PINNABLE_SPREAD),
    JobField("pp", _S, int, 1, "pipeline parallel size: the layers split into this many stages",
             "流水线并行规模：各层分成这么多个阶段", low=1, high=512, doors=_PINNABLE_SPREAD),
    JobField("vpp", _S, int, 1, "virtual pipeline stages per GPU (interleaved 1F1B: a smaller bubble, more "
             "activations in flight)", "每个 GPU 的虚拟流水线阶段数（interleaved 1F1B：气泡更小，在途激活更多）",
             low=1, high=64, doors=_PINNABLE_SPREAD, relevant=lambda s: s.pp > 1),
    JobField("pp_schedule", _S, str, "1f1b", "pipeline schedule: 1f1b, interleaved (needs --vpp > 1) or zb (zero "
             "bubble ZB-H1)", "流水线调度：1f1b、interleaved（需 --vpp > 1）或 zb（零气泡 ZB-H1）",
             choices=("1f1b", "interleaved", "zb"), doors=_PINNABLE_SPREAD, relevant=lambda s: s.pp > 1),
    JobField("cp", _S, int, 1, "context parallel size: each sequence split across this many GPUs (ring attention)",
             "上下文并行规模：每条序列切分到这么多 GPU 上（环形注意力）", low=1, high=64, doors=_PINNABLE_SPREAD),
    JobField("ep", _S, int, 1, "expert parallel size: an MoE layer's experts spread across this many GPUs",
             "专家并行规模：MoE 层的专家分布到这么多 GPU 上", low=1, high=1024, doors=_PINNABLE_SPREAD),
    JobField("etp", _S, int, None, "expert tensor parallel size: how the MoE experts' matrices split (Megatron-Core "
             "--expert-tensor-parallel-size; default: the tensor parallel size)",
             "专家张量并行规模：MoE 专家矩阵的切分方式（Megatron-Core --expert-tensor-parallel-size；默认：与张量并行规模相同）",
             low=1, high=64, optional=True, doors=_PINNABLE_SPREAD, relevant=lambda s: s.ep > 1),
    JobField("moe_dispatcher", _S, str, "alltoall", "how MoE tokens reach their experts: alltoall (NCCL all-to-all, "
             "each expert copy sent), deepep or hybridep (Megatron-Core's flex dispatcher: a token sent once per "
             "node, forwarded over NVLink there)",
             "MoE 令牌发往专家的方式：alltoall（NCCL all-to-all，每个专家副本都发送）、deepep 或 hybridep"
             "（Megatron-Core 的 flex 分发器：每个令牌对每个节点只发一次，在节点内经 NVLink 转发）",
             choices=("alltoall", "deepep", "hybridep"), doors=_PINNABLE_SPREAD, relevant=lambda s: s.ep > 1),
    JobField("ep_overlap", _S, bool, False, "overlap the MoE all-to-all with computation: Megatron-Core's combined "
             "1F1B schedule (--overlap-moe-expert-parallel-comm --delay-wgrad-compute); needs ep > 1, virtual stages "
             "with pp > 1, and no full recomputation",
             "MoE 的 all-to-all 与计算重叠：Megatron-Core 的合并 1F1B 调度（--overlap-moe-expert-parallel-comm "
             "--delay-wgrad-compute）；需要 ep > 1、pp > 1 时需虚拟阶段，且不能完全重计算",
             doors=_PINNABLE_SPREAD, relevant=lambda s: s.ep > 1),
    JobField("pp_split_embedding", _S, bool, False, "count the embedding as one layer in the pipeline split: the "
             "first stage holds one decoder layer less (Megatron-Core --account-for-embedding-in-pipeline-split, as "
             "NVIDIA's Llama 3.1 405B and Qwen3-235B recipes set it)",
             "在流水线切分中把嵌入层计为一层：第一个阶段少放一个解码层（Megatron-Core "
             "--account-for-embedding-in-pipeline-split，NVIDIA 的 Llama 3.1 405B 与 Qwen3-235B 配方如此设置）",
             doors=_PINNABLE_SPREAD, relevant=lambda s: s.pp > 1),
    JobField("pp_split_loss", _S, bool, False, "count the loss (LM head) as one layer in the pipeline split: the last "
             "stage holds one decoder layer less (Megatron-Core --account-for-loss-in-pipeline-split)",
             "在流水线切分中把损失（LM head）计为一层：最后一个阶段少放一个解码层（Megatron-Core "
             "--account-for-loss-in-pipeline-split）", doors=_PINNABLE_SPREAD, relevant=lambda s: s.pp > 1),
    JobField("pp_layout", _S, str, None, "Megatron-Core's custom pipeline layout: the layers of each virtual stage, "
             "stages separated by |, E the embedding, t a decoder layer, m a multi-token-prediction layer, L the loss, "
             "(...)*n repeats (--pipeline-model-parallel-layout; NVIDIA's DeepSeek-V3 recipe: 'Et|(tt|)*30mL' for "
             "pp 8: the virtual stages per rank follow from it)",
             "Megatron-Core 的自定义流水线布局：每个虚拟阶段的层，阶段以 | 分隔，E 为嵌入层、t 为解码层、m 为多 token 预测层、"
             "L 为损失，(...)*n 表示重复（--pipeline-model-parallel-layout；NVIDIA 的 DeepSeek-V3 配方：pp 8 时为 "
             "'Et|(tt|)*30mL'，每个 rank 的虚拟阶段数由它决定）",
             optional=True, parse=lambda v: _pp_layout(v), metavar="LAYOUT", doors=_PINNABLE_SPREAD,
             relevant=lambda s: s.pp > 1),
    JobField("grad_reduce_bf16", _S, bool, False, "Megatron-Core accumulates and reduces the gradients in bf16 (its "
             "DDP's grad_reduce_in_fp32 off: Megatron-LM --grad-reduce-in-bf16, Megatron-Bridge's performance "
             "recipes): a 2-byte gradient buffer instead of fp32's 4; needs a tp / pp / cp / ep layout without FSDP",
             "Megatron-Core 以 bf16 累加并归约梯度（其 DDP 的 grad_reduce_in_fp32 关闭：Megatron-LM "
             "--grad-reduce-in-bf16，Megatron-Bridge 的性能配方）：梯度缓冲区每参数 2 字节而非 fp32 的 4 字节；需要 "
             "tp / pp / cp / ep 布局且不用 FSDP", doors=_PINNABLE_SPREAD, relevant=lambda s: s.is_3d),
    JobField("precision_aware_optimizer", _S, bool, False, "Megatron-Core's precision-aware optimizer as NVIDIA's "
             "DeepSeek-V3 recipes set it: gradients accumulated and reduced in bf16, Adam's moments in bf16, fp32 "
             "master weights (--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 "
             "--exp-avg-sq-dtype bf16); needs a tp / pp / cp / ep layout with the distributed optimizer (--zero 1)",
             "Megatron-Core 的精度感知优化器（与 NVIDIA 的 DeepSeek-V3 配方相同）：梯度以 bf16 累加与归约、Adam 的两个动量"
             "为 bf16、主权重为 fp32（--use-precision-aware-optimizer --main-grads-dtype bf16 --exp-avg-dtype bf16 "
             "--exp-avg-sq-dtype bf16）；需要 tp / pp / cp / ep 布局并使用分布式优化器（--zero 1）",
             doors=_PINNABLE_SPREAD, relevant=lambda s: s.is_3d),
    JobField("sequence_parallel", _S, bool, True, "with tensor parallelism: LayerNorm and dropout activations split "
             "across the TP group too (Megatron-LM --sequence-parallel; torchtitan's default with TP)",
             "张量并行时：LayerNorm 与 dropout 的激活也在 TP 组内切分（Megatron-LM --sequence-parallel；torchtitan "
             "开启 TP 时的默认）", doors=_PINNABLE_SPREAD, relevant=lambda s: s.tp > 1),
)

BY_NAME = {f.name: f for f in FIELDS}
BY_KEYWORD = {f.keyword: f for f in FIELDS}


@lru_cache(maxsize=None)
def fields_of(part: str, door: str | None = None) -> tuple[JobField, ...]:
    return tuple(f for f in FIELDS if f.part == part and (door is None or door in f.doors))


@lru_cache(maxsize=None)
def through(door: str) -> tuple[JobField, ...]:
    return tuple(f for f in FIELDS if door in f.doors)


def split_keywords(values: dict[str, Any], door: str = API, where: str = "") -> dict[str, dict]:
    """API keywords / request keys -> {"training": ..., "strategy": ..., "input": ...} values, converted and
    checked; unknown names are a SpecError with a "did you mean". None means "not given"."""
    out: dict[str, dict] = {_T: {}, _S: {}, _I: {}}
    allowed = {f.keyword: f for f in through(door)}
    for key, value in values.items():
        f = allowed.get(key)
        if f is None:
            raise SpecError(say("ei_unknown_job_field", where=where, key=key, dym=did_you_mean(key, allowed)))
        if value is None:  # "not given": the declared default, or one resolved against the model
            continue
        out[f.part][f.name] = f.convert(value)
    return out


def json_values(spec: Any, part: str, door: str) -> dict[str, Any]:
    """A spec's fields that pass `door`, as JSON values (null where the field means nothing for this spec)."""
    out = {}
    for f in fields_of(part, door):
        value = getattr(spec, f.name)
        out[f.name] = f.to_json(value) if f.relevant is None or f.relevant(spec) else None
    return out


def put_config(doc: dict, path: str, value: Any) -> None:
    """Set `value` at a dotted path of train_config.json."""
    *parents, last = path.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    doc[last] = value
