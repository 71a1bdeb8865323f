"""Messages in English and Chinese. JSON keys stay English; only what people read is translated."""

from __future__ import annotations

import os

LANGS = ("en", "zh")

_MESSAGES: dict[str, dict[str, str]] = {
    "fits": {"en": "fits", "zh": "可以放下"},
    "does_not_fit": {"en": "does NOT fit", "zh": "放不下"},
    "memory_per_gpu": {"en": "Memory per GPU", "zh": "每张 GPU 显存"},
    "part": {"en": "part", "zh": "组成"},
    "gib": {"en": "GiB", "zh": "GiB"},
    "weights": {"en": "weights", "zh": "权重"},
    "gradients": {"en": "gradients", "zh": "梯度"},
    "optimizer": {"en": "optimizer states", "zh": "优化器状态"},
    "activations": {"en": "activations", "zh": "激活值"},
    "logits": {"en": "logits / loss", "zh": "logits / 损失"},
    "other": {"en": "other (context, allocator, buffers)", "zh": "其他（CUDA 上下文、分配器、缓冲区）"},
    "total": {"en": "total", "zh": "合计"},
    "usable": {"en": "usable on GPU", "zh": "GPU 可用"},
    "speed": {"en": "Speed", "zh": "速度"},
    "step_time": {"en": "step time", "zh": "每步时间"},
    "tokens_per_s": {"en": "tokens/s (all GPUs)", "zh": "tokens/s（全部 GPU）"},
    "tokens_per_s_per_gpu": {"en": "tokens/s per GPU", "zh": "每卡 tokens/s"},
    "mfu": {"en": "MFU", "zh": "MFU（模型算力利用率）"},
    "bottleneck": {"en": "bottleneck", "zh": "瓶颈"},
    "compute": {"en": "compute", "zh": "算力"},
    "memory": {"en": "memory bandwidth", "zh": "显存带宽"},
    "communication": {"en": "communication", "zh": "通信"},
    "offload": {"en": "offload (CPU/PCIe)", "zh": "卸载（CPU/PCIe）"},
    "overhead": {"en": "launch/step overhead", "zh": "调度/每步开销"},
    "params": {"en": "parameters", "zh": "参数量"},
    "trainable": {"en": "trainable", "zh": "可训练"},
    "warnings": {"en": "Warnings", "zh": "警告"},
    "assumptions": {"en": "Assumptions", "zh": "假设"},
    "what_fits": {"en": "What would fit", "zh": "可行的调整"},
    "over_by": {"en": "over by", "zh": "超出"},
    "efficiencies": {"en": "Efficiencies used", "zh": "使用的效率参数"},
    "peak_phase": {"en": "peak during", "zh": "峰值出现在"},
    "gpu": {"en": "GPU", "zh": "GPU"},
    "settings": {"en": "settings", "zh": "设置"},
    "hours_per_b": {"en": "hours / 1B tokens", "zh": "小时 / 10亿 tokens"},
    "cost_per_b": {"en": "cost / 1B tokens", "zh": "费用 / 10亿 tokens"},
    "instance": {"en": "cheapest instance", "zh": "最便宜实例"},
    "no_alibaba_price": {"en": "no public price", "zh": "无公开价格"},
    "not_on_alibaba": {"en": "not in the Alibaba catalog", "zh": "阿里云目录中没有"},
    "no_fit_any": {"en": "does not fit with any tried setting", "zh": "任何尝试的设置都放不下"},
    "instance_col": {"en": "instance", "zh": "实例"},
    "recommendations": {"en": "Recommendations", "zh": "推荐方案"},
    "hours": {"en": "hours", "zh": "小时"},
    "cost": {"en": "cost", "zh": "费用"},
    "why": {"en": "why", "zh": "理由"},
    "no_plan": {"en": "No configuration meets the request", "zh": "没有满足要求的配置"},
    "binding": {"en": "binding constraint", "zh": "限制条件"},
    "relax": {"en": "what would relax it", "zh": "可以放宽"},
    "pareto": {"en": "Cost-time Pareto front", "zh": "成本-时间帕累托前沿"},
    "excluded": {"en": "Why other GPUs lost", "zh": "其他 GPU 落选原因"},
    "searched": {"en": "searched", "zh": "已搜索"},
    "flag_note": {"en": "GPU model inferred by third parties or price unverified (see --json)",
                  "zh": "GPU 型号为第三方推断或价格未核实（见 --json）"},
    "unverified": {"en": "unverified", "zh": "未核实"},
    "source": {"en": "source", "zh": "来源"},
    "price_date": {"en": "price date", "zh": "价格日期"},
    "families_fast": {"en": "Fast path (hand-written, no torch needed):",
                      "zh": "快速路径（手写结构，无需 torch）："},
    "families_generic": {
        "en": "Every other model_type that transformers knows (causal or masked LM) goes through the generic reader: "
              "the model is built on the meta device and its structure read (needs torch + transformers; cached per "
              "config hash under ~/.cache/trainfit).",
        "zh": "其余 transformers 支持的 model_type（因果或掩码语言模型）都走通用读取器：在 meta 设备上构建模型并读取其结构"
              "（需要 torch 与 transformers；按配置哈希缓存在 ~/.cache/trainfit）。"},
}


def default_lang() -> str:
    for var in ("TRAINFIT_LANG", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(var, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


def t(key: str, lang: str) -> str:
    entry = _MESSAGES.get(key)
    if entry is None:
        return key
    return entry.get(lang) or entry["en"]
