"""Spot pricing in plans: the interruption model (Young's checkpoint interval) and what the plan prints."""

import math

import pytest

from trainfit.search.interruption import spot_overhead, young_interval


def test_young_interval():
    assert young_interval(0.02, 8.0) == pytest.approx(math.sqrt(2 * 0.02 * 8.0))
    assert young_interval(0.0, 8.0) == pytest.approx(1 / 60)  # never more often than once a minute


def test_more_nodes_or_shorter_mtbi_cost_more():
    one = spot_overhead(100.0, 0.05, 6.0, 1, 0.25)
    four = spot_overhead(100.0, 0.05, 6.0, 4, 0.25)
    flaky = spot_overhead(100.0, 0.05, 2.0, 1, 0.25)
    assert four.mtbi_h == pytest.approx(1.5) and four.interruptions > one.interruptions
    assert flaky.overhead_h > one.overhead_h
    # each interruption loses half an interval (plus the checkpoint in flight) and a restart
    assert one.lost_h == pytest.approx(one.interruptions * (one.interval_h + 0.05) / 2)
    assert one.restarts_h == pytest.approx(one.interruptions * 0.25)
    # Young's interval minimises checkpoint + lost-work time among nearby intervals (first order)
    def waste(tau):
        return 100 / tau * 0.05 + 100 / 6.0 * tau / 2
    assert waste(one.interval_h) <= min(waste(one.interval_h * 0.7), waste(one.interval_h * 1.4))


@pytest.fixture
def spot_quote(tmp_path):
    f = tmp_path / "spot.csv"
    f.write_text("provider,instance_type,region,billing,price,currency,price_date\n"
                 "alibaba,ecs.gn7i-c8g1.2xlarge,cn-hangzhou,spot,2.1,CNY,2026-11-29\n")
    return str(f)




def test_acceptance_plan_with_spot_prints_overhead_and_interval(run_cli, spot_quote, plan_json):
    argv = ("--model", "qwen2.5-0.5b", "--method", "full", "--dataset-tokens", "500M", "--pricing", "spot",
            "--prices", spot_quote)
    d = plan_json(*argv)
    best = d["recommendations"][0]
    sp = best["spot"]
    assert best["price_billing"] == "spot" and sp["can_be_reclaimed"]
    assert sp["checkpoint_interval_hours"] == pytest.approx(
        math.sqrt(2 * sp["checkpoint_write_hours"] * sp["mtbi_hours"]), rel=0.02)
    assert best["overhead_hours"] >= sp["interruption_overhead_hours"] > 0
    assert best["hours"] == pytest.approx(best["train_hours"] + best["overhead_hours"], abs=0.01)
    assert any("Young" in a for a in d["assumptions"]) and any("spot" in w for w in best["why"])
    code, out, _ = run_cli("plan", *argv)
    out = " ".join(out.split())  # rich wraps lines at the terminal width
    assert code == 0 and "reclaim" in out and "checkpoint every" in out and "interruption overhead" in out
    code, out, _ = run_cli("plan", *argv, "--lang", "zh")
    out = "".join(out.split())
    assert code == 0 and "抢占式" in out and "检查点" in out


def test_a_shorter_mtbi_costs_more(run_cli, spot_quote, plan_json):
    argv = ("--model", "qwen2.5-0.5b", "--method", "full", "--dataset-tokens", "500M", "--pricing", "spot",
            "--prices", spot_quote, "--gpu", "a10", "--max-nodes", "1")
    calm = plan_json(*argv)["recommendations"][0]
    flaky = plan_json(*argv, "--set", "spot_mtbi_hours=1")["recommendations"][0]
    assert flaky["spot"]["mtbi_hours"] == 1 and flaky["spot"]["expected_interruptions"] > calm["spot"][
        "expected_interruptions"]
    assert flaky["cost"] > calm["cost"]


def test_no_spot_price_says_so(run_cli, plan_json):
    d = plan_json("--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M", "--pricing", "spot")
    assert not d["recommendations"] and d["binding_constraint"]["constraint"] == "catalog"
    assert any("spot" in k for k in d["rejected"])
