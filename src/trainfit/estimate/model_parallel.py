"""Estimates of model-parallel layouts (tp x pp x cp x ep x dp, issue 34): the data-parallel estimator's own compute
time for one pipeline stage, composed with parallel3d's communication, bubble and memory terms.

How one step is built (benchmarks/parallel3d.py measured this composition on the published TP / PP / CP runs first):
1. The stage as a model of its own: ceil(L / pp) blocks at full width, run by the data-parallel estimator on one GPU
   for one micro-batch (every efficiency, the attention kernel, checkpointing and the stack's defaults as for any
   estimate). Its forward and backward divided by tp x cp are one GPU's share: TP splits every matmul, CP every
   token's work. The stage keeps the embedding and the head, so this is the slowest (last) stage's time.
2. parallel3d.step_time adds per micro-batch the exposed TP collectives, the CP ring beyond what the attention core
   hides, the expert all-to-all and the pipeline sends; multiplies by the micro-batches plus the schedule's bubble;
   adds the data-parallel gradient sync (overlapped by efficiency.yaml's comm_overlap), the optimizer step divided
   by the GPUs that share its states, and the fixed per-step overhead.
3. Links: the cluster's own (NVLink / NVSwitch / PCIe inside a node, the catalog's network between nodes, one share
   per GPU), each at its NCCL efficiency (comm_efficiency).
4. Memory: parallel3d.peak_memory_per_gpu (the first or the last stage, whichever holds more), then the estimator's
   allocator, CUDA-context and NCCL terms as the stage estimate has them.
"""

from __future__ import annotations

from dataclasses import replace

from ..catalog.efficiency import EfficiencyView
from ..errors import SpecError
from ..i18n import say
from ..spec import pp_layout
from ..spec.cluster import Cluster
from ..spec.model import ModelSpec
from ..spec.training import Method, Strategy, TrainingSpec
from . import parallel3d as p3
from .layout import (TORCHTITAN_LOSS_PARALLEL_BYTES, _stage_of, layout_of, memory, modules_of,  # noqa: F401
                     optimizer_bytes, recompute_of, stage_model, stage_training)
from .perf import StepTime

# Overlap of each collective with compute, the same for every layout (parallel3d.Overlap): TP collectives and
# pipeline sends exposed (Megatron-LM overlaps neither by default), the ring attention's KV exchange hidden behind the
# attention core (each step sends the next chunk while it computes on this one).
TP_OVERLAP, P2P_OVERLAP, CP_OVERLAP, EP_OVERLAP = 0.0, 0.0, 1.0, 0.0


def check_layout(m: ModelSpec, t: TrainingSpec, s: Strategy) -> p3.Layout:
    """The layout, or a SpecError naming the first rule it breaks (parallel3d.layout_problems)."""
    if t.method in (Method.LORA, Method.QLORA):
        raise SpecError(say("ec_mp_adapters", method=t.method.value))
    layout = layout_of(s)
    problems = p3.layout_problems(p3.arch_of(m), layout, s.gpus_per_node, gpus=s.gpus, seq_len=t.seq_len,
                                  micro_batches=t.grad_accum, recompute=recompute_of(t))
    if problems:
        reason = problems[0].msg()
        if problems[0] == p3.Reason.PP_LAYOUT:  # which of Megatron-Core's layout rules, in its own words
            key, values = pp_layout.problem(layout.pp_layout, layout.pp, m.layers)
            reason = say(key, **values)
        raise SpecError(say("ec_mp_layout", layout=s.label(), reason=reason))
    return layout


def _extra_heads_s(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                   layout: p3.Layout, stage) -> tuple[float, float]:
    """Forward and backward seconds of the output layers the timed rank of a custom layout runs beyond the one its
    stage estimate holds (each MTP layer's; parallel3d.stage_heads), one micro-batch at full width: an output layer
    is what the stage estimate takes beyond its blocks, a block what one block more or less changes (the same
    estimator, one block fewer)."""
    extra = p3.stage_heads(p3.arch_of(m), layout) - 1
    n = stage_model(m, s, layout).layers
    if extra <= 0 or n < 2:
        return 0.0, 0.0
    less = _stage_estimate(m, t, s, cluster, eff, layout, layers=n - 1)
    out = []
    for key in ("compute/forward", "compute/backward"):
        whole, fewer = stage.time.parts.get(key, 0.0), less.time.parts.get(key, 0.0)
        out.append(extra * max(0.0, whole - n * (whole - fewer)))
    return out[0], out[1]


