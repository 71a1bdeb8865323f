"""Chinese for the descriptions and the bases of the named efficiencies (catalog/data/efficiency.yaml), shown by
`trainfit efficiencies --lang zh`. Each Chinese text is keyed by a digest of the English it translates (whitespace
collapsed): when the English in efficiency.yaml changes, its old Chinese is no longer used (the English shows
until the Chinese is updated), and tests/test_zh_complete.py names every text without a current Chinese form."""

from __future__ import annotations

import hashlib

from . import Msg


def digest(text: str) -> str:
    """The key of an English text: 8 hex digits of the SHA-1 of its words joined by single spaces."""
    return hashlib.sha1(" ".join(str(text).split()).encode()).hexdigest()[:8]


# digest of the English -> Chinese (the efficiency's name in the comment before each)
_ZH: dict[str, str] = {
    # ---- descriptions ----
    # allocator_overhead_fraction
    "cfb477c8": "PyTorch 缓存分配器在存活峰值之外额外保留的显存（碎片、块取整）：reserved = allocated × (1 + 该值)。",
    # allocator_overhead_gib
    "03daecc1": "PyTorch 缓存分配器在存活峰值之外保留的固定部分（已释放的临时缓冲区留下的缓存段、块取整）："
                "reserved = allocated × (1 + allocator_overhead_fraction) + 该值。",
    # allocator_varlen_expandable_fraction
    "96985d3b": "设置 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True（--expandable-segments）时的 "
                "allocator_varlen_fraction：段原地增长，而不是按每种形状缓存新块，因此额外保留的很少。",
    # allocator_varlen_fraction
    "47d2283f": "变长批次（--avg-len、--data、fixed_length 为 false 的案例）：张量形状逐步变化时缓存分配器的额外保留。"
                "为较短批次缓存的块不能用于较长的批次，一直保留着，因此 reserved（及 nvidia-smi）显存比 allocated "
                "多出峰值时激活值与 logits（形状会变的张量）的这一比例；allocated 显存不变。",
    # attention_efficiency
    "7fe21ab7": "融合注意力内核（FlashAttention-2 / SDPA 的 flash 或 memory-efficient 后端）在注意力矩阵乘（QK^T 与 PV）"
                "上达到的稠密峰值比例，前向与反向。",
    # backward_transient_intermediates
    "23ecb644": "一个块的反向过程中同时存活的 intermediate 大小（tokens × intermediate_size）的张量个数（MLP 的 gate/up "
                "输出及激活函数的梯度），在该块保存的激活值之外。",
    # billing_granularity_s
    "6e33bd27": "按量付费的时长如何向上取整计费，按云厂商。",
    # causal_attention_work
    "ebdf7b1a": "融合因果内核实际执行的注意力计算量占完整的序列长度平方计算量的比例（FlashAttention 跳过被掩码的上三角）；"
                "eager 注意力计算完整矩阵。",
    # checkpoint_interval_hours
    "c6042182": "两次检查点之间的挂钟小时数（结束时也写一次）。",
    # checkpoint_write_gbytes_per_s
    "b05f00a9": "每个节点写检查点存储（云块存储）的带宽；写入时训练暂停。",
    # comm_efficiency
    "e1ec5ec5": "NCCL 总线带宽占链路单向带宽的比例，按链路。",
    # comm_overlap
    "9a4db2d5": "反向过程中梯度 / 参数集合通信能与计算重叠的时间比例。",
    # compile_time_factor
    "13acc574": "在 torch.compile 下运行的模型的计算时间（前向与反向）相对于同一训练栈 eager 运行的倍数"
                "（TrainingSpec.torch_compile）：Inductor 把矩阵乘周围的归一化、激活、RoPE 和残差加法融合起来，启动的内核更少。"
                "在训练栈的 framework_time_factor 之上再乘，因此训练栈的因子对应其 eager 代码，任何训练栈的编译运行都再乘上此值。",
    # cpu_adam_params_per_s_per_core
    "6e2a7e1b": "优化器卸载时 DeepSpeed CPU-Adam 每个主机核心的吞吐。",
    # cuda_context_gib
    "2106c9a3": "CUDA 上下文、cuBLAS/cuDNN 工作区和 PyTorch 运行时在缓存分配器之外占用的显存（nvidia-smi 可见，"
                "torch.cuda.memory_reserved 不含）。",
    # cuda_core_matmul_efficiency
    "3be79148": "在没有 TF32 张量核心的 GPU（Volta、Turing）上用 fp32 训练时，大型 GEMM 在训练步中达到的 fp32（CUDA 核心）"
                "峰值比例。与 matmul_efficiency 描述的张量核心是不同的计算单元：fp32 运行说明不了 fp16 运行的张量核心效率，"
                "反之亦然。",
    # default_inter_node_gbps
    "b3ec0d2a": "多节点估算既没有指定实例、也没有给出 --network-gbps 时的节点间网络带宽。",
    # elementwise_passes_per_layer
    "ed2255ad": "一个块中非矩阵乘算子（归一化、激活、残差加法、旋转位置编码、数据类型转换）的前向显存流量，以 (hidden_size × "
                "tokens × 激活字节数) 为单位。反向为两倍。按 Hugging Face 的 eager 实现计数（RMSNorm 升为 fp32、SiLU/GELU、"
                "旋转位置编码、残差）。",
    # fit_headroom_fraction
    "a59bb58e": "预测的设备显存不超过 (1 − 该值) × 可用显存时，配置算作放得下。",
    # flash_backward_recompute
    "dad1a41a": "FlashAttention 的反向过程重算的额外注意力前向计算量（P 矩阵）。",
    # fp8_matmul_share
    "eb456ee2": "--precision fp8 时以 FP8 运行的矩阵乘 FLOPs 比例（Transformer Engine 把其余部分留在 bf16）。",
    # framework_activation_factor
    "a3242c71": "实测运行的训练栈保存的激活值相对于估算器为其计算的量的倍数（按该训练栈所述设置运行的 eager Hugging Face "
                "代码：卸载、检查点策略、LitGPT 自己的代码）。用于 `trainfit validate` 和校准；trainfit 自己的运行器和 HF "
                "Trainer 为 1.0。",
    # framework_logits_factor
    "b9b30f7b": "实测运行的训练栈的损失缓冲区（logits、fp32 对数概率及其梯度）相对于 transformers 升为 fp32 的交叉熵的倍数"
                "（torchtune、LitGPT、Unsloth 的分块或融合交叉熵保留得更少）。用于 `trainfit validate` 和校准；trainfit "
                "自己的运行器和 HF Trainer 为 1.0。",
    # framework_time_factor
    "3b9dd577": "实测运行的训练栈的计算时间相对于 eager Hugging Face 代码（train.py 运行的代码）的倍数：融合内核和 "
                "torch.compile 让一些训练栈更快。用于 `trainfit validate` 和校准；trainfit 自己的运行器和 HF Trainer 为 1.0。"
                "默认值给没有自己拟合因子的训练栈（校准没见过的，或没有 --framework）：校准把它设为已见训练栈的合并值"
                "（其拟合因子与每个参考训练栈的 1 的几何平均；calibrate.py pool_stack_factors），因此没见过的训练栈按典型的"
                "训练栈预测，而不是按 eager HF 代码。",
    # freeze_trainable_layers
    "3f075e69": "方法 `freeze` 只训练最后 N 个块（其余都不训练），同 LLaMA-Factory 的冻结微调。",
    # gemm_dim_knee
    "41550959": "小型 GEMM 达不到 matmul_efficiency：效率乘以 d / (d + knee)，其中 d 是 GEMM 三个维度中最小的一个"
                "（分块/波次量化和启动开销）。",
    # host_cores_default
    "65ecaddd": "没有给出实例时为 CPU-Adam 假设的主机核心数。",
    # host_process_overhead_gib
    "04ec02e0": "每个训练进程在所加载的模型之外占用的主机内存：Python 解释器、torch/CUDA 主机端库和数据加载器"
                "（按进程加到加载所需的主机内存上）。",
    # loading_checkpoint_shard_bytes
    "35cb110b": "把模型加载到其 ZeRO-3 分区时，每个 rank 一次读取的一个检查点分片的大小（加载所需的主机内存；`plan` "
                "用它对照实例内存检查，生成的 README 写明它）。",
    # lora_alpha_ratio
    "81adf97f": "不用于显存或时间；记录在生成的配置中（alpha = 该比值 × 秩）。",
    # matmul_efficiency
    "77154c65": "大型 GEMM 在训练步中达到的稠密张量核心峰值比例（cuBLAS，没有其他负载）。",
    # memory_bandwidth_efficiency
    "afe22d59": "流式逐元素内核达到的数据手册显存带宽比例。",
    # memory_reserved_fraction
    "ff51516c": "应用无法使用的 GPU 显存比例。开启 ECC 时，GDDR6 数据中心 GPU 留出 1/16 的显存给 ECC（A10：24 GiB × "
                "15/16 = 22.5 GiB；nvidia-smi 显示 23028 MiB）；HBM 的 ECC 在带外。",
    # nccl_buffers_gib
    "c45662d0": "多张 GPU 训练时每张 GPU 上的 NCCL 通信器缓冲区。",
    # op_overhead_s
    "3e626c04": "eager PyTorch 中每个启动的算子的固定开销（Python 调度 + 内核启动），在内核太短、无法掩盖它时计入。",
    # ops_per_layer_forward
    "cf7b991c": "eager Hugging Face 代码的前向中每个块启动的算子数（反向约 2 倍）。",
    # optimizer_bytes_per_param
    "29dfb1ab": "fp32 主权重下，每个可训练参数一次 AdamW 更新的显存流量（读参数、梯度、m、v；写参数、m、v；加上 foreach "
                "的临时张量）。",
    # plan_memory_headroom_fraction
    "dc331a58": "计划的安全余量：预测的设备显存须低于 (1 − 该值) × 可用显存。",
    # spot_mtbi_hours
    "ad9f977b": "一个抢占式（spot）GPU 实例两次中断之间的平均时间。n 个实例上的任务中断频率是其 n 倍；计划每 "
                "sqrt(2 × 检查点时间 × MTBI) 保存一次检查点（Young 1974），并为每次预期的中断计入自上次检查点以来损失的"
                "工作和一次重启。",
    # spot_restart_hours
    "09c8ae80": "从一次中断到重新开始训练的挂钟小时数：新的抢占式实例、镜像与环境、模型与检查点加载。",
    # startup_hours
    "da47923d": "每次运行在第一步之前的时间：实例启动、镜像与驱动、环境安装、模型下载与加载、数据集分词。与训练时间一样计费。",
    # step_overhead_s
    "fb845ac0": "每个优化器步在模型之外的固定开销（数据加载、zero_grad、学习率调度、日志）。",
    # triton_attention_backward_slowdown
    "0c30672d": "Triton 版 FlashAttention 在相同计算量下的反向时间相对于 FlashAttention-2 的倍数（见 "
                "triton_attention_forward_slowdown）。",
    # triton_attention_forward_slowdown
    "8637fda1": "Triton 版 FlashAttention（flash-attention 的 flash_attn_triton.py；llm-foundry 的 attn_impl='triton' "
                "是它的副本）在相同计算量下的前向时间相对于 FlashAttention-2 的倍数（TrainingSpec.triton_attention）。",
    # zero3_module_overhead_s
    "d850f49e": "DeepSpeed ZeRO-3 每个 micro-batch 在每个持有参数的模块上花费的 CPU 时间（其前向与反向钩子取回该模块被切分的"
                "参数并释放），前向与反向各占一半；与 op_overhead_s 一样，GPU 比 CPU 忙时被掩盖。没有自有参数的模块（块、"
                "PEFT 的 ModuleDict 和 dropout）几乎不花时间；被检查点的块重算时只增加很少。",
    # ---- bases ----
    # initial-estimate (most names)
    "fd1aa185": "初始估计",
    # assumption (checkpoint_interval_hours, host_cores_default, startup_hours)
    "57763304": "假设",
    # allocator_overhead_gib
    "0a7cb83f": "初始估计（未拟合：拟合它会增大留一来源交叉验证的显存误差；calibrate.NOT_FITTED_BY_CV）",
    # allocator_varlen_expandable_fraction
    "2631da26": "初始估计，未拟合（同 allocator_varlen_fraction）",
    # allocator_varlen_fraction
    "5ae79f2a": "初始估计，未拟合：开发集中没有写明样本长度的变长案例，因此这份保留无法与批次实际的长度区分开。机制："
                "PyTorch CUDA 语义文档“用 PYTORCH_CUDA_ALLOC_CONF 优化显存使用”一节（expandable_segments：“作业经常改变"
                "分配大小时，例如批大小变化……碎片”）；NVIDIA NeMo PR #9061（动态的批次形状在每个 mini-batch 重新分配）",
    # attention_efficiency
    "fcf3f388": "初始估计（FlashAttention-2 论文报告前向达到 A100 峰值的 50-73%，反向更低）",
    # backward_transient_intermediates
    "98f2acd3": "初始估计（门控 MLP 中 act(gate)、up 及二者乘积的梯度）",
    # billing_granularity_s
    "eaeb9535": "假设，并非来自参考资料（未核实）：阿里云 ECS 按量付费按秒计费，AWS 和 GCP 按秒计费（Linux 最少 60 秒），"
                "Azure 按分钟计费",
    # causal_attention_work
    "88dbcb7c": "FlashAttention-2 的因果掩码（Dao 2023）；eager = 1.0",
    # checkpoint_write_gbytes_per_s
    "7d6c8e2a": "假设（云 SSD 块存储；ESSD PL1 级）",
    # comm_efficiency
    "8180b326": "初始估计（nccl-tests 的 PERFORMANCE.md 定义了总线带宽；A100 NVSwitch 上的 all-reduce 约达到 300 GB/s "
                "中的 230）",
    # compile_time_factor
    "8a90e6fa": "公开实测：torchtitan benchmarks/llama3_h100_202412_torchtitan.md 表 3（Llama 3.1 8B，128 张 H100，FSDP，"
                "选择性算子检查点，本地批量 2 × 8192）：eager 每张 GPU 5,605 tokens/s，torch.compile 6,514，其余相同："
                "5605 / 6514 = 0.8605。在有编译运行的实测时由 trainfit calibrate 拟合。",
    # cuda_core_matmul_efficiency
    "75e1f813": "初始估计（训练规模下 SGEMM 受 CUDA 核心算力限制；由 trainfit calibrate 拟合）",
    # default_inter_node_gbps
    "324b3cc7": "假设（每节点一块 400 Gbit/s RDMA 网卡）；8 卡基板上的 SXM GPU 按 NVIDIA DGX 参考设计，每张 GPU 一块网卡："
                "DGX A100 数据手册 8 × ConnectX-6 200 Gb/s HDR（1600），DGX H100 / DGX H200 数据手册 8 × ConnectX-7 "
                "400 Gb/s（3200），DGX B200 用户指南（docs.nvidia.com/dgx/dgxb200-user-guide，“Introduction to NVIDIA "
                "DGX B200 Systems”：4 个 OSFP 端口对应 8 张单端口 ConnectX-7 网卡，InfiniBand 每张最高 400 Gbps）3200",
    # fit_headroom_fraction
    "83e77d81": "假设（plan 使用它自己的安全余量）",
    # flash_backward_recompute
    "d4b1d5aa": "FlashAttention-2 论文（反向 = 前向矩阵乘 FLOPs 的 2.5 倍）",
    # framework_activation_factor
    "9e57bea6": "初始估计（由 trainfit calibrate 拟合）。torchtitan 默认的选择性检查点（\"op\"：保留每个块的输入、SDPA "
                "输出和每隔一个矩阵乘的输出，其余重算）在这里曾以 0.3 为先验（其保存的字节数相对于注意力核心检查点下 eager "
                "Hugging Face 代码的，Llama-3.1-8B）；自 2026-12-02（第三轮）起估算器自己计算该策略（TrainingSpec.selective_ac "
                "\"op\"，frameworks.yaml；estimate/activations.py selective_policy_block），因此 torchtitan 与任何训练栈一样"
                "从 1.0 开始",
    # framework_logits_factor
    "303aee3a": "初始估计（由 trainfit calibrate 拟合）；各训练栈拟合之前的值（未参与拟合的训练栈按它预测）由其损失代码推出。"
                "Unsloth：其 Triton 交叉熵（unsloth/kernels/cross_entropy_loss.py，Fast_CrossEntropyLoss）只保留 16 位 "
                "logits 和每个 token 一个 fp32 logsumexp，反向把梯度原地写入 logits：约为升为 fp32 的损失每个词表项、每个 "
                "token 所占 12 字节中的 2 字节（2 / 12 = 0.17）。torchtune：1.0，其分块输出与 CEWithChunkedOutputLoss 已按其代码"
                "建模（estimate/memory_loss.py torchtune_logits_items，TrainingSpec.loss_impl；此倍数作用于这些项）；此前由 "
                "(2 + 12 / 8) / 12 = 0.3 的先验代替它们",
    # framework_time_factor
    "450830ad": "初始估计（由 trainfit calibrate 拟合；默认值由已拟合的训练栈合并而来）",
    # freeze_trainable_layers
    "1fec316a": "假设（LLaMA-Factory 默认 freeze_trainable_layers=2）",
    # host_process_overhead_gib
    "e5d2b648": "初始估计（粗略的余量，此处未测量）",
    # loading_checkpoint_shard_bytes
    "f8885076": "关于检查点的假设：5 GB 是 transformers 经典的 `save_pretrained(max_shard_size=\"5GB\")` 默认值，"
                "大多数公开的检查点都以此写出（并非测量值）",
    # lora_alpha_ratio
    "593ff2b4": "惯例",
    # memory_bandwidth_efficiency
    "b6daa9bb": "初始估计，未由 trainfit calibrate 拟合：拟合时它跑到边界（1.0），增大了样本内的吞吐误差，且没有降低留一来源"
                "交叉验证的误差（README，Accuracy）",
    # memory_reserved_fraction
    "c2161db3": "NVIDIA GDDR6 的 ECC 预留（1/16）；HBM 的值为初始估计",
    # ops_per_layer_forward
    "093a2ed6": "初始估计（按 modeling_llama.py 的 forward 计数）",
    # plan_memory_headroom_fraction
    "073a010c": "假设（吸收分配器碎片尖峰和变长批次）",
    # spot_mtbi_hours
    "14283466": "明确的假设，未经测量，也没有云厂商以速率形式公布：AWS 的 Spot Instance Advisor 只按实例类型给出每月的中断"
                "频率区间（<5% ... >20%），GCP 和 Azure 回收抢占式容量时没有公布速率，阿里云只保证抢占式实例的第一个小时"
                "（保护期）。可用 --set spot_mtbi_hours=H 设定你自己的值。",
    # spot_restart_hours
    "22a1e216": "假设（预热好的镜像；比 startup_hours 短，因为数据和环境已经准备好）",
    # triton_attention_backward_slowdown
    "91673fea": "公开实测：FlashAttention-2 论文（arXiv:2307.08691，4.1 节）：反向“快约 2 倍”。未拟合。",
    # triton_attention_forward_slowdown
    "3c777559": "公开实测：FlashAttention-2 论文（Dao，arXiv:2307.08691，4.1 节，A100 80GB SXM4，头维度 64/128，有或没有"
                "因果掩码）：“FlashAttention-2 在前向中比 Triton 版 FlashAttention 快约 1.3-1.5 倍，在反向中快约 2 倍”"
                "（取 1.3-1.5 的中点）。未拟合。",
    # zero3_module_overhead_s
    "271aa035": "在 CPU 上测得（benchmarks/zero3_hooks.py，data/measurements/zero3_hooks_cpu.json，2026-12-02：DeepSpeed "
                "0.19.8 使用其 CPU 加速器，gloo，单进程，hidden size 64、4 层和 16 层的 Llama，ZeRO-3 对比 ZeRO-0）：每个"
                "持有参数的模块每个 micro-batch 1.06 ms（全参微调），有检查点时 1.16 ms，每个 Linear 上都有 PEFT LoRA 时 "
                "2.14 ms（同一台机器上更早的同类运行：1.5-1.7 ms）；取该范围的中间值。GPU 主机的 CPU 和 DeepSpeed 版本不同，"
                "因此在有 ZeRO-3 的实测运行时拟合",
}

