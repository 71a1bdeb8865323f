"""Chinese for the sentences the estimator and the search write in English (assumptions, warnings, the plan's "why"
lines and rejection reasons): each is matched whole by a pattern and rewritten with the values it carries. A
sentence no pattern matches is shown in English; tests/test_i18n.py generates the sentences over many
configurations and fails when one has no Chinese form."""

from __future__ import annotations

import re

_N = r"[0-9][0-9,.]*"
# (pattern matched against the whole sentence, Chinese template filled with the pattern's named groups)
_ZH: list[tuple[str, str]] = [
    # validate: why a measured value is excluded (validate.compare), and the notes of its report
    (rf"the run's GPUs were held at a (?P<w>{_N}) W power limit, below the (?P<g>.+?)'s (?P<t>{_N}) W the catalog's "
     r"peaks are for; no source gives the clock that limit leaves: a GPU the catalog does not carry",
     "该运行的 GPU 被限制在 {w} W 的功耗上限，低于目录中 {g} 峰值所对应的 {t} W；没有来源给出该上限下的频率：这是目录未收录的 GPU"),
    (rf"measured (?P<m>{_N}) GiB is below the (?P<f>{_N}) GiB of weights and optimizer states the stated setup keeps "
     r"on each GPU: the run cannot have used the stated setup",
     "实测 {m} GiB 低于所述配置在每张 GPU 上常驻的 {f} GiB 权重与优化器状态：该运行不可能用的是所述配置"),
    (rf"measured (?P<v>{_N}) tokens/s per GPU needs at least (?P<n>{_N}) TFLOP/s of matmuls per GPU \(causal attention "
     rf"at half its work\), above the (?P<g>.+?)'s dense (?P<d>\w+) peak of (?P<p>{_N}): the figure cannot be one GPU's running "
     r"the stated setup",
     "实测每张 GPU {v} tokens/s 至少需要每张 GPU {n} TFLOP/s 的矩阵乘（因果注意力按其一半的计算量计），高于 {g} 的 {d} 稠密峰值 {p}：该数字不可能是"
     "单张 GPU 运行所述配置的结果"),
    (rf"measured (?P<v>{_N}) s per step needs at least (?P<n>{_N}) TFLOP/s of matmuls per GPU \(causal attention "
     rf"at half its work\), above the (?P<g>.+?)'s dense (?P<d>\w+) peak of (?P<p>{_N}): the figure cannot be one GPU's running "
     r"the stated setup",
     "实测每步 {v} 秒至少需要每张 GPU {n} TFLOP/s 的矩阵乘（因果注意力按其一半的计算量计），高于 {g} 的 {d} 稠密峰值 {p}：该数字不可能是"
     "单张 GPU 运行所述配置的结果"),
    (r"memory cases without a memory_kind are compared with predicted (?P<k>\w+) memory",
     "没有 memory_kind 的显存案例与预测的 {k} 显存比较"),
    (r"trace cases \(source 'trace': allocations of a traced step\) are compared with the predicted allocated peak, "
     r"without allocator cache or CUDA context; their statistics are under 'trace', apart from the measured runs', "
     r"and beside them in memory_by_source_kind",
     "trace 案例（来源 trace：追踪一步训练得到的分配量）与预测的 allocated 峰值比较，不含分配器缓存和 CUDA 上下文；其统计在 "
     "'trace' 下，与实测运行分开，并在 memory_by_source_kind 中并列"),
    (r"a measured peak below the weights and optimizer states its stated setup keeps resident is listed under "
     r"'excluded' and left out of the memory statistics \(--keep-inconsistent counts it\)",
     "低于所述配置常驻的权重与优化器状态的实测峰值列在 'excluded' 下，不计入显存统计（--keep-inconsistent 会计入）"),
    (r"a measured speed whose matmuls \(a causal model's attention at half its work\) would need more than the GPU's "
     r"dense peak is listed under 'excluded' and left out of the throughput and MFU statistics \(--keep-inconsistent "
     r"counts it\)",
     "其矩阵乘（因果模型的注意力按一半计算量计）需要超过 GPU 稠密峰值的实测速度列在 'excluded' 下，不计入吞吐与 MFU "
     "统计（--keep-inconsistent 会计入）"),
    (r"a speed measured on GPUs held under a power limit below the catalog GPU's TDP \(the case's notes state it\) is "
     r"listed under 'excluded' and left out of the throughput and MFU statistics; its memory is compared",
     "在低于目录 GPU TDP 的功耗上限下测得的速度（案例注释中写明）列在 'excluded' 下，不计入吞吐与 MFU 统计；其显存照常比较"),
    (r"throughput: tokens/s per GPU where measured, else step time; variable-length runs are not compared on "
     r"throughput", "吞吐：有实测每 GPU tokens/s 时用它，否则用每步时间；变长数据的运行不比较吞吐"),
    (r"errors are absolute percentage errors as fractions \(0\.1 = 10%\)", "误差为绝对百分比误差，以小数表示（0.1 = 10%）"),
    # serving validate (serving/validate.py): why a TTFT is excluded, and the report's notes
    (rf"measured (?P<t>{_N}) ms is below the (?P<f>{_N}) ms a (?P<n>{_N})-token prefill takes at the GPU's dense peak: "
     r"not a full prefill \(prefix cache\?\)",
     "实测 {t} ms 低于 {n} token 的 prefill 在 GPU 稠密峰值下所需的 {f} ms：不是完整的 prefill（前缀缓存？）"),
    (r"kv_capacity: KV-cache tokens where measured, else max concurrency, else the KV cache's GiB",
     "kv_capacity：有实测 KV 缓存 token 数时用它，否则用最大并发，否则用 KV 缓存的 GiB"),
    (r"a case without engine_version is predicted with its engine_version_inferred \(stated in the case\), else the "
     r"engine's default version", "没有 engine_version 的案例按其 engine_version_inferred（案例中写明）预测，否则按引擎的默认版本"),
    (r"throughput: output tokens/s where measured, else total tokens/s, else requests/s",
     "吞吐：有实测输出 tokens/s 时用它，否则用总 tokens/s，否则用 requests/s"),
    (r"GPTQ 8-bit checkpoints are predicted as int8 weights", "GPTQ 8 位权重按 int8 权重预测"),
    (r"serving\.sampler \(flashinfer \| pytorch\), serving\.custom_all_reduce and serving\.block_size are read where a "
     r"case states them \(fields beyond SERVING_SCHEMA\.md, which readers may add\)",
     "serving.sampler（flashinfer | pytorch）、serving.custom_all_reduce 和 serving.block_size 在案例写明时读取（SERVING_SCHEMA.md "
     "之外、读取方可加的字段）"),
    (r"a measured run that served is predicted for speed even where trainfit's KV estimate at the engine's default "
     r"flags falls below its max_model_len \(served_with_predicted_kv_short lists them\)",
     "实际已运行的服务即使 trainfit 在引擎默认参数下估算的 KV 低于其 max_model_len，也照常预测速度"
     "（served_with_predicted_kv_short 列出它们）"),
    # a training stack's own scripts (spec/training.py stack_refuses): plan's rejection rule and estimate's warning
    (r"(?P<rule>(?:LitGPT's finetune scripts|Megatron-LM) .+): `plan --framework (?P<f>[\w.-]+)` does not offer this "
     r"layout", "{rule}：`plan --framework {f}` 不提供此布局"),
    (r"LitGPT's finetune scripts run one device without DeepSpeed, FSDP or offload",
     "LitGPT 的微调脚本单卡运行时不用 DeepSpeed、FSDP 或卸载"),
    (r"LitGPT's finetune scripts do not checkpoint activations on one device", "LitGPT 的微调脚本单卡运行时不做激活检查点"),
    (r"LitGPT's finetune scripts refuse --quantize \(QLoRA\) on more than one device",
     "LitGPT 的微调脚本在多卡上拒绝 --quantize（QLoRA）"),
    (r"LitGPT's finetune scripts run several devices under FSDP full shard, without DeepSpeed or offload",
     "LitGPT 的微调脚本多卡运行时用 FSDP full shard，不用 DeepSpeed 或卸载"),
    (r"LitGPT's finetune scripts checkpoint every block under FSDP", "LitGPT 的微调脚本在 FSDP 下对每个块做检查点"),
    (r"Megatron-LM trains full models \(LoRA and QLoRA are not in Megatron-LM\)",
     "Megatron-LM 只做全参训练（Megatron-LM 中没有 LoRA 与 QLoRA）"),
    (r"Megatron-LM shards at most the optimizer states \(its distributed optimizer\), without offload",
     "Megatron-LM 至多切分优化器状态（其分布式优化器），不做卸载"),
    # estimate: assumptions
    (r"memory of the (?P<s>first|last) pipeline stage of (?P<l>.+?) \(estimate/parallel3d\.py: Korthikanti et al\. "
     r"2022 activations, Megatron-LM's states\)",
     "显存按 {l} 的{s}流水线阶段计（estimate/parallel3d.py：激活依 Korthikanti 等 2022，状态依 Megatron-LM）"),
    (rf"sequences packed to exactly (?P<n>{_N}) tokens \(no padding\); mean sample (?P<a>{_N}) tokens from "
     r"(?P<src>.+)", "序列打包为恰好 {n} 个 token（无填充）；样本平均 {a} 个 token，来自 {src}"),
    (rf"sequences packed to exactly (?P<n>{_N}) tokens \(no padding\)", "序列打包为恰好 {n} 个 token（无填充）"),
    (rf"samples padded \((?P<l>[a-z-]+)\), lengths not given: memory and time at the longest, (?P<n>{_N}) tokens "
     r"\(time an upper bound; --avg-len or --data gives them\)",
     "样本补齐（{l}），未给出长度：显存与时间均按最长 {n} 个 token 计（时间为上限；--avg-len 或 --data 可给出）"),
    (rf"every sample padded to (?P<n>{_N}) tokens \(padded-max\): memory and time at (?P<m>{_N}) tokens \(mean "
     rf"sample (?P<a>{_N}); (?P<w>{_N})% padding\)(?:; lengths from (?P<src>.+))?",
     "每条样本补齐到 {n} 个 token（padded-max）：显存与时间按 {m} 个 token 计（样本平均 {a}；填充占 {w}%）"),
    (rf"variable-length samples, mean length not given: memory and time at the longest, (?P<n>{_N}) tokens "
     r"\(time an upper bound; --avg-len or --data gives it\)",
     "变长样本，未给出平均长度：显存与时间均按最长 {n} 个 token 计（时间为上限；--avg-len 或 --data 可给出）"),
    (rf"variable-length samples padded to the longest of each micro-batch: memory at the longest, (?P<n>{_N}) "
     rf"tokens; time at (?P<p>{_N}) tokens per sequence \(mean sample (?P<a>{_N}); (?P<w>{_N})% padding\)"
     r"; lengths from (?P<src>.+)",
     "变长样本，每个 micro-batch 填充到其中最长者：显存按最长 {n} 个 token 计；时间按每条序列 {p} 个 token 计"
     "（样本平均 {a}；填充占 {w}%）；长度来自 {src}"),
    (rf"variable-length samples padded to the longest of each micro-batch: memory at the longest, (?P<n>{_N}) "
     rf"tokens; time at (?P<p>{_N}) tokens per sequence \(mean sample (?P<a>{_N}); (?P<w>{_N})% padding\)",
     "变长样本，每个 micro-batch 填充到其中最长者：显存按最长 {n} 个 token 计；时间按每条序列 {p} 个 token 计"
     "（样本平均 {a}；填充占 {w}%）"),
    (rf"allocator: shapes vary from step to step, (?P<g>{_N}) GiB more reserved \((?P<name>\w+) = (?P<f>{_N}) of "
     r"activations and logits\)",
     "分配器：形状逐步变化，多保留 {g} GiB（{name} = 激活与 logits 的 {f}）"),
    (rf"LoRA rank (?P<r>{_N}) on (?P<t>.+); adapters in (?P<d>\w+) \(PEFT default\)",
     "LoRA 秩 {r}，作用于 {t}；适配器为 {d}（PEFT 默认）"),
    (rf"LoRA rank (?P<r>{_N}) on (?P<t>.+); adapters in bf16 \(the stack trains in pure 16-bit\)",
     "LoRA 秩 {r}，作用于 {t}；适配器为 bf16（该训练栈全程 16 位训练）"),
    (r"LitGPT's own model and loop \(model_code litgpt\): .+",
     "LitGPT 自己的模型与训练循环（model_code litgpt）：k、v 复制到每个头，每个适配器前有 0.05 的 dropout，输出头与损失按 "
     "128 个 token 的 bf16 分块计算，上一步的 logits 存活到下一次前向"),
    (rf"LoRA rank (?P<r>{_N}) on (?P<t>.+); adapters in (?P<d>\w+)(?P<rest>.*)", "LoRA 秩 {r}，作用于 {t}；适配器为 {d}{rest}"),
    (r"DPO keeps a frozen reference copy of the model \(LoRA/QLoRA reuse the base with adapters off\)",
     "DPO 保留一份冻结的参考模型副本（LoRA/QLoRA 关闭适配器后复用基座模型）"),
    (r"DPO: micro-batch counts preference pairs \(chosen \+ rejected = 2 sequences\)",
     "DPO：micro-batch 按偏好对计数（chosen + rejected = 2 条序列）"),
    (r"QLoRA through PEFT: (?P<rest>.+)", "经 PEFT 的 QLoRA：嵌入层、归一化层和输出头转为 fp32，隐藏状态与 MLP 中间结果也随之为 fp32"
                                          "（bitsandbytes 返回输入的数据类型）"),
    (r"(?P<g>[\w.-]+): GPUs talk over PCIe Gen(?P<v>\d) \(no NVLink bridge assumed\)",
     "{g}：GPU 之间经 PCIe Gen{v} 通信（假设无 NVLink 桥）"),
    (rf"(?P<g>[\w.-]+): SXM GPUs assumed on an NVSwitch/NVLink baseboard \((?P<bw>{_N}) GB/s NVLink\)",
     "{g}：假设 SXM GPU 位于 NVSwitch/NVLink 基板上（NVLink {bw} GB/s）"),
    (rf"classification head with (?P<n>{_N}) labels", "分类头，{n} 个类别"),
    (r"freeze: only the last blocks train \(freeze_trainable_layers\)", "冻结训练：只训练最后几层（freeze_trainable_layers）"),
    (r"full fine-tuning without DeepSpeed/FSDP keeps fp32 weights under autocast",
     "不用 DeepSpeed/FSDP 的全参微调在 autocast 下保留 fp32 权重"),
    (rf"sequence length (?P<n>{_N}) \(the model's positions; default (?P<d>{_N})\)",
     "序列长度 {n}（模型的位置数；默认 {d}）"),
    (r"optimizer_impl fused: torch (?P<o>\w+) run as one fused kernel .+",
     "optimizer_impl fused：torch {o} 以一个融合算子运行（Hugging Face Trainer 的默认 adamw_torch_fused，train.py 同）"),
    (r"optimizer_impl foreach: torch (?P<o>\w+) run as multi-tensor foreach ops .+",
     "optimizer_impl foreach：torch {o} 以多张量 foreach 运算运行（CUDA 上 torch 自身的默认）：更新时多占一份状态大小的显存"),
    (r"optimizer_impl forloop: torch (?P<o>\w+) run as a loop over tensors.+",
     "optimizer_impl forloop：torch {o} 逐张量循环运行：更新时多占最大张量的中间结果"),
    (r"pure bf16: weights, gradients and AdamW states in bf16", "纯 bf16：权重、梯度和 AdamW 状态均为 bf16"),
    (rf"the routed experts alone take (?P<g>{_N}) GiB per GPU in 16 bit, more than a (?P<m>{_N}) GB GPU: spread them "
     r"with expert parallelism.+",
     "仅路由专家权重就需每张 GPU {g} GiB（16 位），超过 {m} GB 的 GPU：请用专家并行（--ep：每张 GPU 持有部分专家，"
     "Megatron-Core）分布专家，或用 ZeRO-3 / FSDP 切分"),
    (rf"the routed experts alone take (?P<g>{_N}) GiB per GPU in 16 bit, more than a (?P<m>{_N}) GB GPU: .+",
     "仅路由专家权重就需每张 GPU {g} GiB（16 位），超过 {m} GB 的 GPU：请用 ZeRO-3 / FSDP 切分（专家并行仅对全参训练建模）"),
    # estimate: warnings
    (r"QLoRA with ZeRO-3/FSDP needs bnb_4bit_quant_storage set to the compute dtype \(bitsandbytes >= 0\.43\); "
     r"generated configs set it", "ZeRO-3/FSDP 下的 QLoRA 需要把 bnb_4bit_quant_storage 设为计算精度（bitsandbytes >= 0.43）；"
                                  "生成的配置已设置"),
    (r"fp16 mixed precision needs loss scaling \(the generated Trainer config enables it\)",
     "fp16 混合精度需要损失缩放（生成的配置已启用）"),
    # plan: workload notes
    (rf"global batch (?P<n>{_N}) sequences per optimizer step \(fine-tuning default; --global-batch\)",
     "每个优化器步的全局批量为 {n} 条序列（微调默认值；--global-batch）"),
    (rf"global batch (?P<n>{_N}) sequences \(~1M tokens\) per step \(pre-training default; --global-batch\)",
     "每步全局批量 {n} 条序列（约 1M tokens，预训练默认值；--global-batch）"),
    (rf"(?P<t>{_N}) tokens packed into (?P<s>{_N})-token sequences x (?P<e>{_N}) epochs",
     "{t} 个 token 打包为 {s} token 的序列 × {e} 轮"),
    (rf"sequence length capped at the model's (?P<n>{_N}) positions", "序列长度限制为模型的 {n} 个位置"),
    # plan: why lines
    (rf"bottleneck: (?P<b>[\w ]+); (?P<t>{_N}) tokens/s \((?P<g>{_N}) per GPU\), MFU (?P<m>{_N})%",
     "瓶颈：{b}；{t} tokens/s（每卡 {g}），MFU {m}%"),
    (rf"memory: (?P<u>{_N}) of (?P<a>{_N}) GiB per GPU \((?P<h>{_N}) GiB headroom\), micro-batch (?P<mb>{_N}) x "
     rf"grad-accum (?P<ga>{_N})", "显存：每张 GPU {u} / {a} GiB（余量 {h} GiB），micro-batch {mb} × 梯度累积 {ga}"),
    (rf"memory: (?P<u>{_N}) of (?P<a>{_N}) GiB per GPU \((?P<h>{_N}) GiB headroom, (?P<r>{_N})% out-of-memory risk\), "
     rf"micro-batch (?P<mb>{_N}) x grad-accum (?P<ga>{_N})",
     "显存：每张 GPU {u} / {a} GiB（余量 {h} GiB，显存溢出风险 {r}%），micro-batch {mb} × 梯度累积 {ga}"),
    (rf"memory: an option is kept when its out-of-memory risk is at most (?P<r>{_N})% \(--max-oom-risk\), .+",
     "显存：显存溢出风险不超过 {r}%（--max-oom-risk）的方案才保留；风险取自峰值显存的留一来源交叉验证残差"
     "（trainfit calibrate --cv source），按校准未见过的训练框架取较宽的区间"),
    (r"does not fit in GPU memory", "显存放不下"),
    (r"out-of-memory risk above --max-oom-risk", "显存溢出风险高于 --max-oom-risk"),
    (rf"communication: (?P<p>{_N})% of each step exposed", "通信：每步有 {p}% 未被计算掩盖"),
    (rf"host RAM: (?P<n>{_N}) of (?P<h>{_N}) GiB per node to load the model",
     "主机内存：加载模型需要每节点 {n} / {h} GiB"),
    (rf"host RAM: (?P<n>{_N}) of (?P<h>{_N}) GiB per node to load the model \((?P<o>{_N}) GiB more for CPU offload\)",
     "主机内存：加载模型需要每节点 {n} / {h} GiB（CPU 卸载另需 {o} GiB）"),
    (r"runner-up: (?P<desc>.+) \((?P<m>.+) more\)", "次优：{desc}（多 {m}）"),
    (r"caution: (?P<f>.+)", "注意：{f}"),
    (rf"multi-node: (?P<n>{_N}) nodes over (?P<l>\w+) \((?P<g>{_N}) Gbit/s\); exposed communication (?P<p>{_N})% of "
     r"each step", "多机：{n} 个节点经 {l}（{g} Gbit/s）；每步有 {p}% 通信未被掩盖"),
    (r"the job outgrows one machine: it does not fit on a single node of this type",
     "任务超出单机：此类型的单个节点放不下"),
    (rf"one node would take (?P<h>{_N}) h", "单节点需要 {h} 小时"),
    (rf"layout: tensor parallel (?P<t>{_N}) inside a node x (?P<p>{_N}) pipeline stage\(s\) x context parallel "
     rf"(?P<c>{_N}) x (?P<d>{_N}) data-parallel copies; pipeline bubble (?P<b>{_N})%, exposed tensor-parallel "
     rf"communication (?P<x>{_N})% of each step",
     "并行布局：节点内张量并行 {t} x {p} 个流水线阶段 x 上下文并行 {c} x {d} 份数据并行副本；流水线气泡占每步 {b}%，"
     "未掩盖的张量并行通信占 {x}%"),
    (rf"monthly subscription: (?P<m>{_N}) month\(s\) cost less than pay-as-you-go for (?P<h>{_N}) h",
     "包月：{m} 个月比按量付费 {h} 小时更便宜"),
    (rf"spot: can be reclaimed; expected (?P<n>{_N}) interruptions \(MTBI (?P<m>{_N}) h\), checkpoint every "
     rf"(?P<c>{_N}) min \(Young/Daly sqrt\(2 C M\), C = (?P<w>{_N}) s\): (?P<o>{_N}) h of lost work, restarts and "
     r"checkpoints",
     "抢占式实例：可能被随时回收；预计中断 {n} 次（平均间隔 {m} 小时），每 {c} 分钟保存一次检查点（Young/Daly "
     "sqrt(2 C M)，C = {w} 秒）：损失的工作、重启和检查点共 {o} 小时"),
    (r"spot: can be reclaimed; (?P<rest>.+)", "抢占式实例：可能被随时回收；{rest}"),
    # plan: the named values a plan assumes (efficiency.yaml), the billing and cost lines
    (rf"plan_memory_headroom_fraction = (?P<v>{_N}) fraction: .+",
     "plan_memory_headroom_fraction = {v}：计划的安全余量，预测显存须低于可用显存的 (1 − 该值) 倍"),
    (rf"startup_hours = (?P<v>{_N}) h: .+", "startup_hours = {v} 小时：每次运行在第一步之前的时间（实例启动、镜像与驱动、环境安装、"
                                            "模型下载与加载、数据分词），与训练时间一样计费"),
    (rf"checkpoint_interval_hours = (?P<v>{_N}) h: .+", "checkpoint_interval_hours = {v} 小时：两次检查点之间的时间（结束时也写一次）"),
    (rf"checkpoint_write_gbytes_per_s = (?P<v>{_N}) GB/s: .+",
     "checkpoint_write_gbytes_per_s = {v} GB/s：每个节点写检查点存储的带宽；写入时训练暂停"),
    (r"billing: .+", "计费：假设值，未经参考资料核实：阿里云 ECS 按量付费按秒计费，AWS 和 GCP 按秒计费（Linux 最少 60 秒），"
                     "Azure 按分钟计费"),
    (r"cost = price per hour x instances x billed hours; prices are catalog snapshots \(see price_date\)",
     "费用 = 每小时价格 × 实例数 × 计费小时；价格为目录快照（见 price_date）"),
    (rf"spot_mtbi_hours = (?P<v>{_N}) h \(.+\)", "spot_mtbi_hours = {v} 小时（抢占式实例两次回收之间的平均时间；假设值）"),
    (rf"spot_restart_hours = (?P<v>{_N}) h \(.+\)", "spot_restart_hours = {v} 小时（每次回收后的重启时间；假设值）"),
    (r"spot instances can be reclaimed at any time; .+",
     "抢占式实例可能被随时回收；检查点间隔 sqrt(2 × 检查点时间 × MTBI)（Young 1974），每次回收损失上次检查点以来的工作并需重启"),
    # validate: why a case was skipped
    (r"CPU measurement", "CPU 上的测量"),
    (r"trace case without memory_kind allocated \(a trace counts allocated bytes only\)",
     "trace 案例的 memory_kind 不是 allocated（追踪只统计已分配的字节）"),
    (r"GPU not in the catalog", "GPU 不在目录中"),
    (r"GPUs do not divide into nodes", "GPU 数不能均分到节点"),
    (r"engine not modelled", "未建模的推理引擎"),
    (r"incompatible: (?P<r>.+)", "不兼容：{r}"),
    (r"model architecture incomplete", "模型结构不完整"),
    (r"model type not supported or config incomplete", "模型类型不受支持或配置不完整"),
    (r"model type not supported", "模型类型不受支持"),
    (r"not a JSON object", "不是 JSON 对象"),
    (r"nothing comparable \(the setup does not fit, or no measured value\)", "无可比较的值（配置放不下，或没有实测值）"),
    (r"nothing comparable \(variable-length throughput only, or no usable measured value\)",
     "无可比较的值（只有变长数据的吞吐，或没有可用的实测值）"),
    (r"nothing measured", "没有实测值"),
    (r"number of GPUs unknown", "GPU 数未知"),
    (r"parallel layout unknown", "并行布局未知"),
    (r"pipeline parallelism not modelled", "未建模流水线并行"),
    (r"sequence length or micro-batch unknown", "序列长度或 micro-batch 未知"),
    (r"serving settings invalid or incomplete", "推理部署设置无效或不完整"),
    (r"tensor/pipeline/context parallelism is not modelled", "未建模张量/流水线/上下文并行"),
    (r"variable-length workload", "变长工作负载"),
    (r"weight format not modelled", "未建模的权重格式"),
    (r"malformed (?P<s>\w+) fields", "{s} 字段格式错误"),
    (r"unsupported (?P<s>[\w -]+) settings", "不支持的 {s} 设置"),
    (r"unsupported (?P<s>[\w-]+)", "不支持的 {s}"),
    # trace: the notes beside a traced step (trace/__init__.py, trace/tracer.py) and the generic reader's note
    (r"one GPU's unsharded view: ZeRO/FSDP sharding, DDP buckets, the CUDA context and allocator caching are not "
     r"traced", "单张 GPU 的未切分视图：未追踪 ZeRO/FSDP 切分、DDP 梯度桶、CUDA 上下文和分配器缓存"),
    (r"QLoRA traced as LoRA on a 16-bit base \(bitsandbytes' 4-bit storage needs CUDA\); the weights are corrected "
     r"to NF4 analytically, and to fp32 for the parameters PEFT's prepare_model_for_kbit_training upcasts",
     "QLoRA 按 16 位基座上的 LoRA 追踪（bitsandbytes 的 4 位存储需要 CUDA）；权重按解析方式改回 NF4，"
     "PEFT 的 prepare_model_for_kbit_training 升为 fp32 的参数按 fp32 计"),
    (r"FlashAttention traced as SDPA's flash kernel for the CPU \(same saved tensors\)",
     "FlashAttention 按 SDPA 在 CPU 上的 flash 内核追踪（保存的张量相同）"),
    (r"dropout on the CPU keeps its mask in the activation dtype \(CUDA keeps a 1-byte bool mask\): the trace "
     r"counts up to 3 bytes more per dropped element than a GPU holds",
     "CPU 上的 dropout 以激活值的数据类型保存掩码（CUDA 保存 1 字节的 bool 掩码）：追踪结果每个被丢弃的元素"
     "最多比 GPU 多计 3 字节"),
    (r"MoE routing is data \(fake tensors have none\): the experts were traced with balanced routing, each expert "
     r"taking the expected share of the tokens x top-k rows \(the same tensors transformers' grouped_mm experts "
     r"hold, whatever the routing\); the router itself runs as written",
     "MoE 路由取决于数据（伪张量没有数据）：专家按均衡路由追踪，每个专家分到 token 数 × top-k 行的期望份额"
     "（无论如何路由，transformers 的 grouped_mm 专家持有的张量都相同）；路由器本身按原代码运行"),
    (r"attention with a value head dim other than the query's \(MLA\) was traced with SDPA's memory-efficient "
     r"kernel, which a GPU selects for it \(it saves q, k, v, the output and the log-sum-exp\); the CPU would fall "
     r"back to the math path, which keeps the s x s probabilities",
     "value 头维度与 query 不同的注意力（MLA）按 SDPA 的 memory-efficient 内核追踪，GPU 会为它选用该内核"
     "（保存 q、k、v、输出和 log-sum-exp）；CPU 会退回数学实现，保留 s × s 的概率矩阵"),
    (r"(?P<m>[\w.-]+): the text model only \((?P<t>[\w.-]+)\); the vision tower is not counted",
     "{m}：只计文本模型（{t}）；未计入视觉塔"),
    # the generic reader: a structure template under another transformers version (catalog/generic.py)
    (r"(?P<m>[\w.-]+): the structure is trainfit's template made with transformers (?P<v>[\w.+-]+); the installed "
     r"transformers (?P<i>[\w.+-]+) cannot check it without torch",
     "{m}：结构来自 trainfit 用 transformers {v} 生成的模板；已安装的 transformers {i} 没有 torch，无法核对"),
    (r"(?P<m>[\w.-]+): the structure is trainfit's template made with transformers (?P<v>[\w.+-]+); the installed "
     r"transformers (?P<i>[\w.+-]+) cannot build this config \((?P<e>.+)\)",
     "{m}：结构来自 trainfit 用 transformers {v} 生成的模板；已安装的 transformers {i} 无法构建此配置（{e}）"),
    (r"(?P<m>[\w.-]+): transformers (?P<i>[\w.+-]+) builds this config otherwise than trainfit's template made with "
     r"transformers (?P<v>[\w.+-]+) \((?P<d>.+)\); the structure read from transformers (?P=i) is used",
     "{m}：transformers {i} 构建此配置的结果与 trainfit 用 transformers {v} 生成的模板不同（{d}）；采用从 transformers {i} "
     "读取的结构"),
    (r"the trace keeps the optimizer states on the device \(no paged states\): they are not those of the requested "
     r"setup", "追踪把优化器状态留在设备上（无分页状态）：它们不是所请求配置的"),
    (r"memory_gib counts allocated bytes \(no CUDA context or allocator cache\); the analytic allocated figure is "
     r"compared", "memory_gib 计的是已分配的字节（不含 CUDA 上下文和分配器缓存）；与之比较的是解析模型的已分配值"),
    (r"the trace's activations include the logits buffers; temporaries are in other",
     "追踪的激活值包含 logits 缓冲区；临时张量计入其他"),
    (r"the trace does not shard: compare the sharded terms analytically", "追踪不做切分：切分后的各项请用解析模型比较"),
    # plan: host RAM (the counted reason is typed: search/reasons.py HOST_RAM)
    (rf"loading the model \(and CPU offload\) needs (?P<n>{_N}) GiB of host RAM per node, the instance has "
     rf"(?P<h>{_N}) GiB", "加载模型（及 CPU 卸载）需要每节点 {n} GiB 主机内存，实例只有 {h} GiB"),
    (rf"options fit in GPU memory, but loading the model \(and CPU offload\) needs more host RAM than their "
     rf"instances have \(closest: "
     rf"(?P<n>{_N}) GiB per node needed, (?P<h>{_N}) GiB available\)",
     "方案能放进显存，但加载模型（及 CPU 卸载）所需主机内存超过实例内存（最接近的：每节点需要 {n} GiB，实有 {h} GiB）"),
    # estimate: why a configuration does not fit (advise.overflow_terms) and what a candidate gave up (advise._dropped)
    (rf"model states \(weights (?P<w>{_N}) \+ gradients (?P<g>{_N}) \+ optimizer (?P<o>{_N}) GiB\) alone exceed the "
     rf"(?P<u>{_N}) GiB usable", "模型状态（权重 {w} + 梯度 {g} + 优化器状态 {o} GiB）本身就超过可用的 {u} GiB"),
    (rf"activations (?P<a>{_N}) GiB and logits (?P<l>{_N}) GiB do not fit in what the model states leave "
     rf"\((?P<r>{_N}) GiB\)", "激活值 {a} GiB 和 logits {l} GiB 放不进模型状态之外剩下的 {r} GiB"),
    (rf"over by (?P<o>{_N}) GiB \((?P<n>{_N}) needed, (?P<u>{_N}) usable\)", "超出 {o} GiB（需要 {n}，可用 {u}）"),
    (r"(?P<flags>.*) \(without (?P<gone>--[\w -]+)\)", "{flags}（去掉 {gone}）"),
    # estimate and compare: how a workload was made legal on a GPU (estimate/core.py adapt_to_gpu)
    (r"--precision fp16 \(no bf16 on this GPU\)", "--precision fp16（此 GPU 不支持 bf16）"),
    (r"--precision (?P<p>\w+) \(no FP8 on this GPU\)", "--precision {p}（此 GPU 不支持 FP8）"),
    (r"--attention sdpa \(FlashAttention-2 needs Ampere\+\)", "--attention sdpa（FlashAttention-2 需要 Ampere 或更新的 GPU）"),
    # estimate: warnings and assumptions (estimate/core.py, estimate/memory.py, estimate/activations.py, spec/)
    (r"no published throughput measurement on (?P<g>\S+) is in trainfit's validation data: the speed here is modelled "
     r"from its datasheet and the fits on other GPUs, not checked against a run on it \(`trainfit bench` measures it "
     r"on your machine\)", "trainfit 的验证数据中没有 {g} 上公开发表的吞吐实测：此处的速度由其数据手册和在其他 GPU 上的"
                           "拟合推算，未经该 GPU 上的运行核对（`trainfit bench` 可在你的机器上测量）"),
    (rf"trainfit's throughput error on the (?P<n>{_N}) published runs on (?P<g>\S+) in its validation data is (?P<m>\S+) "
     r"\(MAPE; data/validation\): read this speed with that in mind, or measure it with `trainfit bench`",
     "trainfit 在其验证数据中 {g} 上的 {n} 个公开运行的吞吐误差为 {m}（MAPE；data/validation）：请据此看待此速度，"
     "或用 `trainfit bench` 测量"),
    (r"offloading a 4-bit model is rarely worth it: the adapters' optimizer is tiny",
     "卸载 4 位模型通常不值得：适配器的优化器状态很小"),
    (r"BERT-style models have no FlashAttention-2 path in transformers; SDPA is used",
     "transformers 中 BERT 类模型没有 FlashAttention-2 实现；改用 SDPA"),
    (r"the model soft-caps its attention logits, which SDPA cannot do: .+",
     "该模型对注意力 logits 做软截断（soft-cap），SDPA 做不到：transformers 改用 eager 注意力（此类模型的默认；显式指定 "
     "attn_implementation='sdpa' 会被拒绝），反向需保存每个头 s × s 的分数；按 eager 估算。FlashAttention-2 在其内核中做软截断"
     "（--attention flash）"),
    (r"paged optimizer: its states live in CUDA managed memory, .+",
     "分页优化器：其状态位于 CUDA 托管内存中，PyTorch 的显存计数看不到；GPU 有空间时留在 GPU 上，没有空间时换出到主机内存"),
    (rf"(?P<i>[\w.-]+): NVLink bandwidth not documented; PCIe assumed", "{i}：NVLink 带宽未见文档；按 PCIe 计"),
    (rf"(?P<i>[\w.-]+): GPU interconnect not documented; PCIe assumed \(conservative\)",
     "{i}：GPU 互联方式未见文档；按 PCIe 计（保守）"),
    (rf"no instance or --network-gbps given: between nodes the network of (?P<i>\S+) \((?P<g>{_N}) Gbit/s "
     rf"(?P<r>[\w-]+)\), the fastest the catalog has for (?P<gpu>\S+)",
     "未给出实例或 --network-gbps：节点之间按 {i} 的网络计（{g} Gbit/s {r}），这是目录中 {gpu} 可用的最快网络"),
    (rf"no instance or --network-gbps given: (?P<g>{_N}) Gbit/s RDMA between nodes assumed",
     "未给出实例或 --network-gbps：假设节点之间为 {g} Gbit/s RDMA"),
    (rf"sequences padded to (?P<s>{_N}) tokens \(next power of two above --avg-len (?P<a>{_N})\)",
     "序列填充到 {s} 个 token（大于 --avg-len {a} 的下一个 2 的幂）"),
    (rf"samples longer than (?P<s>{_N}) tokens are truncated", "超过 {s} 个 token 的样本会被截断"),
    (rf"(?P<n>{_N}) samples x (?P<t>{_N}) tokens \((?P<l>[a-z-]+): time at the padded length\) x (?P<e>{_N}) "
     r"epochs", "{n} 个样本 × {t} 个 token（{l}：时间按补齐后的长度计）× {e} 轮"),
    (rf"(?P<t>{_N}) tokens in (?P<s>{_N})-token sequences \((?P<l>[a-z-]+), sample lengths not given: time as if "
     rf"every sequence were full\) x (?P<e>{_N}) epochs",
     "{t} 个 token，{s} token 的序列（{l}，未给出样本长度：时间按每条序列都满计）× {e} 轮"),
    # estimate: where the lengths of variable-length samples come from (spec/lengths.py), inside "lengths from ..."
    (rf"--data (?P<p>.+?): (?P<n>{_N}) samples, longest (?P<l>{_N}) \((?P<how>.+)\)",
     "--data {p}：{n} 个样本，最长 {l}（{how}）"),
    (r"the model's tokenizer", "模型自己的分词器"),
    (rf"whitespace words x (?P<w>{_N}), CJK characters x (?P<c>{_N}), no tokenizer at hand",
     "按空白分隔的词数 × {w}、CJK 字符数 × {c} 计（手头没有分词器）"),
    (r"--avg-len \(exponential lengths assumed: a micro-batch of b is padded to about avg x \(1 \+ 1/2 \+ \.\.\. \+ "
     r"1/b\)\)", "--avg-len（假设长度呈指数分布：b 条样本的 micro-batch 约填充到 avg × (1 + 1/2 + ... + 1/b)）"),
    # plan: rules that set a layout aside (search/run.py Reason.INCOMPATIBLE, estimate/core.py, spec/training.py)
    (r"trainfit's FSDP setups train in bf16 or fp32; on GPUs without bf16 \(V100, T4\) use DeepSpeed ZeRO "
     r"\(--zero 1/2/3\), which scales fp16 losses",
     "trainfit 的 FSDP 配置只用 bf16 或 fp32 训练；在不支持 bf16 的 GPU（V100、T4）上请用 DeepSpeed ZeRO（--zero 1/2/3），"
     "它会对 fp16 损失做缩放"),
    (r"QLoRA with FSDP CPU offload is not supported by bitsandbytes", "bitsandbytes 不支持 QLoRA 与 FSDP CPU 卸载同用"),
    (r"FSDP offloads parameters and gradients together: use --offload all", "FSDP 会同时卸载参数和梯度：请用 --offload all"),
    (r"8-bit AdamW \(bitsandbytes\) runs on the GPU and cannot be offloaded; use --optimizer adamw with --offload",
     "8 位 AdamW（bitsandbytes）在 GPU 上运行，无法卸载；要卸载请用 --optimizer adamw"),
    (r"optimizer-in-backward is a PyTorch/torchtune feature: not with DeepSpeed ZeRO",
     "optimizer-in-backward 是 PyTorch/torchtune 的功能：不能与 DeepSpeed ZeRO 同用"),
    (r"optimizer-in-backward steps each gradient before DDP could all-reduce it: use one GPU or FSDP",
     "optimizer-in-backward 在 DDP 对梯度做 all-reduce 之前就已更新参数：请用单张 GPU 或 FSDP"),
    (r"paged optimizers are bitsandbytes optimizers: DeepSpeed ZeRO runs its own",
     "分页优化器是 bitsandbytes 的优化器：DeepSpeed ZeRO 运行它自己的优化器"),
    (r"(?P<g>.+) has no bf16 support \(compute capability (?P<c>[\d.]+)\); use --precision fp16",
     "{g} 不支持 bf16（计算能力 {c}）；请用 --precision fp16"),
    (r"(?P<g>.+) has no FP8 tensor cores \(FP8 needs Ada or Hopper\); use --precision bf16",
     "{g} 没有 FP8 张量核心（FP8 需要 Ada 或 Hopper）；请用 --precision bf16"),
    (r"FlashAttention-2 needs compute capability 8\.0\+ \((?P<g>.+) is (?P<c>[\d.]+)\); use --attention sdpa "
     r"\(memory-efficient kernel\)", "FlashAttention-2 需要计算能力 8.0 以上（{g} 为 {c}）；请用 --attention sdpa"
                                     "（memory-efficient 内核）"),
    # plan: the binding constraint when nothing meets the request (plan.binding_constraint), and what would relax it
    (r"no priced instance matches the request's provider, GPU, region and pricing filters",
     "没有带价格的实例符合请求中云厂商、GPU、地域和计费方式的筛选条件"),
    (rf"options fit by the estimate but each runs out of memory with more than (?P<p>{_N})% probability; least "
     r"risky: (?P<risky>.+)", "按估算能放下的方案，显存溢出的概率都超过 {p}%；风险最低的：{risky}"),
    (rf"does not fit on any offered GPU even with ZeRO-3 \+ CPU offload on up to (?P<n>{_N}) nodes \(smallest need "
     rf"(?P<g>{_N}) GiB per GPU\)", "即使用 ZeRO-3 + CPU 卸载、最多 {n} 个节点，在任何提供的 GPU 上都放不下"
                                    "（最小需求为每张 GPU {g} GiB）"),
    (rf"no plan finishes within (?P<h>{_N}) h; fastest: (?P<desc>.+)", "没有方案能在 {h} 小时内完成；最快的：{desc}"),
    (r"no plan costs (?P<b>\S+) or less; cheapest: (?P<desc>.+)", "没有费用不超过 {b} 的方案；最便宜的：{desc}"),
    (r"meets the deadline with (?P<desc>.+): over budget by (?P<m>\S+)", "满足截止时间的方案 {desc}：超出预算 {m}"),
    (r"no offered instance runs the layout given \((?P<flags>.+)\)", "没有提供的实例能运行给定的布局（{flags}）"),
    (rf"the fastest option takes (?P<y>{_N}) years \((?P<h>{_N}) h\), more than ten: (?P<desc>.+)",
     "最快的方案也要 {y} 年（{h} 小时），超过十年：{desc}"),
    (r"fewer --dataset-tokens or --epochs", "更少的 --dataset-tokens 或 --epochs"),
    (r"--method qlora", "--method qlora"),
    (rf"does not fit on any offered GPU with the layout given \((?P<flags>.+); smallest need (?P<g>{_N}) GiB per "
     r"GPU\)", "按给定的布局（{flags}）在任何提供的 GPU 上都放不下（最小需求为每张 GPU {g} GiB）"),
    (r"leave out (?P<flags>.+) \(the search then chooses\)", "去掉 {flags}（由搜索来选择）"),
    (r"other --gpu / --instance filters", "换用其他 --gpu / --instance 筛选"),
    (r"drop --gpu / --region filters", "去掉 --gpu / --region 筛选"),
    (r"a shorter --seq-len", "更短的 --seq-len"),
    (r"--provider all for larger GPUs", "--provider all（显存更大的 GPU）"),
    (r"--provider all for instances with more RAM", "--provider all（内存更大的实例）"),
    (r"more nodes \(--max-nodes\): ZeRO-3 partitions shrink with the GPU count",
     "更多节点（--max-nodes）：ZeRO-3 的分片随 GPU 数增加而变小"),
    (r"more nodes \(--max-nodes\)", "更多节点（--max-nodes）"),
    (r"--method lora or qlora \(16-bit weights\)", "--method lora 或 qlora（16 位权重）"),
    (r"--method lora or qlora", "--method lora 或 qlora"),
    (r"--method lora/qlora \(less work per token\)", "--method lora/qlora（每个 token 的计算量更少）"),
    (rf"a deadline of at least (?P<h>{_N}) h", "截止时间至少 {h} 小时"),
    (rf"a deadline of (?P<h>{_N}) h", "截止时间 {h} 小时"),
    (r"a budget of at least (?P<m>\S+)", "预算至少 {m}"),
    (r"a budget of (?P<m>\S+)", "预算 {m}"),
    # plan: why each other GPU lost (plan.excluded_gpus) and the layouts rejected for risk (plan.risky_text)
    (r"rejected for out-of-memory risk: (?P<risky>.+)", "因显存溢出风险而排除：{risky}"),
    (r"no option with the layout given \((?P<flags>.+)\)", "没有符合给定布局（{flags}）的方案"),
    (rf"does not fit even with ZeRO-3 \+ CPU offload on the offered GPU counts \(needs (?P<n>{_N}) of (?P<h>{_N}) "
     r"GiB\)", "即使用 ZeRO-3 + CPU 卸载，在提供的 GPU 数下也放不下（需要 {n} / {h} GiB）"),
    (r"does not fit even with ZeRO-3 \+ CPU offload on the offered GPU counts",
     "即使用 ZeRO-3 + CPU 卸载，在提供的 GPU 数下也放不下"),
    (rf"too slow for the deadline \(fastest (?P<h>{_N}) h with (?P<desc>.+)\)",
     "赶不上截止时间（最快 {h} 小时：{desc}）"),
    (r"over budget \(cheapest meeting the deadline: (?P<desc>.+)\)", "超出预算（满足截止时间的最便宜方案：{desc}）"),
    (r"meets the constraints but loses on (?P<objective>cheapest|fastest) \((?P<v>.+?)\): (?P<desc>.+)",
     "满足约束，但按“{objective}”排名落后（{v}）：{desc}"),
    (rf"(?P<where>.+?), (?P<m>[\w-]+), (?P<s>.+?), micro-batch (?P<mb>{_N}): (?P<need>{_N}) of (?P<u>{_N}) GiB "
     rf"predicted, (?P<r>{_N})% out-of-memory risk(?P<safe>; .+)?",
     "{where}，{m}，{s}，micro-batch {mb}：预测 {need} / {u} GiB，显存溢出风险 {r}%{safe}"),
    # trainfit efficiencies: how a value is chosen for a GPU (catalog/efficiency.py PRECEDENCE)
    (r"--set NAME=VALUE \(a plain value replaces every per-GPU/architecture/\.\.\. variant\)",
     "--set NAME=VALUE（一个普通值替换所有按 GPU/架构/... 区分的取值）"),
    (r"by_link\[link\] \(collectives: the link that carries them\)", "by_link[link]（集合通信：承载它们的链路）"),
    (r"by_framework\[stack\] \(--framework, or a validation case's stack\)",
     "by_framework[stack]（--framework，或验证案例的训练栈）"),
    (r"by_gpu\[gpu\] set by a calibration, --calibration FILE or --set",
     "by_gpu[gpu]，由校准、--calibration FILE 或 --set 设定"),
    (r"by_gpu\[gpu\] from efficiency\.yaml alone \(uncalibrated\): .+",
     "by_gpu[gpu]，仅来自 efficiency.yaml（未校准）：它是相对其架构的比值，作用于该架构的当前值 = by_architecture[arch] × "
     "by_gpu[gpu] / efficiency.yaml 的 by_architecture[arch]（因此校准过的架构会带着它的 GPU 一起变，未校准的 GPU 不会覆盖它）"),
    (r"by_architecture\[arch\] \(calibrated or efficiency\.yaml\)", "by_architecture[arch]（校准值或 efficiency.yaml）"),
    (r"(?P<l>\S+) = (?P<v>\S+) at the fit's (?P<side>low|high) bound", "{l} = {v}，处于拟合范围的{side}"),
]
_COMPILED = _ZH  # compiled on first use (first_match): an English run never pays for the Chinese patterns
_WORDS = {"compute": "算力", "memory": "显存带宽", "communication": "通信", "offload": "卸载", "overhead": "开销",
          "pipeline": "流水线气泡", "optimizer": "优化器", "first": "第一个", "last": "最后一个"}