def _stage_estimate(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                    layout: p3.Layout | None = None, layers: int | None = None):
    """The data-parallel estimator on one GPU running one micro-batch of the stage: a middle stage's blocks with
    the embedding and the head (with the embedding or the loss counted in the split, a middle stage holds the most
    blocks; its time is taken with the head as before — tried 2026-12-07 and not landed: the busier of a middle
    stage without the head and the last stage with one block less, which moved the two Llama 3.1 405B runs from
    +1.1% / +4.8% to +4.9% / +8.9% and left Qwen3-235B's where they were)."""
    from ..spec.cluster import cluster_for
    from .estimator import check_compatibility, data_parallel_estimate

    one = Strategy(gpus_per_node=1, nodes=1)
    sm, t1, c1 = stage_model(m, s, layout), stage_training(t, s), cluster_for(cluster.gpu, 1, 1)
    if layers is not None:  # the same stage with another block count (_extra_heads_s)
        sm = _stage_of(m, layers, sm.expert_shards)
    return data_parallel_estimate(sm, t1, one, c1, eff, check_compatibility(sm, t1, one, c1))


def links_of(cluster: Cluster, s: Strategy, eff: EfficiencyView) -> p3.Links:
    # one GPU per node: no link inside a node is used (every group spans nodes); PCIe's efficiency as perf.py takes it
    intra = cluster.intra_bytes_per_s * eff("comm_efficiency",
                                            link=cluster.intra_link if cluster.intra_link != "single" else "pcie")
    if s.nodes > 1 and cluster.inter_bytes_per_s:
        inter = cluster.inter_bytes_per_s / s.gpus_per_node * eff("comm_efficiency", link=cluster.inter_link)
    else:
        inter = intra
    return p3.Links(intra=intra, inter=inter, gpus_per_node=s.gpus_per_node)


def step_time(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
              layout: p3.Layout) -> tuple[StepTime, object]:
    """The step's time by term (StepTime, bounds by kind) and the stage estimate it was built from. A custom
    pipeline layout: the slowest of its ranks (one of each kind, by blocks and output layers: parallel3d.rank_kinds),
    each timed as the even split's stage is, with its own blocks and its output layers (at least one)."""
    if not layout.pp_layout:
        return _step_time(m, t, s, cluster, eff, layout)
    timed = [_step_time(m, t, s, cluster, eff, replace(layout, timed_rank=i))
             for i in p3.rank_kinds(p3.arch_of(m), layout)]
    return max(timed, key=lambda x: x[0].total)


def _step_time(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
               layout: p3.Layout) -> tuple[StepTime, object]:
    stage = _stage_estimate(m, t, s, cluster, eff, layout)
    parts = stage.time.parts
    share = s.tp * s.cp
    heads_f, heads_b = _extra_heads_s(m, t, s, cluster, eff, layout, stage) if layout.pp_layout else (0.0, 0.0)
    fwd = (parts.get("compute/forward", 0.0) + heads_f) / share
    bwd = (parts.get("compute/backward", 0.0) + heads_b) / share
    fwd, bwd = _with_expert_bias(m, t, s, cluster, eff, fwd, bwd, layout)
    bwd += module_recompute_s(m, t, s, cluster, eff, layout) / share
    fwd, bwd = _with_moe_launches(m, t, s, eff, fwd, bwd, layout)
    states = s.tp * (s.dp * s.cp if layout.distributed_optimizer or layout.fsdp else 1)
    optimizer = sum(v for k, v in parts.items() if k.startswith("optimizer")) / states
    overhead = sum(v for k, v in parts.items() if k.startswith("overhead"))
    tt = t.for_time
    links = links_of(cluster, s, eff)
    overlap = overlap_of(m, t, s, layout, links, eff, fwd, bwd, moe_share=_moe_share(m, t, s, cluster, eff, layout))
    terms = p3.step_time(p3.arch_of(m), layout, links, seq_len=tt.seq_len // s.cp * s.cp,
                         micro_batch=tt.sequences_per_micro_batch, micro_batches=t.grad_accum, compute_fwd_s=fwd,
                         compute_bwd_s=bwd, recompute=recompute_of(t),
                         attention_share=stage.flops.attention / stage.flops.total if stage.flops.total else 0.0,
                         optimizer_s=optimizer, overhead_s=overhead, overlap=overlap,
                         moe_recompute="moe" in modules_of(t),
                         grad_bytes=optimizer_bytes(t, s).get("grad_bytes", 4.0))
    st = StepTime()
    # what limits each term (the bottleneck): the bubble is the pipeline's idle time; the optimizer step streams the
    # states through memory, as in the data-parallel estimate
    kinds = {"compute": "compute", "pipeline": "pipeline", "communication": "communication",
             "optimizer": "memory", "overhead": "overhead"}
    for key, seconds in terms.parts.items():
        st.add(key, seconds, kinds.get(key.split("/", 1)[0], "compute"))
    return st, stage


