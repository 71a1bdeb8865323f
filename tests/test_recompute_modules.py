"""Megatron-Core's selective recompute modules (issue 34): `--selective-ac layernorm,moe_act` on a tp / pp / cp / ep
layout. Parsed with did-you-mean, refused off Megatron's layouts (en / zh), priced in memory by what each module
does not keep (parallel3d.recomputed_coefficients) and in time by what it runs again (model_parallel.
module_recompute_s), and written as Megatron-LM's --recompute-modules, checked by its argument parser."""

import json
import os

import pytest

import trainfit
from trainfit.errors import SpecError, sentence_of
from trainfit.estimate import parallel3d as p3
from trainfit.i18n.errors import localize_error
from trainfit.spec.choices import parse_selective_ac, recompute_modules

ROOT = os.path.join(os.path.dirname(__file__), "..")
JOB = dict(method="full", seq_len=4096, micro_batch=1, grad_accum=8, zero=1)


def _moe(selective_ac=None, **kw):
    ckpt = dict(grad_ckpt="selective", selective_ac=selective_ac) if selective_ac else dict(grad_ckpt="none")
    return trainfit.estimate("qwen3-30b-a3b", "h100-sxm", gpus=8, nodes=2, pp=2, ep=8, **{**JOB, **ckpt, **kw})


@pytest.mark.parametrize("given, canonical", [("moe_act,layernorm", "layernorm,moe_act"),
                                              (" LayerNorm , moe_act,layernorm", "layernorm,moe_act"),
                                              ("core_attn", "attention"), ("moe", "moe"),
                                              ("core_attn,mlp", "core_attn,mlp"), ("op", "op"), ("2", "2")])
def test_module_lists_parse_to_one_canonical_form(given, canonical):
    assert parse_selective_ac(given) == canonical


def test_an_unknown_module_is_named_with_what_it_may_have_meant():
    with pytest.raises(SpecError) as err:
        parse_selective_ac("moe_act,layernrom")
    text = str(err.value)
    assert "'layernrom'" in text and "did you mean 'layernorm'" in text
    assert "重算模块" in localize_error(sentence_of(err.value), "zh")


def test_module_lists_need_megatrons_layout_and_mla_up_proj_needs_mla():
    with pytest.raises(SpecError, match="run on its own layouts") as err:
        trainfit.estimate("qwen3-30b-a3b", "h100-sxm", gpus=8, **JOB, grad_ckpt="selective", selective_ac="moe_act")
    assert "并行布局" in localize_error(sentence_of(err.value), "zh")
    with pytest.raises(SpecError, match="multi-latent attention"):
        _moe("mla_up_proj")


def test_each_module_keeps_less_and_recomputes_more():
    """Qwen3-30B-A3B, PP 2 x EP 8 (gated experts of width 768, top-8 of 128, hidden 2048): moe_act drops fc2's
    input of every expert copy, 2·768/2048·8 = 6 s·b·h per layer; layernorm the pre-MLP norm's output, 2 s·b·h;
    moe the whole expert part. Time only grows, most for moe (its experts and all-to-alls run again)."""
    arch = p3.arch_of(_moe().model)
    whole, sharded, _ = p3.layer_activation_coefficients(arch, 4096, flash_attention=True)
    assert p3.recomputed_coefficients(arch, whole, sharded, frozenset({"moe_act"})) == (whole, sharded - 6.0)
    assert p3.recomputed_coefficients(arch, whole, sharded, frozenset({"layernorm"})) == (whole - 2.0, sharded)
    moe_part = 8 * (6.0 * 768 / 2048 + 2.0) + 4.0 * 128 / 2048
    assert p3.recomputed_coefficients(arch, whole, sharded, frozenset({"moe"}))[1] == pytest.approx(sharded - moe_part)
    assert p3.recomputed_coefficients(arch, whole, sharded, frozenset({"mlp"})) == (whole, sharded)  # no dense MLP
    base, act, both, moe = _moe(), _moe("moe_act"), _moe("layernorm,moe_act"), _moe("moe")
    acts = [e.memory.phases[0].components[0]["activations/layers"] for e in (base, act, both, moe)]
    assert acts[0] > acts[1] > acts[2] > acts[3]
    per_layer = 4096 * 2048 * 1.0  # s·b·h bytes, no TP: 6 of them per layer held in flight
    assert acts[0] - acts[1] == pytest.approx(6.0 * per_layer * p3.in_flight_layers(arch, p3.Layout(pp=2, ep=8, dp=8),
                                                                                    8))
    assert base.step_time_s <= act.step_time_s <= both.step_time_s < moe.step_time_s
    assert moe.time.parts["communication/ep"] > base.time.parts["communication/ep"]  # dispatch + combine again


