"""Errors of bad input (names from the catalogs, the declared job fields and closed choices, units, numbers, files,
--data), en / zh, with the "did you mean" and hint sentences that follow them. Registered in the one message table
by `trainfit.i18n`; made with `say` where they are raised."""

from __future__ import annotations

MESSAGES: dict[str, dict[str, str]] = {
    # a message inside another: a file's name before its own message, "did you mean", a hint after ';'
    "ei_in_file": {"en": "{where}: {message}", "zh": "{where}：{message}"},
    "ei_dym": {"en": " (did you mean: {close}?)", "zh": "（是否想输入：{close}？）"},
    "ei_hint": {"en": "; {hint}", "zh": "；{hint}"},
    "ei_hint_gpus": {"en": "`trainfit gpus` lists the catalog", "zh": "`trainfit gpus` 列出目录"},
    "ei_hint_instances": {"en": "`trainfit instances` lists the catalog", "zh": "`trainfit instances` 列出目录"},
    "ei_hint_regions": {"en": "`trainfit instances` lists regions with prices",
                        "zh": "`trainfit instances` 列出有价格的地域"},
    "ei_hint_models": {"en": "use a preset (`trainfit models`), a config.json path or a model directory",
                       "zh": "请使用预设（`trainfit models`）、config.json 路径或模型目录"},
    "ei_hint_paste": {"en": "choose a preset or paste a config.json", "zh": "请选择预设或粘贴 config.json"},
    "ei_hint_frameworks": {"en": "choose from {names} ('{other}': a stack not listed)",
                           "zh": "可选：{names}（'{other}'：未列出的训练框架）"},
    # hostile and malformed files (issue 32): the detail after a file's name
    "ei_samples_where": {"en": "cannot read samples from {path}", "zh": "无法读取 {path} 中的样本"},
    "ei_samples_list": {"en": "'samples' must be a list", "zh": "'samples' 必须是列表"},
    "ei_json_constant": {"en": "{name} is not a JSON number", "zh": "{name} 不是 JSON 数字"},
    "ei_not_json": {"en": "{where}: not valid JSON ({detail})", "zh": "{where}：不是有效的 JSON（{detail}）"},
    "ei_json_digits": {"en": "{where}: a number with more than 4300 digits is not a value any field takes",
                       "zh": "{where}：超过 4300 位的数不是任何字段可取的值"},
    "ei_config_not_object": {"en": "{file}: a config.json holds a JSON object, not {type}",
                             "zh": "{file}：config.json 应为 JSON 对象，而不是 {type}"},
    "ei_model_type_text": {"en": "{where}: model_type must be text (such as \"llama\"), not {type} {value}",
                           "zh": "{where}：model_type 必须是文本（如 \"llama\"），而不是 {type} {value}"},
    "ei_model_type_unknown": {
        "en": "model_type {model_type!r} is known neither to trainfit's built-in families nor to transformers "
              "{version}: a newer transformers may know it (pip install -U transformers), or pass the config.json of "
              "a supported architecture",
        "zh": "trainfit 的内置架构和 transformers {version} 都不认识 model_type {model_type!r}：更新的 transformers 也许认识"
              "（pip install -U transformers），或请给出受支持架构的 config.json"},
    "ei_transformers_rejects": {"en": "transformers rejects this {model_type} config: {why}",
                                "zh": "transformers 拒绝这个 {model_type} 配置：{why}"},
    "ei_not_a_language_model": {"en": "model_type {model_type!r} is not supported: transformers has no causal-LM or "
                                       "masked-LM class for it (trainfit estimates decoder language models and "
                                       "encoders; encoder-decoder, vision and audio models are out of scope)",
                                "zh": "不支持 model_type {model_type!r}：transformers 没有它的因果语言模型或掩码语言模型类"
                                      "（trainfit 估算解码器语言模型和编码器；编码器-解码器、视觉和音频模型不在范围内）"},
    "ei_transformers_cannot_build": {"en": "transformers cannot build {model_type} from this config ({kind}: {why})",
                                     "zh": "transformers 无法用这个配置构建 {model_type}（{kind}: {why}）"},
    "ei_structure_unreadable": {"en": "cannot read the structure of this {model_type} model ({kind}: {why})",
                                "zh": "无法读取这个 {model_type} 模型的结构（{kind}: {why}）"},
    "ei_unknown_lora_target": {"en": "unknown LoRA target {name!r} (use all-linear or names like q_proj,k_proj,v_proj,"
                                     "o_proj,gate_proj,up_proj,down_proj)",
                               "zh": "未知的 LoRA 目标模块 {name!r}（请用 all-linear 或 q_proj,k_proj,v_proj,o_proj,"
                                     "gate_proj,up_proj,down_proj 等名称）"},
    "ei_lora_no_match": {"en": "no LoRA target matches a Linear layer of {model} (targets name Linear modules, e.g. "
                               "{examples})",
                         "zh": "没有 LoRA 目标模块匹配 {model} 的线性层（目标模块按线性层名称指定，例如 {examples}）"},
    "ei_lora_no_linear": {"en": "{model} has no Linear layer in its blocks: LoRA has nothing to adapt (--method full "
                                "or freeze trains it)",
                          "zh": "{model} 的各层中没有线性层：LoRA 无可适配的模块（可用 --method full 或 freeze 训练）"},
    "ei_hub_unreachable": {"en": "{model!r} is not a preset and the Hugging Face Hub is not reachable ({problem}); use "
                                 "a preset (`trainfit models`) or a local config.json",
                           "zh": "{model!r} 不是预设，且无法访问 Hugging Face Hub（{problem}）；请使用预设（`trainfit "
                                 "models`）或本地 config.json"},
    "ei_cannot_reach": {"en": "cannot reach {host}: {why}", "zh": "无法连接 {host}：{why}"},
    "ei_eff_number": {"en": "{origin}: {name} must be a number, got {value!r}",
                      "zh": "{origin}：{name} 必须是数字，实际为 {value!r}"},
    "ei_eff_not_finite": {"en": "{origin}: {name} = {value} is not a finite number",
                          "zh": "{origin}：{name} = {value} 不是有限的数"},
    "ei_eff_range": {"en": "{origin}: {name} = {value:g} is outside its valid range {interval}",
                     "zh": "{origin}：{name} = {value:g} 超出有效范围 {interval}"},
    # --data (the lengths of the user's samples)
    "ei_data_nul": {"en": "--data {path}: a NUL byte at byte offset {offset} (line {line}): not a text file",
                    "zh": "--data {path}：字节偏移 {offset} 处（第 {line} 行）有 NUL 字节：不是文本文件"},
    "ei_data_long_line": {"en": "--data {path}: line {line} is longer than {mb} MB: not one sample per line",
                          "zh": "--data {path}：第 {line} 行超过 {mb} MB：不是每行一个样本"},
    "ei_data_not_utf8": {"en": "--data {path}: not UTF-8 text (line {line}, byte offset {offset})",
                         "zh": "--data {path}：不是 UTF-8 文本（第 {line} 行，字节偏移 {offset}）"},
    "ei_data_no_file": {"en": "--data {path}: no such file", "zh": "--data {path}：没有这个文件"},
    "ei_data_no_text": {"en": "--data {path}: no text in any of its {n} JSON values (expected a sample's text as "
                              "strings, e.g. {{\"text\": ...}} or {{\"messages\": [...]}})",
                        "zh": "--data {path}：其 {n} 个 JSON 值中都没有文本（样本的文本应为字符串，例如 {{\"text\": ...}} "
                              "或 {{\"messages\": [...]}}）"},
    "ei_data_no_samples": {"en": "--data {path}: no samples (expected JSON lines or one sample per line)",
                           "zh": "--data {path}：没有样本（应为 JSON 行或每行一个样本）"},
    "ei_avg_len_and_data": {"en": "give --avg-len or --data (whose lengths give the mean), not both",
                            "zh": "--avg-len 与 --data（其长度给出平均值）只能给一个"},
    "ei_avg_len_range": {"en": "--avg-len must be an integer in [1, the longest sample {seq_len}], got {value!r}",
                         "zh": "--avg-len 必须是 [1, 最长样本 {seq_len}] 内的整数，实际为 {value!r}"},
    "ei_not_multiple": {"en": "{a} {x} is not a multiple of {b} {y}", "zh": "{a} {x} 不是 {b} {y} 的倍数"},
    "ei_missing": {"en": "missing {what}", "zh": "缺少 {what}"},
    "ei_sample_not_object": {"en": "sample {i} is not an object", "zh": "第 {i} 个样本不是对象"},
    "ei_sample_not_finite": {"en": "sample {i}: {key} = {value} is not a finite number",
                             "zh": "第 {i} 个样本：{key} = {value} 不是有限的数"},
    "ei_sample_gpu_index": {"en": "sample {i}: gpu must be an index", "zh": "第 {i} 个样本：gpu 必须是序号"},
    "ei_learned_positions": {"en": "{model} has learned positions for {positions} tokens; --seq-len {seq} is longer",
                             "zh": "{model} 的学习式位置编码只有 {positions} 个 token；--seq-len {seq} 超出了"},
    # validate's limits (the lines after "limit exceeded:")
    "ei_limit_serving": {"en": "serving {metric}", "zh": "推理部署 {metric}"},
    "ei_limit_nothing": {"en": "{metric}: no case was compared, the limit holds nothing",
                         "zh": "{metric}：没有可比较的案例，此限制无从检验"},
    "ei_limit_mape": {"en": "{metric} MAPE {mape:.1%} > {limit:.1%}", "zh": "{metric} MAPE {mape:.1%} > {limit:.1%}"},
    "ei_limit_no_cases": {"en": "no case was read, --min-predicted holds nothing",
                          "zh": "没有读到案例，--min-predicted 无从检验"},
    "ei_limit_predicted": {"en": "predicted {share:.1%} of the cases < {limit:.1%}",
                           "zh": "预测了 {share:.1%} 的案例 < {limit:.1%}"},
    # units typed as people write them (issue 33): money, token counts, one dataset size, --lang
    "ei_not_money": {"en": "not an amount of money: {text!r} (examples: {examples})",
                     "zh": "{text!r} 不是金额（例如 {examples}）"},
    "ei_not_a_number": {"en": "not a number: {value!r}", "zh": "{value!r} 不是数字"},
    "ei_dataset_size_twice": {"en": "--dataset-tokens {tokens:,.0f} and --samples {samples:,.0f} both give the dataset "
                                    "size: give one (--samples goes with --avg-len)",
                              "zh": "--dataset-tokens {tokens:,.0f} 和 --samples {samples:,.0f} 都给出了数据集大小：请只给一个"
                                    "（--samples 需配合 --avg-len）"},
    "ei_dataset_size_disagree": {"en": "--dataset-tokens {tokens:,.0f} and --samples {samples:,.0f} x --avg-len "
                                       "{avg_len:g} = {total:,.0f} tokens disagree: give one of them",
                                 "zh": "--dataset-tokens {tokens:,.0f} 与 --samples {samples:,.0f} × --avg-len "
                                       "{avg_len:g} = {total:,.0f} 个 token 不一致：请只给一个"},
    "ei_tokens_absurd": {"en": "{what} = {value:.3g} tokens is more than any published training run used (the largest "
                               "pre-training runs are about 3.6e13 = 36T tokens): at most 1e+14",
                         "zh": "{what} = {value:.3g} 个 token，超过任何已公开的训练所用的量（最大的预训练约 3.6e13 = 36T 个 "
                               "token）：最多 1e+14"},
    "ei_budget_currency": {"en": "--budget {text} is in {named} but --currency is {given}: give one currency",
                           "zh": "--budget {text} 以 {named} 计，但 --currency 为 {given}：请只用一种货币"},
    "ei_budget_home_currency": {"en": "--budget {text} is in {named} but {provider} prices in {home}: give the budget "
                                      "in {home}, or the rate with --usd-cny (CNY per USD, e.g. 7.1)",
                                "zh": "--budget {text} 以 {named} 计，但 {provider} 以 {home} 标价：请以 {home} 给出预算，"
                                      "或用 --usd-cny 给出汇率（每美元兑人民币，如 7.1）"},
    "ei_lang": {"en": "{flag} must be en or zh (or another name of either: zh-CN, zh-Hans, chinese, 中文, en-US, "
                      "english), got {value!r}{dym}",
                "zh": "{flag} 必须是 en 或 zh（或其其他写法：zh-CN, zh-Hans, chinese, 中文, en-US, english），实际为 "
                      "{value!r}{dym}"},
    # names from the catalogs
    "ei_unknown_name": {"en": "unknown {kind} {word!r}{dym}{hint}", "zh": "未知的{kind} {word!r}{dym}{hint}"},
    "ei_kind_gpu": {"en": "GPU", "zh": "GPU"},
    "ei_kind_model": {"en": "model", "zh": "模型"},
    "ei_kind_instance_type": {"en": "instance type", "zh": "实例类型"},
    "ei_kind_region": {"en": "region", "zh": "地域"},
    "ei_kind_framework": {"en": "framework", "zh": "训练框架"},
    "ei_kind_provider_instance_type": {"en": "{provider} instance type", "zh": " {provider} 实例类型"},
    "ei_unknown_efficiency": {"en": "unknown efficiency {name!r}{dym}", "zh": "未知的效率参数 {name!r}{dym}"},
    "ei_seq_len_too_long": {"en": "--seq-len {seq} is longer than {model}'s {positions} positions{rest}",
                            "zh": "--seq-len {seq} 超过 {model} 的 {positions} 个位置{rest}"},
    "ei_seq_len_learned": {"en": " (learned)", "zh": "（学习式位置编码）"},
    "ei_seq_len_rope": {"en": "; a context-extended model says so in its config.json (rope_scaling and a larger "
                              "max_position_embeddings): pass that config.json",
                        "zh": "；上下文扩展过的模型会在其 config.json 中写明（rope_scaling 与更大的 "
                              "max_position_embeddings）：请传入那个 config.json"},
    "ei_seq_len_rope_mpe": {"en": " (max_position_embeddings); a context-extended model says so in its config.json "
                                  "(rope_scaling and a larger max_position_embeddings): pass that config.json",
                            "zh": "（max_position_embeddings）；上下文扩展过的模型会在其 config.json 中写明（rope_scaling "
                                  "与更大的 max_position_embeddings）：请传入那个 config.json"},
    "ei_give_gpu": {"en": "give --gpu or --instance", "zh": "请给出 --gpu 或 --instance"},
    # numbers and files
    "ei_cfg_size": {"en": "{where}: {key} = {value!r} is not a plausible size (a whole number from {low} up to "
                          "{limit:,})",
                    "zh": "{where}：{key} = {value!r} 不是合理的尺寸（应为 {low} 到 {limit:,} 之间的整数）"},
    "ei_cfg_bool": {"en": "{where}: {key} = {value!r} must be true or false",
                    "zh": "{where}：{key} = {value!r} 必须是 true 或 false"},
    "ei_cfg_object": {"en": "{where}: {key} must be an object, not {type} {value}",
                      "zh": "{where}：{key} 必须是对象，而不是 {type} {value}"},
    "ei_cfg_top_k": {"en": "{where}: each token is routed to {top_k} experts but the model has {experts}",
                     "zh": "{where}：每个 token 路由到 {top_k} 个专家，但模型只有 {experts} 个"},
    "ei_not_calibration": {"en": "{path}: not a calibration file (no 'values')",
                           "zh": "{path}：不是校准文件（没有 'values'）"},
    "ei_network_gbps": {"en": "--network-gbps must be a bandwidth in Gbit/s in (0, {high}], got {value!r}",
                        "zh": "--network-gbps 必须是 (0, {high}] 内的带宽（Gbit/s），实际为 {value!r}"},
    "ei_set_form": {"en": "--set expects NAME=VALUE, got {item!r}", "zh": "--set 需要 NAME=VALUE 形式，实际为 {item!r}"},
    "ei_set_number": {"en": "--set {name}: {value!r} is not a number", "zh": "--set {name}：{value!r} 不是数字"},
    "ei_cannot_read": {"en": "cannot read {path}: {why}", "zh": "无法读取 {path}：{why}"},
    "ei_out_unusable": {"en": "--out {path!r}: not a usable path (empty, or a name longer than the file system allows)",
                        "zh": "--out {path!r}：不是可用的路径（为空，或名称超过文件系统的限制）"},
    "ei_out_not_dir": {"en": "--out {path}: exists and is not a directory", "zh": "--out {path}：已存在且不是目录"},
    "ei_out_not_file": {"en": "--out {path}: exists and is not a regular file", "zh": "--out {path}：已存在且不是普通文件"},
    "ei_out_folder_is_file": {"en": "--out {path}: {folder} is a file, not a directory",
                              "zh": "--out {path}：{folder} 是文件，不是目录"},
    "ei_out_cannot_write": {"en": "--out {path}: cannot write in {folder} ({why})",
                            "zh": "--out {path}：无法在 {folder} 中写入（{why}）"},
    # the declared job fields (spec/job.py) and closed choices (spec/choices.py)
    "ei_invalid_choice": {"en": "invalid {what} {value!r} (choose from: {choices}){dym}",
                          "zh": "无效的 {what} {value!r}（可选：{choices}）{dym}"},
    "ei_int_in_range": {"en": "{what} must be an integer in [{low}, {high}], got {value!r}",
                        "zh": "{what} 必须是 [{low}, {high}] 内的整数，实际为 {value!r}"},
    "ei_number_in_range": {"en": "{what} must be a number in [{low}, {high}], got {value!r}",
                           "zh": "{what} 必须是 [{low}, {high}] 内的数，实际为 {value!r}"},
    "ei_integer": {"en": "{what} must be an integer, got {value!r}", "zh": "{what} 必须是整数，实际为 {value!r}"},
    "ei_number": {"en": "{what} must be a number, got {value!r}", "zh": "{what} 必须是数字，实际为 {value!r}"},
    "ei_finite": {"en": "{what} must be a finite number, got {value!r}", "zh": "{what} 必须是有限的数，实际为 {value!r}"},
    "ei_bool": {"en": "{what} must be true or false, got {value!r}", "zh": "{what} 必须是 true 或 false，实际为 {value!r}"},
    "ei_name_text": {"en": "{what} must be a name (text), got {type} {value!r}",
                     "zh": "{what} 必须是名称（文本），实际为 {type} {value!r}"},
    "ei_text": {"en": "{what} must be text, got {type} {value!r}", "zh": "{what} 必须是文本，实际为 {type} {value!r}"},
    "ei_zero": {"en": "zero must be 0, 1, 2 or 3, got {value!r}", "zh": "zero 必须是 0、1、2 或 3，实际为 {value!r}"},
    "ei_zero_stage": {"en": "zero stage must be 0, 1, 2 or 3, got {value!r}",
                      "zh": "ZeRO 阶段必须是 0、1、2 或 3，实际为 {value!r}"},
    "ei_data_layout": {"en": "data-layout must be one of {choices}, got {value!r}{dym}",
                       "zh": "data-layout 必须是 {choices} 之一，实际为 {value!r}{dym}"},
    "ei_unknown_job_field": {"en": "{where}unknown job field {key!r}{dym}", "zh": "{where}未知的作业字段 {key!r}{dym}"},
    "ei_unknown_saved_module": {"en": "unknown module to save {item!r} (choose from: embed_tokens, lm_head)",
                                "zh": "未知的 modules_to_save 模块 {item!r}（可选：embed_tokens, lm_head）"},
    "ei_lora_targets_empty": {"en": "--lora-targets is empty", "zh": "--lora-targets 为空"},
    "ei_len_in_range": {"en": "{what} must be an integer in [1, max-len {seq_len}], got {value!r}",
                        "zh": "{what} 必须是 [1, max-len {seq_len}] 内的整数，实际为 {value!r}"},
    "ei_oib_grad_accum": {"en": "optimizer-in-backward steps every micro-batch: it needs grad-accum 1",
                          "zh": "optimizer-in-backward 每个 micro-batch 都更新参数：需要 grad-accum 1"},
    "ei_oib_fp16": {"en": "optimizer-in-backward cannot unscale fp16 loss-scaled gradients: use bf16",
                    "zh": "optimizer-in-backward 无法对 fp16 损失缩放的梯度反缩放：请用 bf16"},
    "ei_paged_optimizer": {"en": "paged optimizers are AdamW, 8-bit AdamW or LAMB, not {optimizer}",
                           "zh": "分页优化器只有 AdamW、8 位 AdamW 或 LAMB，不是 {optimizer}"},
    "ei_zero_and_fsdp": {"en": "choose either --zero or --fsdp, not both", "zh": "--zero 和 --fsdp 只能选一个"},
    "ei_offload_needs_sharding": {"en": "offload needs DeepSpeed ZeRO (--zero 1/2/3) or FSDP",
                                  "zh": "卸载需要 DeepSpeed ZeRO（--zero 1/2/3）或 FSDP"},
    "ei_offload_all": {"en": "--offload all (parameters too) needs --zero 3 or --fsdp full_shard; use --offload "
                             "optimizer with ZeRO-1/2",
                       "zh": "--offload all（连同参数）需要 --zero 3 或 --fsdp full_shard；ZeRO-1/2 请用 --offload optimizer"},
    "ei_packed_task": {"en": "data-layout packed: {task} samples are not packed (a DPO pair or a labelled sample is "
                             "one sequence each): use padded-batch or padded-max",
                       "zh": "data-layout packed：{task} 样本不能打包（一对 DPO 样本或一条带标签样本各自是一条序列）：请用 "
                             "padded-batch 或 padded-max"},
    "ei_option_finite": {"en": "{what} must be a finite number, got {value}", "zh": "{what} 必须是有限的数，实际为 {value}"},
    "ei_option_positive": {"en": "{what} must be a positive number, got {value:g}",
                           "zh": "{what} 必须是正数，实际为 {value:g}"},
    "ei_result_not_finite": {"en": "the result holds a number that is not finite (NaN or infinity): check the inputs",
                             "zh": "结果中有非有限的数（NaN 或无穷大）：请检查输入"},
    "ei_calibrate_nothing": {"en": "calibrate: no training case to fit in {paths} ({n} cases read)",
                             "zh": "calibrate：{paths} 中没有可拟合的训练案例（读到 {n} 个案例）"},
    "ei_dym_one": {"en": " (did you mean {close!r}?)", "zh": "（是否想输入 {close!r}？）"},
    "ei_selective_ac": {"en": "selective-ac must be attention, op, a block interval such as 2 or Megatron-Core's "
                              "recompute modules such as moe_act,layernorm, got {value!r}{hint}",
                        "zh": "selective-ac 必须是 attention、op、块间隔（如 2）或 Megatron-Core 的重算模块（如 "
                              "moe_act,layernorm），实际为 {value!r}{hint}"},
    "ei_recompute_module": {"en": "selective-ac {value!r}: {item!r} is not one of Megatron-Core's recompute modules "
                                  "that trainfit models ({modules}){hint}",
                            "zh": "selective-ac {value!r}：{item!r} 不是 trainfit 建模的 Megatron-Core 重算模块之一"
                                  "（{modules}）{hint}"},
    "ei_selective_ac_interval": {"en": "selective-ac block interval must be 1 to 1024, got {value!r}",
                                 "zh": "selective-ac 的块间隔必须在 1 到 1024 之间，实际为 {value!r}"},
    "ei_selective_ac_given": {"en": "selective-ac {value!r}: give attention, op, a block interval such as '2' or "
                                    "Megatron-Core's recompute modules such as 'layernorm,moe_act'",
                              "zh": "selective-ac {value!r}：请给出 attention、op、块间隔（如 '2'）或 Megatron-Core "
                                    "的重算模块（如 'layernorm,moe_act'）"},
    "ei_tokens": {"en": "{what} must be a number of tokens, got {value!r} (examples: {examples})",
                  "zh": "{what} 必须是 token 数，实际为 {value!r}（例如 {examples}）"},
}