def _moe_share(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
               layout: p3.Layout | None = None) -> float:
    """The MoE MLP's share of a block's forward time on the stage's GPU (its Linears: routed and shared experts,
    router), the rest being the attention half the EP overlap schedules beside it; 0 for a dense model."""
    if not m.is_moe or s.ep == 1:
        return 0.0
    from ..spec.cluster import cluster_for
    from .params import layer_linears
    from .perf import block_times
    from .trainable import split_params

    sm, t1 = stage_model(m, s, layout), stage_training(t, s)
    one = Strategy(gpus_per_node=1, nodes=1)
    times = block_times(sm, t1, split_params(sm, t1, int(eff("freeze_trainable_layers"))),
                        cluster_for(cluster.gpu, 1, 1), eff, one)
    moe = {f"linear/{lin.module}" for lin in layer_linears(sm)
           if lin.count > 1 or lin.kind or any(w in lin.module for w in ("mlp", "expert", "moe", "router", "gate"))}
    total = sum(seconds for seconds, _ in times.values())
    return sum(times[k][0] for k in moe if k in times) / total if total else 0.0


def module_recompute_s(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                       layout: p3.Layout | None = None) -> float:
    """Seconds one micro-batch's backward on the stage spends running again what Megatron-Core's recompute modules
    discarded (layout.modules_of; the attention core's recomputation is in the stage estimate), at full width (the
    caller divides by tp x cp like the rest of the stage's compute): per block of the stage, the forward time of
    the modules' own operators as perf.block_times prices them (the stage's Linears by role and kind: mla_up_proj
    the q_b / kv_b up projections, mlp a dense MLP's Linears, moe and shared_experts the routed and the shared
    experts' ones), and the two memory-bound ones by their traffic at the GPU's bandwidth: moe_act reads each
    expert copy's fc1 output (2·f, gated) and writes f, layernorm reads and writes the hidden state once per
    recomputed norm (pre-MLP of an MoE layer, input under MLA; parallel3d.recomputed_coefficients). A recomputed
    MoE layer's extra all-to-alls are parallel3d's (ep_comm_per_layer_s moe_recompute)."""
    modules = modules_of(t)
    if not modules:
        return 0.0
    from ..spec.cluster import cluster_for
    from .memory_result import regime_for
    from .params import layer_linears
    from .perf import block_times
    from .trainable import split_params

    sm, t1 = stage_model(m, s, layout), stage_training(t, s)
    one = Strategy(gpus_per_node=1, nodes=1)
    times = block_times(sm, t1, split_params(sm, t1, int(eff("freeze_trainable_layers"))),
                        cluster_for(cluster.gpu, 1, 1), eff, one)
    again = set()  # a module of several block kinds is one key of block_times, its time summed over them
    for lin in layer_linears(sm):
        dense_mlp = not lin.kind and bool(set(lin.roles) & {"gate", "up", "down"}) and not sm.is_moe
        if (("mla_up_proj" in modules and set(lin.roles) & {"q_b", "kv_b"})
                or ("mlp" in modules and dense_mlp)
                or ("moe" in modules and lin.kind in ("routed", "shared"))
                or ("shared_experts" in modules and "moe" not in modules and lin.kind == "shared")):
            again.add(f"linear/{lin.module}")
    per_block = sum(times[k][0] for k in again if k in times)
    tokens, act = t1.tokens_per_micro_batch, regime_for(t1, one).act
    bw = cluster.gpu.memory_bandwidth * eff("memory_bandwidth_efficiency")
    if "moe_act" in modules and "moe" not in modules and sm.is_moe:
        width = sum(lin.in_features * lin.share for lin in layer_linears(sm)
                    if lin.kind == "routed" and "down" in lin.roles)
        per_block += tokens * max(1, sm.experts_per_tok) * width * (3.0 if sm.gated_mlp else 2.0) * act / bw
    if "layernorm" in modules:
        norms = float(sm.is_moe) + float(p3.arch_of(sm).mla_latent > 0)
        per_block += norms * tokens * sm.hidden * 2 * act / bw
    return per_block * sm.layers * eff("framework_time_factor")


