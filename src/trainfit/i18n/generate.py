"""Messages of `trainfit generate` (training setups and launch targets), en / zh. Merged into the message table by
`trainfit.i18n`; errors raise `GenerateError(key, ...)`."""

from __future__ import annotations

GENERATE_MESSAGES: dict[str, dict[str, str]] = {
    # what the command prints
    "gen_wrote": {"en": "wrote {out}: {files}", "zh": "已写入 {out}：{files}"},
    "gen_next_ecs": {"en": "next: pip install -r {out}/requirements.txt && DATA={data} {out}/launch.sh",
                     "zh": "下一步：pip install -r {out}/requirements.txt && DATA={data} {out}/launch.sh"},
    "gen_next_submit": {"en": "next: cd {out} && {submit}", "zh": "下一步：cd {out} && {submit}"},
    "gen_sky_note": {
        "en": "note: SkyPilot does not reach Alibaba ECS directly; run it on ACK (cloud: kubernetes) or another "
              "cloud, or use --target ecs / dlc / pytorchjob",
        "zh": "注意：SkyPilot 不能直接创建阿里云 ECS 实例；可在 ACK 上运行（cloud: kubernetes）或换用其他云，"
              "或使用 --target ecs / dlc / pytorchjob"},
    # errors: the command's inputs
    "gen_e_framework": {
        "en": "generate writes trainfit's train.py (Transformers + PEFT under DDP, FSDP2 or DeepSpeed), not a "
              "{framework} run, and the numbers were made for {framework}: drop --framework (or use --framework "
              "trainfit / hf-trainer) to generate and estimate train.py's run, or launch {framework} yourself with the "
              "layout the plan chose",
        "zh": "generate 生成的是 trainfit 的 train.py（Transformers + PEFT，DDP、FSDP2 或 DeepSpeed），不是 {framework} "
              "的运行，而这些数字是按 {framework} 估算的：去掉 --framework（或用 --framework trainfit / hf-trainer）来生成并"
              "估算 train.py 的运行，或按计划选出的布局自行启动 {framework}"},
    "gen_e_plan_and_model": {"en": "give --plan or the workload flags (--model ...), not both",
                             "zh": "请给出 --plan 或工作负载参数（--model ...），不能同时给出"},
    "gen_e_no_input": {"en": "give --plan plan.json, or --model with the workload flags",
                       "zh": "请给出 --plan plan.json，或 --model 及工作负载参数"},
    "gen_e_nofit": {
        "en": "this setup does not fit: it needs {need} of {usable} GiB per GPU; `trainfit estimate` with the same "
              "flags lists what would fit (or --force writes it anyway)",
        "zh": "此配置放不下：每张 GPU 需要 {need} / {usable} GiB；用相同参数运行 `trainfit estimate` 可列出能放下的配置"
              "（或用 --force 仍然写出）"},
    "gen_e_data": {"en": "{detail}", "zh": "--data 检查未通过：{detail}"},
    "gen_e_target": {"en": "unknown --target {target!r} (one of {targets})",
                     "zh": "未知的 --target {target!r}（可选：{targets}）"},
    "gen_e_out_not_empty": {"en": "{out} exists and is not empty (use --force to replace it)",
                            "zh": "{out} 已存在且不为空（用 --force 替换）"},
    "gen_e_bad_name": {"en": "{what}: {value!r} is not a valid name (letters, digits and . _ : / @ + - only)",
                       "zh": "{what}：{value!r} 不是有效名称（只能包含字母、数字和 . _ : / @ + -）"},
    "gen_e_selective_ac": {
        "en": "{what} checkpoints the attention core under --grad-ckpt selective; --selective-ac {policy} is "
              "torchtitan's policy, estimated but not run here (use --selective-ac attention, or --grad-ckpt full)",
        "zh": "{what} 在 --grad-ckpt selective 下只对注意力核心做检查点；--selective-ac {policy} 是 torchtitan 的策略，"
              "只能估算、不能在此运行（请用 --selective-ac attention，或 --grad-ckpt full）"},
    "gen_e_model_source": {"en": "--model-source {source!r}: one of {sources}",
                           "zh": "--model-source {source!r}：可选 {sources}"},
    "gen_e_local_needs_path": {
        "en": "--model-source local needs --model-path (the model directory on the training machines)",
        "zh": "--model-source local 需要 --model-path（训练机器上的模型目录）"},
    "gen_e_path_control": {"en": "--model-path: control characters in the path",
                           "zh": "--model-path：路径中含控制字符"},
    "gen_e_no_hub_id": {"en": "{model}: no Hub id known; use --model-source local --model-path DIR",
                        "zh": "{model}：没有已知的 Hub ID；请用 --model-source local --model-path 目录"},
    "gen_e_needs_config": {"en": "{model}: generate needs a preset or a local config.json",
                           "zh": "{model}：generate 需要预设模型或本地 config.json"},
    "gen_e_oib": {
        "en": "optimizer-in-backward: the generated setup runs it on one GPU only (gradients are stepped before any "
              "all-reduce could run)",
        "zh": "optimizer-in-backward：生成的配置只在单张 GPU 上运行它（梯度在任何 all-reduce 之前就已更新）"},
    # errors: plan.json
    "gen_e_plan_missing": {"en": "plan file not found: {path}", "zh": "找不到计划文件：{path}"},
    "gen_e_plan_not_object": {"en": "{path}: not a trainfit plan (expected a JSON object)",
                              "zh": "{path}：不是 trainfit 计划（应为 JSON 对象）"},
    "gen_e_plan_version": {
        "en": "{path}: plan format version {version!r}; this trainfit reads version {expected} (re-run "
              "`trainfit plan --out`)",
        "zh": "{path}：计划格式版本 {version!r}；此 trainfit 读取版本 {expected}（请重新运行 `trainfit plan --out`）"},
    "gen_e_plan_key_missing": {"en": "{path}: missing {name!r}", "zh": "{path}：缺少 {name!r}"},
    "gen_e_plan_unknown_key": {"en": "{where}: unknown key {name!r} (a plan.json from another trainfit version?)",
                               "zh": "{where}：未知键 {name!r}（来自其他 trainfit 版本的 plan.json？）"},
    "gen_e_plan_unknown_key_close": {
        "en": "{where}: unknown key {name!r} (did you mean: {close}?) (a plan.json from another trainfit version?)",
        "zh": "{where}：未知键 {name!r}（是否想输入：{close}？）（来自其他 trainfit 版本的 plan.json？）"},
    "gen_e_no_strategy": {"en": "{path}: choice has no strategy", "zh": "{path}：choice 中没有 strategy"},
    "gen_e_no_hf_config": {"en": "{path}: the model has no hf_config (needed to build or load it)",
                           "zh": "{path}：模型没有 hf_config（构建或加载模型需要它）"},
    # errors: generate --serving --from RUN_DIR (the model a training run wrote)
    "gen_e_serving_no_model": {"en": "give --model (the model to serve) or --from RUN_DIR (a training run's output "
                                     "directory)",
                               "zh": "请给出 --model（要部署的模型）或 --from RUN_DIR（训练运行的输出目录）"},
    "gen_e_from_needs_serving": {"en": "--from RUN_DIR names a trained model to serve: it goes with --serving",
                                 "zh": "--from RUN_DIR 指定要部署的训练结果：需与 --serving 一起使用"},
    "gen_e_from_and": {"en": "--from takes the model and its path from the run; drop {flag}",
                       "zh": "--from 会从训练结果中读取模型及其路径；请去掉 {flag}"},
    "gen_e_from_missing": {"en": "--from {path}: no such directory (give the output directory of a training run)",
                           "zh": "--from {path}：目录不存在（请给出训练运行的输出目录）"},
    "gen_e_from_none": {
        "en": "--from {path}: no trained model there (train.py writes it to OUTPUT_DIR/{merged} at the end of "
              "training; give that output directory, or a folder holding config.json and weights)",
        "zh": "--from {path}：其中没有训练好的模型（train.py 在训练结束时把它写到 OUTPUT_DIR/{merged}；请给出该输出目录，"
              "或包含 config.json 和权重的目录）"},
    "gen_e_from_no_weights": {
        "en": "--from: {path} holds config.json but no weights (*.safetensors or pytorch_model*.bin): the model was "
              "not completely written or copied",
        "zh": "--from：{path} 中有 config.json 但没有权重（*.safetensors 或 pytorch_model*.bin）：模型没有完整写出或复制"},
    "gen_e_from_adapter_only": {
        "en": "--from: the run left only a LoRA adapter, {path} (no merged model; its trainfit_artifact.json says "
              "why): serve it on its base model with --model BASE --model-path BASE_DIR --adapter {path}",
        "zh": "--from：该运行只留下了 LoRA 适配器 {path}（没有合并后的模型，原因见其中的 trainfit_artifact.json）："
              "请用 --model 基座模型 --model-path 基座目录 --adapter {path} 在基座模型上部署它"},
    # the generated README: where multi-node checkpoints go, per target
    "gen_storage_ecs": {"en": "NAS or CPFS mounted at the same path on every node (or OSS through ossfs)",
                        "zh": "在每个节点相同路径挂载的 NAS 或 CPFS（或经 ossfs 挂载的 OSS）"},
    "gen_storage_dlc": {"en": "a NAS / CPFS / OSS data source mounted at {shared}",
                        "zh": "挂载在 {shared} 的 NAS / CPFS / OSS 数据源"},
    "gen_storage_pytorchjob": {
        "en": "a PersistentVolumeClaim backed by NAS / CPFS / OSS (ACK CSI), mounted at {shared}",
        "zh": "由 NAS / CPFS / OSS（ACK CSI）提供、挂载在 {shared} 的 PersistentVolumeClaim"},
    "gen_storage_skypilot": {"en": "a SkyPilot file_mounts / volume entry (or a cloud bucket) for OUTPUT_DIR",
                             "zh": "为 OUTPUT_DIR 配置的 SkyPilot file_mounts / volume（或云存储桶）"},
    "gen_storage_slurm": {"en": "the cluster's shared file system (the submit directory)",
                          "zh": "集群的共享文件系统（提交目录）"},
    # errors: where --out may write (generate writes only into a directory of its own, never over a user's file)
    "gen_e_out_root": {"en": "--out {out} is the file system root; give a new directory for the setup",
                       "zh": "--out {out} 是文件系统根目录；请给出一个新目录存放生成的配置"},
    "gen_e_out_home": {"en": "--out {out} is your home directory; give a new directory for the setup",
                       "zh": "--out {out} 是你的主目录；请给出一个新目录存放生成的配置"},
    "gen_e_out_cwd": {"en": "--out {out} is the current directory or one of its parents; give a new directory for "
                            "the setup",
                      "zh": "--out {out} 是当前目录或其上级目录；请给出一个新目录存放生成的配置"},
    "gen_e_out_holds_input": {"en": "--out {out} holds {flag} {path}; give a directory that does not contain the "
                                    "run's inputs",
                              "zh": "--out {out} 包含 {flag} {path}；请给出一个不包含本次输入的目录"},
    "gen_e_out_foreign": {"en": "{out}: {name} was not written by trainfit generate (not in its {manifest}); move or "
                                "rename it, or choose another --out (--force replaces only generate's own files)",
                          "zh": "{out}：{name} 不是 trainfit generate 写入的（不在其 {manifest} 中）；请移走或改名，"
                                "或换一个 --out（--force 只替换 generate 自己写入的文件）"},
    "gen_e_out_modified": {"en": "{out}: {name} was changed since trainfit generate wrote it; move or rename it to "
                                 "keep the changes (or delete it), then run again",
                           "zh": "{out}：{name} 在 trainfit generate 写入后被修改过；如需保留修改请移走或改名"
                                 "（或删除它），然后重新运行"},
    # errors: model-parallel plans (engine megatron / torchtitan: generate/stacks.py), layouts the stacks do not run
    "gen_e_3d_method": {
        "en": "{engine} trains full models: --method {method} is not in it (LoRA / QLoRA are NeMo's or PEFT's); use "
              "--method full, or a layout without tp / pp / cp / ep (DDP, FSDP2, DeepSpeed) for adapters",
        "zh": "{engine} 只做全参数训练：它没有 --method {method}（LoRA / QLoRA 属于 NeMo 或 PEFT）；请用 --method full，"
              "或用不含 tp / pp / cp / ep 的布局（DDP、FSDP2、DeepSpeed）训练适配器"},
    "gen_e_3d_offload": {
        "en": "{engine} does not offload to host memory (--offload {offload}): drop --offload for this layout",
        "zh": "{engine} 不支持卸载到主机内存（--offload {offload}）：此布局请去掉 --offload"},
    "gen_e_3d_zero": {
        "en": "{engine} shards at most the optimizer states (--zero 1: the distributed optimizer), not ZeRO-{stage}",
        "zh": "{engine} 最多只切分优化器状态（--zero 1：分布式优化器），不支持 ZeRO-{stage}"},
    "gen_e_3d_task": {
        "en": "{engine}'s launch written here trains next-token loss (pretrain, sft), not --task {task}",
        "zh": "这里生成的 {engine} 启动只训练下一词损失（pretrain、sft），不支持 --task {task}"},
    "gen_e_3d_optimizer": {
        "en": "the {engine} launch written here uses AdamW, not --optimizer {optimizer}",
        "zh": "这里生成的 {engine} 启动使用 AdamW，不支持 --optimizer {optimizer}"},
    "gen_e_3d_zb": {
        "en": "{engine} has no zero-bubble schedule with one stage per GPU (--pp-schedule zb): use 1f1b, or "
              "interleaved with --vpp > 1",
        "zh": "{engine} 没有每卡一个阶段的零气泡调度（--pp-schedule zb）：请用 1f1b，或 interleaved 加 --vpp > 1"},
    "gen_e_3d_etp": {
        "en": "torchtitan runs expert tensor parallelism of 1 or the tensor parallel size ({tp}), not {etp}: "
              "set --etp 1 or --etp {tp}",
        "zh": "torchtitan 的专家张量并行只能是 1 或张量并行规模（{tp}），不能是 {etp}：请设 --etp 1 或 --etp {tp}"},
    "gen_e_3d_split": {
        "en": "{what} do not divide evenly by {by}: choose sizes that do",
        "zh": "{what} 不能被 {by} 整除：请选择能整除的规模"},
    "gen_e_pp_layout": {
        "en": "the pipeline layout does not fit the model: {reason}",
        "zh": "流水线布局与模型不符：{reason}"},
    "gen_e_3d_model": {
        "en": "{engine}: {model} cannot be written for it: {why}",
        "zh": "{engine}：无法为 {model} 生成配置：{why}"},
    "gen_e_3d_selective": {
        "en": "{engine}'s selective checkpointing is {supported}, not --selective-ac {policy}: re-plan with one of "
              "those, or --grad-ckpt full / none",
        "zh": "{engine} 的选择性检查点是 {supported}，不是 --selective-ac {policy}：请改用其中之一重新规划，"
              "或 --grad-ckpt full / none"},
    "gen_e_3d_precision": {
        "en": "{engine}'s launch written here trains in {supported}, not --precision {precision}",
        "zh": "这里生成的 {engine} 启动以 {supported} 训练，不支持 --precision {precision}"},
    "gen_e_3d_no_sp": {
        "en": "torchtitan always splits LayerNorm activations across the tensor-parallel group: a plan without "
              "sequence parallelism is not its run (re-plan with sequence parallelism)",
        "zh": "torchtitan 在张量并行组内总是切分 LayerNorm 激活：不含序列并行的计划不是它的运行（请开启序列并行重新规划）"},
    "gen_e_3d_framework": {
        "en": "the plan's numbers were made for {framework}, but its layout is launched with {engine}: re-plan with "
              "--framework {engine_key} or without --framework",
        "zh": "计划的数字是按 {framework} 估算的，但该布局要用 {engine} 启动：请用 --framework {engine_key} 或不加 "
              "--framework 重新规划"},
}
