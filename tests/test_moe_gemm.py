"""The Linears of a block read from a model's code with several block kinds (issue 34, gpt-oss-120B): the mean block
lists a module once per kind that has it, each at its kind's share of the blocks, and its time is the sum over them."""

import os
from dataclasses import replace
from types import SimpleNamespace

import pytest

from trainfit.catalog.efficiency import Efficiencies
from trainfit.catalog.gpus import get_gpu
from trainfit.estimate.activations import Regime
from trainfit.estimate.layout import stage_model
from trainfit.estimate.params import layer_linears
from trainfit.estimate.perf import _block_times, linears_per_block, selective_recompute_kernels, \
    zero3_modules_per_block
from trainfit.estimate.trainable import split_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASE = "mbridge-260401-h100-gpt-oss-120b-g64-bf16"


def _case():
    from trainfit.validate import _model, _strategy, _training, load_cases, pipeline_micro_batches

    c = next(c for c in load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")]) if c["id"] == CASE)
    m, s = _model(c), _strategy(c)
    return m, s, pipeline_micro_batches(c, _training(c, m), s).per_micro_batch


def _one_kind(sm):
    """The same stage with all its blocks of one kind (the full-attention blocks' Linears are the same modules)."""
    full = sm.structure.groups[-1]
    return replace(sm, structure=replace(sm.structure, groups=(replace(full, count=sm.layers),), pattern=()))


def test_a_module_in_two_block_kinds_is_timed_over_both():
    """Regression: gpt-oss alternates sliding-window and full-attention blocks (config.json layer_types), so its read
    structure has two groups with the same Linears (q/k/v/o, the experts). _block_times kept only the last group's
    share of each (5 of a PP-4 stage's 9 blocks: the Linears at 56% of their time; the case predicted +45.6% too
    fast, +13.2% after). A Linear's time is the same whether the stage's blocks are of one kind or two."""
    m, s, t = _case()
    sm = stage_model(m, s)
    assert [(g.mixer, g.count) for g in sm.structure.groups] == [("sliding_attention", 4), ("attention", 5)]
    assert len(layer_linears(sm)) == 12 and linears_per_block(sm) == pytest.approx(6.0)
    gpu, eff, r = get_gpu("h100-sxm"), Efficiencies.default(), Regime(2, 2, False)
    two = _block_times(sm, t, split_params(sm, t), gpu, eff, r)
    one_kind = _one_kind(sm)
    one = _block_times(one_kind, t, split_params(one_kind, t), gpu, eff, r)
    linears = [k for k in two if k.startswith("linear/")]
    assert len(linears) == 6 and set(linears) == {k for k in one if k.startswith("linear/")}
    for k in linears:
        assert two[k][0] == pytest.approx(one[k][0], rel=1e-12) and two[k][1] == one[k][1]
    assert two["attention/core"][0] < one["attention/core"][0]  # 4 of the 9 blocks attend to 128 keys only


def test_per_module_counts_weigh_each_block_kind_by_its_share():
    """Kernel and module counts per mean block (ZeRO-3's hooked modules, QLoRA's dequantization per Linear,
    torchtitan's op-policy recompute) count a module listed once per block kind once."""
    m, s, t = _case()
    sm = stage_model(m, s)
    one_kind = _one_kind(sm)
    split, split1 = split_params(sm, t), split_params(one_kind, t)
    assert zero3_modules_per_block(sm, split) == pytest.approx(zero3_modules_per_block(one_kind, split1))
    assert zero3_modules_per_block(one_kind, split1) == 6 + 2
    op = SimpleNamespace(selective_ac="op")  # the kernels the op policy runs again: all but the kept Linears'
    assert selective_recompute_kernels(sm, op, 30) == pytest.approx(selective_recompute_kernels(one_kind, op, 30))
    assert selective_recompute_kernels(one_kind, op, 30) == 30 - 3 - 1


def test_under_expert_parallelism_a_gpu_reads_its_own_experts_and_each_gets_its_share_of_rows():
    """Regression (issue 34): the stage estimate read every expert's weights each micro-batch and gave an expert GEMM
    the micro-batch's tokens as rows, where a GPU holds num_experts / ep of them (ep 8: 16 of gpt-oss's 128) and
    each gets tokens · top-k · ep / num_experts rows (4096 · 4 · 8 / 128 = 1024). Weights read and rows are
    checked on the GEMM's memory traffic and the efficiency knee it sees, through _block_times itself."""
    m, s, t = _case()
    sm = stage_model(m, s)
    assert s.ep == 8 and s.tp == 1 and sm.expert_shards == 8
    gpu, eff, r = get_gpu("h100-sxm"), Efficiencies.default(), Regime(2, 2, False)
    view = eff.shared_view(gpu)
    whole = replace(sm, expert_shards=1.0)
    ours = _block_times(sm, t, split_params(sm, t), gpu, eff, r)
    every = _block_times(whole, t, split_params(whole, t), gpu, eff, r)
    # the attention's Linears are not experts: the same either way
    assert ours["linear/self_attn.q_proj"] == every["linear/self_attn.q_proj"]
    tokens = t.tokens_per_micro_batch
    lin = next(x for x in layer_linears(sm) if x.module == "mlp.experts.down_proj")
    flops = 2.0 * tokens * lin.in_features * lin.out_features * m.experts_per_tok
    rows = tokens * m.experts_per_tok * s.ep / m.num_experts
    assert rows == 1024
    knee = view("gemm_dim_knee")
    compute = flops / (view("matmul_efficiency") * rows / (rows + knee) * gpu.peak("bf16"))
    weights = lin.in_features * lin.out_features * (m.num_experts // s.ep) * 2
    memory = (tokens * (lin.in_features + lin.out_features) * 2 * m.experts_per_tok + weights) / (
        gpu.memory_bandwidth * view("memory_bandwidth_efficiency"))
    groups = sum(x.share for x in layer_linears(sm) if x.module == lin.module)
    assert ours["linear/mlp.experts.down_proj"][0] == pytest.approx(max(compute, memory) * groups, rel=1e-9)
    # all 128 experts on one GPU (a data-parallel estimate): 8x the weights, 128 rows each: slower
    assert every["linear/mlp.experts.down_proj"][0] > ours["linear/mlp.experts.down_proj"][0]


def test_expert_tp_sets_how_many_experts_a_stage_at_full_width_holds():
    """layout.stage_model: a GPU holds num_experts / ep experts at 1 / etp of their width, and the stage's time is
    divided by tp; so the full-width stage holds num_experts · tp / (ep · etp) (expert_shards = ep · etp / tp). With
    Megatron-Core's default expert TP (= tp) that is num_experts / ep; with expert TP 1 under TP 2 (DeepSeek-V3's
    recipe) twice as many at full width, each half of the GPU's tokens."""
    from trainfit.spec.training import Strategy

    m, _, _ = _case()
    assert stage_model(m, Strategy(gpus_per_node=8, nodes=2, tp=2, ep=8)).expert_shards == 8
    assert stage_model(m, Strategy(gpus_per_node=8, nodes=2, tp=2, ep=8, etp=1)).expert_shards == 4
    assert stage_model(m, Strategy(gpus_per_node=8, nodes=2, ep=8)).layers == m.layers
    assert stage_model(m, Strategy(gpus_per_node=8, nodes=2, tp=2)) is m  # no EP: every expert, the model itself


def test_megatron_core_expert_fc2_bias_loop_is_timed_where_the_experts_have_one():
    """gpt-oss's routed experts carry biases (mlp.experts.down_proj_bias); Megatron-Core adds FC2's per local expert
    in a Python loop (TEGroupedMLP._apply_bias): its traffic over the routed copies and its launches per expert are
    counted (model_parallel.EXPERT_BIAS_BYTES / EXPERT_BIAS_KERNELS); a model whose experts have none pays nothing."""
    from trainfit.estimate import model_parallel as mp
    from trainfit.spec.cluster import cluster_for

    m, s, t = _case()
    sm = stage_model(m, s)
    assert mp.routed_bias_width(sm) == pytest.approx(2880.0)  # the down projection's output, in every block
    gpu = get_gpu("h100-sxm")
    view = Efficiencies.default().shared_view(gpu)
    cluster = cluster_for(gpu, 1, 1)  # the bias's traffic is the GPU's own
    fwd, bwd = mp._with_expert_bias(m, t, s, cluster, view, 1.0, 2.0)
    elements = t.tokens_per_micro_batch * m.experts_per_tok * 2880 * sm.layers
    bw = gpu.memory_bandwidth * view("memory_bandwidth_efficiency")
    assert fwd - 1.0 == pytest.approx(elements * mp.EXPERT_BIAS_BYTES[0] / bw, rel=1e-9)
    assert bwd - 2.0 == pytest.approx(elements * mp.EXPERT_BIAS_BYTES[1] / bw, rel=1e-9)
    plain = _one_kind(sm)
    groups = tuple(replace(g, tensors=tuple(x for x in g.tensors if not x.name.endswith("bias")))
                   for g in plain.structure.groups)
    unbiased = replace(plain, structure=replace(plain.structure, groups=groups))
    assert mp.routed_bias_width(unbiased) == 0.0
    per_f = mp.moe_launches(m, t, s)[0] - mp.moe_launches(unbiased, t, s)[0]
    assert per_f == mp.EXPERT_BIAS_KERNELS[0] * (m.num_experts // s.ep)