# Kernels one Megatron-Core MoE layer launches per micro-batch (a fixed part, a part per local expert), counted from
# the code (data/validation/parallel_sources.md "MoE layer kernels": Megatron-LM d98e8a64 moe/ and TransformerEngine
# d0067d0d grouped_linear.py, the alltoall dispatcher with permute and router fusion, grouped GEMM): forward,
# backward. TE's grouped GEMM launches one cuBLASLt GEMM per expert; fp8 current scaling quantizes each expert's
# input separately (4 launches each). The attention half with TE's fused kernels: about 10 forward, 18 backward.
MOE_KERNELS = {"bf16": ((30 + 10, 2), (20 + 18, 4)), "fp8": ((33 + 10, 10), (23 + 18, 12))}


# Megatron-Core's expert FC2 bias (TEGroupedMLP._apply_bias, core_v0.16.1 to core_v0.18.0: linear_fc2 is built
# with skip_bias_add, FC1's bias is added inside its GEMM): per local expert in a Python loop, `t + b * p` over that
# expert's rows of the split output, then one torch.cat. In bf16 (probs in the router's dtype, the input's unless
# moe_router_dtype is set; TE's fused router keeps the logits' dtype): forward b * p writes 2 bytes per output
# element, the add reads 2 + 2 and writes 2, the cat reads 2 and writes 2 (12); backward the bias gradient
# (grad * p, then its sum: 2 + 2 + 2), the probs' (the same, 6) and the split's gradient, one cat (2 + 2): 16.
# Launches per local expert: the forward's mul and add (2); backward two mul-and-sum pairs and the bias gradient's
# accumulation into its main_grad (5).
EXPERT_BIAS_BYTES = (12.0, 16.0)
EXPERT_BIAS_KERNELS = (2, 5)


def routed_bias_width(m: ModelSpec) -> float:
    """Output features of the mean block's routed-expert down projections that carry a bias (gpt-oss:
    mlp.experts.down_proj_bias), each at the share of blocks holding it; 0 when none does. A fused expert set keeps
    its bias as a tensor of its own beside the module (`<module>_bias`), a list of Linears as their `.bias`."""
    from .params import layer_linears

    biased = set()
    if m.structure is not None:
        for g in m.structure.groups:
            biased |= {x.name.removesuffix("_bias").removesuffix(".bias") for x in g.tensors
                       if x.name.endswith("bias")}
    return sum(lin.out_features * lin.share for lin in layer_linears(m)
               if lin.kind == "routed" and "down" in lin.roles and (lin.bias or lin.module in biased))


def _with_expert_bias(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                      fwd: float, bwd: float, layout: p3.Layout | None = None) -> tuple[float, float]:
    """A micro-batch's forward and backward with Megatron-Core's per-expert FC2 bias (EXPERT_BIAS_BYTES): its
    traffic over the routed tokens' k copies on this GPU (tokens / (tp · cp) · k per layer, each down projection's
    output width), at the GPU's memory bandwidth. Only the megatron engine runs that loop."""
    if not m.is_moe or s.engine != "megatron":
        return fwd, bwd
    sm, tt = stage_model(m, s, layout), t.for_time
    width = routed_bias_width(sm)
    if not width:
        return fwd, bwd
    elements = tt.tokens_per_micro_batch / (s.tp * s.cp) * max(1, m.experts_per_tok) * width * sm.layers
    bw = cluster.gpu.memory_bandwidth * eff("memory_bandwidth_efficiency")
    return fwd + elements * EXPERT_BIAS_BYTES[0] / bw, bwd + elements * EXPERT_BIAS_BYTES[1] / bw