_CAUTIONS = {"price unverified": "价格未核实", "GPU model inferred by third parties": "GPU 型号为第三方推断"}


_COMPILED_BY_ID: dict[int, tuple] = {}


def _compiled(pairs: list) -> tuple:
    """The module-level list of (regex, template) pairs, compiled once."""
    if id(pairs) not in _COMPILED_BY_ID:
        _COMPILED_BY_ID[id(pairs)] = tuple((re.compile(p), z) for p, z in pairs)
    return _COMPILED_BY_ID[id(pairs)]


def first_match(pairs: list, text: str):
    """(pattern, Chinese template, match) of the first of (regex, template) `pairs` that matches all of `text`, or
    None. The patterns are compiled once, when a Chinese text is first asked for."""
    for pattern, template in _compiled(pairs):
        m = pattern.fullmatch(text)
        if m:
            return pattern, template, m
    return None


_OBJECTIVES = {"cheapest": "最便宜", "fastest": "最快"}


def _zh_where(text: str) -> str:
    """'2 x a16 on 2 nodes' -> '2 x a16（2 个节点）'."""
    return re.sub(rf" on ({_N}) nodes$", r"（\1 个节点）", text)


def _zh_safe(text: str) -> str:
    """'; safe with 2.1 GiB less peak memory (a shorter --seq-len, qlora) or with --max-oom-risk 0.20'."""
    m = re.fullmatch(rf"; safe with (?P<g>{_N}) GiB less peak memory \(a shorter --seq-len, qlora\) or with "
                     rf"--max-oom-risk (?P<r>{_N})", text)
    return f"；峰值显存再少 {m['g']} GiB（更短的 --seq-len、qlora）或 --max-oom-risk {m['r']} 时可保留" if m else text


