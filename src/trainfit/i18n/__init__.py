"""Messages in English and Chinese. JSON keys stay English; only what people read is translated."""

from __future__ import annotations

import os

LANGS = ("en", "zh")

_MESSAGES: dict[str, dict[str, str]] = {
    # validate
    "v_predicted": {"en": "{p} of {n} cases predicted", "zh": "{n} 个案例中预测了 {p} 个"},
    "v_skipped": {"en": "skipped: ", "zh": "跳过："},
    "v_title": {"en": "error of the predictions (MAPE = mean absolute percentage error)",
                "zh": "预测误差（MAPE = 平均绝对百分比误差）"},
    "v_metric": {"en": "metric", "zh": "指标"},
    "v_group": {"en": "group", "zh": "分组"},
    "v_worst": {"en": "worst", "zh": "最差"},
    "v_coverage": {"en": "{metric}: {c} of {n} measured values inside their {level} band (bands from "
                         "leave-one-source-out residuals)",
                   "zh": "{metric}：{n} 个实测值中有 {c} 落在 {level} 误差带内（误差带取自留一来源交叉验证残差）"},
    "v_oom": {"en": "out of memory: {ok} of {n} OOM cases predicted as not fitting",
              "zh": "显存溢出：{n} 个 OOM 案例中有 {ok} 个被预测为放不下"},
    "v_ran": {"en": "runs that trained: {ok} of {n} predicted to fit",
              "zh": "实际完成训练的运行：{n} 个中有 {ok} 个被预测为放得下"},
    "v_ran_oom": {"en": "predicted out of memory though it ran: {id}", "zh": "预测为显存不足但实际运行成功：{id}"},
    "v_excluded": {"en": "excluded from {metric} ({err} off): {id}: {reason}",
                   "zh": "未计入 {metric}（偏差 {err}）：{id}：{reason}"},
    "v_per_case": {"en": "per case", "zh": "逐个案例"},
    "v_by_source": {"en": "peak memory by source and counter: measured runs and traced steps side by side",
                    "zh": "按来源与计数方式的峰值显存误差：实测运行与追踪步骤并列"},
    "v_source": {"en": "source", "zh": "来源"},
    "v_counter": {"en": "counter", "zh": "计数方式"},
    "v_truth": {"en": "truth", "zh": "真值"},
    "v_serving": {"en": "serving: ", "zh": "推理部署："},
    # why the search set an option aside (search/reasons.py Reason, worded by report.plan.reason_text)
    "rj_not_training_instance": {"en": "not a training instance (vGPU slice or unknown GPU)",
                                 "zh": "不是训练实例（vGPU 切片或未知 GPU）"},
    "rj_no_price": {"en": "no price in the catalog", "zh": "目录中无价格"},
    "rj_no_price_region": {"en": " for region {region}", "zh": "（地域 {region}）"},
    "rj_no_price_pricing": {"en": " ({pricing})", "zh": "（{pricing}）"},
    "rj_no_price_sold_out": {"en": " (or sold out)", "zh": "（或已售罄）"},
    "rj_other_currency": {"en": "priced in {currency}; give --usd-cny to compare with {target}",
                          "zh": "以 {currency} 计价；给出 --usd-cny 才能与 {target} 比较"},
    "rj_layout": {"en": "tensor/pipeline layout: {rule}", "zh": "张量/流水线并行布局：{rule}"},
    "rj_more_gpus_than_batch": {"en": "more GPUs than sequences in the global batch", "zh": "GPU 数多于全局批量的序列数"},
    "oom_policy_over": {"en": "fits by the estimate, but its out-of-memory risk is {risk} (above --max-oom-risk "
                              "{limit}): plan and compare would not choose it; what fits within the limit is above",
                        "zh": "按估算放得下，但显存溢出风险为 {risk}（高于 --max-oom-risk {limit}）：plan 与 compare "
                              "不会选它；在此限度内放得下的调整见上"},
    "oom_policy_over_none": {"en": "fits by the estimate, but its out-of-memory risk is {risk} (above --max-oom-risk "
                                   "{limit}): plan and compare would not choose it, and no change trainfit tries on "
                                   "this GPU type fits within the limit",
                             "zh": "按估算放得下，但显存溢出风险为 {risk}（高于 --max-oom-risk {limit}）：plan 与 compare "
                                   "不会选它，trainfit 在此 GPU 型号上尝试的调整也都不在此限度内"},
    "plan_nothing_meets": {"en": "trainfit: no configuration meets the request (binding constraint: {constraint}){out}",
                           "zh": "trainfit: 没有满足请求的配置（约束：{constraint}）{out}"},
    "plan_nothing_written": {"en": "nothing written to {out}", "zh": "未写入 {out}"},
    "plan_written": {"en": "plan written to {path}", "zh": "计划已写入 {path}"},
    "compare_note_layout": {"en": "like for like: the job's method, optimizer, precision, global batch and stack on "
                                  "every GPU; per GPU the layout plan would choose on up to {nodes} instances (the footnote shows "
                                  "it: GPU count, ZeRO/FSDP, offload, checkpointing, micro-batch; those you give are "
                                  "kept)",
                            "zh": "同等比较：每种 GPU 上使用相同的方法、优化器、精度、全局批量和训练框架；每种 GPU 用 plan "
                                  "在最多 {nodes} 台实例上会选择的布局（见脚注：GPU 数、ZeRO/FSDP、卸载、检查点、micro-batch；你给出的保持不变）"},
    "compare_note_rank": {"en": "1., 2., ...: rank among the like-for-like rows by cost per 1B tokens on Alibaba (rows "
                                "without an Alibaba price unranked), or elsewhere when no row has an Alibaba price; "
                                "≠ = the job's settings had to change to fit on this GPU (see its footnote): not ranked",
                          "zh": "1.、2.……：同等比较的行按阿里云上每 1B token 的成本排名（没有阿里云价格的行不排名）；"
                                "若没有任何行有阿里云价格则按其他云的成本；≠ = 必须改变作业设置才能在此 GPU 上放下"
                                "（见脚注）：不参与排名"},
    "rj_gpus_do_not_divide_batch": {"en": "GPU count does not divide the global batch", "zh": "GPU 数不能整除全局批量"},
    "rj_micro_batch_does_not_divide": {"en": "the given --micro-batch {micro_batch} does not divide the sequences each "
                                             "GPU takes per step",
                                       "zh": "给定的 --micro-batch {micro_batch} 不能整除每张 GPU 每步的序列数"},
    "rj_pinned_layout": {"en": "the instance has fewer than the given --gpus {gpus}",
                         "zh": "实例的 GPU 少于给定的 --gpus {gpus}"},
    "rj_incompatible": {"en": "incompatible: {rule}", "zh": "不兼容：{rule}"},
    "rj_no_fit": {"en": "does not fit in GPU memory", "zh": "显存放不下"},
    "rj_no_fit_headroom": {"en": "does not fit in GPU memory (with the safety headroom)", "zh": "显存放不下（含安全余量）"},
    "rj_oom_risk": {"en": "out-of-memory risk above --max-oom-risk", "zh": "显存溢出风险高于 --max-oom-risk"},
    "rj_dominated_micro_batch": {"en": "dominated by a larger micro-batch that fits",
                                 "zh": "被能放下的更大 micro-batch 取代"},
    "rj_dominated_heavier": {"en": "slower than the same layout with lighter activation checkpointing or less CPU "
                                   "offload, which fits a micro-batch at least as large",
                             "zh": "比同一布局下更轻的激活检查点或更少 CPU 卸载更慢（后者能放下同样大或更大的 micro-batch）"},
    "rj_offload_host_ram": {"en": "CPU offload needs more host RAM than the instance has",
                            "zh": "CPU 卸载所需内存超过实例内存"},
    "rj_host_ram": {"en": "host RAM for loading the model (and CPU offload) exceeds the instance's RAM",
                    "zh": "加载模型（及 CPU 卸载）所需主机内存超过实例内存"},
    "rj_too_slow": {"en": "too slow for the deadline", "zh": "赶不上截止时间"},
    "rj_over_budget": {"en": "over budget", "zh": "超出预算"},
    "rj_skipped": {"en": "instance types skipped: {reason}", "zh": "跳过的实例类型：{reason}"},
    "fits": {"en": "fits", "zh": "可以放下"},
    "does_not_fit": {"en": "does NOT fit", "zh": "放不下"},
    "fit_likely": {"en": "{p} likely to fit", "zh": "放得下的概率 {p}"},
    # trainfit gpus, trainfit instances
    "gpus_title": {"en": "trainfit gpus (dense tensor TFLOPS; * = unverified)",
                   "zh": "trainfit GPU 目录（稠密张量 TFLOPS；* = 未核实）"},
    "instances_title": {"en": "trainfit instances (price = cheapest pay-as-you-go region; * = unverified/inferred; "
                              "† = price older than 180 days)",
                        "zh": "trainfit 实例目录（价格 = 最便宜地域的按量价格；* = 未核实/推断；† = 价格已超过 180 天）"},
    # trainfit efficiencies
    "eff_title": {"en": "named efficiencies and overheads (override with --set NAME=VALUE)",
                  "zh": "命名的效率参数与开销（用 --set NAME=VALUE 覆盖）"},
    "eff_name": {"en": "name", "zh": "名称"},
    "eff_value": {"en": "value", "zh": "取值"},
    "eff_unit": {"en": "unit", "zh": "单位"},
    "eff_basis": {"en": "basis", "zh": "依据"},
    "eff_description": {"en": "description", "zh": "说明"},
    "eff_per": {"en": "per {keys}", "zh": "按 {keys} 区分"},
    "eff_at_bound": {"en": "at bound: ", "zh": "处于拟合边界："},
    "precedence": {"en": "how a value is chosen for a GPU (first match wins)",
                   "zh": "某块 GPU 取值的优先顺序（先匹配者生效）"},
    "band_known-stack": {"en": "80% band for {fw}", "zh": "{fw} 的 80% 区间"},
    "band_unseen-stack": {"en": "80% band for a stack the calibration has not seen ({fw})",
                          "zh": "校准未见过的训练框架（{fw}）的 80% 区间"},
    "band_unstated-stack": {"en": "80% band for any training stack; --framework NAME narrows it",
                            "zh": "任意训练框架的 80% 区间；用 --framework 指定可收窄"},
    "too_risky": {"en": "rejected for out-of-memory risk above {risk}", "zh": "因显存溢出风险高于 {risk} 而排除"},
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
    "pipeline": {"en": "pipeline bubble", "zh": "流水线气泡"},
    "params": {"en": "parameters", "zh": "参数量"},
    "trainable": {"en": "trainable", "zh": "可训练"},
    "warnings": {"en": "Warnings", "zh": "警告"},
    "assumptions": {"en": "Assumptions", "zh": "假设"},
    "what_fits": {"en": "What would fit", "zh": "可行的调整"},
    "change_col": {"en": "change", "zh": "调整"},
    "over_by": {"en": "over by", "zh": "超出"},
    "efficiencies": {"en": "Efficiencies used", "zh": "使用的效率参数"},
    "peak_phase": {"en": "peak during", "zh": "峰值出现在"},
    "gpu": {"en": "GPU", "zh": "GPU"},
    "settings": {"en": "settings", "zh": "设置"},
    "hours_per_b": {"en": "hours / 1B tokens", "zh": "小时 / 10亿 tokens"},
    "cost_per_b": {"en": "cost / 1B tokens", "zh": "费用 / 10亿 tokens"},
    "instance": {"en": "cheapest instance", "zh": "最便宜实例"},
    "no_alibaba_price": {"en": "no public price (give yours: --prices FILE)", "zh": "无公开价格（可用 --prices FILE 提供报价）"},
    "not_on_alibaba": {"en": "not in the Alibaba catalog", "zh": "阿里云目录中没有"},
    "unpriced_short": {"en": "no public price ‡", "zh": "无公开价格 ‡"},
    "not_sold_short": {"en": "not sold", "zh": "未销售"},
    "unpriced_note": {"en": "‡ no public price: give your own quote with --prices FILE",
                      "zh": "‡ 无公开价格：可用 --prices FILE 提供你的报价"},
    "no_fit_any": {"en": "does not fit with any tried setting", "zh": "任何尝试的设置都放不下"},
    "instance_col": {"en": "instance", "zh": "实例"},
    "host_ram_col": {"en": "RAM GiB need/has", "zh": "内存 GiB 需/有"},
    "recommendations": {"en": "Recommendations", "zh": "推荐方案"},
    "hours": {"en": "hours", "zh": "小时"},
    "cost": {"en": "cost", "zh": "费用"},
    "why": {"en": "why", "zh": "理由"},
    "no_plan": {"en": "No configuration meets the request", "zh": "没有满足要求的配置"},
    "binding": {"en": "binding constraint", "zh": "限制条件"},
    "relax": {"en": "what would relax it", "zh": "可以放宽"},
    # the constraint that binds when no plan meets the request (plan.binding_constraint's "constraint")
    "bc_catalog": {"en": "catalog", "zh": "目录"},
    "bc_out_of_memory_risk": {"en": "out-of-memory risk", "zh": "显存溢出风险"},
    "bc_host_memory": {"en": "host memory", "zh": "主机内存"},
    "bc_memory": {"en": "memory", "zh": "显存"},
    "bc_deadline": {"en": "deadline", "zh": "截止时间"},
    "bc_budget": {"en": "budget", "zh": "预算"},
    "bc_deadline_and_budget": {"en": "deadline and budget", "zh": "截止时间与预算"},
    "bc_given_layout": {"en": "given layout", "zh": "给定的布局"},
    "bc_duration": {"en": "duration", "zh": "时长"},
    # the plan's first line (report/plan.py render_plan)
    "plan_head_tokens": {"en": "{b}B tokens processed", "zh": "处理 {b}B tokens"},
    "plan_head_batch": {"en": "global batch {n}", "zh": "全局批量 {n}"},
    "plan_head_deadline": {"en": "deadline {h} h", "zh": "截止时间 {h} 小时"},
    "plan_head_budget": {"en": "budget {b}", "zh": "预算 {b}"},
    "plan_head_objective": {"en": "objective {o}", "zh": "目标：{o}"},
    "objective_cheapest": {"en": "cheapest", "zh": "最便宜"},
    "objective_fastest": {"en": "fastest", "zh": "最快"},
    "pareto": {"en": "Cost-time Pareto front", "zh": "成本-时间帕累托前沿"},
    "excluded": {"en": "Why other GPUs lost", "zh": "其他 GPU 落选原因"},
    "searched": {"en": "searched", "zh": "已搜索"},
    "searched_line": {"en": "searched: {n} candidates in {s} s ({reasons})",
                      "zh": "已搜索：{s} 秒内 {n} 个候选（{reasons}）"},
    "phase_forward_end": {"en": "forward_end", "zh": "前向结束"},
    "phase_backward_start": {"en": "backward_start", "zh": "反向开始"},
    "phase_backward_head": {"en": "backward_head", "zh": "输出头反向"},
    "phase_backward_end": {"en": "backward_end", "zh": "反向结束"},
    "phase_optimizer": {"en": "optimizer", "zh": "优化器更新"},
    "phase_backward_top_block": {"en": "backward_top_block", "zh": "最上层块反向"},
    "phase_backward_embedding": {"en": "backward_embedding", "zh": "嵌入层反向"},
    "flag_note": {"en": "GPU model inferred by third parties or price unverified (see --json)",
                  "zh": "GPU 型号为第三方推断或价格未核实（见 --json）"},
    "unverified": {"en": "unverified", "zh": "未核实"},
    "source": {"en": "source", "zh": "来源"},
    "price_date": {"en": "price date", "zh": "价格日期"},
    "yes": {"en": "yes", "zh": "是"},
    "would_fit_with": {"en": "does not fit with the requested method and GPU count; would fit with {change} (not "
                             "compared)",
                       "zh": "按所请求的方法和 GPU 数放不下；改为 {change} 可以放下（未参与比较）"},
    "pf_no_file": {"en": "--prices {where}: no such file", "zh": "--prices {where}：文件不存在"},
    "pf_bad_value": {"en": "{where}: {col}={value!r} is not one of {allowed}",
                     "zh": "{where}：{col}={value!r} 不在可选值 {allowed} 中"},
    "pf_missing": {"en": "{where}: missing {cols}", "zh": "{where}：缺少 {cols}"},
    "pf_price": {"en": "{where}: price must be a positive number", "zh": "{where}：price 必须是正数"},
    "pf_date": {"en": "{where}: price_date {value!r} is not YYYY-MM-DD", "zh": "{where}：price_date {value!r} 不是 YYYY-MM-DD 格式"},
    "pf_columns": {"en": "{where}: not a price file in the catalog's format (missing columns {cols})",
                   "zh": "{where}：不是目录格式的价格文件（缺少列 {cols}）"},
    "pf_unreadable": {"en": "{where}: cannot read ({reason})", "zh": "{where}：无法读取（{reason}）"},
    "pf_unknown_instance": {"en": "{where}: {detail}", "zh": "{where}：{detail}"},
    "pf_price_bad": {"en": "{where}: price {value!r} must be a finite positive number (not nan, inf, 0 or negative)",
                     "zh": "{where}：price {value!r} 必须是有限的正数（不能是 nan、inf、0 或负数）"},
    "pf_too_big": {"en": "{where}: {size} is larger than a price file may be ({cap}); keep only the rows you need",
                   "zh": "{where}：{size} 超过价格文件的大小上限（{cap}）；请只保留需要的行"},
    "pf_too_many_rows": {"en": "{where}: more than {cap} rows, the most a price file may have; keep only the rows you "
                               "need",
                         "zh": "{where}：超过 {cap} 行（价格文件的行数上限）；请只保留需要的行"},
    "pf_control": {"en": "{where}: column {col} contains a control or bidirectional-override character ({char}); "
                         "remove it",
                   "zh": "{where}：列 {col} 含有控制字符或双向文本覆盖字符（{char}）；请删除"},
    "pf_markup": {"en": "{where}: column {col} contains {tag!r}, which a terminal would read as styling markup; remove "
                        "the square brackets",
                  "zh": "{where}：列 {col} 含有 {tag!r}，终端会把它当作样式标记；请去掉方括号"},
    "pf_not_utf8": {"en": "{where}: not UTF-8 text ({reason})", "zh": "{where}：不是 UTF-8 文本（{reason}）"},
    "pf_csv": {"en": "{where}: not a readable CSV file ({reason})", "zh": "{where}：不是可读取的 CSV 文件（{reason}）"},
    "pf_cache_bad": {"en": "{detail} (a file of the price cache: remove it with `rm {path}`, then set or refresh "
                           "those prices again)",
                     "zh": "{detail}（这是价格缓存中的文件：用 `rm {path}` 删除它，然后重新设置或刷新这些价格）"},
    "pf_locked": {"en": "{where}: another trainfit run has been writing this file for more than {s} s; try again",
                  "zh": "{where}：另一个 trainfit 进程写入此文件已超过 {s} 秒；请稍后重试"},
    "spot_warning": {
        "en": "Spot prices: the provider can reclaim these instances at any time. Hours and cost include the expected "
              "interruptions (lost work since the last checkpoint + restart) and the checkpoints that bound them.",
        "zh": "抢占式（spot）价格：云厂商可随时回收这些实例。小时数和费用已包含预期的中断损失（自上次检查点以来的"
              "工作 + 重启）以及用于限制损失的检查点开销。"},
    "spot_line": {
        "en": "interruption overhead {interruption_overhead_hours} h: ~{expected_interruptions} interruptions "
              "(MTBI {mtbi_hours} h), checkpoint every {checkpoint_interval_hours} h, lost work {lost_work_hours} h, "
              "restarts {restart_hours} h",
        "zh": "中断开销 {interruption_overhead_hours} 小时：约 {expected_interruptions} 次中断（平均间隔 {mtbi_hours} "
              "小时），每 {checkpoint_interval_hours} 小时保存检查点，损失工作 {lost_work_hours} 小时，重启 "
              "{restart_hours} 小时"},
    "no_credentials_alibaba": {
        "en": "no Alibaba Cloud credentials: set ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET (or "
              "~/.alibabacloud/credentials.ini); trainfit only reads prices (ecs:DescribePrice)",
        "zh": "未找到阿里云凭证：请设置 ALIBABA_CLOUD_ACCESS_KEY_ID 和 ALIBABA_CLOUD_ACCESS_KEY_SECRET（或 "
              "~/.alibabacloud/credentials.ini）；trainfit 只读取价格（ecs:DescribePrice）"},
    "no_credentials_aws": {
        "en": "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or AWS_PROFILE (~/.aws/credentials)"
              "; trainfit only reads prices (pricing:GetProducts, ec2:DescribeSpotPriceHistory)",
        "zh": "未找到 AWS 凭证：请设置 AWS_ACCESS_KEY_ID 和 AWS_SECRET_ACCESS_KEY 或 AWS_PROFILE（~/.aws/credentials）；"
              "trainfit 只读取价格（pricing:GetProducts、ec2:DescribeSpotPriceHistory）"},
    "no_credentials_gcp": {
        "en": "no Google Cloud API key: set GOOGLE_API_KEY (Cloud Billing Catalog API enabled); trainfit only reads "
              "public SKU prices",
        "zh": "未找到 Google Cloud API 密钥：请设置 GOOGLE_API_KEY（需启用 Cloud Billing Catalog API）；"
              "trainfit 只读取公开的 SKU 价格"},
    "api_error": {"en": "{provider} price API failed ({what}): {code}; nothing was written to the cache",
                  "zh": "{provider} 价格接口调用失败（{what}）：{code}；缓存未作改动"},
    "network_error": {"en": "{provider} price API unreachable ({url}): {reason}; nothing was written to the cache",
                      "zh": "无法访问 {provider} 价格接口（{url}）：{reason}；缓存未作改动"},
    "refresh_nothing": {"en": "{provider}: the API returned no price for the requested instance types and regions",
                        "zh": "{provider}：接口没有返回所请求实例规格和地域的价格"},
    "report_written": {"en": "report written to {path}", "zh": "报告已写入 {path}"},
    "prices_title": {"en": "trainfit prices", "zh": "trainfit 价格"},
    "region": {"en": "region", "zh": "地域"},
    "billing": {"en": "billing", "zh": "计费"},
    "price": {"en": "price", "zh": "价格"},
    "per_gpu_hour": {"en": "per GPU-hour", "zh": "每 GPU 小时"},
    "age_days": {"en": "age (days)", "zh": "天数"},
    "origin": {"en": "origin", "zh": "来源类型"},
    "stale": {"en": "STALE", "zh": "过期"},
    "sold_out": {"en": "sold out", "zh": "售罄"},
    "prices_note": {
        "en": "STALE = older than {days} days. origin: catalog = shipped snapshot, live = `trainfit prices refresh`, "
              "user = your quotes (`trainfit prices set FILE` or --prices FILE). * = unverified. Cache: {cache}",
        "zh": "过期 = 超过 {days} 天。来源类型：catalog = 随软件发布的快照，live = `trainfit prices refresh` 获取，"
              "user = 你的报价（`trainfit prices set FILE` 或 --prices FILE）。* = 未核实。缓存目录：{cache}"},
    "prices_age_title": {"en": "how old the prices are (as of {date})", "zh": "价格有多旧（截至 {date}）"},
    "rows": {"en": "rows", "zh": "行数"},
    "oldest": {"en": "oldest", "zh": "最旧"},
    "newest": {"en": "newest", "zh": "最新"},
    "fresh": {"en": "≤ {days} days", "zh": "≤ {days} 天"},
    "undated": {"en": "undated", "zh": "无日期"},
    "prices_age_note": {
        "en": "{rows} prices: {fresh} younger than {days} days, {stale} stale ({undated} of them undated). "
              "`trainfit prices list` shows each one with its date and source.",
        "zh": "共 {rows} 个价格：{fresh} 个不超过 {days} 天，{stale} 个已过期（其中 {undated} 个无日期）。"
              "`trainfit prices list` 逐条列出日期和来源。"},
    "prices_set_done": {"en": "{n} rows in {path} (provenance: user); every command now uses them",
                        "zh": "{path} 中共有 {n} 行（来源：user）；之后所有命令都会使用"},
    "refresh_done": {"en": "{provider}: {n} prices written to {path} ({date})",
                     "zh": "{provider}：{n} 个价格已写入 {path}（{date}）"},
    "no": {"en": "no", "zh": "否"},
    "alibaba_instance": {"en": "Alibaba instance (GPUs used/of)", "zh": "阿里云实例（使用/总 GPU）"},
    "other_instance": {"en": "elsewhere (GPUs used/of)", "zh": "其他云（使用/总 GPU）"},
    "compare_note_cost": {
        "en": "cost per 1B tokens = pay-as-you-go price of the WHOLE instance x hours; for each GPU the instance and "
              "GPU count (data-parallel) with the lowest cost per token, priced like `plan`",
        "zh": "每 10 亿 tokens 费用 = 整台实例的按量价格 x 小时；每种 GPU 取每 token 成本最低的实例和 GPU 数"
              "（数据并行），计价方式与 `plan` 相同"},
    "compare_note_stale": {
        "en": "† price older than {days} days (stale): `trainfit prices refresh`, or your own quotes with "
              "--prices FILE; `trainfit prices list` shows every date and source",
        "zh": "† 价格已超过 {days} 天（过期）：运行 `trainfit prices refresh`，或用 --prices FILE 提供自己的报价；"
              "`trainfit prices list` 列出每个价格的日期和来源"},
    "compare_note_hours": {"en": "hours per 1B tokens at the estimated throughput, without start-up or checkpoints",
                           "zh": "每 10 亿 tokens 小时数按估算吞吐计算，不含启动和检查点时间"},
    "flag_note_short": {"en": "* GPU model inferred or price unverified (see --json)",
                        "zh": "* GPU 型号为推断或价格未核实（见 --json）"},
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


def _register_areas() -> None:
    """The one message table: the CLI's messages above and each area's own entries, every key once."""
    from .errors_commands import MESSAGES as COMMAND_ERRORS
    from .errors_inputs import MESSAGES as INPUT_ERRORS
    from .generate import GENERATE_MESSAGES
    from .report import REPORT_MESSAGES
    from .sentences_estimate import SENTENCES as ESTIMATE_SENTENCES
    from .sentences_plan import SENTENCES as PLAN_SENTENCES
    from .sentences_validate import SENTENCES as VALIDATE_SENTENCES
    from .serving import SERVING_MESSAGES
    from .ui import UI_MESSAGES
    from .userfiles import USERFILE_MESSAGES

    for area in (SERVING_MESSAGES, GENERATE_MESSAGES, USERFILE_MESSAGES, REPORT_MESSAGES, UI_MESSAGES,
                 VALIDATE_SENTENCES, ESTIMATE_SENTENCES, PLAN_SENTENCES, INPUT_ERRORS,
                 COMMAND_ERRORS):
        clash = sorted(set(area) & set(_MESSAGES))
        if clash:
            raise RuntimeError(f"message keys defined twice: {clash}")
        _MESSAGES.update(area)


_register_areas()


class Msg(str):
    """A sentence of the message table: its English text (what it is as a str, so it prints, joins and goes into
    JSON as before) with the key and values it was made from, so it renders in any language from the table, not by
    translating the English. Values that are themselves Msg (a reason inside a sentence) render in the same language.
    Made by `say`."""

    key: str
    values: dict

    def __new__(cls, key: str, values: dict):
        self = super().__new__(cls, _format(key, "en", values))
        self.key, self.values = key, values
        return self

    def render(self, lang: str) -> str:
        return str.__str__(self) if lang == "en" else _format(self.key, lang, self.values)

    def __reduce__(self):  # pickles as its key and values (a str subclass would otherwise pickle as its text)
        return (Msg, (self.key, self.values))


def _format(key: str, lang: str, values: dict) -> str:
    if key not in _MESSAGES:
        raise KeyError(f"no message {key!r} in the message table")
    return t(key, lang).format(**{k: v.render(lang) if isinstance(v, Msg) else v for k, v in values.items()})


def say(key: str, /, **values) -> Msg:
    """The sentence `key` of the message table with its values: English as a str, any language by `.render(lang)`
    or `trainfit.i18n.notes.localize`."""
    return Msg(key, values)