def test_mla_up_proj_keeps_the_latents_instead_of_q_k_v():
    """DeepSeek-V3 (MLA: q latent 1536, kv latent 512 + 64 RoPE, 128 heads of 192): mla_up_proj swaps Q, K and V for
    the 2,112 latent values per token, and costs the up projections' forward again."""
    cases = [json.loads(line) for line in open(os.path.join(ROOT, "data/validation/parallel_dev.jsonl"))
             if line.strip()]
    case = next(c for c in cases if c["id"] == "mbridge-2509-h100-deepseek-v3-g1024-dropless")
    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.validate import _model, predict_case

    arch = p3.arch_of(_model(case))
    assert arch.mla_latent == 1536 + 576
    whole, sharded, _ = p3.layer_activation_coefficients(arch, 4096, flash_attention=True)
    w2, s2 = p3.recomputed_coefficients(arch, whole, sharded, frozenset({"mla_up_proj"}))
    assert w2 - whole == pytest.approx(2 * 2112 / 7168)
    assert sharded - s2 == pytest.approx((2 * 128 * 192 + 4 * 128 * 192) / 7168)
    est = predict_case(case, Efficiencies.default())
    plain = {**case, "training": {**case["training"], "grad_ckpt": "none", "selective_ac": None}}
    before = predict_case(plain, Efficiencies.default())
    assert est.memory.allocated < before.memory.allocated and est.step_time_s > before.step_time_s


def test_recompute_modules_reach_megatrons_parser():
    from test_generate_3d import _setup, megatron_argv, megatron_parser

    setup = _setup("qwen3-30b-a3b", 8, 2, "megatron", pp=2, ep=8, ga=4, zero=1, ckpt="selective",
                   selective_ac="layernorm,moe_act")
    args = megatron_parser().parse_args(megatron_argv(setup) + ["--data-path", "/d", "--save", "/o"])
    assert args.recompute_granularity == "selective" and args.recompute_modules == ["layernorm", "moe_act"]
    assert args.moe_grouped_gemm  # Megatron-Core takes moe_act only with grouped GEMM
    assert set(args.recompute_modules) == recompute_modules("layernorm,moe_act")


def test_a_module_of_two_block_kinds_is_recomputed_once():
    """gpt-oss-120B's sliding-window and full-attention blocks hold the same expert Linears: block_times sums each
    module over its kinds, so recomputing the MoE layer costs those keys once per block (counted twice before the
    review of 2026-12-07)."""
    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.estimate.layout import stage_model, stage_training
    from trainfit.estimate.model_parallel import module_recompute_s
    from trainfit.estimate.perf import block_times
    from trainfit.estimate.trainable import split_params
    from trainfit.spec.cluster import cluster_for
    from trainfit.spec.training import Strategy
    from trainfit.validate import _strategy, _training, _model, load_cases

    case = next(c for c in load_cases([os.path.join(ROOT, "data/validation/parallel_dev.jsonl")])
                if c["id"] == "mbridge-260401-h100-gpt-oss-120b-g64-bf16")
    m, s = _model(case), _strategy(case)
    t = _training(case, m).with_(selective_ac="moe")
    gpu = trainfit.catalog.get_gpu("h100-sxm")
    eff = Efficiencies.default().for_framework("megatron-bridge").for_gpu(gpu)
    sm, t1, one = stage_model(m, s), stage_training(t), Strategy(gpus_per_node=1, nodes=1)
    times = block_times(sm, t1, split_params(sm, t1, 0), cluster_for(gpu, 1, 1), eff, one)
    routed = [k for k in times if "experts" in k]
    assert len(routed) == 2  # gate_up and down, each listed in both block kinds by layer_linears
    expected = sum(times[k][0] for k in routed) * sm.layers * eff("framework_time_factor")
    assert module_recompute_s(m, t, s, cluster_for(gpu, 1, 1), eff) == pytest.approx(expected)
