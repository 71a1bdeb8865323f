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
