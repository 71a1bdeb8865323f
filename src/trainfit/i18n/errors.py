"""Chinese for the one-line errors of bad input (SpecError messages written in English where they are raised).

Each pattern matches a whole message and rewrites it with the values it carries, as i18n/notes.py does for the
estimator's sentences; keyed errors (errors.LocalizedError) are worded by the catalog instead. A message no pattern
knows keeps its English detail behind a Chinese lead-in (FALLBACK_ZH). The CLI and the web calculator both use it;
tests/test_i18n.py runs many bad inputs under --lang zh and fails when English sentences are left.
"""

from __future__ import annotations

import re

_ZH: list[tuple[str, str]] = [
    # hostile and malformed files (issue 32): the detail after a file's name
    (r"cannot read samples from (?P<p>.+?): (?P<why>.+)", "无法读取 {p} 中的样本：{why}"),
    (r"'samples' must be a list", "'samples' 必须是列表"),
    (r"--(?P<w>[\w-]+): not a number: (?P<v>.+)", "--{w}：{v} 不是数字"),
    (r"(?P<v>NaN|Infinity|-Infinity) is not a JSON number", "{v} 不是 JSON 数字"),
    (r"not valid JSON \((?P<d>.+)\)", "不是有效的 JSON（{d}）"),
    (r"a config\.json holds a JSON object, not (?P<t>\w+)", "config.json 应为 JSON 对象，而不是 {t}"),
    (r"a number with more than 4300 digits is not a value any field takes", "超过 4300 位的数不是任何字段可取的值"),
    (r"model_type must be text \(such as \"llama\"\), not (?P<v>.+)", "model_type 必须是文本（如 \"llama\"），而不是 {v}"),
    (r"model_type (?P<t>'.*?') is known neither to trainfit's built-in families nor to transformers (?P<v>\S+): a "
     r"newer transformers may know it \(pip install -U transformers\), or pass the config\.json of a supported "
     r"architecture", "trainfit 的内置架构和 transformers {v} 都不认识 model_type {t}：更新的 transformers 也许认识"
     "（pip install -U transformers），或请给出受支持架构的 config.json"),
    (r"transformers rejects this (?P<t>.+?) config: (?P<why>.+)", "transformers 拒绝这个 {t} 配置：{why}"),
    (r"(?P<a>\w+) (?P<x>\d+) is not a multiple of (?P<b>\w+) (?P<y>\d+)", "{a} {x} 不是 {b} {y} 的倍数"),
    (r"(?P<k>\w+) = (?P<v>.+) is not a finite number", "{k} = {v} 不是有限的数"),
    (r"(?P<k>\w+) = (?P<v>.+) is outside its valid range (?P<r>.+)", "{k} = {v} 超出有效范围 {r}"),
    (r"true or false, got (?P<v>.+)", "应为 true 或 false，实际为 {v}"),
    (r"(?P<g>\d+) is not micro_batch (?P<m>\d+) x grad_accum (?P<a>\d+) x (?P<n>\d+) GPU\(s\) = (?P<t>\d+)",
     "{g} 不等于 micro_batch {m} × grad_accum {a} × {n} 张 GPU = {t}"),
    (r"missing (?P<v>'.+)", "缺少 {v}"),
    (r"(?P<v>'.*?') disagrees with its ZeRO/FSDP settings and GPU count, which make it (?P<e>'.*?')",
     "{v} 与其 ZeRO/FSDP 设置和 GPU 数不一致（据此应为 {e}）"),
    (r"unknown LoRA target (?P<v>'.*?') \(use all-linear or names like (?P<n>.+)\)",
     "未知的 LoRA 目标模块 {v}（请用 all-linear 或 {n} 等名称）"),
    (r"(?P<m>'.*') is not a preset and the Hugging Face Hub is not reachable \((?P<why>.+)\); use a preset "
     r"\(`trainfit models`\) or a local config\.json",
     "{m} 不是预设，且无法访问 Hugging Face Hub（{why}）；请使用预设（`trainfit models`）或本地 config.json"),
    (r"cannot reach huggingface\.co: (?P<why>.+)", "无法连接 huggingface.co：{why}"),
    # --data (the lengths of the user's samples)
    (r"no samples \(expected JSON lines or one sample per line\)", "没有样本（应为 JSON 行或每行一个样本）"),
    (r"no text in any of its (?P<n>\d+) JSON values \(expected a sample's text as strings, (?P<e>.+)\)",
     "其 {n} 个 JSON 值中都没有文本（样本的文本应为字符串，{e}）"),
    (r"a NUL byte at byte offset (?P<o>\d+) \(line (?P<l>\d+)\): not a text file",
     "字节偏移 {o} 处（第 {l} 行）有 NUL 字节：不是文本文件"),
    (r"line (?P<l>\d+) is longer than (?P<m>.+): not one sample per line", "第 {l} 行超过 {m}：不是每行一个样本"),
    (r"not UTF-8 text \(line (?P<l>\d+), byte offset (?P<o>\d+)\)", "不是 UTF-8 文本（第 {l} 行，字节偏移 {o}）"),
    (r"no such file", "没有这个文件"),
    # validate's limits (the lines after "limit exceeded:")
    (r"(?P<s>serving )?(?P<m>[\w ]+): no case was compared, the limit holds nothing",
     "{s}{m}：没有可比较的案例，此限制无从检验"),
    (r"(?P<s>serving )?(?P<m>[\w ]+) MAPE (?P<v>\S+) > (?P<l>\S+)", "{s}{m} MAPE {v} > {l}"),
    (r"no case was read, --min-predicted holds nothing", "没有读到案例，--min-predicted 无从检验"),
    (r"predicted (?P<v>\S+) of the cases < (?P<l>\S+)", "预测了 {v} 的案例 < {l}"),
    # the declared job fields (spec/job.py) and closed choices (spec/choices.py)
    (r"invalid (?P<w>[\w -]+) (?P<v>'.*') \(choose from: (?P<c>.+)\)(?P<rest>.*)", "无效的 {w} {v}（可选：{c}）{rest}"),
    (r"(?P<w>[\w-]+) must be an integer in \[(?P<a>[^,]*), (?P<b>[^\]]*)\], got (?P<v>.+)",
     "{w} 必须是 [{a}, {b}] 内的整数，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be a number in \[(?P<a>[^,]*), (?P<b>[^\]]*)\], got (?P<v>.+)",
     "{w} 必须是 [{a}, {b}] 内的数，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be an integer, got (?P<v>.+)", "{w} 必须是整数，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be a number, got (?P<v>.+)", "{w} 必须是数字，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be a finite number, got (?P<v>.+)", "{w} 必须是有限的数，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be a positive number, got (?P<v>.+)", "{w} 必须是正数，实际为 {v}"),
    (r"calibrate: no training case to fit in (?P<p>.+) \((?P<n>\d+) cases read\)",
     "calibrate：{p} 中没有可拟合的训练案例（读到 {n} 个案例）"),
    (r"the result holds a number that is not finite \(NaN or infinity\): check the inputs",
     "结果中有非有限的数（NaN 或无穷大）：请检查输入"),
    (r"(?P<w>[\w-]+) must be true or false, got (?P<v>.+)", "{w} 必须是 true 或 false，实际为 {v}"),
    (r"(?P<w>[\w-]+) must be a name \(text\), got (?P<v>.+)", "{w} 必须是名称（文本），实际为 {v}"),
    (r"(?P<w>[\w-]+) must be text, got (?P<v>.+)", "{w} 必须是文本，实际为 {v}"),
    (r"zero stage must be 0, 1, 2 or 3, got (?P<v>.+)", "ZeRO 阶段必须是 0、1、2 或 3，实际为 {v}"),
    (r"data-layout must be one of (?P<c>.+?), got (?P<v>.+)", "data-layout 必须是 {c} 之一，实际为 {v}"),
    (r"data-layout packed: (?P<t>\w+) samples are not packed \(a DPO pair or a labelled sample is one sequence "
     r"each\): use padded-batch or padded-max",
     "data-layout packed：{t} 样本不能打包（一对 DPO 样本或一条带标签样本各自是一条序列）：请用 padded-batch 或 padded-max"),
    (r"unknown job field (?P<v>'.*?')(?P<dym>.*)", "未知的作业字段 {v}{dym}"),
    (r"unknown module to save (?P<v>'.*') \(choose from: (?P<c>.+)\)", "未知的 modules_to_save 模块 {v}（可选：{c}）"),
    (r"--lora-targets is empty", "--lora-targets 为空"),
    (r"choose either --zero or --fsdp, not both", "--zero 和 --fsdp 只能选一个"),
    (r"offload needs DeepSpeed ZeRO \(--zero 1/2/3\) or FSDP", "卸载需要 DeepSpeed ZeRO（--zero 1/2/3）或 FSDP"),
    (r"--offload all \(parameters too\) needs --zero 3 or --fsdp full_shard; use --offload optimizer with ZeRO-1/2",
     "--offload all（连同参数）需要 --zero 3 或 --fsdp full_shard；ZeRO-1/2 请用 --offload optimizer"),
    (r"optimizer-in-backward steps every micro-batch: it needs grad-accum 1",
     "optimizer-in-backward 每个 micro-batch 都更新参数：需要 grad-accum 1"),
    (r"optimizer-in-backward cannot unscale fp16 loss-scaled gradients: use bf16",
     "optimizer-in-backward 无法对 fp16 损失缩放的梯度反缩放：请用 bf16"),
    (r"paged optimizers are AdamW, 8-bit AdamW or LAMB, not (?P<o>.+)", "分页优化器只有 AdamW、8 位 AdamW 或 LAMB，不是 {o}"),
    # units typed as people write them (issue 33): counts, durations, money, token lengths, --lang, one dataset size
    (r"--(?P<w>[\w-]+): not an amount of money: (?P<v>.+) \(examples: (?P<e>.+)\)", "--{w}：{v} 不是金额（例如 {e}）"),
    (r"(?P<w>[\w-]+) must be a number of tokens, got (?P<v>.+) \(examples: (?P<e>.+)\)",
     "{w} 必须是 token 数，实际为 {v}（例如 {e}）"),
    (r"(?P<w>--[\w-]+(?: x --[\w-]+)*) = (?P<v>\S+) tokens is more than any published training run used \(the "
     r"largest pre-training runs are about 3\.6e13 = 36T tokens\): at most 1e\+14",
     "{w} = {v} 个 token，超过任何已公开的训练所用的量（最大的预训练约 3.6e13 = 36T 个 token）：最多 1e+14"),
    (r"--dataset-tokens (?P<d>[\d,]+) and --samples (?P<s>[\d,]+) both give the dataset size: give one "
     r"\(--samples goes with --avg-len\)",
     "--dataset-tokens {d} 和 --samples {s} 都给出了数据集大小：请只给一个（--samples 需配合 --avg-len）"),
    (r"--dataset-tokens (?P<d>[\d,]+) and --samples (?P<s>[\d,]+) x --avg-len (?P<a>\S+) = (?P<t>[\d,]+) tokens "
     r"disagree: give one of them", "--dataset-tokens {d} 与 --samples {s} × --avg-len {a} = {t} 个 token 不一致：请只给一个"),
    (r"--budget (?P<v>.+) is in (?P<c>CNY|USD) but --currency is (?P<g>\w+): give one currency",
     "--budget {v} 以 {c} 计，但 --currency 为 {g}：请只用一种货币"),
    (r"--budget (?P<v>.+) is in (?P<c>CNY|USD) but (?P<p>\w+) prices in (?P<h>CNY|USD): give the budget in (?P<h2>\w+), "
     r"or the rate with --usd-cny \(CNY per USD, e\.g\. 7\.1\)",
     "--budget {v} 以 {c} 计，但 {p} 以 {h} 标价：请以 {h} 给出预算，或用 --usd-cny 给出汇率（每美元兑人民币，如 7.1）"),
    (r"--lang must be en or zh \(or another name of either: (?P<n>.+)\), got (?P<v>.+)",
     "--lang 必须是 en 或 zh（或其其他写法：{n}），实际为 {v}"),
    # names from the catalogs
    (r"unknown (?P<k>GPU|model|instance type|region|efficiency|provider) (?P<v>'.*?'|\".*?\")(?P<rest>.*)",
     "未知的{k} {v}{rest}"),
    (r"(?P<v>.+?): not a config\.json \((?P<why>.+)\)", "{v}：不是 config.json（{why}）"),
    (r"(?P<v>.+?): not a plan\.json \((?P<why>.+)\)", "{v}：不是 plan.json（{why}）"),
    (r"--seq-len (?P<n>\d+) is longer than (?P<m>.+?)'s (?P<p>\d+) positions(?P<rest>.*)",
     "--seq-len {n} 超过 {m} 的 {p} 个位置{rest}"),
    (r"give --gpu or --instance", "请给出 --gpu 或 --instance"),
    # numbers and files
    (r"(?P<p>.+?): (?P<k>\w+) = (?P<v>.+) is not a plausible size \(a whole number from (?P<a>\d+) up to (?P<b>[\d,]+)\)",
     "{p}：{k} = {v} 不是合理的尺寸（应为 {a} 到 {b} 之间的整数）"),
    (r"(?P<p>.+?): (?P<k>\w+) = (?P<v>.+) must be true or false", "{p}：{k} = {v} 必须是 true 或 false"),
    (r"(?P<p>.+?): (?P<k>\w+) must be an object, not (?P<v>.+)", "{p}：{k} 必须是对象，而不是 {v}"),
    (r"(?P<p>.+?): each token is routed to (?P<k>\d+) experts but the model has (?P<n>\d+)",
     "{p}：每个 token 路由到 {k} 个专家，但模型只有 {n} 个"),
    (r"--network-gbps must be a bandwidth in Gbit/s in \(0, (?P<h>\d+)\], got (?P<v>.+)",
     "--network-gbps 必须是 (0, {h}] 内的带宽（Gbit/s），实际为 {v}"),
    (r"--set: (?P<n>\w+) = (?P<v>.+) is not a finite number", "--set：{n} = {v} 不是有限的数"),
    (r"--set: (?P<n>\w+) = (?P<v>.+) is outside its valid range (?P<r>.+)", "--set：{n} = {v} 超出有效范围 {r}"),
    (r"--set expects NAME=VALUE, got (?P<v>.+)", "--set 需要 NAME=VALUE 形式，实际为 {v}"),
    (r"--set (?P<n>\w+): (?P<v>.+) is not a number", "--set {n}：{v} 不是数字"),
    (r"--lang must be one of (?P<c>.+), got (?P<v>.+)", "--lang 必须是 {c} 之一，实际为 {v}"),
    (r"cannot read calibration (?P<p>.+?): (?P<why>.+)", "无法读取校准文件 {p}：{why}"),
    (r"cannot read (?P<p>.+?): (?P<why>.+)", "无法读取 {p}：{why}"),
    (r"(?P<p>.+?): not a calibration file \(no 'values'\)", "{p}：不是校准文件（没有 'values'）"),
    (r"--out (?P<p>.+?): exists and is not a directory", "--out {p}：已存在且不是目录"),
    (r"--out (?P<p>.+?): exists and is not a regular file", "--out {p}：已存在且不是普通文件"),
    (r"--out (?P<p>.+?): (?P<f>.+) is a file, not a directory", "--out {p}：{f} 是文件，不是目录"),
    (r"--out (?P<p>.+?): cannot write in (?P<f>.+?) \((?P<why>.+)\)", "--out {p}：无法在 {f} 中写入（{why}）"),
    (r"--out (?P<p>.*?): not a usable path (?P<rest>.+)", "--out {p}：不是可用的路径（为空，或名称超过文件系统的限制）"),
    # plan requests
    (r"give the dataset size: --dataset-tokens 200M, or --samples 50k with --avg-len 900",
     "请给出数据集大小：--dataset-tokens 200M，或 --samples 50k 加 --avg-len 900"),
    (r"--(?P<w>[\w-]+) must be at least 1, got (?P<v>.+)", "--{w} 至少为 1，实际为 {v}"),
    (r"--(?P<w>[\w-]+) must be positive, got (?P<v>.+)", "--{w} 必须为正数，实际为 {v}"),
    (r"--(?P<w>[\w-]+) must be a positive integer, got (?P<v>.+)", "--{w} 必须是正整数，实际为 {v}"),
    (r"--(?P<w>[\w-]+): not a count: (?P<v>.+) \(examples: (?P<e>.+)\)", "--{w}：{v} 不是数量（例如 {e}）"),
    (r"--(?P<w>[\w-]+): not a duration: (?P<v>.+) \(examples: (?P<e>.+)\)", "--{w}：{v} 不是时长（例如 {e}）"),
    (r"--epochs (?P<v>.+) is absurd \(at most 1000\)", "--epochs {v} 不合理（最多 1000）"),
    (r"--dataset-tokens above 10\^15 is absurd", "--dataset-tokens 超过 10^15 不合理"),
    (r"--provider all compares offers priced in CNY and in USD: .+",
     "--provider all 要比较以人民币和美元计价的报价：请用 --usd-cny 给出汇率（每美元兑人民币，如 7.1）；"
     "否则无法比较 AWS/GCP/Azure 的报价"),
    (r"give --global-batch \(sequences\) or --global-batch-tokens, not both",
     "--global-batch（序列数）和 --global-batch-tokens 只能给一个"),
    (r"--max-oom-risk is a probability between 0 and 1, got (?P<v>.+)", "--max-oom-risk 是 0 到 1 之间的概率，实际为 {v}"),
    (r"--provider must be one of (?P<c>.+)", "--provider 必须是 {c} 之一"),
    (r"(?P<p>.+?): unknown key (?P<v>'.*?')(?P<rest>.*)", "{p}：未知的键 {v}{rest}"),
    (r"(?P<p>.+?): 'model' is required", "{p}：必须给出 'model'"),
    (r"(?P<p>.+?): (?P<k>'\w+') must be a name \(text\), got (?P<v>.+)", "{p}：{k} 必须是名称（文本），实际为 {v}"),
    (r"(?P<p>.+?): expected a mapping of request keys", "{p}：应为请求键的映射"),
    (r"request file not found: (?P<p>.+)", "找不到请求文件：{p}"),
    # generate
    (r"plan file not found: (?P<p>.+)", "找不到计划文件：{p}"),
    (r"give --plan plan\.json, or --model with the workload flags", "请给出 --plan plan.json，或 --model 加工作负载参数"),
    (r"give --plan or the workload flags \(--model \.\.\.\), not both", "--plan 与工作负载参数（--model ...）只能给一种"),
    (r"this setup does not fit: it needs (?P<a>[\d.]+) of (?P<b>[\d.]+) GiB per GPU; .+",
     "这一配置放不下：每张 GPU 需要 {a} GiB，只有 {b} GiB；用相同参数运行 `trainfit estimate` 可看到能放下的方案"
     "（或用 --force 仍然写出）"),
    (r"(?P<p>.+?) exists and is not empty \(use --force to replace it\)", "{p} 已存在且非空（用 --force 替换）"),
    (r"(?P<p>.+?) choice\.strategy\.?(?P<f>[\w.]*): (?P<rest>.+)", "{p} choice.strategy {f}：{rest}"),
    (r"(?P<p>.+?) choice\.(?P<f>\w+): (?P<rest>.+)", "{p} choice.{f}：{rest}"),
    (r"nothing to write to (?P<p>.+?): no configuration meets the request \((?P<c>.*)\)",
     "没有可写入 {p} 的内容：没有满足请求的配置（{c}）"),
    # the web calculator's own inputs (ui/app.py) and shapes it meets
    (r"(?P<f>[\w-]+): '(?P<v>.*)' is not a whole number", "{f}：'{v}' 不是整数"),
    (r"model: choose a preset or paste a config\.json", "模型：请选择预设或粘贴 config.json"),
    (r"config\.json: not valid JSON \((?P<d>.+)\)", "config.json：不是有效的 JSON（{d}）"),
    (r"malformed model config for (?P<w>.+?): (?P<d>.+)", "模型配置格式错误（{w}）：{d}"),
    (r"(?P<f>--?[\w-]+) must be at least (?P<lo>\S+), got (?P<v>.*)", "{f} 至少为 {lo}，实际为 {v}"),
    (r"(?P<f>--[\w-]+): could not convert string to float: '(?P<v>.*)'", "{f}：'{v}' 不是数字"),
    (r"lang must be one of (?P<c>.+), got '(?P<v>.*)'", "lang 必须是 {c} 之一，实际为 '{v}'"),
    (r"request too large \((?P<n>[\d,]+) bytes; a config\.json is a few KB\)",
     "请求过大（{n} 字节；config.json 通常只有几 KB）"),
    # the web calculator's guard and `trainfit ui` itself (ui/guard.py)
    (r"request too large \(over (?P<n>[\d,]+) bytes; a config\.json is a few KB\)",
     "请求过大（超过 {n} 字节；config.json 通常只有几 KB）"),
    (r"forbidden: Host (?P<h>'.*') is not this calculator's address \(open (?P<u>.+)\)",
     "拒绝：Host {h} 不是此计算器的地址（请打开 {u}）"),
    (r"forbidden: a page from (?P<o>'.*') cannot use this calculator \(cross-origin request\)",
     "拒绝：来自 {o} 的网页不能使用此计算器（跨源请求）"),
    (r"the calculator's API takes Content-Type: application/json, got (?P<v>'.*')",
     "计算器的 API 只接受 Content-Type: application/json，实际为 {v}"),
    (r"bad Content-Length (?P<v>'.*')", "无效的 Content-Length {v}"),
    (r"--port (?P<n>\d+): address already in use on (?P<h>.+?) \(another program listens there; choose another "
     r"--port\)", "--port {n}：{h} 上的该端口已被占用（已有其他程序在监听；请换一个 --port）"),
    (r"--host (?P<h>.+?): not an address of this machine \((?P<why>.+)\)", "--host {h}：不是本机的地址（{why}）"),
    (r"--host (?P<h>.+?) --port (?P<n>\d+): cannot listen there \((?P<why>.+)\)",
     "--host {h} --port {n}：无法在此监听（{why}）"),
    (r"form: expected a JSON object", "表单：应为 JSON 对象"),
    (r"form: (?P<d>.+)", "表单：{d}"),
    (r"no configuration meets the request \((?P<c>.+)\)", "没有满足请求的配置（约束：{c}）"),
    # model-parallel layouts (issue 34: spec/training.py Strategy, estimate/model_parallel.py)
    (r"(?P<n>\d+) GPUs do not divide into tp (?P<t>\d+) x pp (?P<p>\d+) x cp (?P<c>\d+) \(GPUs = tp x pp x cp x "
     r"data-parallel size\)", "{n} 个 GPU 不能分成 tp {t} x pp {p} x cp {c}（GPU 数 = tp x pp x cp x 数据并行规模）"),
    (r"tp (?P<t>\d+) must divide the (?P<n>\d+) GPUs of a node \(tensor parallelism stays inside a node\)",
     "tp {t} 必须整除每个节点的 {n} 个 GPU（张量并行限于节点内）"),
    (r"--ep-overlap overlaps the MoE all-to-all of expert parallelism: it needs --ep above 1",
     "--ep-overlap 让专家并行的 MoE all-to-all 与计算重叠：需要 --ep 大于 1"),
    (r"vpp (?P<v>\d+) with schedule (?P<s>\S+): the interleaved schedule and vpp > 1 go together, with pp > 1",
     "vpp {v} 配调度 {s}：interleaved 调度与 vpp > 1 必须同时使用，且 pp > 1"),
    (r"with tp / pp / cp / ep the optimizer states are sharded by the distributed optimizer \(--zero 1\) or FSDP "
     r"\(--fsdp full_shard\); ZeRO-2/3 and offload are not modelled there",
     "使用 tp / pp / cp / ep 时，优化器状态由分布式优化器（--zero 1）或 FSDP（--fsdp full_shard）切分；此时不建模 "
     "ZeRO-2/3 与卸载"),
    (r"(?P<m>\w+) with tp / pp / cp / ep is not modelled \(Megatron-LM and torchtitan train full models\): use data "
     r"parallelism \(--zero / --fsdp\) for adapters",
     "{m} 与 tp / pp / cp / ep 同用不在建模范围内（Megatron-LM 与 torchtitan 训练全量模型）：适配器训练请用数据并行"
     "（--zero / --fsdp）"),
    (r"layout (?P<l>.+?): (?P<why>.+)", "并行布局 {l}：{why}"),
    # argparse (cli/main.py _Parser)
    (r"argument (?P<a>\S+): invalid choice: (?P<v>'.*?') \(choose from (?P<c>.+)\) \(see (?P<h>.+)\)",
     "参数 {a}：无效的选项 {v}（可选：{c}）（见 {h}）"),
    (r"unrecognized arguments: (?P<a>.+) \(see (?P<h>.+)\)", "无法识别的参数：{a}（见 {h}）"),
    (r"the following arguments are required: (?P<a>.+) \(see (?P<h>.+)\)", "缺少必需的参数：{a}（见 {h}）"),
    (r"argument (?P<a>\S+): expected one argument \(see (?P<h>.+)\)", "参数 {a}：需要一个值（见 {h}）"),
    (r"internal error, please report it: (?P<rest>.+)", "内部错误，请报告：{rest}"),
]
_COMPILED_PAIRS: tuple | None = None