def _zh_describe(text: str) -> str:
    """A plan option as plan._describe writes it: only its '(2 of 8 GPUs)' is words."""
    return re.sub(rf" \(({_N}) of ({_N}) GPUs\)", r"（使用 \2 张中的 \1 张 GPU）", text)


# values that are sentences (or phrases) of their own, by the name of their group
_INNER = {"rule": lambda v: localize(v, "zh"), "risky": lambda v: localize(v, "zh"),
          "src": lambda v: localize(v, "zh"), "how": lambda v: localize(v, "zh"), "desc": _zh_describe,
          "where": _zh_where, "safe": _zh_safe, "objective": lambda v: _OBJECTIVES.get(v, v),
          "side": lambda v: {"low": "下限", "high": "上限"}.get(v, v)}


def localize(text: str, lang: str) -> str:
    """`text` in `lang`: a sentence of the message table (trainfit.i18n.Msg) from the table; an English sentence
    not yet in the table by the patterns above (unchanged when no pattern knows it)."""
    from . import Msg

    if isinstance(text, Msg):
        return text.render(lang)
    hit = first_match(_COMPILED, text) if lang == "zh" else None
    if hit is None:
        return text
    pattern, template, m = hit
    values = {k: _WORDS.get(v, v) if v else "" for k, v in m.groupdict().items()}
    for key, inner in _INNER.items():  # a sentence inside the sentence: in Chinese where a pattern knows it
        if values.get(key):
            values[key] = inner(m.group(key))
    if pattern.pattern.startswith("caution"):
        values["f"] = "，".join(_CAUTIONS.get(x, x) for x in values["f"].split(", "))
    return template.format(**values)


def has_chinese(text: str) -> bool:
    return localize(text, "zh") != text
