"""Labels of the web calculator's form (en / zh), sent to the page by /api/options."""

from __future__ import annotations

UI_WORDS: dict[str, dict[str, str]] = {
    "title": {"en": "trainfit calculator", "zh": "trainfit 训练计算器"},
    "model": {"en": "Model", "zh": "模型"},
    "preset": {"en": "preset", "zh": "预设"},
    "config": {"en": "or paste / upload a config.json", "zh": "或粘贴 / 上传 config.json"},
    "gpu": {"en": "GPU", "zh": "GPU"},
    "instance": {"en": "or instance", "zh": "或实例"},
    "none": {"en": "(none)", "zh": "（无）"},
    "method": {"en": "Method", "zh": "训练方法"},
    "seq_len": {"en": "sequence length", "zh": "序列长度"},
    "micro_batch": {"en": "micro-batch", "zh": "微批大小"},
    "grad_accum": {"en": "gradient accumulation", "zh": "梯度累积"},
    "gpus": {"en": "GPUs per node", "zh": "每节点 GPU 数"},
    "zero": {"en": "ZeRO stage", "zh": "ZeRO 阶段"},
    "grad_ckpt": {"en": "activation checkpointing", "zh": "激活检查点"},
    "lora_rank": {"en": "LoRA rank", "zh": "LoRA 秩"},
    "plan_inputs": {"en": "Plan: data, deadline, budget", "zh": "规划：数据量、期限、预算"},
    "dataset_tokens": {"en": "dataset tokens (200M)", "zh": "数据集 tokens（如 200M）"},
    "epochs": {"en": "epochs", "zh": "轮数"},
    "deadline": {"en": "deadline (48h)", "zh": "期限（如 48h）"},
    "budget": {"en": "budget (CNY)", "zh": "预算（元）"},
    "estimate": {"en": "Estimate", "zh": "估算"},
    "compare": {"en": "Compare GPUs", "zh": "对比 GPU"},
    "plan": {"en": "Plan", "zh": "规划"},
    "download_plan": {"en": "Download plan.json", "zh": "下载 plan.json"},
    "download_zip": {"en": "Download setup (zip)", "zh": "下载训练配置（zip）"},
    "working": {"en": "working…", "zh": "计算中…"},
    "answered": {"en": "answered in {ms} ms", "zh": "用时 {ms} 毫秒"},
    "network_error": {"en": "cannot reach the trainfit server ({detail})", "zh": "无法连接 trainfit 服务（{detail}）"},
    "server_error": {"en": "the server answered {status} without a message", "zh": "服务器返回 {status}，没有说明"},
}


def words(lang: str) -> dict[str, str]:
    return {k: v.get(lang) or v["en"] for k, v in UI_WORDS.items()}