# the units of efficiency.yaml
_UNITS = {"fraction": "比例", "count": "个数", "factor": "倍数", "ratio": "比值", "elements": "元素数", "bytes": "字节",
          "parameters/s": "参数/秒", "hidden-sized tensor passes": "hidden 大小张量的遍数",
          "fraction of the attention forward": "注意力前向的比例"}


def efficiency_text(text: str, lang: str) -> str:
    """A description or basis of efficiency.yaml in `lang` (the English where no Chinese is current)."""
    if lang != "zh" or not text:
        return text
    return _ZH.get(digest(text), text)


def efficiency_unit(unit: str, lang: str) -> str:
    return _UNITS.get(unit, unit) if lang == "zh" else unit


class EfficiencyText(Msg):
    """A description or basis of efficiency.yaml as a value inside a sentence of the message table (a plan's
    assumptions): its English is the str, its other languages come from `efficiency_text` (here, by digest)."""

    def __new__(cls, text: str):
        self = str.__new__(cls, text)
        self.key, self.values = "", {}
        return self

    def render(self, lang: str) -> str:
        return efficiency_text(str.__str__(self), lang)

    def __reduce__(self):
        return (EfficiencyText, (str.__str__(self),))


def missing_chinese() -> list[str]:
    """The descriptions and bases of the shipped efficiencies without a current Chinese form ("name: field")."""
    from ..catalog.efficiency import Efficiencies

    eff = Efficiencies.default()
    return [f"{name}: {field}" for name in eff.names() for field in ("description", "basis")
            if eff.describe(name).get(field) and digest(eff.describe(name)[field]) not in _ZH]
