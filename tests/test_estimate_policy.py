"""estimate under the one out-of-memory policy (uncertainty.within_policy): a job that fits by the estimate but whose
risk is above --max-oom-risk is one plan and compare would not choose, so estimate shows what would fit within the
limit — and says so only when it has something to show."""

import json


ARGS = ("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--seq-len", "2048", "--grad-ckpt",
        "full")


def test_a_risky_fit_shows_what_fits_within_the_limit(run_cli):
    code, out, err = run_cli(*ARGS, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["fits"] and "does_not_fit" not in doc
    assert doc["oom_policy"]["within"] is False and doc["oom_policy"]["oom_risk"] > 0.05
    changes = [a["change"] for a in doc["oom_policy"]["alternatives"]]
    assert changes and "--method qlora" in changes
    code, out, err = run_cli(*ARGS)
    assert code == 0, err
    table = out.index("What would fit")
    assert "--method qlora" in out[table:] and out.index("within the limit is above") > table


def test_no_claim_of_a_table_when_nothing_fits_within_the_limit(run_cli):
    """With a limit nothing meets (--max-oom-risk 0.001), estimate says no change fits within it instead of pointing
    at a table it does not print."""
    code, out, err = run_cli(*ARGS, "--max-oom-risk", "0.001")
    assert code == 0, err
    assert "What would fit" not in out and "no change trainfit tries" in out
    code, out, err = run_cli(*ARGS, "--max-oom-risk", "0.001", "--lang", "zh")
    assert "调整也都不在此限度内" in out
