"""optimizer_impl: an assumption of every estimate, and the optimizer step's transient by implementation."""

import json

from trainfit.api import estimate


def _opt_phase(est):
    return next(p for p in est.memory.phases if p.name == "optimizer").items


def test_estimate_json_names_the_implementation(run_cli):
    code, out, err = run_cli("estimate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--seq-len", "64",
                             "--optimizer-impl", "foreach", "--json")
    assert code == 0, err
    d = json.loads(out)
    assert d["config"]["optimizer_impl"] == "foreach"
    assert any(a.startswith("optimizer_impl foreach") for a in d["assumptions"])


def test_step_transient_by_implementation():
    kw = dict(seq_len=64, method="full")
    fused, foreach, forloop = (_opt_phase(estimate("tiny-llama", "a100-sxm4-80gb", optimizer_impl=i, **kw))
                               for i in ("fused", "foreach", "forloop"))
    assert "optimizer/step_transient" not in fused
    # foreach: one more state's worth (fp32 weights -> fp32 states); for-loop: two of the largest tensor
    assert foreach["optimizer/step_transient"] == foreach["optimizer/states"] / 2
    assert 0 < forloop["optimizer/step_transient"] < foreach["optimizer/step_transient"]
