"""Sentences of the plan area (en / zh), made with `trainfit.i18n.say(key, **values)` where they are written and
rendered in either language from here: the message table, not a translation of the English. Registered in the one
message table by `trainfit.i18n`."""

from __future__ import annotations

SENTENCES: dict[str, dict[str, str]] = {
    # a training stack's own scripts (spec/training.py stack_refuses): plan's rejection rule and estimate's warning
    "pl_stack_warning": {"en": "{rule}: `plan --framework {framework}` does not offer this layout",
                         "zh": "{rule}：`plan --framework {framework}` 不提供此布局"},
    "pl_litgpt_one_device": {"en": "LitGPT's finetune scripts run one device without DeepSpeed, FSDP or offload",
                             "zh": "LitGPT 的微调脚本单卡运行时不用 DeepSpeed、FSDP 或卸载"},
    "pl_litgpt_one_device_ckpt": {"en": "LitGPT's finetune scripts do not checkpoint activations on one device",
                                  "zh": "LitGPT 的微调脚本单卡运行时不做激活检查点"},
    "pl_litgpt_qlora": {"en": "LitGPT's finetune scripts refuse --quantize (QLoRA) on more than one device",
                        "zh": "LitGPT 的微调脚本在多卡上拒绝 --quantize（QLoRA）"},
    "pl_litgpt_fsdp": {"en": "LitGPT's finetune scripts run several devices under FSDP full shard, without DeepSpeed "
                             "or offload",
                       "zh": "LitGPT 的微调脚本多卡运行时用 FSDP full shard，不用 DeepSpeed 或卸载"},
    "pl_litgpt_fsdp_ckpt": {"en": "LitGPT's finetune scripts checkpoint every block under FSDP",
                            "zh": "LitGPT 的微调脚本在 FSDP 下对每个块做检查点"},
    "pl_megatron_full": {"en": "Megatron-LM trains full models (LoRA and QLoRA are not in Megatron-LM)",
                         "zh": "Megatron-LM 只做全参训练（Megatron-LM 中没有 LoRA 与 QLoRA）"},
    "pl_megatron_shards": {"en": "Megatron-LM shards at most the optimizer states (its distributed optimizer), without "
                                 "offload",
                           "zh": "Megatron-LM 至多切分优化器状态（其分布式优化器），不做卸载"},
    # plan: rules that set a layout aside (search/run.py Reason.INCOMPATIBLE): spec/training.py combination_problem
    # and estimate/estimator.py's checks (raised as SpecError(say(...)), read back by errors.sentence_of: estimate's
    # error and the search's rule in the same words)
    "pl_rule_oib_deepspeed": {"en": "optimizer-in-backward is a PyTorch/torchtune feature: not with DeepSpeed ZeRO",
                              "zh": "optimizer-in-backward 是 PyTorch/torchtune 的功能：不能与 DeepSpeed ZeRO 同用"},
    "pl_rule_oib_ddp": {"en": "optimizer-in-backward steps each gradient before DDP could all-reduce it: use one GPU "
                              "or FSDP",
                        "zh": "optimizer-in-backward 在 DDP 对梯度做 all-reduce 之前就已更新参数：请用单张 GPU 或 FSDP"},
    "pl_rule_paged_deepspeed": {"en": "paged optimizers are bitsandbytes optimizers: DeepSpeed ZeRO runs its own",
                                "zh": "分页优化器是 bitsandbytes 的优化器：DeepSpeed ZeRO 运行它自己的优化器"},
    "pl_rule_no_bf16": {"en": "{gpu} has no bf16 support (compute capability {cc:g}); use --precision fp16",
                        "zh": "{gpu} 不支持 bf16（计算能力 {cc:g}）；请用 --precision fp16"},
    "pl_rule_no_fp8": {"en": "{gpu} has no FP8 tensor cores (FP8 needs Ada or Hopper); use --precision bf16",
                       "zh": "{gpu} 没有 FP8 张量核心（FP8 需要 Ada 或 Hopper）；请用 --precision bf16"},
    "pl_rule_flash": {"en": "FlashAttention-2 needs compute capability 8.0+ ({gpu} is {cc:g}); use --attention sdpa "
                            "(memory-efficient kernel)",
                      "zh": "FlashAttention-2 需要计算能力 8.0 以上（{gpu} 为 {cc:g}）；请用 --attention sdpa"
                            "（memory-efficient 内核）"},
    "pl_rule_adamw8bit_offload": {"en": "8-bit AdamW (bitsandbytes) runs on the GPU and cannot be offloaded; use "
                                        "--optimizer adamw with --offload",
                                  "zh": "8 位 AdamW（bitsandbytes）在 GPU 上运行，无法卸载；要卸载请用 --optimizer adamw"},
    "pl_rule_fsdp_offload": {"en": "FSDP offloads parameters and gradients together: use --offload all",
                             "zh": "FSDP 会同时卸载参数和梯度：请用 --offload all"},
    "pl_rule_recompute_modules": {"en": "Megatron-Core's recompute modules ({policy}) run on its own layouts: give "
                                        "tp, pp, cp or ep above 1 without --fsdp, or use --selective-ac attention",
                                  "zh": "Megatron-Core 的重算模块（{policy}）只在其自身的并行布局上运行：请给出大于 1 的 "
                                        "tp、pp、cp 或 ep（不用 --fsdp），或改用 --selective-ac attention"},
    "pl_rule_recompute_mla": {"en": "mla_up_proj recomputes multi-latent attention's up projections, which {model} "
                                    "does not have (Megatron-Core refuses it too)",
                              "zh": "mla_up_proj 重算多头潜在注意力（MLA）的上投影，而 {model} 没有 MLA（Megatron-Core "
                                    "同样会拒绝）"},
    "pl_rule_fsdp_fp16": {"en": "trainfit's FSDP setups train in bf16 or fp32; on GPUs without bf16 (V100, T4) use "
                                "DeepSpeed ZeRO (--zero 1/2/3), which scales fp16 losses",
                          "zh": "trainfit 的 FSDP 配置只用 bf16 或 fp32 训练；在不支持 bf16 的 GPU（V100、T4）上请用 "
                                "DeepSpeed ZeRO（--zero 1/2/3），它会对 fp16 损失做缩放"},
    "pl_rule_qlora_fsdp_offload": {"en": "QLoRA with FSDP CPU offload is not supported by bitsandbytes",
                                   "zh": "bitsandbytes 不支持 QLoRA 与 FSDP CPU 卸载同用"},
    # plan: workload notes (search/workload.py)
    "pl_provider_from_gpu": {"en": "--gpu {gpus}: Alibaba Cloud (the default provider) does not rent it; searched the "
                                    "providers that do: {providers} (prices in USD; --provider to choose)",
                             "zh": "--gpu {gpus}：默认云厂商阿里云不提供该 GPU；已在提供它的云厂商中搜索：{providers}"
                                   "（美元计价；可用 --provider 指定）"},
    "pl_global_batch_finetune": {"en": "global batch {gb} sequences per optimizer step (fine-tuning default; "
                                       "--global-batch)",
                                 "zh": "每个优化器步的全局批量为 {gb} 条序列（微调默认值；--global-batch）"},
    "pl_global_batch_pretrain": {"en": "global batch {gb} sequences (~1M tokens) per step (pre-training default; "
                                       "--global-batch)",
                                 "zh": "每步全局批量 {gb} 条序列（约 1M tokens，预训练默认值；--global-batch）"},
    "pl_tokens_packed": {"en": "{tokens:,.0f} tokens packed into {seq}-token sequences x {epochs:g} epochs",
                         "zh": "{tokens:,.0f} 个 token 打包为 {seq} token 的序列 × {epochs:g} 轮"},
    "pl_seq_capped": {"en": "sequence length capped at the model's {positions} positions",
                      "zh": "序列长度限制为模型的 {positions} 个位置"},
    # plan: why lines (plan.py why)
    "pl_why_bottleneck": {"en": "bottleneck: {bottleneck}; {tps:,.0f} tokens/s ({tps_gpu:,.0f} per GPU), MFU {mfu:.0%}",
                          "zh": "瓶颈：{bottleneck}；{tps:,.0f} tokens/s（每卡 {tps_gpu:,.0f}），MFU {mfu:.0%}"},
    "pl_w_compute": {"en": "compute", "zh": "算力"},
    "pl_w_memory": {"en": "memory", "zh": "显存带宽"},
    "pl_w_communication": {"en": "communication", "zh": "通信"},
    "pl_w_offload": {"en": "offload", "zh": "卸载"},
    "pl_w_overhead": {"en": "overhead", "zh": "开销"},
    "pl_w_pipeline": {"en": "pipeline", "zh": "流水线气泡"},
    "pl_w_optimizer": {"en": "optimizer", "zh": "优化器"},
    "pl_why_memory": {"en": "memory: {used:,.1f} of {usable:,.1f} GiB per GPU ({headroom:,.1f} GiB headroom), "
                            "micro-batch {mb} x grad-accum {ga}",
                      "zh": "显存：每张 GPU {used:,.1f} / {usable:,.1f} GiB（余量 {headroom:,.1f} GiB），micro-batch {mb} × "
                            "梯度累积 {ga}"},
    "pl_why_memory_risk": {"en": "memory: {used:,.1f} of {usable:,.1f} GiB per GPU ({headroom:,.1f} GiB headroom, "
                                 "{risk:.0%} out-of-memory risk), micro-batch {mb} x grad-accum {ga}",
                           "zh": "显存：每张 GPU {used:,.1f} / {usable:,.1f} GiB（余量 {headroom:,.1f} GiB，显存溢出风险 "
                                 "{risk:.0%}），micro-batch {mb} × 梯度累积 {ga}"},
    "pl_why_host_ram": {"en": "host RAM: {loading:,.0f} of {instance:,.0f} GiB per node to load the model",
                        "zh": "主机内存：加载模型需要每节点 {loading:,.0f} / {instance:,.0f} GiB"},
    "pl_why_host_ram_offload": {"en": "host RAM: {loading:,.0f} of {instance:,.0f} GiB per node to load the model "
                                      "({offload:,.0f} GiB more for CPU offload)",
                                "zh": "主机内存：加载模型需要每节点 {loading:,.0f} / {instance:,.0f} GiB（CPU 卸载另需 "
                                      "{offload:,.0f} GiB）"},
    "pl_why_layout": {"en": "layout: tensor parallel {tp} inside a node x {pp} pipeline stage(s) x context parallel "
                            "{cp} x {dp} data-parallel copies; pipeline bubble {bubble:.0%}, exposed tensor-parallel "
                            "communication {tp_comm:.0%} of each step",
                      "zh": "并行布局：节点内张量并行 {tp} x {pp} 个流水线阶段 x 上下文并行 {cp} x {dp} 份数据并行副本；"
                            "流水线气泡占每步 {bubble:.0%}，未掩盖的张量并行通信占 {tp_comm:.0%}"},
    "pl_why_multi_node": {"en": "multi-node: {nodes} nodes over {link} ({gbps:,.0f} Gbit/s); exposed communication "
                                "{comm:.0%} of each step",
                          "zh": "多机：{nodes} 个节点经 {link}（{gbps:,.0f} Gbit/s）；每步有 {comm:.0%} 通信未被掩盖"},
    "pl_why_outgrows": {"en": "the job outgrows one machine: it does not fit on a single node of this type",
                        "zh": "任务超出单机：此类型的单个节点放不下"},
    "pl_why_one_node": {"en": "one node would take {hours:,.1f} h", "zh": "单节点需要 {hours:,.1f} 小时"},
    "pl_why_comm": {"en": "communication: {comm:.0%} of each step exposed", "zh": "通信：每步有 {comm:.0%} 未被计算掩盖"},
    "pl_why_runner_up": {"en": "runner-up: {desc} ({more} more)", "zh": "次优：{desc}（多 {more}）"},
    "pl_why_spot": {"en": "spot: can be reclaimed; expected {n:,.1f} interruptions (MTBI {mtbi:,.1f} h), checkpoint "
                          "every {every:,.0f} min (Young/Daly sqrt(2 C M), C = {write:,.1f} s): {lost:,.2f} h of lost "
                          "work, restarts and checkpoints",
                    "zh": "抢占式实例：可能被随时回收；预计中断 {n:,.1f} 次（平均间隔 {mtbi:,.1f} 小时），每 {every:,.0f} "
                          "分钟保存一次检查点（Young/Daly sqrt(2 C M)，C = {write:,.1f} 秒）：损失的工作、重启和检查点共 "
                          "{lost:,.2f} 小时"},
    "pl_why_monthly": {"en": "monthly subscription: {months:,.0f} month(s) cost less than pay-as-you-go for "
                             "{hours:,.0f} h",
                       "zh": "包月：{months:,.0f} 个月比按量付费 {hours:,.0f} 小时更便宜"},
    "pl_why_caution": {"en": "caution: {flags}", "zh": "注意：{flags}"},
    "pl_caution_two": {"en": "{first}, {second}", "zh": "{first}，{second}"},
    "pl_caution_price": {"en": "price unverified", "zh": "价格未核实"},
    "pl_caution_gpu": {"en": "GPU model inferred by third parties", "zh": "GPU 型号为第三方推断"},
    # a plan option (plan._describe): only its GPU share is words
    "pl_describe": {"en": "{count}{used}, {method}, {layout}: {hours:,.1f} h, {cost}",
                    "zh": "{count}{used}, {method}, {layout}: {hours:,.1f} h, {cost}"},
    "pl_gpus_used": {"en": " ({n} of {of} GPUs)", "zh": "（使用 {of} 张中的 {n} 张 GPU）"},
    # plan: the named values a plan assumes (efficiency.yaml), the billing and cost lines (report/plan.py)
    "pl_named_value": {"en": "{name} = {value:g} {unit}: {description}",
                       "zh": "{name} = {value:g} {unit}：{description}"},
    "pl_spot_value": {"en": "{name} = {value:g} {unit} ({basis})", "zh": "{name} = {value:g} {unit}（{basis}）"},
    "pl_unit_h": {"en": "h", "zh": "小时"},
    "pl_unit_fraction": {"en": "fraction", "zh": "比例"},
    "pl_billing": {"en": "billing: {basis}", "zh": "计费：{basis}"},
    "pl_cost": {"en": "cost = price per hour x instances x billed hours; prices are catalog snapshots (see price_date)",
                "zh": "费用 = 每小时价格 × 实例数 × 计费小时；价格为目录快照（见 price_date）"},
    "pl_spot_assumption": {"en": "spot instances can be reclaimed at any time; checkpoint interval sqrt(2 x checkpoint "
                                 "time x MTBI) (Young 1974), each interruption costs the work since the last "
                                 "checkpoint plus a restart",
                           "zh": "抢占式实例可能被随时回收；检查点间隔 sqrt(2 × 检查点时间 × MTBI)（Young 1974），每次回收"
                                 "损失上次检查点以来的工作并需重启"},
    "pl_risk_kept": {"en": "memory: an option is kept when its out-of-memory risk is at most {limit:.0%} "
                           "(--max-oom-risk), the risk read from leave-one-source-out residuals of peak memory "
                           "(trainfit calibrate --cv source), {band}",
                     "zh": "显存：显存溢出风险不超过 {limit:.0%}（--max-oom-risk）的方案才保留；风险取自峰值显存的留一来源"
                           "交叉验证残差（trainfit calibrate --cv source），{band}"},
    "pl_band_known": {"en": "the band of {framework} (--framework)", "zh": "取 {framework} 的区间（--framework）"},
    "pl_band_unseen": {"en": "the wider band of a training stack the calibration has not seen (--framework NAME "
                             "narrows it)",
                       "zh": "按校准未见过的训练框架取较宽的区间（--framework NAME 可收窄）"},
    # plan: host RAM (the counted reason is typed: search/reasons.py HOST_RAM)
    "pl_ex_host_ram": {"en": "loading the model (and CPU offload) needs {need:,.0f} GiB of host RAM per node, the "
                             "instance has {have:,.0f} GiB",
                       "zh": "加载模型（及 CPU 卸载）需要每节点 {need:,.0f} GiB 主机内存，实例只有 {have:,.0f} GiB"},
    "pl_bc_host_ram": {"en": "options fit in GPU memory, but loading the model (and CPU offload) needs more host RAM "
                             "than their instances have (closest: {need:,.0f} GiB per node needed, {have:,.0f} GiB "
                             "available)",
                       "zh": "方案能放进显存，但加载模型（及 CPU 卸载）所需主机内存超过实例内存（最接近的：每节点需要 "
                             "{need:,.0f} GiB，实有 {have:,.0f} GiB）"},
    # plan: the binding constraint when nothing meets the request (plan.binding_constraint), and what would relax it
    "pl_bc_catalog": {"en": "no priced instance matches the request's provider, GPU, region and pricing filters",
                      "zh": "没有带价格的实例符合请求中云厂商、GPU、地域和计费方式的筛选条件"},
    "pl_bc_risk": {"en": "options fit by the estimate but each runs out of memory with more than {limit:.0%} "
                         "probability; least risky: {risky}",
                   "zh": "按估算能放下的方案，显存溢出的概率都超过 {limit:.0%}；风险最低的：{risky}"},
    "pl_bc_memory": {"en": "does not fit on any offered GPU even with ZeRO-3 + CPU offload on up to {nodes} nodes "
                           "(smallest need {need:,.1f} GiB per GPU)",
                     "zh": "即使用 ZeRO-3 + CPU 卸载、最多 {nodes} 个节点，在任何提供的 GPU 上都放不下（最小需求为每张 GPU "
                           "{need:,.1f} GiB）"},
    "pl_bc_memory_given": {"en": "does not fit on any offered GPU with the layout given ({flags}; smallest need "
                                 "{need:,.1f} GiB per GPU)",
                           "zh": "按给定的布局（{flags}）在任何提供的 GPU 上都放不下（最小需求为每张 GPU {need:,.1f} GiB）"},
    "pl_bc_given_layout": {"en": "no offered instance runs the layout given ({flags})",
                           "zh": "没有提供的实例能运行给定的布局（{flags}）"},
    "pl_bc_deadline": {"en": "no plan finishes within {hours:,.1f} h; fastest: {desc}",
                       "zh": "没有方案能在 {hours:,.1f} 小时内完成；最快的：{desc}"},
    "pl_bc_budget": {"en": "no plan costs {budget} or less; cheapest: {desc}",
                     "zh": "没有费用不超过 {budget} 的方案；最便宜的：{desc}"},
    "pl_bc_both": {"en": "meets the deadline with {desc}: over budget by {over}", "zh": "满足截止时间的方案 {desc}：超出预算 {over}"},
    "pl_bc_duration": {"en": "the fastest option takes {years:,.0f} years ({hours:,.0f} h), more than ten: {desc}",
                       "zh": "最快的方案也要 {years:,.0f} 年（{hours:,.0f} 小时），超过十年：{desc}"},
    "pl_relax_fewer_tokens": {"en": "fewer --dataset-tokens or --epochs", "zh": "更少的 --dataset-tokens 或 --epochs"},
    "pl_relax_leave_out": {"en": "leave out {flags} (the search then chooses)", "zh": "去掉 {flags}（由搜索来选择）"},
    "pl_relax_other_filters": {"en": "other --gpu / --instance filters", "zh": "换用其他 --gpu / --instance 筛选"},
    "pl_relax_drop_filters": {"en": "drop --gpu / --region filters", "zh": "去掉 --gpu / --region 筛选"},
    "pl_relax_shorter_seq": {"en": "a shorter --seq-len", "zh": "更短的 --seq-len"},
    "pl_relax_larger_gpus": {"en": "{flag} for larger GPUs", "zh": "{flag}（显存更大的 GPU）"},
    "pl_relax_more_ram": {"en": "{flag} for instances with more RAM", "zh": "{flag}（内存更大的实例）"},
    "pl_relax_more_nodes_zero3": {"en": "more nodes (--max-nodes): ZeRO-3 partitions shrink with the GPU count",
                                  "zh": "更多节点（--max-nodes）：ZeRO-3 的分片随 GPU 数增加而变小"},
    "pl_relax_more_nodes": {"en": "more nodes (--max-nodes)", "zh": "更多节点（--max-nodes）"},
    "pl_relax_lora_or_qlora": {"en": "--method lora or qlora", "zh": "--method lora 或 qlora"},
    "pl_relax_deadline_at_least": {"en": "a deadline of at least {hours:,.1f} h", "zh": "截止时间至少 {hours:,.1f} 小时"},
    "pl_relax_deadline": {"en": "a deadline of {hours:,.1f} h", "zh": "截止时间 {hours:,.1f} 小时"},
    "pl_relax_budget_at_least": {"en": "a budget of at least {cost}", "zh": "预算至少 {cost}"},
    "pl_relax_budget": {"en": "a budget of {cost}", "zh": "预算 {cost}"},
    # plan: why each other GPU lost (plan.excluded_gpus) and the layouts rejected for risk (plan.risky_text)
    "pl_ex_risky": {"en": "rejected for out-of-memory risk: {risky}", "zh": "因显存溢出风险而排除：{risky}"},
    "pl_ex_layout": {"en": "no option with the layout given ({flags})", "zh": "没有符合给定布局（{flags}）的方案"},
    "pl_ex_no_fit": {"en": "does not fit even with ZeRO-3 + CPU offload on the offered GPU counts",
                     "zh": "即使用 ZeRO-3 + CPU 卸载，在提供的 GPU 数下也放不下"},
    "pl_ex_no_fit_need": {"en": "does not fit even with ZeRO-3 + CPU offload on the offered GPU counts (needs "
                                "{need:,.1f} of {usable:,.1f} GiB)",
                          "zh": "即使用 ZeRO-3 + CPU 卸载，在提供的 GPU 数下也放不下（需要 {need:,.1f} / {usable:,.1f} GiB）"},
    "pl_ex_too_slow": {"en": "too slow for the deadline (fastest {hours:,.1f} h with {desc})",
                       "zh": "赶不上截止时间（最快 {hours:,.1f} 小时：{desc}）"},
    "pl_ex_over_budget": {"en": "over budget (cheapest meeting the deadline: {desc})",
                          "zh": "超出预算（满足截止时间的最便宜方案：{desc}）"},
    "pl_ex_loses": {"en": "meets the constraints but loses on {objective} ({versus}): {desc}",
                    "zh": "满足约束，但按“{objective}”排名落后（{versus}）：{desc}"},
    "pl_w_cheapest": {"en": "cheapest", "zh": "最便宜"},
    "pl_w_fastest": {"en": "fastest", "zh": "最快"},
    "pl_risky": {"en": "{where}, {method}, {strategy}, micro-batch {mb}: {need:,.1f} of {usable:,.1f} GiB predicted, "
                       "{risk:.0%} out-of-memory risk{safe}",
                 "zh": "{where}，{method}，{strategy}，micro-batch {mb}：预测 {need:,.1f} / {usable:,.1f} GiB，显存溢出风险 "
                       "{risk:.0%}{safe}"},
    "pl_risky_nodes": {"en": "{gpus} x {gpu} on {nodes} nodes", "zh": "{gpus} x {gpu}（{nodes} 个节点）"},
    "pl_risky_safe": {"en": "; safe with {less:,.1f} GiB less peak memory (a shorter --seq-len, qlora) or with "
                            "--max-oom-risk {limit:.2f}",
                      "zh": "；峰值显存再少 {less:,.1f} GiB（更短的 --seq-len、qlora）或 --max-oom-risk {limit:.2f} 时可保留"},
}
