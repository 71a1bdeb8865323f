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
    (rf"sequences packed to exactly (?P<n>{_N}) tokens \(no padding\)", "序列打包为恰好 {n} 个 token（无填充）"),
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
    (rf"the routed experts alone take (?P<g>{_N}) GiB per GPU in 16 bit, more than a (?P<m>{_N}) GB GPU: .+",
     "仅路由专家权重就需每张 GPU {g} GiB（16 位），超过 {m} GB 的 GPU：未建模专家并行（每张 GPU 持有部分专家）；"
     "trainfit 只在 ZeRO-3 / FSDP 下切分专家"),
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
    (r"runner-up: (?P<d>.+) \((?P<m>.+) more\)", "次优：{d}（多 {m}）"),
    (r"caution: (?P<f>.+)", "注意：{f}"),
    (rf"multi-node: (?P<n>{_N}) nodes over (?P<l>\w+) \((?P<g>{_N}) Gbit/s\); exposed communication (?P<p>{_N})% of "
     r"each step", "多机：{n} 个节点经 {l}（{g} Gbit/s）；每步有 {p}% 通信未被掩盖"),
    (r"the job outgrows one machine: it does not fit on a single node of this type",
     "任务超出单机：此类型的单个节点放不下"),
    (rf"one node would take (?P<h>{_N}) h", "单节点需要 {h} 小时"),
    (rf"monthly subscription: (?P<m>{_N}) month\(s\) cost less than pay-as-you-go for (?P<h>{_N}) h",
     "包月：{m} 个月比按量付费 {h} 小时更便宜"),
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
]
_COMPILED = [(re.compile(p), z) for p, z in _ZH]
_WORDS = {"compute": "算力", "memory": "显存带宽", "communication": "通信", "offload": "卸载", "overhead": "开销"}
_CAUTIONS = {"price unverified": "价格未核实", "GPU model inferred by third parties": "GPU 型号为第三方推断"}


def first_match(compiled: list, text: str):
    """(pattern, Chinese template, match) of the first pattern that matches all of `text`, or None."""
    for pattern, template in compiled:
        m = pattern.fullmatch(text)
        if m:
            return pattern, template, m
    return None


def localize(text: str, lang: str) -> str:
    """`text` in `lang` (English sentences pass through unchanged when no pattern knows them)."""
    hit = first_match(_COMPILED, text) if lang == "zh" else None
    if hit is None:
        return text
    pattern, template, m = hit
    values = {k: _WORDS.get(v, v) if v else "" for k, v in m.groupdict().items()}
    if pattern.pattern.startswith("(?P<rule>"):  # a sentence inside the sentence: in Chinese where a pattern knows it
        values["rule"] = localize(values["rule"], lang)
    if pattern.pattern.startswith("caution"):
        values["f"] = "，".join(_CAUTIONS.get(x, x) for x in values["f"].split(", "))
    return template.format(**values)


def has_chinese(text: str) -> bool:
    return localize(text, "zh") != text
