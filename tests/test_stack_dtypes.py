"""The dtype a training stack keeps a full fine-tune's weights in (frameworks.yaml `param_dtype_<method>`): ms-swift
trains a full fine-tune in the dtype the model was loaded in (bf16: weights, gradients and AdamW states), LLaMA-Factory
and the Hugging Face Trainer recipes cast the trainable weights to fp32. Read from the stacks' code (the basis in
frameworks.yaml); a wrong default doubles or halves the optimizer states of every `--framework ms-swift` estimate."""

import pytest

import trainfit
from trainfit.catalog.frameworks import framework_defaults, stack_param_dtype
from trainfit.spec.training import Method, resolve_job_defaults


@pytest.mark.parametrize("stack, method, dtype", [
    ("ms-swift", "full", "bf16"), ("ms-swift", "lora", "fp32"), ("ms-swift", "qlora", "fp32"),
    ("ms-swift", None, "bf16"),  # the job's default method is full
    ("llama-factory", "full", "fp32"), ("hf-trainer", "full", "fp32"), ("torchtune", "full", "bf16"),
])
def test_stack_default_dtype(stack, method, dtype):
    values = {} if method is None else {"method": Method(method)}
    out, _ = resolve_job_defaults(values, None, {"framework": stack})
    assert out["param_dtype"] == dtype
    assert stack_param_dtype(framework_defaults()[stack], method) == dtype


def test_stated_dtype_wins():
    out, _ = resolve_job_defaults({"method": Method.FULL, "param_dtype": "fp32"}, None, {"framework": "ms-swift"})
    assert out["param_dtype"] == "fp32"


def test_ms_swift_full_states_are_half_of_llama_factory():
    """One GPU, AdamW: 16-bit weights and two 16-bit moments under ms-swift; fp32 weights and moments under
    LLaMA-Factory (the same model code otherwise)."""
    est = {fw: trainfit.estimate("qwen2.5-0.5b", "a100-sxm4-80gb", method="full", framework=fw, seq_len=512)
           for fw in ("ms-swift", "llama-factory")}
    swift, lf = (est[fw].memory.detail for fw in ("ms-swift", "llama-factory"))
    assert swift["optimizer/states"] == pytest.approx(lf["optimizer/states"] / 2, rel=1e-9)
    assert est["ms-swift"].training.param_dtype == "bf16" and est["llama-factory"].training.param_dtype == "fp32"
