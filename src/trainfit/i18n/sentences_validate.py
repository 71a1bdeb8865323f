"""Sentences of the validate area (en / zh), made with `trainfit.i18n.say(key, **values)` where they are written and
rendered in either language from here: the message table, not a translation of the English. Registered in the one
message table by `trainfit.i18n`."""

from __future__ import annotations

SENTENCES: dict[str, dict[str, str]] = {
    # validate: why a measured value is excluded (validate.py power_limited, inconsistent_memory,
    # inconsistent_throughput)
    "va_power_limited": {
        "en": "the run's GPUs were held at a {limit:.0f} W power limit, below the {gpu}'s {tdp:.0f} W the catalog's "
              "peaks are for; no source gives the clock that limit leaves: a GPU the catalog does not carry",
        "zh": "该运行的 GPU 被限制在 {limit:.0f} W 的功耗上限，低于目录中 {gpu} 峰值所对应的 {tdp:.0f} W；没有来源给出该上限下"
              "的频率：这是目录未收录的 GPU"},
    "va_below_resident": {
        "en": "measured {measured:.2f} GiB is below the {floor:.2f} GiB of weights and optimizer states the stated "
              "setup keeps on each GPU: the run cannot have used the stated setup",
        "zh": "实测 {measured:.2f} GiB 低于所述配置在每张 GPU 上常驻的 {floor:.2f} GiB 权重与优化器状态：该运行不可能用的是所述配置"},
    "va_above_peak": {
        "en": "measured {what} needs at least {needed:.0f} TFLOP/s of matmuls per GPU (causal attention at half its "
              "work), above the {gpu}'s dense {dtype} peak of {peak:.1f}: the figure cannot be one GPU's running the "
              "stated setup",
        "zh": "实测{what}至少需要每张 GPU {needed:.0f} TFLOP/s 的矩阵乘（因果注意力按其一半的计算量计），高于 {gpu} 的 {dtype} "
              "稠密峰值 {peak:.1f}：该数字不可能是单张 GPU 运行所述配置的结果"},
    "va_what_tokens": {"en": "{v:g} tokens/s per GPU", "zh": "每张 GPU {v:g} tokens/s "},
    "va_what_step": {"en": "{v:g} s per step", "zh": "每步 {v:g} 秒"},
    # validate: the notes of its report (validate.py Report.to_dict)
    "va_note_null_kind": {"en": "memory cases without a memory_kind are compared with predicted {kind} memory",
                          "zh": "没有 memory_kind 的显存案例与预测的 {kind} 显存比较"},
    "va_note_trace": {
        "en": "trace cases (source 'trace': allocations of a traced step) are compared with the predicted allocated "
              "peak, without allocator cache or CUDA context; their statistics are under 'trace', apart from the "
              "measured runs', and beside them in memory_by_source_kind",
        "zh": "trace 案例（来源 trace：追踪一步训练得到的分配量）与预测的 allocated 峰值比较，不含分配器缓存和 CUDA 上下文；"
              "其统计在 'trace' 下，与实测运行分开，并在 memory_by_source_kind 中并列"},
    "va_note_resident": {
        "en": "a measured peak below the weights and optimizer states its stated setup keeps resident is listed under "
              "'excluded' and left out of the memory statistics (--keep-inconsistent counts it)",
        "zh": "低于所述配置常驻的权重与优化器状态的实测峰值列在 'excluded' 下，不计入显存统计（--keep-inconsistent 会计入）"},
    "va_note_peak": {
        "en": "a measured speed whose matmuls (a causal model's attention at half its work) would need more than the "
              "GPU's dense peak is listed under 'excluded' and left out of the throughput and MFU statistics "
              "(--keep-inconsistent counts it)",
        "zh": "其矩阵乘（因果模型的注意力按一半计算量计）需要超过 GPU 稠密峰值的实测速度列在 'excluded' 下，不计入吞吐与 MFU "
              "统计（--keep-inconsistent 会计入）"},
    "va_note_power": {
        "en": "a speed measured on GPUs held under a power limit below the catalog GPU's TDP (the case's notes state "
              "it) is listed under 'excluded' and left out of the throughput and MFU statistics; its memory is compared",
        "zh": "在低于目录 GPU TDP 的功耗上限下测得的速度（案例注释中写明）列在 'excluded' 下，不计入吞吐与 MFU 统计；"
              "其显存照常比较"},
    "va_note_throughput": {
        "en": "throughput: tokens/s per GPU where measured, else step time; variable-length runs are not compared on "
              "throughput",
        "zh": "吞吐：有实测每 GPU tokens/s 时用它，否则用每步时间；变长数据的运行不比较吞吐"},
    "va_note_errors": {"en": "errors are absolute percentage errors as fractions (0.1 = 10%)",
                       "zh": "误差为绝对百分比误差，以小数表示（0.1 = 10%）"},
    # serving validate (serving/validate.py): why a TTFT is excluded, and the report's notes
    "va_sv_ttft": {
        "en": "measured {ttft:g} ms is below the {floor:.1f} ms a {tokens}-token prefill takes at the GPU's dense "
              "peak: not a full prefill (prefix cache?)",
        "zh": "实测 {ttft:g} ms 低于 {tokens} token 的 prefill 在 GPU 稠密峰值下所需的 {floor:.1f} ms：不是完整的 prefill（前缀缓存？）"},
    "va_sv_note_kv": {"en": "kv_capacity: KV-cache tokens where measured, else max concurrency, else the KV cache's GiB",
                      "zh": "kv_capacity：有实测 KV 缓存 token 数时用它，否则用最大并发，否则用 KV 缓存的 GiB"},
    "va_sv_note_version": {
        "en": "a case without engine_version is predicted with its engine_version_inferred (stated in the case), else "
              "the engine's default version",
        "zh": "没有 engine_version 的案例按其 engine_version_inferred（案例中写明）预测，否则按引擎的默认版本"},
    "va_sv_note_throughput": {"en": "throughput: output tokens/s where measured, else total tokens/s, else requests/s",
                              "zh": "吞吐：有实测输出 tokens/s 时用它，否则用总 tokens/s，否则用 requests/s"},
    "va_sv_note_gptq": {"en": "GPTQ 8-bit checkpoints are predicted as int8 weights", "zh": "GPTQ 8 位权重按 int8 权重预测"},
    "va_sv_note_fields": {
        "en": "serving.sampler (flashinfer | pytorch), serving.custom_all_reduce and serving.block_size are read where "
              "a case states them (fields beyond SERVING_SCHEMA.md, which readers may add)",
        "zh": "serving.sampler（flashinfer | pytorch）、serving.custom_all_reduce 和 serving.block_size 在案例写明时读取"
              "（SERVING_SCHEMA.md 之外、读取方可加的字段）"},
    "va_sv_note_served": {
        "en": "a measured run that served is predicted for speed even where trainfit's KV estimate at the engine's "
              "default flags falls below its max_model_len (served_with_predicted_kv_short lists them)",
        "zh": "实际已运行的服务即使 trainfit 在引擎默认参数下估算的 KV 低于其 max_model_len，也照常预测速度"
              "（served_with_predicted_kv_short 列出它们）"},
    # validate and serving validate: why a case was skipped
    "va_skip_cpu": {"en": "CPU measurement", "zh": "CPU 上的测量"},
    "va_skip_trace_kind": {"en": "trace case without memory_kind allocated (a trace counts allocated bytes only)",
                           "zh": "trace 案例的 memory_kind 不是 allocated（追踪只统计已分配的字节）"},
    "va_skip_gpu": {"en": "GPU not in the catalog", "zh": "GPU 不在目录中"},
    "va_skip_instance": {"en": "instance {instance} not in the catalog with this GPU",
                         "zh": "实例 {instance} 不在目录中（或其 GPU 与此不同）"},
    "va_skip_nodes": {"en": "GPUs do not divide into nodes", "zh": "GPU 数不能均分到节点"},
    "va_skip_engine": {"en": "engine not modelled", "zh": "未建模的推理引擎"},
    "va_skip_incompatible": {"en": "incompatible: {rule}", "zh": "不兼容：{rule}"},
    "va_skip_arch": {"en": "model architecture incomplete", "zh": "模型结构不完整"},
    "va_skip_type_or_config": {"en": "model type not supported or config incomplete",
                               "zh": "模型类型不受支持或配置不完整"},
    "va_skip_type": {"en": "model type not supported", "zh": "模型类型不受支持"},
    "va_skip_not_object": {"en": "not a JSON object", "zh": "不是 JSON 对象"},
    "va_skip_nothing_fits": {"en": "nothing comparable (the setup does not fit, or no measured value)",
                             "zh": "无可比较的值（配置放不下，或没有实测值）"},
    "va_skip_nothing_comparable": {
        "en": "nothing comparable (variable-length throughput only, or no usable measured value)",
        "zh": "无可比较的值（只有变长数据的吞吐，或没有可用的实测值）"},
    "va_skip_nothing_measured": {"en": "nothing measured", "zh": "没有实测值"},
    "va_skip_gpus": {"en": "number of GPUs unknown", "zh": "GPU 数未知"},
    "va_skip_layout": {"en": "parallel layout unknown", "zh": "并行布局未知"},
    "va_skip_pp": {"en": "pipeline parallelism not modelled", "zh": "未建模流水线并行"},
    "va_skip_seq": {"en": "sequence length or micro-batch unknown", "zh": "序列长度或 micro-batch 未知"},
    "va_skip_serving": {"en": "serving settings invalid or incomplete", "zh": "推理部署设置无效或不完整"},
    "va_skip_varlen": {"en": "variable-length workload", "zh": "变长工作负载"},
    "va_skip_weights": {"en": "weight format not modelled", "zh": "未建模的权重格式"},
    "va_skip_malformed": {"en": "malformed {section} fields", "zh": "{section} 字段格式错误"},
    "va_skip_unsupported_settings": {"en": "unsupported {section} settings", "zh": "不支持的 {section} 设置"},
    "va_skip_unsupported": {"en": "unsupported {name}", "zh": "不支持的 {name}"},
    "va_w_optimizer": {"en": "optimizer", "zh": "优化器"},
    "va_skip_config_invalid": {"en": "model config invalid or incomplete", "zh": "模型配置无效或不完整"},
    "va_skip_varlen_range": {"en": "variable-length fields out of range (avg_len <= max_len <= seq_len)",
                             "zh": "变长字段超出范围（应满足 avg_len <= max_len <= seq_len）"},
    "va_skip_duplicate": {"en": "duplicate case id (the first is counted)", "zh": "案例 id 重复（只计第一个）"},
    "va_skip_implausible": {"en": "implausible measured {field}", "zh": "实测 {field} 不合理"},
    "va_skip_could_not": {"en": "could not predict: {error}", "zh": "无法预测：{error}"},
    "va_skip_unexpected": {"en": "could not predict (unexpected {error})", "zh": "无法预测（意外的 {error}）"},
    # trace: the notes beside a traced step (trace/__init__.py, trace/tracer.py)
    "va_tr_unsharded": {
        "en": "one GPU's unsharded view: ZeRO/FSDP sharding, DDP buckets, the CUDA context and allocator caching are "
              "not traced",
        "zh": "单张 GPU 的未切分视图：未追踪 ZeRO/FSDP 切分、DDP 梯度桶、CUDA 上下文和分配器缓存"},
    "va_tr_qlora": {
        "en": "QLoRA traced as LoRA on a 16-bit base (bitsandbytes' 4-bit storage needs CUDA); the weights are "
              "corrected to NF4 analytically, and to fp32 for the parameters PEFT's prepare_model_for_kbit_training "
              "upcasts",
        "zh": "QLoRA 按 16 位基座上的 LoRA 追踪（bitsandbytes 的 4 位存储需要 CUDA）；权重按解析方式改回 NF4，"
              "PEFT 的 prepare_model_for_kbit_training 升为 fp32 的参数按 fp32 计"},
    "va_tr_flash": {"en": "FlashAttention traced as SDPA's flash kernel for the CPU (same saved tensors)",
                    "zh": "FlashAttention 按 SDPA 在 CPU 上的 flash 内核追踪（保存的张量相同）"},
    "va_tr_dropout": {
        "en": "dropout on the CPU keeps its mask in the activation dtype (CUDA keeps a 1-byte bool mask): the trace "
              "counts up to 3 bytes more per dropped element than a GPU holds",
        "zh": "CPU 上的 dropout 以激活值的数据类型保存掩码（CUDA 保存 1 字节的 bool 掩码）：追踪结果每个被丢弃的元素"
              "最多比 GPU 多计 3 字节"},
    "va_tr_routing": {
        "en": "MoE routing is data (fake tensors have none): the experts were traced with balanced routing, each "
              "expert taking the expected share of the tokens x top-k rows (the same tensors transformers' grouped_mm "
              "experts hold, whatever the routing); the router itself runs as written",
        "zh": "MoE 路由取决于数据（伪张量没有数据）：专家按均衡路由追踪，每个专家分到 token 数 × top-k 行的期望份额"
              "（无论如何路由，transformers 的 grouped_mm 专家持有的张量都相同）；路由器本身按原代码运行"},
    "va_tr_sdpa": {
        "en": "attention with a value head dim other than the query's (MLA) was traced with SDPA's memory-efficient "
              "kernel, which a GPU selects for it (it saves q, k, v, the output and the log-sum-exp); the CPU would "
              "fall back to the math path, which keeps the s x s probabilities",
        "zh": "value 头维度与 query 不同的注意力（MLA）按 SDPA 的 memory-efficient 内核追踪，GPU 会为它选用该内核"
              "（保存 q、k、v、输出和 log-sum-exp）；CPU 会退回数学实现，保留 s × s 的概率矩阵"},
    "va_tr_paged": {
        "en": "the trace keeps the optimizer states on the device (no paged states): they are not those of the "
              "requested setup",
        "zh": "追踪把优化器状态留在设备上（无分页状态）：它们不是所请求配置的"},
    "va_tr_allocated": {
        "en": "memory_gib counts allocated bytes (no CUDA context or allocator cache); the analytic allocated figure "
              "is compared",
        "zh": "memory_gib 计的是已分配的字节（不含 CUDA 上下文和分配器缓存）；与之比较的是解析模型的已分配值"},
    "va_tr_logits": {"en": "the trace's activations include the logits buffers; temporaries are in other",
                     "zh": "追踪的激活值包含 logits 缓冲区；临时张量计入其他"},
    "va_tr_no_shard": {"en": "the trace does not shard: compare the sharded terms analytically",
                       "zh": "追踪不做切分：切分后的各项请用解析模型比较"},
    # the generic reader (catalog/generic.py): a multimodal config's text model, a structure template under another
    # transformers version
    "va_gen_text_only": {"en": "{model}: the text model only ({text}); the vision tower is not counted",
                         "zh": "{model}：只计文本模型（{text}）；未计入视觉塔"},
    "va_gen_no_torch": {
        "en": "{model}: the structure is trainfit's template made with transformers {made}; the installed "
              "transformers {installed} cannot check it without torch",
        "zh": "{model}：结构来自 trainfit 用 transformers {made} 生成的模板；已安装的 transformers {installed} 没有 torch，"
              "无法核对"},
    "va_gen_cannot_build": {
        "en": "{model}: the structure is trainfit's template made with transformers {made}; the installed "
              "transformers {installed} cannot build this config ({error})",
        "zh": "{model}：结构来自 trainfit 用 transformers {made} 生成的模板；已安装的 transformers {installed} "
              "无法构建此配置（{error}）"},
    "va_gen_otherwise": {
        "en": "{model}: transformers {installed} builds this config otherwise than trainfit's template made with "
              "transformers {made} ({difference}); the structure read from transformers {installed} is used",
        "zh": "{model}：transformers {installed} 构建此配置的结果与 trainfit 用 transformers {made} 生成的模板不同"
              "（{difference}）；采用从 transformers {installed} 读取的结构"},
    # trainfit efficiencies: how a value is chosen for a GPU (catalog/efficiency.py PRECEDENCE), a fit at its bound
    "va_prec_set": {"en": "--set NAME=VALUE (a plain value replaces every per-GPU/architecture/... variant)",
                    "zh": "--set NAME=VALUE（一个普通值替换所有按 GPU/架构/... 区分的取值）"},
    "va_prec_link": {"en": "by_link[link] (collectives: the link that carries them)",
                     "zh": "by_link[link]（集合通信：承载它们的链路）"},
    "va_prec_framework": {"en": "by_framework[stack] (--framework, or a validation case's stack)",
                          "zh": "by_framework[stack]（--framework，或验证案例的训练栈）"},
    "va_prec_gpu_set": {"en": "by_gpu[gpu] set by a calibration, --calibration FILE or --set",
                        "zh": "by_gpu[gpu]，由校准、--calibration FILE 或 --set 设定"},
    "va_prec_gpu_yaml": {
        "en": "by_gpu[gpu] from efficiency.yaml alone (uncalibrated): a ratio to its architecture, applied to the "
              "architecture's current value = by_architecture[arch] x by_gpu[gpu] / efficiency.yaml's "
              "by_architecture[arch] (so a calibrated architecture moves its GPUs with it and an uncalibrated GPU "
              "never overrides it)",
        "zh": "by_gpu[gpu]，仅来自 efficiency.yaml（未校准）：它是相对其架构的比值，作用于该架构的当前值 = "
              "by_architecture[arch] × by_gpu[gpu] / efficiency.yaml 的 by_architecture[arch]（因此校准过的架构会带着它的 "
              "GPU 一起变，未校准的 GPU 不会覆盖它）"},
    "va_prec_arch": {"en": "by_architecture[arch] (calibrated or efficiency.yaml)",
                     "zh": "by_architecture[arch]（校准值或 efficiency.yaml）"},
    "va_at_bound": {"en": "{level} = {value:g} at the fit's {side} bound", "zh": "{level} = {value:g}，处于拟合范围的{side}"},
    "va_bound_low": {"en": "low", "zh": "下限"},
    "va_bound_high": {"en": "high", "zh": "上限"},
}
