"""Sentences of the estimate area (en / zh), made with `trainfit.i18n.say(key, **values)` where they are written and
rendered in either language from here: the message table, not a translation of the English. Registered in the one
message table by `trainfit.i18n`."""

from __future__ import annotations

SENTENCES: dict[str, dict[str, str]] = {
    # words inside sentences
    "es_w_first": {"en": "first", "zh": "第一个"},
    "es_w_last": {"en": "last", "zh": "最后一个"},
    # assumptions: the model-parallel layout (estimate/layout.py)
    "es_pp_stage_memory": {
        "en": "memory of the {which} pipeline stage of {layout} (estimate/parallel3d.py: Korthikanti et al. 2022 "
              "activations, Megatron-LM's states)",
        "zh": "显存按 {layout} 的{which}流水线阶段计（estimate/parallel3d.py：激活依 Korthikanti 等 2022，状态依 Megatron-LM）"},
    # assumptions: the lengths of the sequences (estimate/estimator.py _length_assumption)
    "es_len_packed": {"en": "sequences packed to exactly {n} tokens (no padding)",
                      "zh": "序列打包为恰好 {n} 个 token（无填充）"},
    "es_len_packed_from": {"en": "sequences packed to exactly {n} tokens (no padding); {src}",
                           "zh": "序列打包为恰好 {n} 个 token（无填充）；{src}"},
    "es_len_mean_from": {"en": "mean sample {avg} tokens from {src}", "zh": "样本平均 {avg} 个 token，来自 {src}"},
    "es_src_avg_len": {"en": "--avg-len", "zh": "--avg-len"},
    "es_len_padded_unknown": {
        "en": "samples padded ({layout}), lengths not given: memory and time at the longest, {n} tokens (time an upper "
              "bound; --avg-len or --data gives them)",
        "zh": "样本补齐（{layout}），未给出长度：显存与时间均按最长 {n} 个 token 计（时间为上限；--avg-len 或 --data 可给出）"},
    "es_len_padded_max": {
        "en": "every sample padded to {n} tokens (padded-max): memory and time at {n} tokens (mean sample {avg}; "
              "{waste:.0%} padding)",
        "zh": "每条样本补齐到 {n} 个 token（padded-max）：显存与时间按 {n} 个 token 计（样本平均 {avg}；填充占 {waste:.0%}）"},
    "es_len_padded_max_from": {
        "en": "every sample padded to {n} tokens (padded-max): memory and time at {n} tokens (mean sample {avg}; "
              "{waste:.0%} padding); lengths from {src}",
        "zh": "每条样本补齐到 {n} 个 token（padded-max）：显存与时间按 {n} 个 token 计（样本平均 {avg}；填充占 {waste:.0%}）"
              "；长度来自 {src}"},
    "es_len_varlen_unknown": {
        "en": "variable-length samples, mean length not given: memory and time at the longest, {n} tokens (time an "
              "upper bound; --avg-len or --data gives it)",
        "zh": "变长样本，未给出平均长度：显存与时间均按最长 {n} 个 token 计（时间为上限；--avg-len 或 --data 可给出）"},
    "es_len_varlen": {
        "en": "variable-length samples padded to the longest of each micro-batch: memory at the longest, {n} tokens; "
              "time at {p} tokens per sequence (mean sample {avg}; {waste:.0%} padding)",
        "zh": "变长样本，每个 micro-batch 填充到其中最长者：显存按最长 {n} 个 token 计；时间按每条序列 {p} 个 token 计"
              "（样本平均 {avg}；填充占 {waste:.0%}）"},
    "es_len_varlen_from": {
        "en": "variable-length samples padded to the longest of each micro-batch: memory at the longest, {n} tokens; "
              "time at {p} tokens per sequence (mean sample {avg}; {waste:.0%} padding); lengths from {src}",
        "zh": "变长样本，每个 micro-batch 填充到其中最长者：显存按最长 {n} 个 token 计；时间按每条序列 {p} 个 token 计"
              "（样本平均 {avg}；填充占 {waste:.0%}）；长度来自 {src}"},
    # assumptions: memory (estimate/memory_result.py, estimate/memory.py)
    "es_allocator_varlen": {
        "en": "allocator: shapes vary from step to step, {gib:.2f} GiB more reserved ({name} = {frac:g} of "
              "activations and logits)",
        "zh": "分配器：形状逐步变化，多保留 {gib:.2f} GiB（{name} = 激活与 logits 的 {frac:g}）"},
    "es_dpo_reference": {
        "en": "DPO keeps a frozen reference copy of the model (LoRA/QLoRA reuse the base with adapters off)",
        "zh": "DPO 保留一份冻结的参考模型副本（LoRA/QLoRA 关闭适配器后复用基座模型）"},
    "es_qlora_upcast": {
        "en": "QLoRA through PEFT: embeddings, norms and the output head are cast to fp32, which makes the hidden "
              "states and the MLP's intermediates fp32 too (bitsandbytes returns its input's dtype)",
        "zh": "经 PEFT 的 QLoRA：嵌入层、归一化层和输出头转为 fp32，隐藏状态与 MLP 中间结果也随之为 fp32"
              "（bitsandbytes 返回输入的数据类型）"},
    "es_paged_optimizer": {
        "en": "paged optimizer: its states live in CUDA managed memory, which PyTorch's memory counters do not see; "
              "they stay on the GPU while it has room and page out to host memory when it does not",
        "zh": "分页优化器：其状态位于 CUDA 托管内存中，PyTorch 的显存计数看不到；GPU 有空间时留在 GPU 上，没有空间时换出到主机内存"},
    # assumptions: the workload's standing settings (estimate/estimator.py _standing_assumptions)
    "es_lora_bf16": {"en": "LoRA rank {rank} on {targets}; adapters in bf16 (the stack trains in pure 16-bit)",
                     "zh": "LoRA 秩 {rank}，作用于 {targets}；适配器为 bf16（该训练栈全程 16 位训练）"},
    "es_lora_peft": {"en": "LoRA rank {rank} on {targets}; adapters in fp32 (PEFT default)",
                     "zh": "LoRA 秩 {rank}，作用于 {targets}；适配器为 fp32（PEFT 默认）"},
    "es_litgpt_code": {
        "en": "LitGPT's own model and loop (model_code litgpt): k and v repeated to every head, dropout 0.05 before "
              "each adapter, head and loss in 128-token bf16 chunks, the previous step's logits alive into the next "
              "forward",
        "zh": "LitGPT 自己的模型与训练循环（model_code litgpt）：k、v 复制到每个头，每个适配器前有 0.05 的 dropout，输出头与损失按 "
              "128 个 token 的 bf16 分块计算，上一步的 logits 存活到下一次前向"},
    "es_freeze": {"en": "freeze: only the last blocks train (freeze_trainable_layers)",
                  "zh": "冻结训练：只训练最后几层（freeze_trainable_layers）"},
    "es_cls_head": {"en": "classification head with {n} labels", "zh": "分类头，{n} 个类别"},
    "es_dpo_pairs": {"en": "DPO: micro-batch counts preference pairs (chosen + rejected = 2 sequences)",
                     "zh": "DPO：micro-batch 按偏好对计数（chosen + rejected = 2 条序列）"},
    "es_opt_fused": {
        "en": "optimizer_impl fused: torch {opt} run as one fused kernel (Hugging Face Trainer's default "
              "adamw_torch_fused, train.py)",
        "zh": "optimizer_impl fused：torch {opt} 以一个融合算子运行（Hugging Face Trainer 的默认 adamw_torch_fused，train.py 同）"},
    "es_opt_foreach": {
        "en": "optimizer_impl foreach: torch {opt} run as multi-tensor foreach ops (torch's own default on CUDA): one "
              "more state's worth of memory during the step",
        "zh": "optimizer_impl foreach：torch {opt} 以多张量 foreach 运算运行（CUDA 上 torch 自身的默认）：更新时多占一份状态大小的显存"},
    "es_opt_forloop": {
        "en": "optimizer_impl forloop: torch {opt} run as a loop over tensors: intermediates of the largest tensor "
              "during the step",
        "zh": "optimizer_impl forloop：torch {opt} 逐张量循环运行：更新时多占最大张量的中间结果"},
    "es_full_fp32_autocast": {"en": "full fine-tuning without DeepSpeed/FSDP keeps fp32 weights under autocast",
                              "zh": "不用 DeepSpeed/FSDP 的全参微调在 autocast 下保留 fp32 权重"},
    "es_pure_bf16": {"en": "pure bf16: weights, gradients and AdamW states in bf16",
                     "zh": "纯 bf16：权重、梯度和 AdamW 状态均为 bf16"},
    "es_seq_len_default": {"en": "sequence length {n} (the model's positions; default {default})",
                           "zh": "序列长度 {n}（模型的位置数；默认 {default}）"},
    # assumptions: the GPUs (api.py: an instance without --gpus; spec/cluster.py: their links)
    "es_whole_instance": {"en": "all {n} GPUs of {instance} used (data-parallel; --gpus N uses fewer)",
                          "zh": "使用 {instance} 的全部 {n} 张 GPU（数据并行；--gpus N 可用更少）"},
    "es_pcie_gen": {"en": "{gpu}: GPUs talk over PCIe Gen{gen} (no NVLink bridge assumed)",
                    "zh": "{gpu}：GPU 之间经 PCIe Gen{gen} 通信（假设无 NVLink 桥）"},
    "es_sxm_nvswitch": {"en": "{gpu}: SXM GPUs assumed on an NVSwitch/NVLink baseboard ({bw:g} GB/s NVLink)",
                        "zh": "{gpu}：假设 SXM GPU 位于 NVSwitch/NVLink 基板上（NVLink {bw:g} GB/s）"},
    "es_nvlink_undocumented": {"en": "{instance}: NVLink bandwidth not documented; PCIe assumed",
                               "zh": "{instance}：NVLink 带宽未见文档；按 PCIe 计"},
    "es_link_undocumented": {"en": "{instance}: GPU interconnect not documented; PCIe assumed (conservative)",
                             "zh": "{instance}：GPU 互联方式未见文档；按 PCIe 计（保守）"},
    "es_network_catalog": {
        "en": "no instance or --network-gbps given: between nodes the network of {instance} ({gbps:g} Gbit/s "
              "{rdma}), the fastest the catalog has for {gpu}",
        "zh": "未给出实例或 --network-gbps：节点之间按 {instance} 的网络计（{gbps:g} Gbit/s {rdma}），这是目录中 {gpu} 可用的最快网络"},
    "es_network_default": {"en": "no instance or --network-gbps given: {gbps:g} Gbit/s RDMA between nodes assumed",
                           "zh": "未给出实例或 --network-gbps：假设节点之间为 {gbps:g} Gbit/s RDMA"},
    # warnings (estimate/estimator.py _compatibility, _expert_warning; estimate/activations.py; validated.py)
    "es_experts_ep": {
        "en": "the routed experts alone take {gib:,.0f} GiB per GPU in 16 bit, more than a {gb:g} GB GPU: spread "
              "them with expert parallelism (--ep: each GPU holds a share of the experts, Megatron-Core) or shard "
              "them with ZeRO-3 / FSDP",
        "zh": "仅路由专家权重就需每张 GPU {gib:,.0f} GiB（16 位），超过 {gb:g} GB 的 GPU：请用专家并行（--ep：每张 GPU 持有部分专家，"
              "Megatron-Core）分布专家，或用 ZeRO-3 / FSDP 切分"},
    "es_experts_zero3": {
        "en": "the routed experts alone take {gib:,.0f} GiB per GPU in 16 bit, more than a {gb:g} GB GPU: shard them "
              "with ZeRO-3 / FSDP (expert parallelism is modelled for full training only)",
        "zh": "仅路由专家权重就需每张 GPU {gib:,.0f} GiB（16 位），超过 {gb:g} GB 的 GPU：请用 ZeRO-3 / FSDP 切分"
              "（专家并行仅对全参训练建模）"},
    "es_qlora_quant_storage": {
        "en": "QLoRA with ZeRO-3/FSDP needs bnb_4bit_quant_storage set to the compute dtype (bitsandbytes >= 0.43); "
              "generated configs set it",
        "zh": "ZeRO-3/FSDP 下的 QLoRA 需要把 bnb_4bit_quant_storage 设为计算精度（bitsandbytes >= 0.43）；生成的配置已设置"},
    "es_fp16_loss_scaling": {"en": "fp16 mixed precision needs loss scaling (the generated Trainer config enables it)",
                             "zh": "fp16 混合精度需要损失缩放（生成的配置已启用）"},
    "es_offload_host_ram": {"en": "CPU offload needs ~{need:,.0f} GiB of host RAM per node; {instance} has {ram:g} GiB",
                            "zh": "CPU 卸载每个节点约需 {need:,.0f} GiB 主机内存；{instance} 只有 {ram:g} GiB"},
    "es_qlora_offload": {"en": "offloading a 4-bit model is rarely worth it: the adapters' optimizer is tiny",
                         "zh": "卸载 4 位模型通常不值得：适配器的优化器状态很小"},
    "es_bert_flash": {"en": "BERT-style models have no FlashAttention-2 path in transformers; SDPA is used",
                      "zh": "transformers 中 BERT 类模型没有 FlashAttention-2 实现；改用 SDPA"},
    "es_softcap_eager": {
        "en": "the model soft-caps its attention logits, which SDPA cannot do: transformers runs its eager attention "
              "instead (the default for such a model; an explicit attn_implementation='sdpa' is refused), with s x s "
              "scores per head saved for backward; estimated as eager. FlashAttention-2 soft-caps in its kernel "
              "(--attention flash)",
        "zh": "该模型对注意力 logits 做软截断（soft-cap），SDPA 做不到：transformers 改用 eager 注意力（此类模型的默认；显式指定 "
              "attn_implementation='sdpa' 会被拒绝），反向需保存每个头 s × s 的分数；按 eager 估算。FlashAttention-2 在其内核中做软截断"
              "（--attention flash）"},
    "es_unvalidated_gpu": {
        "en": "no published throughput measurement on {gpu} is in trainfit's validation data: the speed here is "
              "modelled from its datasheet and the fits on other GPUs, not checked against a run on it "
              "(`trainfit bench` measures it on your machine)",
        "zh": "trainfit 的验证数据中没有 {gpu} 上公开发表的吞吐实测：此处的速度由其数据手册和在其他 GPU 上的拟合推算，"
              "未经该 GPU 上的运行核对（`trainfit bench` 可在你的机器上测量）"},
    "es_large_error_gpu": {
        "en": "trainfit's throughput error on the {n} published runs on {gpu} in its validation data is {mape:.0%} "
              "(MAPE; data/validation): read this speed with that in mind, or measure it with `trainfit bench`",
        "zh": "trainfit 在其验证数据中 {gpu} 上的 {n} 个公开运行的吞吐误差为 {mape:.0%}（MAPE；data/validation）：请据此看待此速度，"
              "或用 `trainfit bench` 测量"},
    # why a configuration does not fit (advise.overflow_terms) and what a candidate gave up (advise._dropped)
    "es_over_states": {
        "en": "model states (weights {w:.1f} + gradients {g:.1f} + optimizer {o:.1f} GiB) alone exceed the "
              "{usable:.1f} GiB usable",
        "zh": "模型状态（权重 {w:.1f} + 梯度 {g:.1f} + 优化器状态 {o:.1f} GiB）本身就超过可用的 {usable:.1f} GiB"},
    "es_over_acts": {
        "en": "activations {a:.1f} GiB and logits {l:.1f} GiB do not fit in what the model states leave "
              "({rest:.1f} GiB)",
        "zh": "激活值 {a:.1f} GiB 和 logits {l:.1f} GiB 放不进模型状态之外剩下的 {rest:.1f} GiB"},
    "es_over_by": {"en": "over by {over:.1f} GiB ({need:.1f} needed, {usable:.1f} usable)",
                   "zh": "超出 {over:.1f} GiB（需要 {need:.1f}，可用 {usable:.1f}）"},
    "es_without": {"en": "{flags} (without {gone})", "zh": "{flags}（去掉 {gone}）"},
    # how a workload was made legal on a GPU (estimate/estimator.py adapt_to_gpu)
    "es_adapt_fp16": {"en": "--precision fp16 (no bf16 on this GPU)", "zh": "--precision fp16（此 GPU 不支持 bf16）"},
    "es_adapt_fp8": {"en": "--precision {precision} (no FP8 on this GPU)",
                     "zh": "--precision {precision}（此 GPU 不支持 FP8）"},
    "es_adapt_sdpa": {"en": "--attention sdpa (FlashAttention-2 needs Ampere+)",
                      "zh": "--attention sdpa（FlashAttention-2 需要 Ampere 或更新的 GPU）"},
    # the workload of a plan (search/workload.py): padding and the tokens processed
    "es_pad_pow2": {"en": "sequences padded to {seq} tokens (next power of two above --avg-len {avg:g})",
                    "zh": "序列填充到 {seq} 个 token（大于 --avg-len {avg:g} 的下一个 2 的幂）"},
    "es_truncated": {"en": "samples longer than {seq} tokens are truncated", "zh": "超过 {seq} 个 token 的样本会被截断"},
    "es_samples_padded": {
        "en": "{samples:,.0f} samples x {per_sample:,.0f} tokens ({layout}: time at the padded length) x {epochs:g} "
              "epochs",
        "zh": "{samples:,.0f} 个样本 × {per_sample:,.0f} 个 token（{layout}：时间按补齐后的长度计）× {epochs:g} 轮"},
    "es_tokens_unknown_len": {
        "en": "{tokens:,.0f} tokens in {seq}-token sequences ({layout}, sample lengths not given: time as if every "
              "sequence were full) x {epochs:g} epochs",
        "zh": "{tokens:,.0f} 个 token，{seq} token 的序列（{layout}，未给出样本长度：时间按每条序列都满计）× {epochs:g} 轮"},
    # where the lengths of variable-length samples come from (spec/lengths.py), inside "lengths from ..."
    "es_len_data": {"en": "--data {path}: {n} samples, longest {longest} ({how})",
                    "zh": "--data {path}：{n} 个样本，最长 {longest}（{how}）"},
    "es_tok_model": {"en": "the model's tokenizer", "zh": "模型自己的分词器"},
    "es_tok_whitespace": {"en": "whitespace words x {per_word:.2f}, CJK characters x {per_cjk:g}, no tokenizer at hand",
                          "zh": "按空白分隔的词数 × {per_word:.2f}、CJK 字符数 × {per_cjk:g} 计（手头没有分词器）"},
    "es_len_avg_exp": {
        "en": "--avg-len (exponential lengths assumed: a micro-batch of b is padded to about avg x (1 + 1/2 + ... + "
              "1/b))",
        "zh": "--avg-len（假设长度呈指数分布：b 条样本的 micro-batch 约填充到 avg × (1 + 1/2 + ... + 1/b)）"},
}
