"""Property tests (Hypothesis): monotonicity that must hold whatever the configuration."""

from dataclasses import replace

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from trainfit.catalog import get_gpu, resolve_model
from trainfit.catalog.efficiency import Efficiencies
from trainfit.estimate.core import run_estimate
from trainfit.estimate.params import count_params, largest_module_params
from trainfit.spec.cluster import cluster_for
from trainfit.spec.training import (Attention, GradCkpt, Method, Offload, Optimizer, Precision, Strategy, Task,
                                    TrainingSpec)

MODELS = ["tiny-llama", "gpt2", "qwen2.5-0.5b", "llama-2-7b", "qwen2-7b", "mixtral-8x7b", "bert-base-uncased",
          "gemma-2b"]
GPUS = ["a10", "a100-sxm4-80gb", "h100-sxm", "l20", "h20"]
EFF = Efficiencies.default()
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def workloads(draw):
    model = resolve_model(draw(st.sampled_from(MODELS)))
    task = Task.CLASSIFICATION if model.is_encoder else draw(st.sampled_from([Task.SFT, Task.DPO]))
    seq = draw(st.sampled_from([128, 512, 2048]))
    if model.max_positions:  # a longer sequence than the model's positions is refused (learned or RoPE)
        seq = min(seq, model.max_positions)
    t = TrainingSpec(method=draw(st.sampled_from(list(Method))), task=task, seq_len=seq,
                     micro_batch=draw(st.integers(1, 8)), grad_accum=draw(st.integers(1, 4)),
                     precision=Precision.BF16, optimizer=draw(st.sampled_from([Optimizer.ADAMW, Optimizer.SGD])),
                     grad_ckpt=draw(st.sampled_from(list(GradCkpt))),
                     attention=draw(st.sampled_from([Attention.SDPA, Attention.EAGER])),
                     lora_rank=draw(st.sampled_from([8, 64])))
    return model, t


def _est(model, t, s, gpu="a100-sxm4-80gb"):
    g = get_gpu(gpu)
    return run_estimate(model, t, s, cluster_for(g, s.gpus_per_node, s.nodes), EFF)


@SETTINGS
@given(workloads(), st.sampled_from([2, 4, 8]))
def test_memory_never_rises_with_a_higher_zero_stage(w, gpus):
    """With one GPU there is nothing to shard: ZeRO-1 adds fp32 master weights over plain AMP and ZeRO-3 adds its
    gather buffers, so the property is about two or more GPUs."""
    model, t = w
    # DeepSpeed's own arithmetic (4·largest_layer + 18Ψ/N for ZeRO-3 vs 2Ψ + 18Ψ/N for ZeRO-2) puts ZeRO-3 above
    # ZeRO-2 when one module (GPT-2's 50k x 768 embedding) outweighs what sharding saves: excluded by assumption.
    assume(4 * largest_module_params(model) <= 2 * count_params(model) * (1 - 1 / gpus) * 0.5)
    stages = (0, 1, 2, 3)
    ests = [_est(model, t, Strategy(gpus_per_node=gpus, zero_stage=z)) for z in stages]
    mem = [e.memory.device for e in ests]
    # DPO with eager attention: ZeRO-0 is DDP with fp32 weights under autocast, where adding the mask promotes the
    # reference forward's scores to fp32 (8 bytes a score), DeepSpeed's 16-bit weights keep them 16-bit beside the
    # fp32 copy and softmax (10 bytes; both traced): on a tiny model that outweighs what sharding saves
    scores = [e.memory.detail.get("activations/dpo_reference_attention_scores", 0.0) for e in ests]
    assert all(a >= b - 1 - 2 * max(0.0, sb - sa) for a, b, sa, sb in zip(mem, mem[1:], scores, scores[1:])), mem


@SETTINGS
@given(workloads())
def test_memory_never_rises_with_more_gpus_under_zero3(w):
    model, t = w
    # from 2 GPUs on (going from 1 to 2 adds NCCL's communicator buffers, a real cost)
    mem = [_est(model, t, Strategy(gpus_per_node=n, zero_stage=3)).memory.device for n in (2, 4, 8)]
    assert all(a >= b - 1 for a, b in zip(mem, mem[1:])), mem


