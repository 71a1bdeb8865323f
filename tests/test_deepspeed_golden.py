"""Golden: trainfit's DeepSpeed model-state bytes equal DeepSpeed's own estimator arithmetic.

Source: deepspeed.runtime.zero.stage_1_and_2.estimate_zero2_model_states_mem_needs and
deepspeed.runtime.zero.stage3.estimate_zero3_model_states_mem_needs (DeepSpeed 0.19; the functions behind
`estimate_zero{2,3}_model_states_mem_needs_all_live`). Tolerance: exact up to DeepSpeed's int() rounding (< 1 byte
per GPU per term). When deepspeed is not installed the same arithmetic is checked against the formulas written in
DeepSpeed's docs (ZeRO-2: 2Ψ + 18Ψ/N, offload 2Ψ; ZeRO-3: 4L + 18Ψ/N, optimizer offload 4L + 2Ψ/N, all offload 4L).
"""

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.catalog.efficiency import Efficiencies
from trainfit.estimate.memory import estimate_memory
from trainfit.estimate.params import largest_module_params
from trainfit.estimate.trainable import split_params
from trainfit.spec.training import Offload, Strategy, TrainingSpec


def _ds_formulas():
    try:
        from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as z3
        from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as z2

        return (lambda p, n, off: z2(p, num_gpus_per_node=n, cpu_offload=off)[1],
                lambda p, ll, n, off, offp: z3(p, ll, num_gpus_per_node=n, cpu_offload=off,
                                               cpu_offload_params=offp)[1])
    except ImportError:  # the documented arithmetic
        def z2(p, n, off):
            return 2 * p if off else 2 * p + int(18 * p / n)

        def z3(p, ll, n, off, offp):
            if off:
                return 4 * ll if offp else 4 * ll + int(2 * p / n)
            return 4 * ll + int(18 * p / n)

        return z2, z3


def _model_states(model, gpus, zero, offload):
    m = resolve_model(model)
    t = TrainingSpec()
    s = Strategy(gpus_per_node=gpus, zero_stage=zero, offload=Offload(offload))
    eff = Efficiencies.default().for_gpu(get_gpu("a100-sxm4-80gb"))
    split = split_params(m, t)
    mem = estimate_memory(m, t, s, get_gpu("a100-sxm4-80gb"), split, eff)
    opt_phase = next(p for p in mem.phases if p.name == "optimizer")
    parts = opt_phase.parts()
    largest = largest_module_params(m, "lm")
    return parts["weights"] + parts["gradients"] + parts["optimizer"], split.total, largest


@pytest.mark.parametrize("model", ["llama-2-7b", "qwen2-7b", "gpt2-xl"])
@pytest.mark.parametrize("gpus", [1, 2, 8])
@pytest.mark.parametrize("offload", ["none", "optimizer"])
def test_zero2_matches_deepspeed(model, gpus, offload):
    z2, _ = _ds_formulas()
    ours, psi, _ = _model_states(model, gpus, 2, offload)
    assert ours == pytest.approx(z2(psi, gpus, offload != "none"), abs=2)


@pytest.mark.parametrize("model", ["llama-2-7b", "qwen2-7b", "gpt2-xl"])
@pytest.mark.parametrize("gpus", [1, 4, 8])
@pytest.mark.parametrize("offload", ["none", "optimizer", "all"])
def test_zero3_matches_deepspeed(model, gpus, offload):
    _, z3 = _ds_formulas()
    ours, psi, largest = _model_states(model, gpus, 3, offload)
    expected = z3(psi, largest, gpus, offload != "none", offload == "all")
    assert ours == pytest.approx(expected, abs=2)


def test_bytes_per_parameter_by_stage():
    """ZeRO paper (Rajbhandari et al. 2020, fig. 1) with DeepSpeed's bookkeeping, N = 8, bf16 + AdamW:
    stage 1: 4 + 16/8 = 6 B/param; stage 2: 2 + 18/8 = 4.25; stage 3: 18/8 = 2.25 plus the gathered largest layer."""
    for stage, per_param in ((1, 6.0), (2, 4.25)):
        ours, psi, _ = _model_states("llama-2-7b", 8, stage, "none")
        assert ours / psi == pytest.approx(per_param, rel=1e-6)
    ours, psi, largest = _model_states("llama-2-7b", 8, 3, "none")
    assert (ours - 4 * largest) / psi == pytest.approx(2.25, rel=1e-6)