def first_match(text: str):
    """(pattern, Chinese template, match) of the first of `_ZH`'s patterns that matches all of `text`, or None. The
    patterns are compiled once, when a Chinese message is first asked for."""
    global _COMPILED_PAIRS
    if _COMPILED_PAIRS is None:
        _COMPILED_PAIRS = tuple((re.compile(p), z) for p, z in _ZH)
    for pattern, template in _COMPILED_PAIRS:
        m = pattern.fullmatch(text)
        if m:
            return pattern, template, m
    return None
FALLBACK_ZH = "输入有误："
_WORDS = {"GPU": "GPU", "model": "模型", "instance type": "实例类型", "region": "地域", "efficiency": "效率参数",
          "provider": "云厂商"}
_DYM = re.compile(r" \(did you mean: (?P<c>.+?)\?\)")
# a file's name before its own message: "req.yaml: ...", "--data d.jsonl: ..." (a path: a known suffix or a slash)
_FILE_PREFIX = re.compile(r"(?P<p>(?:--[\w-]+ )?\S*(?:\.(?:ya?ml|json|jsonl|csv|toml|txt)|/\S*)): (?P<rest>.+)", re.S)


def _inner(text: str) -> str:
    """Sentences inside a match (did-you-mean, a hint after ';') in Chinese where known."""
    text = _DYM.sub(lambda m: f"（是否想输入：{m.group('c')}？）", text)
    text = text.replace("; `trainfit gpus` lists the catalog", "；`trainfit gpus` 列出目录")
    text = text.replace("; `trainfit instances` lists the catalog", "；`trainfit instances` 列出目录")
    text = text.replace("; `trainfit instances` lists regions with prices", "；`trainfit instances` 列出有价格的地域")
    text = text.replace("; use a preset (`trainfit models`), a config.json path or a model directory",
                        "；请使用预设（`trainfit models`）、config.json 路径或模型目录")
    text = text.replace("; choose a preset or paste a config.json", "；请选择预设或粘贴 config.json")
    return text