@SETTINGS
@given(workloads(), st.sampled_from([1, 8]))
def test_memory_never_rises_with_more_checkpointing(w, gpus):
    model, t = w
    s = Strategy(gpus_per_node=gpus, zero_stage=3 if gpus > 1 else 0)
    ests = [_est(model, t.with_(grad_ckpt=level), s) for level in GradCkpt]
    mem = [e.memory.device for e in ests]
    none, selective, full = mem
    # Selective keeps the attention core's inputs as they reach it (traced, benchmarks/conformance.py): eager
    # attention's causal mask, to the end of backward (without checkpointing it is freed after the forward), and
    # with fp32 weights RoPE's fp32 rotated q and k (without checkpointing the core saves their 16-bit casts).
    # Selective may exceed none by those (with the allocator's overhead on top) — and never more.
    from trainfit.estimate.memory import regime_for

    detail, r = ests[1].memory.detail, regime_for(t, s)
    mask = detail.get("activations/checkpoint/eager_attention_mask", 0.0)
    fp32_qk = (1 - r.act / r.residual) * (detail.get("activations/attn/q", 0.0) + detail.get("activations/attn/k", 0.0))
    assert none >= selective - 1 - 2 * (mask + fp32_qk), mem
    # Full checkpointing holds what selective does not (all traced, benchmarks/conformance.py): a block's 16-bit input
    # beside its recomputation (2 bytes x hidden x tokens); eager attention's causal mask, an input of every
    # checkpointed block; the recomputed attention core of the block whose MLP runs its backward, which selective
    # recomputes only later, at the attention's backward; for an MoE model the recomputed block's MLP backward on
    # tokens x top-k rows where the block run once keeps tokens x intermediate (memory._in_block_items); and for a
    # freeze fine-tune the checkpointed inputs of the frozen blocks, which transformers' checkpointing makes run a
    # backward (trainable.py; at most fp32 hidden states each), with the bottom one's 16-bit weight copies when it is
    # recomputed under autocast with fp32 weights. Full may exceed selective by those (with the allocator's overhead
    # on top) — and never more.
    detail = ests[2].memory.detail
    core = max(0.0, detail.get("activations/last_block", 0.0) - ests[1].memory.detail.get("activations/last_block", 0.0))
    moe_recompute = max(0.0, detail.get("activations/backward_buffers", 0.0) -
                        ests[1].memory.detail.get("activations/backward_buffers", 0.0)) if model.is_moe else 0.0
    tokens = t.tokens_per_micro_batch
    frozen_inputs = 4.0 * model.hidden * tokens * (model.layers - ests[2].split.trainable_blocks) \
        if t.method == Method.FREEZE else 0.0
    traced_full_only = 2.0 * model.hidden * tokens + detail.get("activations/checkpoint/eager_attention_mask", 0.0) \
        + core + moe_recompute + frozen_inputs + detail.get("other/autocast_copies_frozen_block", 0.0)
    assert selective >= full - 1 - 2 * traced_full_only, mem


@SETTINGS
@given(workloads(), st.sampled_from([1, 8]))
def test_memory_never_rises_with_offload(w, gpus):
    model, t = w
    if t.optimizer != Optimizer.ADAMW:
        t = t.with_(optimizer=Optimizer.ADAMW)
    mem = [_est(model, t, Strategy(gpus_per_node=gpus, zero_stage=3, offload=o)).memory.device for o in Offload]
    assert all(a >= b - 1 for a, b in zip(mem, mem[1:])), mem


@st.composite
def faster_gpus(draw):
    base = get_gpu(draw(st.sampled_from(GPUS)))
    k = lambda: draw(st.floats(1.0, 4.0))  # noqa: E731
    flops = k()
    faster = replace(base, peak_flops={dt: v * flops for dt, v in base.peak_flops.items()},
                     memory_bandwidth=base.memory_bandwidth * k(),
                     nvlink_gbs=(base.nvlink_gbs or 0) * k() if base.nvlink_gbs else base.nvlink_gbs,
                     pcie_gen=max(base.pcie_gen or 3, draw(st.sampled_from([3, 4, 5]))))
    return base, faster


@SETTINGS
@given(workloads(), faster_gpus(), st.sampled_from([1, 8]), st.sampled_from([0, 2, 3]))
def test_step_time_never_rises_on_a_faster_gpu(w, gpus_pair, n, zero):
    model, t = w
    base, faster = gpus_pair
    s = Strategy(gpus_per_node=n, zero_stage=zero if n > 1 else 0)
    slow = run_estimate(model, t, s, cluster_for(base, n, 1), EFF)
    fast = run_estimate(model, t, s, cluster_for(faster, n, 1), EFF)
    assert fast.step_time_s <= slow.step_time_s * (1 + 1e-9)