def moe_launches(m: ModelSpec, t: TrainingSpec, s: Strategy) -> tuple[float, float]:
    """Kernel launches of one MoE layer's forward and backward on a GPU holding num_experts / ep experts (with
    an FC2 bias on the experts, its loop's launches per local expert: EXPERT_BIAS_KERNELS)."""
    local = max(1, m.num_experts // max(1, s.ep))
    fp8 = getattr(t.precision, "value", t.precision) == "fp8"
    (fixed_f, per_f), (fixed_b, per_b) = MOE_KERNELS["fp8" if fp8 else "bf16"]
    if routed_bias_width(m):
        per_f, per_b = per_f + EXPERT_BIAS_KERNELS[0], per_b + EXPERT_BIAS_KERNELS[1]
    return fixed_f + per_f * local, fixed_b + per_b * local


def _with_moe_launches(m: ModelSpec, t: TrainingSpec, s: Strategy, eff: EfficiencyView, fwd: float,
                       bwd: float, layout: p3.Layout | None = None) -> tuple[float, float]:
    """A micro-batch's forward and backward on the stage with each MoE layer at least as long as the host takes to
    launch its kernels (op_overhead_s each, as for any eager operator): the dispatcher's token counts reach the host
    in every MoE layer's forward (the alltoall dispatcher's d2h sync before its all-to-all, DeepEP's and HybridEP's
    waits on received counts), so the host cannot run ahead of the GPU across layers, and a layer of many small
    per-expert kernels (many local experts, little work each) is bound by their launches, not by the GPU. The counts
    are Megatron-Core's (MOE_KERNELS); torchtitan's MoE (one grouped GEMM kernel per matrix) is not counted."""
    if not m.is_moe or s.ep == 1 or s.engine != "megatron":
        return fwd, bwd
    sm = stage_model(m, s, layout)
    layers = max(1, sm.layers)
    moe = sum(g.count for g in sm.structure.groups if g.moe) if sm.structure is not None else layers
    launch_f, launch_b = (n * eff("op_overhead_s") for n in moe_launches(m, t, s))
    if "moe" in modules_of(t):  # the recomputed MoE layer launches its forward again inside the backward
        launch_b += launch_f
    return (fwd + moe * max(0.0, launch_f - fwd / layers), bwd + moe * max(0.0, launch_b - bwd / layers))


def overlap_of(m: ModelSpec, t: TrainingSpec, s: Strategy, layout: p3.Layout, links: p3.Links, eff: EfficiencyView,
               fwd: float, bwd: float, moe_share: float = 0.0) -> p3.Overlap:
    """How much of each collective the stack hides (frameworks.yaml: what its recipes switch on).

    tp_comm_overlap (Transformer Engine's userbuffers; needs sequence parallelism): each GEMM's all-gather /
    reduce-scatter is pipelined with the GEMM's chunks, hidden up to the micro-batch's compute. overlap_p2p_comm
    (with virtual stages): the interleaved schedule sends while it computes the next chunk. overlap_grad_reduce /
    overlap_param_gather (Megatron-Core's distributed data parallel): gradients are reduced bucket by bucket during
    the last micro-batch's backward and the updated weights gathered during the first forward, so one micro-batch's
    compute hides them. Else the data-parallel sync overlaps as efficiency.yaml's comm_overlap says, and TP and
    pipeline sends are exposed (Megatron-LM's defaults)."""
    from ..catalog.frameworks import framework_defaults

    stack = framework_defaults().get(str(eff.eff.framework or ""), {})
    arch, tt = p3.arch_of(m), t.for_time
    per_mb = fwd + bwd
    tp = p3.stage_layers(arch, layout) * p3.tp_comm_per_layer_s(arch, layout, links, tt.seq_len,
                                                                 tt.sequences_per_micro_batch)
    tp_hidden = TP_OVERLAP
    if stack.get("tp_comm_overlap") and layout.sequence_parallel and tp > 0:
        tp_hidden = min(tp, per_mb) / tp
    dp_hidden = eff("comm_overlap")
    if stack.get("overlap_grad_reduce"):
        dp = p3.dp_comm_s(arch, layout, links, micro_batches=t.grad_accum,
                          grad_bytes=optimizer_bytes(t, s).get("grad_bytes", 4.0))
        dp_hidden = min(dp, per_mb) / dp if dp > 0 else 1.0
    p2p = 1.0 if stack.get("overlap_p2p_comm") and s.vpp > 1 else P2P_OVERLAP
    ep_hidden = EP_OVERLAP
    if layout.ep_overlap:  # the combined 1F1B schedule (parallel3d.ep_overlap_exposed_share), per layer
        n = max(1, p3.stage_layers(arch, layout))
        one = p3.ep_comm_per_layer_s(arch, layout, links, tt.seq_len, tt.sequences_per_micro_batch,
                                     recompute=recompute_of(t)) / 4
        ep_hidden = 1.0 - p3.ep_overlap_exposed_share(layout, one, (1 - moe_share) * fwd / n,
                                                      (1 - moe_share) * bwd / n, moe_share * (fwd + bwd) / n,
                                                      t.grad_accum)
    return p3.Overlap(tp=tp_hidden, cp=CP_OVERLAP, ep=ep_hidden, p2p=p2p, dp=dp_hidden)
