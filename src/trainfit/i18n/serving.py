"""Messages of `trainfit serving` (en / zh). Merged into the message table by `trainfit.i18n`."""

from __future__ import annotations

SERVING_MESSAGES: dict[str, dict[str, str]] = {
    # tables
    "sv_title": {"en": "Serving {model} on {gpus} x {gpu} (TP {tp}, {engine} {version})",
                 "zh": "在 {gpus} 张 {gpu} 上部署 {model}（TP {tp}，{engine} {version}）"},
    "sv_memory": {"en": "Memory per GPU", "zh": "每张 GPU 显存"},
    "sv_weights": {"en": "weights ({fmt})", "zh": "权重（{fmt}）"},
    "sv_buffers": {"en": "buffers loaded with the weights", "zh": "随权重加载的缓冲区"},
    "sv_activation": {"en": "profiling activation peak", "zh": "预分析激活峰值"},
    "sv_state_pool": {"en": "request states of the linear-attention / Mamba layers ({n})",
                      "zh": "线性注意力 / Mamba 层的请求状态（{n} 个）"},
    "sv_non_torch": {"en": "non-torch (cuBLAS, NCCL, context)", "zh": "非 PyTorch 内存（cuBLAS、NCCL、上下文）"},
    "sv_cuda_graph": {"en": "CUDA graphs", "zh": "CUDA 图"},
    "sv_kv_budget": {"en": "KV cache", "zh": "KV 缓存"},
    "sv_budget": {"en": "engine budget ({frac:.0%} of {total:.1f} GiB)", "zh": "引擎预算（{total:.1f} GiB 的 {frac:.0%}）"},
    "sv_kv_per_token": {"en": "KV bytes per token (per GPU)", "zh": "每 token KV 字节（每卡）"},
    "sv_kv_tokens": {"en": "KV capacity (tokens)", "zh": "KV 容量（tokens）"},
    "sv_max_conc": {"en": "max concurrency at {n} tokens", "zh": "{n} tokens 时的最大并发"},
    "sv_speed": {"en": "Speed ({inp} in / {out} out, {load})", "zh": "速度（输入 {inp} / 输出 {out}，{load}）"},
    "sv_conc": {"en": "concurrency {c}", "zh": "并发 {c}"},
    "sv_rate": {"en": "{r} requests/s", "zh": "每秒 {r} 个请求"},
    "sv_all_at_once": {"en": "{n:,} requests at once", "zh": "{n:,} 个请求同时发出"},
    "sv_ttft": {"en": "time to first token", "zh": "首 token 延迟（TTFT）"},
    "sv_ttft_p99": {"en": "time to first token, p99", "zh": "首 token 延迟 p99"},
    "sv_tpot": {"en": "time per output token", "zh": "每输出 token 时间（TPOT）"},
    "sv_out_tps": {"en": "output tokens/s", "zh": "输出 tokens/s"},
    "sv_req_s": {"en": "requests/s", "zh": "请求/秒"},
    "sv_decode_bound": {"en": "decode bound", "zh": "解码瓶颈"},
    "sv_bw_bound": {"en": "bandwidth bound at batch 1 (tokens/s)", "zh": "批大小 1 的带宽上限（tokens/s）"},
    "sv_running": {"en": "requests in flight", "zh": "在途请求数"},
    "sv_fits": {"en": "fits", "zh": "可以部署"},
    "sv_not_fit": {"en": "does NOT fit", "zh": "放不下"},
    "sv_what_fits": {"en": "What would fit", "zh": "可行的调整"},
    "sv_cost_m": {"en": "cost / 1M output tokens", "zh": "每百万输出 tokens 费用"},
    "sv_cost_h": {"en": "cost / hour", "zh": "每小时费用"},
    "sv_setting": {"en": "setting", "zh": "设置"},
    "sv_instance": {"en": "instance", "zh": "实例"},
    "sv_ranked": {"en": "Serving targets met, cheapest per output token first",
                  "zh": "满足服务目标的方案（按每输出 token 成本排序）"},
    "sv_compare": {"en": "Serving {model}: comparison", "zh": "{model} 部署对比"},
    "sv_none_meets": {"en": "No instance in the catalog meets the target ({n} setups tried)",
                      "zh": "目录中没有实例满足目标（已尝试 {n} 种配置）"},
    "sv_h_kv": {"en": "KV tokens", "zh": "KV tokens"},
    "sv_h_tps": {"en": "out tok/s", "zh": "输出 tok/s"},
    "sv_h_ttft": {"en": "TTFT", "zh": "TTFT"},
    "sv_h_tpot": {"en": "TPOT", "zh": "TPOT"},
    "sv_h_cost_h": {"en": "/hour", "zh": "每小时"},
    "sv_h_cost_m": {"en": "/1M out", "zh": "每百万输出"},
    "sv_h_setup": {"en": "setup", "zh": "配置"},
    "sv_unbounded": {"en": "requests queue without bound; latencies shown are for the engine at its largest batch",
                     "zh": "请求会无限排队；所示延迟为引擎在最大批次下的数值"},
    "sv_legend": {"en": "c = concurrency, x = replicas per instance, n = instances",
                  "zh": "c = 并发数，x = 每实例副本数，n = 实例数"},
    "sv_default_len": {"en": "max_model_len {n} (trainfit's default; the engines default to the model's {max} "
                              "positions)",
                       "zh": "max_model_len {n}（trainfit 默认值；引擎默认使用模型的 {max} 个位置）"},
    "sv_hybrid_state": {"en": "vLLM's hybrid KV cache: {full} full-attention and {state} linear-attention or Mamba "
                               "layers in {groups} groups, {block}-token blocks (a page holds a layer's state); a request of {n} "
                               "tokens takes {need} blocks",
                        "zh": "vLLM 混合 KV 缓存：{full} 层全注意力与 {state} 层线性注意力或 Mamba，"
                              "分为 {groups} 个层组，每块 {block} 个 token（一页容纳一层的状态）；一个 {n} token 的请求占 {need} 个块"},
    "sv_hybrid_sglang": {"en": "SGLang's hybrid pools: {slots} request states of {state} linear-attention or Mamba "
                                "layers ({gib:.2f} GiB, the state share of --mamba-full-memory-ratio {ratio} with the radix "
                                "cache on) beside the KV of {full} full-attention layers; at most {running} requests "
                                "run at once",
                         "zh": "SGLang 混合模型内存池：{slots} 个请求状态（{state} 层线性注意力或 Mamba，{gib:.2f} GiB，"
                               "radix 缓存开启时按 --mamba-full-memory-ratio {ratio} 划分），其余为 {full} 层全注意力的 KV；"
                               "同时最多运行 {running} 个请求"},
    "sv_hybrid_pool": {"en": "{engine} keeps a hybrid's request states in a pool of their own: {slots} states of "
                              "{state} linear-attention or Mamba layers ({gib:.2f} GiB, one per request of its batch size) "
                              "before the KV of {full} full-attention layers (read from its code; no published log "
                              "of a hybrid checks it)",
                       "zh": "{engine} 为混合模型单独保留请求状态池：{slots} 个状态（{state} 层线性注意力或 Mamba，"
                             "{gib:.2f} GiB，按批大小每个请求一个），其余为 {full} 层全注意力的 KV"
                             "（依据其代码；尚无公开的混合模型日志可核对）"},
    "sv_hybrid_window": {"en": "vLLM's hybrid KV cache: {full} full-attention and {sliding} sliding-window ({window} "
                                "tokens) layers in {groups} groups; a request of {n} tokens takes {need} blocks (while "
                                "decoding, the window layers free the blocks behind their window)",
                         "zh": "vLLM 混合 KV 缓存：{full} 层全注意力与 {sliding} 层滑动窗口（{window} 个 token）注意力，"
                               "分为 {groups} 个层组；一个 {n} token 的请求占 {need} 个块（解码时滑动窗口层会释放窗口之外的块）"},
    "sv_hybrid_not_modelled": {"en": "a hybrid model (sliding-window or linear-attention layers): on {engine} "
                                     "{version} its KV is counted in every layer, as for full attention; only "
                                     "vLLM's hybrid KV cache (V1, from 0.9) is modelled",
                               "zh": "混合模型（含滑动窗口或线性注意力层）：在 {engine} {version} 上按每层都是全注意力计算 KV；"
                                     "目前只对 vLLM 的混合 KV 缓存（V1，0.9 起）建模"},
    "sv_hybrid_tokens": {"en": "the KV capacity in tokens counts a token in every layer, as this vLLM version logs it, "
                               "so it understates the concurrency",
                         "zh": "KV 容量（token 数）按每个 token 占用全部层计算（与该 vLLM 版本的日志相同），因此低估了并发数"},
    "sv_assumptions": {"en": "Assumptions", "zh": "假设"},
    # reasons (facts -> words)
    "sv_r_weights": {"en": "weights ({need:.1f} GiB per GPU) exceed the engine budget ({have:.1f} GiB)",
                     "zh": "权重（每卡 {need:.1f} GiB）超过引擎预算（{have:.1f} GiB）"},
    "sv_r_kv": {"en": "KV cache holds {have} tokens, fewer than one request of max length {need}",
                "zh": "KV 缓存只能容纳 {have} 个 token，少于一个最大长度 {need} 的请求"},
    "sv_r_gpus": {"en": "needs {need} GPUs per instance; the instance has {have}",
                  "zh": "需要每实例 {need} 张 GPU，该实例只有 {have} 张"},
    "sv_r_ttft": {"en": "TTFT {have:.0f} ms > {need:.0f} ms", "zh": "TTFT {have:.0f} ms > {need:.0f} ms"},
    "sv_r_tpot": {"en": "TPOT {have:.1f} ms > {need:.1f} ms", "zh": "TPOT {have:.1f} ms > {need:.1f} ms"},
    "sv_r_tps": {"en": "{have:.0f} output tokens/s < {need:.0f}", "zh": "输出 {have:.0f} tokens/s < {need:.0f}"},
    "sv_r_unstable": {"en": "request rate {need:g}/s exceeds the capacity {have:.2f}/s",
                      "zh": "请求速率 {need:g}/s 超过处理能力 {have:.2f}/s"},
    "sv_r_dtype": {"en": "{what} is not supported on {gpu}", "zh": "{gpu} 不支持 {what}"},
    "sv_alt": {"en": "{what}: {kv} KV tokens, max concurrency {conc:.1f} at {ctx} tokens",
               "zh": "{what}：KV {kv} tokens，{ctx} tokens 时最大并发 {conc:.1f}"},
    "sv_alt_weights": {"en": "weights {fmt}", "zh": "权重 {fmt}"},
    "sv_alt_kv": {"en": "fp8 KV cache", "zh": "fp8 KV 缓存"},
    "sv_alt_kv_int8": {"en": "int8 KV cache (LMDeploy --quant-policy 8)", "zh": "int8 KV 缓存（LMDeploy --quant-policy 8）"},
    "sv_alt_len": {"en": "--max-model-len {n}", "zh": "--max-model-len {n}"},
    "sv_alt_seqs": {"en": "--max-num-seqs {n} (fewer request states)", "zh": "--max-num-seqs {n}（更少的请求状态）"},
    "sv_alt_tp": {"en": "TP {tp} over {tp} x {gpu}", "zh": "{tp} 张 {gpu} 张量并行（TP {tp}）"},
    "sv_alt_gpu": {"en": "one {gpu}", "zh": "单张 {gpu}"},
    # errors
    "sv_e_choice": {"en": "--{flag} must be one of {choices}, got {value!r}{dym}",
                    "zh": "--{flag} 必须是 {choices} 之一，收到 {value!r}{dym}"},
    "sv_e_positive": {"en": "--{flag} must be a positive number, got {value!r}",
                      "zh": "--{flag} 必须是正数，收到 {value!r}"},
    "sv_e_fraction": {"en": "--{flag} must be between 0 and 1 (exclusive of 0), got {value!r}",
                      "zh": "--{flag} 必须在 0 和 1 之间（不含 0），收到 {value!r}"},
    "sv_e_load": {"en": "give --concurrency or --request-rate, not both",
                  "zh": "--concurrency 和 --request-rate 只能给一个"},
    "sv_e_where": {"en": "give --gpu or --instance (or --compare)", "zh": "请给出 --gpu 或 --instance（或 --compare）"},
    "sv_e_both": {"en": "give --gpu or --instance, not both", "zh": "--gpu 和 --instance 只能给一个"},
    "sv_e_tp_heads": {"en": "tensor parallel {tp} does not divide the {heads} attention heads of {model}",
                      "zh": "张量并行 {tp} 不能整除 {model} 的 {heads} 个注意力头"},
    "sv_e_len": {"en": "--max-model-len {n} exceeds the model's {max} positions",
                 "zh": "--max-model-len {n} 超过模型的 {max} 个位置"},
    "sv_e_ctx": {"en": "--input-len + --output-len ({n}) exceeds --max-model-len {max}",
                 "zh": "--input-len + --output-len（{n}）超过 --max-model-len {max}"},
    "sv_e_encoder": {"en": "{model} is an encoder; `trainfit serving` models decoder generation",
                     "zh": "{model} 是编码器模型；`trainfit serving` 只针对解码生成"},
    "sv_e_no_kv": {"en": "{model}: its config gives no attention dimensions at the top (hidden size {hidden}, {kv} KV "
                         "heads of {dim}): a composite config (its text model nested under another key) has none to "
                         "size a KV cache with; give the text model's own config.json",
                   "zh": "{model}：其配置顶层没有注意力维度（hidden size {hidden}，{kv} 个 KV 头，每头 {dim}）："
                         "复合配置（文本模型嵌套在其他键下）无法据此计算 KV 缓存；请提供文本模型自己的 config.json"},
    "sv_e_no_attention": {"en": "{model} has no attention layers (a state-space model such as Mamba): `trainfit serving` "
                                "sizes attention KV caches and does not model it",
                          "zh": "{model} 没有注意力层（Mamba 之类的状态空间模型）：`trainfit serving` 按注意力 KV 缓存估算，"
                                "不支持该模型"},
    "sv_e_instance_gpu": {"en": "instance {name} has no known whole GPUs to serve on",
                          "zh": "实例 {name} 没有可用的整卡 GPU 信息"},
    "sv_e_target": {"en": "the serving search needs a target: --target-tokens-per-s, --max-ttft-ms or --max-tpot-ms",
                    "zh": "服务搜索需要目标：--target-tokens-per-s、--max-ttft-ms 或 --max-tpot-ms"},
    "sv_e_lmd_version": {"en": "LMDeploy versions before 0.2.0 are not modelled (their cache_max_entry_count was a "
                                "block count), got {value!r}",
                         "zh": "不支持 0.2.0 之前的 LMDeploy 版本（当时 cache_max_entry_count 是块数），收到 {value!r}"},
    "sv_e_lmd_kv": {"en": "LMDeploy's KV cache dtype (--quant-policy) must be one of {choices}, got {value!r}",
                    "zh": "LMDeploy 的 KV 缓存类型（--quant-policy）必须是 {choices} 之一，收到 {value!r}"},
    "sv_e_lmd_kv_old": {"en": "LMDeploy before 0.4.0 has no {value} KV cache (only int8)",
                        "zh": "0.4.0 之前的 LMDeploy 没有 {value} KV 缓存（只有 int8）"},
    "sv_e_lmd_weights": {"en": "LMDeploy's {backend} engine does not serve {value!r} weights; it serves {choices}",
                         "zh": "LMDeploy 的 {backend} 引擎不支持 {value!r} 权重；支持 {choices}"},
    "sv_lmd_budget_free": {"en": "GPU memory ({backend}: KV = {frac:.0%} of the free after the weights)",
                           "zh": "显存（{backend}：KV = 加载权重后空闲显存的 {frac:.0%}）"},
    "sv_lmd_budget_total": {"en": "GPU memory ({backend}: KV = {frac:.0%} of the total)",
                            "zh": "显存（{backend}：KV = 总显存的 {frac:.0%}）"},
    "sv_e_lmd_lora": {"en": "LMDeploy serves LoRA adapters on its PyTorch engine only: add --lmdeploy-backend pytorch",
                      "zh": "LMDeploy 只有 PyTorch 引擎能加载 LoRA 适配器：请加 --lmdeploy-backend pytorch"},
    "sv_e_lmd_format_old": {"en": "LMDeploy serves {value} checkpoints from {since} on (--engine-version)",
                            "zh": "LMDeploy 从 {since} 起才支持 {value} 权重（--engine-version）"},
    "sv_e_lmd_kv_engine": {"en": "--kv-cache-dtype {value} is LMDeploy's (--engine lmdeploy); {engine} takes auto | fp8",
                           "zh": "--kv-cache-dtype {value} 仅用于 LMDeploy（--engine lmdeploy）；{engine} 只接受 auto | fp8"},
    "sv_e_version": {"en": "--engine-version must look like 0.6.3, got {value!r}",
                     "zh": "--engine-version 格式应如 0.6.3，收到 {value!r}"},
    "sv_e_nofit": {"en": "this setup does not fit ({why}); `trainfit serving` lists what would",
                   "zh": "该配置放不下（{why}）；`trainfit serving` 会列出可行的调整"},
    "sv_e_set": {"en": "unknown serving value {name!r}; known: {known}", "zh": "未知的服务参数 {name!r}；可用：{known}"},
    # TensorRT-LLM (serving/engine_trtllm.py)
    "sv_e_trt_weights": {"en": "--weights {value!r} is not modelled for TensorRT-LLM; choose one of {choices}",
                         "zh": "TensorRT-LLM 暂不支持 --weights {value!r} 的建模；请选择 {choices} 之一"},
    "sv_e_trt_fraction": {"en": "--gpu-memory-utilization (TensorRT-LLM's kv_cache_free_gpu_memory_fraction) must be "
                                "below 1, got {value!r}",
                          "zh": "--gpu-memory-utilization（TensorRT-LLM 的 kv_cache_free_gpu_memory_fraction）必须小于 1，"
                                "收到 {value!r}"},
    "sv_e_trt_lora": {"en": "trtllm-serve has no LoRA flag; serve the merged model (train.py's merged/ folder) instead",
                      "zh": "trtllm-serve 没有 LoRA 参数；请改为部署合并后的模型（train.py 的 merged/ 目录）"},
    "sv_trt_budget": {"en": "GPU memory {total:.1f} GiB (KV cache: {frac:.0%} of the {free:.1f} GiB left free)",
                      "zh": "GPU 显存 {total:.1f} GiB（KV 缓存取剩余 {free:.1f} GiB 的 {frac:.0%}）"},
    "sv_trt_note": {"en": "TensorRT-LLM {version} ({backend} backend): KV cache = {frac:.0%} of the {free:.1f} GiB "
                          "left free after the weights, a {tokens}-token profiling pass and runtime memory; "
                          "max_batch_size {bs}, max_num_tokens {tokens} ({source})",
                    "zh": "TensorRT-LLM {version}（{backend} 后端）：KV 缓存 = 权重、{tokens} token 预分析和运行时内存之后"
                          "剩余 {free:.1f} GiB 的 {frac:.0%}；max_batch_size {bs}，max_num_tokens {tokens}（{source}）"},
    # request mixes (serving/workload.py)
    "sv_e_burst": {"en": "--request-rate inf (all requests at once) needs --num-prompts N and a single estimate "
                         "(not --compare or a search)",
                   "zh": "--request-rate inf（所有请求同时发出）需要 --num-prompts N，且只用于单次估算（不能与 --compare 或搜索同用）"},
    "sv_e_num_prompts": {"en": "--num-prompts must be between 1 and {max:,}, got {value}",
                         "zh": "--num-prompts 必须在 1 到 {max:,} 之间，收到 {value}"},
    "sv_e_workload_name": {"en": "--workload {value!r} is no request mix and no file{dym}",
                           "zh": "--workload {value!r} 既不是请求分布名称，也不是文件{dym}"},
    "sv_e_workload": {"en": "--workload must be fixed, uniform, sharegpt or a CSV/JSONL file of lengths, got {value!r}",
                      "zh": "--workload 必须是 fixed、uniform、sharegpt 或一个长度 CSV/JSONL 文件，收到 {value!r}"},
    "sv_e_prefix_caching": {"en": "prefix_caching must be true, false or absent (the engine's default), got {value!r}",
                            "zh": "prefix_caching 必须是 true、false 或不写（引擎默认），收到 {value!r}"},
    "sv_e_range_ratio": {"en": "--range-ratio must be at least 0 and below 1 (vLLM's rule), got {value!r}",
                         "zh": "--range-ratio 必须不小于 0 且小于 1（vLLM 的规则），收到 {value!r}"},
    "sv_e_mix_row": {"en": "{path}, line {line}: expected two positive integers (input, output tokens), got {text!r}",
                     "zh": "{path} 第 {line} 行：应为两个正整数（输入、输出 tokens），收到 {text!r}"},
    "sv_e_mix_rows": {"en": "{path}: more than {cap} requests; give a sample of them",
                      "zh": "{path}：请求超过 {cap} 条；请给出其中的样本"},
    "sv_e_mix_empty": {"en": "{path}: no (input, output) lengths in the file",
                       "zh": "{path}：文件中没有（输入、输出）长度"},
    "sv_mix": {"en": "request mix {kind} ({n} requests): input mean {mi:.0f} (p50 {i50}, p99 {i99}), "
                     "output mean {mo:.0f} (p50 {o50}, p99 {o99})",
               "zh": "请求分布 {kind}（{n} 个请求）：输入均值 {mi:.0f}（p50 {i50}，p99 {i99}），"
                     "输出均值 {mo:.0f}（p50 {o50}，p99 {o99}）"},
}