@SETTINGS
@given(workloads())
def test_breakdown_sums_to_total(w):
    model, t = w
    est = _est(model, t, Strategy())
    parts = est.memory.parts
    assert sum(parts.values()) == est.memory.device or abs(sum(parts.values()) - est.memory.device) < 1
    assert est.memory.allocated <= est.memory.reserved <= est.memory.device
    assert est.step_time_s == sum(est.time.parts.values())


@SETTINGS
@given(workloads(), st.sampled_from([1, 4, 8]), st.sampled_from([0, 2, 3]), st.sampled_from([4, 8, 16]))
def test_time_per_token_never_rises_with_the_micro_batch(w, gpus, zero, per_gpu):
    """The plan search evaluates time only for the largest micro-batch that fits; this is why that is safe."""
    model, t = w
    s = Strategy(gpus_per_node=gpus, zero_stage=zero if gpus > 1 else 0)
    per_token = []
    for mb in (1, 2, 4, 8, 16):
        if mb > per_gpu:
            break
        e = _est(model, t.with_(micro_batch=mb, grad_accum=per_gpu // mb), s)
        per_token.append(e.step_time_s / e.tokens_per_step)
    assert all(a >= b * (1 - 1e-9) for a, b in zip(per_token, per_token[1:])), per_token


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from([(1, 1), (2, 1), (8, 1), (8, 2)]), st.integers(0, 9), st.sampled_from(GPUS))
def test_step_time_never_falls_with_more_checkpointing(w, layout, k, gpu):
    """The plan search sets aside, untimed, a heavier activation checkpointing whose largest fitting micro-batch is no
    larger than one a lighter checkpointing kept on the same offer and layout (search/run.py
    PRUNE_HEAVIER_CHECKPOINTING): this is why that is safe, on every engine the search tries (offload and FSDP
    included), inside a node and across two."""
    from trainfit.errors import SpecError
    from trainfit.search.space import strategies

    model, t = w
    layouts = strategies(*layout)
    s = layouts[k % len(layouts)]
    try:
        cluster = cluster_for(get_gpu(gpu), s.gpus_per_node, s.nodes)
        times = [run_estimate(model, t.with_(grad_ckpt=c), s, cluster, EFF).step_time_s
                 for c in (GradCkpt.NONE, GradCkpt.SELECTIVE, GradCkpt.FULL)]
    except SpecError:  # a layout this job or GPU refuses (fp16 FSDP, ...), or two nodes of a GPU without a network
        assume(False)
    assert times[0] <= times[1] * (1 + 1e-12) and times[1] <= times[2] * (1 + 1e-12), (times, s.label())


@SETTINGS
@given(workloads(), st.sampled_from([1, 2, 8]), st.integers(0, 3), st.sampled_from(GPUS), st.data())
def test_step_time_never_falls_with_more_offload(w, gpus, k, gpu, data):
    """The plan search also sets aside, untimed, an engine with more offloaded to the CPU whose largest fitting
    micro-batch is no larger than one its lighter sibling kept (search/space.py LIGHTER_ONE_GPU / LIGHTER_MANY):
    each such pair, on the real instances of that GPU (their host cores run the CPU's optimizer step)."""
    from trainfit.catalog import all_instances
    from trainfit.errors import SpecError
    from trainfit.search.space import LIGHTER_MANY, LIGHTER_ONE_GPU

    model, t = w
    table = LIGHTER_ONE_GPU if gpus == 1 else LIGHTER_MANY
    heavy, lighter = sorted(table.items())[k % len(table)]
    hosts = [i for i in all_instances().values() if i.trainable and i.gpu == gpu and (i.gpu_count or 0) >= gpus]
    assume(hosts)
    inst = data.draw(st.sampled_from(hosts))
    cluster = cluster_for(get_gpu(gpu), gpus, 1, inst)
    try:
        times = [run_estimate(model, t, Strategy(gpus_per_node=gpus, zero_stage=z, fsdp=f, offload=o), cluster,
                              EFF).step_time_s for z, f, o in (heavy, *lighter)]
    except SpecError:
        assume(False)
    assert all(times[0] >= x * (1 - 1e-12) for x in times[1:]), (times, heavy, lighter, inst.instance_type)