def localize_error(message: str, lang: str) -> str:
    """A bad-input message in `lang` (English when no pattern knows it)."""
    from . import Msg

    if isinstance(message, Msg):  # a sentence of the message table (an incompatible setting, ...): from the table
        return message.render(lang)
    if lang != "zh":
        return message
    hit = first_match(message)
    if hit is None:
        where = _FILE_PREFIX.match(message)
        if where is not None:  # "req.yaml: <a message a pattern knows>" (a request or data file names itself)
            inner = _known(where.group("rest"))
            if inner != where.group("rest"):
                return f"{where.group('p')}：{inner}"
        return FALLBACK_ZH + message  # a shape no pattern knows: its English detail behind a Chinese lead-in
    pattern, template, m = hit
    values = {k: _inner(_WORDS.get(v, v) if k == "k" else (v or "")) for k, v in m.groupdict().items()}
    for key in ("why", "d"):  # a detail that is itself a message some pattern knows
        if values.get(key):
            values[key] = _known(values[key])
    if "rest" in values and values["rest"].startswith(": "):
        values["rest"] = "：" + _known(values["rest"][2:])
    elif "rest" in values and pattern.pattern.startswith(("(?P<p>.+?) choice", "internal")):
        values["rest"] = _known(values["rest"])
    return template.format(**values)


def _known(text: str) -> str:
    """A message inside another one: in Chinese where a pattern knows it, else as it is (no second lead-in)."""
    from ..estimate.parallel3d import Reason

    for reason in Reason:  # why a model-parallel layout cannot run: worded in both languages where it is declared
        if text == reason.text("en"):
            return reason.text("zh")
    out = localize_error(text, "zh")
    return text if out.startswith(FALLBACK_ZH) else out



USERFILE_WHAT_ZH = {"request file": "请求文件", "calibration file": "校准文件", "config.json": " config.json",
                    "plan.json": " plan.json", "JSONL file of cases": "案例 JSONL 文件",
                    "monitor record": "监控记录文件", "FSDP config": " FSDP 配置文件"}
