"""Labels of the web calculator's form (en / zh), keyed `ui_<label>`; sent to the page by /api/options under
their bare label. Registered in the one message table by `trainfit.i18n`."""

from __future__ import annotations

UI_MESSAGES: dict[str, dict[str, str]] = {
    "ui_title": {"en": "trainfit calculator", "zh": "trainfit 训练计算器"},
    "ui_model": {"en": "Model", "zh": "模型"},
    "ui_preset": {"en": "preset", "zh": "预设"},
    "ui_config": {"en": "or paste / upload a config.json", "zh": "或粘贴 / 上传 config.json"},
    "ui_gpu": {"en": "GPU", "zh": "GPU"},
    "ui_instance": {"en": "or instance", "zh": "或实例"},
    "ui_none": {"en": "(none)", "zh": "（无）"},
    "ui_method": {"en": "Method", "zh": "训练方法"},
    "ui_seq_len": {"en": "sequence length", "zh": "序列长度"},
    "ui_micro_batch": {"en": "micro-batch", "zh": "微批大小"},
    "ui_grad_accum": {"en": "gradient accumulation", "zh": "梯度累积"},
    "ui_gpus": {"en": "GPUs per node", "zh": "每节点 GPU 数"},
    "ui_zero": {"en": "ZeRO stage", "zh": "ZeRO 阶段"},
    "ui_grad_ckpt": {"en": "activation checkpointing", "zh": "激活检查点"},
    "ui_lora_rank": {"en": "LoRA rank", "zh": "LoRA 秩"},
    "ui_plan_inputs": {"en": "Plan: data, deadline, budget", "zh": "规划：数据量、期限、预算"},
    "ui_dataset_tokens": {"en": "dataset tokens (200M)", "zh": "数据集 tokens（如 200M）"},
    "ui_epochs": {"en": "epochs", "zh": "轮数"},
    "ui_deadline": {"en": "deadline (48h)", "zh": "期限（如 48h）"},
    "ui_budget": {"en": "budget (CNY)", "zh": "预算（元）"},
    "ui_estimate": {"en": "Estimate", "zh": "估算"},
    "ui_compare": {"en": "Compare GPUs", "zh": "对比 GPU"},
    "ui_plan": {"en": "Plan", "zh": "规划"},
    "ui_download_plan": {"en": "Download plan.json", "zh": "下载 plan.json"},
    "ui_download_zip": {"en": "Download setup (zip)", "zh": "下载训练配置（zip）"},
    "ui_working": {"en": "working…", "zh": "计算中…"},
    "ui_answered": {"en": "answered in {ms} ms", "zh": "用时 {ms} 毫秒"},
    "ui_network_error": {"en": "cannot reach the trainfit server ({detail})", "zh": "无法连接 trainfit 服务（{detail}）"},
    "ui_server_error": {"en": "the server answered {status} without a message", "zh": "服务器返回 {status}，没有说明"},
}
