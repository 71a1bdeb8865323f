"""Errors of the commands' own inputs (en / zh): plan's request (flags and request files), generate's plan.json,
the web calculator's form and guard, `trainfit ui`, model-parallel layouts and argparse's own messages. Made with
`trainfit.i18n.say(key, **values)` where they are raised; registered in the one message table by `trainfit.i18n`."""

from __future__ import annotations

MESSAGES: dict[str, dict[str, str]] = {
    # plan requests (spec/request.py, units.py, uncertainty.py, the price catalogs)
    "ec_give_dataset_size": {"en": "give the dataset size: --dataset-tokens 200M, or --samples 50k with --avg-len 900",
                             "zh": "请给出数据集大小：--dataset-tokens 200M，或 --samples 50k 加 --avg-len 900"},
    "ec_at_least_1": {"en": "--{option} must be at least 1, got {value:g}", "zh": "--{option} 至少为 1，实际为 {value:g}"},
    "ec_positive": {"en": "--{option} must be positive, got {value!r}", "zh": "--{option} 必须为正数，实际为 {value!r}"},
    "ec_positive_integer": {"en": "--{option} must be a positive integer, got {value!r}",
                            "zh": "--{option} 必须是正整数，实际为 {value!r}"},
    "ec_option_detail": {"en": "--{option}: {message}", "zh": "--{option}：{message}"},
    "ec_not_a_float": {"en": "could not convert string to float: {text!r}", "zh": "{text!r} 不是数字"},
    "ec_not_a_count": {"en": "not a count: {text!r} (examples: {examples})", "zh": "{text!r} 不是数量（例如 {examples}）"},
    "ec_not_a_duration": {"en": "not a duration: {text!r} (examples: {examples})",
                          "zh": "{text!r} 不是时长（例如 {examples}）"},
    "ec_epochs_absurd": {"en": "--epochs {epochs:g} is absurd (at most 1000)",
                         "zh": "--epochs {epochs:g} 不合理（最多 1000）"},
    "ec_provider_all_rate": {
        "en": "--provider all compares offers priced in CNY and in USD: give the rate with --usd-cny (CNY per USD, "
              "e.g. 7.1); without it AWS/GCP/Azure offers could not be compared",
        "zh": "--provider all 要比较以人民币和美元计价的报价：请用 --usd-cny 给出汇率（每美元兑人民币，如 7.1）；"
              "否则无法比较 AWS/GCP/Azure 的报价"},
    "ec_global_batch_both": {"en": "give --global-batch (sequences) or --global-batch-tokens, not both",
                             "zh": "--global-batch（序列数）和 --global-batch-tokens 只能给一个"},
    "ec_max_oom_risk": {"en": "--max-oom-risk is a probability between 0 and 1, got {value}",
                        "zh": "--max-oom-risk 是 0 到 1 之间的概率，实际为 {value}"},
    "ec_provider_one_of": {"en": "--provider must be one of {choices}, got {value!r}",
                           "zh": "--provider 必须是 {choices} 之一，实际为 {value!r}"},
    "ec_provider_one_of_bare": {"en": "--provider must be one of {choices}", "zh": "--provider 必须是 {choices} 之一"},
    "ec_request_unknown_key": {"en": "{where}: unknown key {key!r}{close}", "zh": "{where}：未知的键 {key!r}{close}"},
    "ec_request_model_required": {"en": "{where}: 'model' is required", "zh": "{where}：必须给出 'model'"},
    "ec_request_name_text": {"en": "{where}: {name!r} must be a name (text), got {kind} {value!r}",
                             "zh": "{where}：{name!r} 必须是名称（文本），实际为 {kind} {value!r}"},
    "ec_request_not_mapping": {"en": "{path}: expected a mapping of request keys", "zh": "{path}：应为请求键的映射"},
    "ec_request_missing": {"en": "request file not found: {path}", "zh": "找不到请求文件：{path}"},
    # generate: a plan.json's choice (planfile.py), the message of the field it names after its path
    "ec_plan_strategy_field": {"en": "{path} choice.strategy.{field}: {message}",
                               "zh": "{path} choice.strategy.{field}：{message}"},
    "ec_plan_strategy": {"en": "{path} choice.strategy: {message}", "zh": "{path} choice.strategy：{message}"},
    "ec_plan_choice_field": {"en": "{path} choice.{field}: {message}", "zh": "{path} choice.{field}：{message}"},
    "ec_plan_choice_missing": {"en": "{path} choice: missing {name!r}", "zh": "{path} choice：缺少 {name!r}"},
    "ec_plan_engine_disagrees": {
        "en": "{path} choice.strategy.engine: {engine!r} disagrees with its ZeRO/FSDP settings and GPU count, which "
              "make it {expected!r}",
        "zh": "{path} choice.strategy.engine：{engine!r} 与其 ZeRO/FSDP 设置和 GPU 数不一致（据此应为 {expected!r}）"},
    "ec_plan_strategy_missing": {"en": "{path} choice.strategy: missing {names}",
                                 "zh": "{path} choice.strategy：缺少 {names}"},
    "ec_plan_gpu_needed": {"en": "{path} choice.gpu: a GPU name is needed", "zh": "{path} choice.gpu：需要 GPU 名称"},
    "ec_plan_global_batch_positive": {"en": "{path} choice.strategy.global_batch: a positive integer, got {batch!r}",
                                      "zh": "{path} choice.strategy.global_batch：应为正整数，实际为 {batch!r}"},
    "ec_plan_global_batch_product": {
        "en": "{path} choice.strategy.global_batch: {batch} is not micro_batch {mb} x grad_accum {accum} x {ranks} "
              "GPU(s) = {total}",
        "zh": "{path} choice.strategy.global_batch：{batch} 不等于 micro_batch {mb} × grad_accum {accum} × {ranks} "
              "张 GPU = {total}"},
    "ec_plan_fits_bool": {"en": "{path} choice.fits: true or false, got {value!r}",
                          "zh": "{path} choice.fits：应为 true 或 false，实际为 {value!r}"},
    # the web calculator's own inputs (ui/app.py)
    "ec_ui_not_whole": {"en": "{field}: {value!r} is not a whole number", "zh": "{field}：{value!r} 不是整数"},
    "ec_ui_choose_model": {"en": "model: choose a preset or paste a config.json", "zh": "模型：请选择预设或粘贴 config.json"},
    "ec_ui_lang": {"en": "lang must be one of {choices}, got {value!r}", "zh": "lang 必须是 {choices} 之一，实际为 {value!r}"},
    "ec_ui_form": {"en": "form", "zh": "表单"},  # the request's body, named in the errors about it
    "ec_ui_form_object": {"en": "form: expected a JSON object", "zh": "表单：应为 JSON 对象"},
    "ec_ui_nothing_meets": {"en": "no configuration meets the request ({constraint})",
                            "zh": "没有满足请求的配置（约束：{constraint}）"},
    "ec_malformed_config": {"en": "malformed model config: {detail}", "zh": "模型配置格式错误：{detail}"},
    "ec_malformed_config_for": {"en": "malformed model config for {name}: {detail}", "zh": "模型配置格式错误（{name}）：{detail}"},
    # the web calculator's guard and `trainfit ui` itself (ui/guard.py)
    "ec_ui_too_large_over": {"en": "request too large (over {limit:,} bytes; a config.json is a few KB)",
                             "zh": "请求过大（超过 {limit:,} 字节；config.json 通常只有几 KB）"},
    "ec_ui_too_large": {"en": "request too large ({size:,} bytes; a config.json is a few KB)",
                        "zh": "请求过大（{size:,} 字节；config.json 通常只有几 KB）"},
    "ec_ui_forbidden_host": {"en": "forbidden: Host {host!r} is not this calculator's address (open {address})",
                             "zh": "拒绝：Host {host!r} 不是此计算器的地址（请打开 {address}）"},
    "ec_ui_forbidden_origin": {"en": "forbidden: a page from {origin!r} cannot use this calculator (cross-origin "
                                     "request)",
                               "zh": "拒绝：来自 {origin!r} 的网页不能使用此计算器（跨源请求）"},
    "ec_ui_content_type": {"en": "the calculator's API takes Content-Type: application/json, got {kind!r}",
                           "zh": "计算器的 API 只接受 Content-Type: application/json，实际为 {kind!r}"},
    "ec_ui_bad_length": {"en": "bad Content-Length {length!r}", "zh": "无效的 Content-Length {length!r}"},
    "ec_ui_port_in_use": {"en": "--port {port}: address already in use on {host} (another program listens there; "
                                "choose another --port)",
                          "zh": "--port {port}：{host} 上的该端口已被占用（已有其他程序在监听；请换一个 --port）"},
    "ec_ui_not_an_address": {"en": "--host {host}: not an address of this machine ({why})",
                             "zh": "--host {host}：不是本机的地址（{why}）"},
    "ec_ui_cannot_listen": {"en": "--host {host} --port {port}: cannot listen there ({why})",
                            "zh": "--host {host} --port {port}：无法在此监听（{why}）"},
    # model-parallel layouts (issue 34: spec/training.py Strategy, estimate/model_parallel.py)
    "ec_mp_gpus_divide": {"en": "{gpus} GPUs do not divide into tp {tp} x pp {pp} x cp {cp} (GPUs = tp x pp x cp x "
                                "data-parallel size)",
                          "zh": "{gpus} 个 GPU 不能分成 tp {tp} x pp {pp} x cp {cp}（GPU 数 = tp x pp x cp x 数据并行规模）"},
    "ec_mp_tp_node": {"en": "tp {tp} must divide the {per_node} GPUs of a node (tensor parallelism stays inside a "
                            "node)",
                      "zh": "tp {tp} 必须整除每个节点的 {per_node} 个 GPU（张量并行限于节点内）"},
    "ec_mp_vpp_schedule": {"en": "vpp {vpp} with schedule {schedule}: the interleaved schedule and vpp > 1 go "
                                 "together, "
                                 "with pp > 1",
                           "zh": "vpp {vpp} 配调度 {schedule}：interleaved 调度与 vpp > 1 必须同时使用，且 pp > 1"},
    "ec_mp_ep_overlap": {"en": "--ep-overlap overlaps the MoE all-to-all of expert parallelism: it needs --ep above 1",
                         "zh": "--ep-overlap 让专家并行的 MoE all-to-all 与计算重叠：需要 --ep 大于 1"},
    "ec_mp_precision_aware": {"en": "--precision-aware-optimizer is Megatron-Core's distributed optimizer in lower "
                                    "precision: it needs tp, pp, cp or ep above 1 with --zero 1 (not --fsdp)",
                              "zh": "--precision-aware-optimizer 是 Megatron-Core 低精度的分布式优化器：需要大于 1 的 "
                                    "tp、pp、cp 或 ep，并使用 --zero 1（不能用 --fsdp）"},
    "ec_mp_grad_reduce_bf16": {"en": "--grad-reduce-bf16 is Megatron-Core's gradient buffer in bf16: it needs tp, pp, cp "
                                     "or ep above 1 without --fsdp",
                               "zh": "--grad-reduce-bf16 是 Megatron-Core 的 bf16 梯度缓冲区：需要大于 1 的 tp、pp、cp 或 ep，"
                                     "且不用 --fsdp"},
    "ec_mp_sharding": {"en": "with tp / pp / cp / ep the optimizer states are sharded by the distributed optimizer "
                             "(--zero 1) or FSDP (--fsdp full_shard); ZeRO-2/3 and offload are not modelled there",
                       "zh": "使用 tp / pp / cp / ep 时，优化器状态由分布式优化器（--zero 1）或 FSDP（--fsdp full_shard）"
                             "切分；此时不建模 ZeRO-2/3 与卸载"},
    "ec_mp_adapters": {"en": "{method} with tp / pp / cp / ep is not modelled (Megatron-LM and torchtitan train full "
                             "models): use data parallelism (--zero / --fsdp) for adapters",
                       "zh": "{method} 与 tp / pp / cp / ep 同用不在建模范围内（Megatron-LM 与 torchtitan 训练全量模型）："
                             "适配器训练请用数据并行（--zero / --fsdp）"},
    "ec_mp_layout": {"en": "layout {layout}: {reason}", "zh": "并行布局 {layout}：{reason}"},
    "ec_internal_error": {"en": "internal error, please report it: {kind}: {detail}",
                          "zh": "内部错误，请报告：{kind}: {detail}"},
    # argparse's own messages (cli/main.py _Parser.error), with where to read the usage
    "ec_argparse_invalid_choice": {"en": "argument {argument}: invalid choice: {value} (choose from {choices}) "
                                         "(see `{prog} --help`)",
                                   "zh": "参数 {argument}：无效的选项 {value}（可选：{choices}）（见 `{prog} --help`）"},
    "ec_argparse_unrecognized": {"en": "unrecognized arguments: {arguments} (see `{prog} --help`)",
                                 "zh": "无法识别的参数：{arguments}（见 `{prog} --help`）"},
    "ec_argparse_required": {"en": "the following arguments are required: {arguments} (see `{prog} --help`)",
                             "zh": "缺少必需的参数：{arguments}（见 `{prog} --help`）"},
    "ec_argparse_expected_one": {"en": "argument {argument}: expected one argument (see `{prog} --help`)",
                                 "zh": "参数 {argument}：需要一个值（见 `{prog} --help`）"},
    # why a model-parallel layout cannot run (estimate/parallel3d.py Reason; Megatron-Core's rule where it has one)
    "ec_layout_heads_tp": {
        "en": 'the attention heads do not divide evenly among the tensor-parallel GPUs',
        "zh": '注意力头数不能被张量并行（TP）GPU 数整除'},
    "ec_layout_kv_heads_tp": {
        "en": "the key/value heads are neither a multiple nor a divisor of the tensor-parallel size (Megatron-Core "
              "replicates them when fewer, else splits them)",
        "zh": '键值头数既不是张量并行规模的倍数也不是其约数（头数较少时 Megatron-Core 复制，否则切分）'},
    "ec_layout_layers_stages": {
        "en": 'fewer layers than pipeline stages x virtual stages: some stage would hold none',
        "zh": '层数少于流水线阶段数与虚拟阶段数之积：有的阶段一层也没有'},
    "ec_layout_experts_ep": {
        "en": 'the experts do not divide evenly among the expert-parallel GPUs',
        "zh": '专家数不能被专家并行（EP）GPU 数整除'},
    "ec_layout_ep_without_experts": {
        "en": 'expert parallelism needs a mixture-of-experts model; this one is dense',
        "zh": '专家并行需要混合专家（MoE）模型，而此模型是稠密模型'},
    "ec_layout_tp_across_nodes": {
        "en": 'a tensor-parallel group must fit inside one node (it talks in every layer)',
        "zh": '张量并行组必须位于同一节点内（每一层都要通信）'},
    "ec_layout_gpu_count": {
        "en": 'the GPU count is not the product of the tensor, pipeline, context and data parallel sizes',
        "zh": 'GPU 总数不等于张量、流水线、上下文与数据并行规模的乘积'},
    "ec_layout_ep_folding": {
        "en": "expert-parallel size times expert tensor-parallel size does not divide the GPUs of one pipeline stage "
              "(Megatron-Core: world size must be divisible by etp x ep x pp)",
        "zh": '专家并行规模乘以专家张量并行规模不能整除一个流水线阶段的 GPU 数（Megatron-Core 要求总 GPU 数能被三者之积整除）'},
    "ec_layout_seq_cp": {
        "en": "the sequence length is not a multiple of twice the context-parallel size (load-balanced ring "
              "attention splits each sequence into 2 x cp chunks)",
        "zh": '序列长度不是上下文并行规模两倍的整数倍（负载均衡的环形注意力把每条序列切成 2 x cp 块）'},
    "ec_layout_few_micro_batches": {
        "en": 'fewer micro-batches per step than pipeline stages: the pipeline never fills',
        "zh": '每步的微批次数少于流水线阶段数：流水线始终无法填满'},
    "ec_layout_interleaved_micro_batches": {
        "en": 'the interleaved schedule needs the micro-batches per step to be a multiple of the pipeline stages',
        "zh": '交错式流水线调度要求每步微批次数是流水线阶段数的整数倍'},
    "ec_layout_vpp_schedule": {
        "en": "virtual stages need the interleaved schedule and more than one pipeline stage, and the interleaved "
              "schedule needs virtual stages",
        "zh": '虚拟阶段需要交错式调度且流水线阶段数大于一，交错式调度也需要虚拟阶段'},
    "ec_layout_moe_tp_needs_sp": {
        "en": "expert parallelism together with tensor parallelism needs sequence parallelism (Megatron-Core refuses "
              "it otherwise)",
        "zh": '专家并行与张量并行同时使用时必须开启序列并行（否则 Megatron-Core 拒绝运行）'},
    "ec_layout_ep_overlap_needs_ep": {
        "en": 'overlapping the expert all-to-all needs expert parallelism (ep > 1)',
        "zh": '专家 all-to-all 与计算重叠需要专家并行（ep > 1）'},
    "ec_layout_ep_overlap_needs_vpp": {
        "en": "overlapping the expert all-to-all under pipeline parallelism needs virtual stages (Megatron-Core "
              "asserts it)",
        "zh": '流水线并行下专家 all-to-all 与计算重叠需要虚拟阶段（Megatron-Core 的断言）'},
    "ec_layout_ep_overlap_full_recompute": {
        "en": "overlapping the expert all-to-all does not run with full recomputation (Megatron-Core asserts it): "
              "use selective or no checkpointing",
        "zh": '专家 all-to-all 与计算重叠不能与完全重计算同用（Megatron-Core 的断言）：请用选择性检查点或不用检查点'},
    "ec_layout_split_accounted": {
        "en": "counting the embedding or the loss as a layer in the pipeline split (Megatron-Core's "
              "account_for_*_in_pipeline_split) needs Megatron's pipeline (pp above 1, no FSDP) and the layers plus "
              "those counted to divide by the pipeline stages, and each stage's share by the virtual stages",
        "zh": "把嵌入层或损失计作流水线切分中的一层（Megatron-Core 的 account_for_*_in_pipeline_split）需要 Megatron 的"
              "流水线（pp 大于 1，不用 FSDP），且层数加上计入的层能被流水线阶段数整除，每个阶段的层数能被虚拟阶段数整除"},
    "ec_layout_pp_layout": {
        "en": "the custom pipeline layout (--pp-layout) does not fit this model: Megatron-Core wants E first and once, "
              "L last and once, one t per decoder layer, and MTP layers (m) after them, in one chunk, the last of "
              "their rank",
        "zh": "自定义流水线布局（--pp-layout）与此模型不符：Megatron-Core 要求 E 在最前且只出现一次，L 在最后且只出现一次，"
              "每个解码层一个 t，MTP 层（m）在所有解码层之后、位于同一个块中且是其 rank 的最后一个块"},
    "ec_layout_pp_layout_split": {
        "en": "a custom pipeline layout (--pp-layout) replaces the pipeline split's own knobs: it does not go with "
              "--pp-split-embedding / --pp-split-loss, FSDP or the zb schedule (Megatron-LM's layouts only)",
        "zh": "自定义流水线布局（--pp-layout）取代流水线切分本身的选项：不能与 --pp-split-embedding / --pp-split-loss、"
              "FSDP 或 zb 调度同用（仅限 Megatron-LM 的布局）"},
    "ec_pp_layout_empty": {
        "en": "--pp-layout needs a layout such as 'Et|(tt|)*30mL' (stages separated by |; E embedding, t decoder "
              "layer, m MTP layer, L loss)",
        "zh": "--pp-layout 需要一个布局，如 'Et|(tt|)*30mL'（阶段以 | 分隔；E 嵌入层、t 解码层、m MTP 层、L 损失）"},
    "ec_pp_layout_long": {
        "en": "--pp-layout is too long once its repetitions are written out ({n}; at most {limit})",
        "zh": "--pp-layout 展开重复后过长（{n}；最多 {limit}）"},
    "ec_pp_layout_chars": {
        "en": "--pp-layout: unknown layer characters {chars} (Megatron-Core knows E, t, m and L; stages are separated "
              "by |, (...)*n and x*n repeat, commas are ignored)",
        "zh": "--pp-layout：未知的层字符 {chars}（Megatron-Core 只认 E、t、m、L；阶段以 | 分隔，(...)*n 与 x*n 表示重复，"
              "逗号会被忽略）"},
    "ec_pp_layout_stages": {
        "en": "--pp-layout has {stages} stages, not a multiple of the pipeline size {pp} (Megatron-LM: the layout's "
              "stages / pp are the virtual stages per rank)",
        "zh": "--pp-layout 有 {stages} 个阶段，不是流水线规模 {pp} 的整数倍（Megatron-LM：布局阶段数 / pp 即每个 rank 的"
              "虚拟阶段数）"},
    "ec_pp_layout_vpp": {
        "en": "--vpp {vpp} and --pp-layout disagree: {stages} stages on pp {pp} are {derived} virtual stages per rank "
              "(leave --vpp out: the layout sets it, as Megatron-LM does)",
        "zh": "--vpp {vpp} 与 --pp-layout 不一致：{stages} 个阶段、pp {pp} 即每个 rank {derived} 个虚拟阶段（不必给 "
              "--vpp：与 Megatron-LM 一样由布局决定）"},
    "ec_pp_layout_embedding": {
        "en": "--pp-layout: the embedding E must come first and once",
        "zh": "--pp-layout：嵌入层 E 必须在最前且只出现一次"},
    "ec_pp_layout_loss": {
        "en": "--pp-layout: the loss L must come last and once",
        "zh": "--pp-layout：损失 L 必须在最后且只出现一次"},
    "ec_pp_layout_layers": {
        "en": "--pp-layout places {given} decoder layers (t) and the model has {layers}",
        "zh": "--pp-layout 放置了 {given} 个解码层（t），而模型有 {layers} 层"},
    "ec_pp_layout_mtp": {
        "en": "--pp-layout: multi-token-prediction layers (m) come after every decoder layer, all in one stage, the "
              "last chunk of its rank (Megatron-Core's rule)",
        "zh": "--pp-layout：多 token 预测层（m）必须在所有解码层之后、全部位于同一个阶段，且是其 rank 的最后一个块"
              "（Megatron-Core 的规则）"},
    "ec_layout_ep_overlap_megatron": {
        "en": "overlapping the expert all-to-all is Megatron-Core's option; torchtitan's FSDP layouts do not have it",
        "zh": '专家 all-to-all 与计算重叠是 Megatron-Core 的选项，torchtitan 的 FSDP 布局没有'},
}
