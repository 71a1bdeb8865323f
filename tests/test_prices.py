"""`trainfit prices`: layers (catalog < live cache < user), dates and staleness, user quotes, and live refresh
against recorded responses (built from the providers' documentation; no network, no credentials)."""

import json

import pytest

from trainfit.catalog import prices as P
from trainfit.catalog.instances import get_instance, prices_for

from alibaba_stub import ReplayClient


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache for this test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for k in ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_ACCESS_KEY",
              "ALICLOUD_SECRET_KEY", "ALIBABA_CLOUD_CREDENTIALS_FILE", "ALIBABA_CLOUD_ROLE_ARN",
              "ALIBABA_CLOUD_ECS_METADATA", "ALIBABA_CLOUD_CREDENTIALS_URI"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    P.use_price_files([])
    P.clear_cache()  # another test in this process may have read other layers (use_price_files([]) keeps them)
    yield tmp_path / "cache" / "trainfit" / "prices"
    P.use_price_files([])
    P.clear_cache()


def _json(run_cli, *argv):
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_age_and_staleness():
    p = prices_for(get_instance("ecs.gn7i-c8g1.2xlarge"), region="cn-hangzhou")[0]
    on = P.parse_date("2026-11-30")
    assert P.age_days(p, on) == (on - P.parse_date(p.price_date)).days
    young = P.parse_date(p.price_date).replace(day=1)
    assert not P.is_stale(p, young) and P.is_stale(p, P.parse_date("2030-01-01"))
    undated = type(p)(**{**p.__dict__, "price_date": "undated"})
    assert P.age_days(undated) is None and P.is_stale(undated)


def test_prices_list_a10_shows_dates_and_sources(run_cli, cache):
    d = _json(run_cli, "prices", "list", "--gpu", "a10")
    assert d["prices"] and all(r["gpu"] == "a10" for r in d["prices"])
    for r in d["prices"]:
        assert r["price_date"] and r["price_sources"] and r["price_origin"] == "catalog"
        assert r["price_stale"] == (r["price_age_days"] is None or r["price_age_days"] > P.STALE_DAYS)
    code, out, _ = run_cli("prices", "list", "--gpu", "a10")
    assert code == 0 and "STALE" in " ".join(out.split())


def _quote(path, price, region="cn-hangzhou", billing="payg", itype="ecs.gn7i-c8g1.2xlarge", date="2026-11-28"):
    path.write_text("provider,instance_type,region,billing,price,currency,price_date\n"
                    f"alibaba,{itype},{region},{billing},{price},CNY,{date}\n")
    return str(path)


def test_user_quote_wins_over_the_catalog_with_provenance(run_cli, cache, tmp_path):
    f = _quote(tmp_path / "q.csv", 4.25)
    d = _json(run_cli, "prices", "list", "--gpu", "a10", "--region", "cn-hangzhou", "--prices", f)
    row = next(r for r in d["prices"] if r["instance_type"] == "ecs.gn7i-c8g1.2xlarge" and r["billing"] == "payg")
    assert row["price"] == 4.25 and row["price_origin"] == "user" and row["price_age_days"] == 2
    assert not row["price_stale"]


def test_prices_set_persists_for_later_commands(run_cli, cache, tmp_path):
    _json(run_cli, "prices", "set", _quote(tmp_path / "q.csv", 3.5))
    assert (cache / "user.csv").is_file()
    d = _json(run_cli, "compare", "--model", "qwen2.5-0.5b", "--method", "lora", "--gpus-list", "a10")
    ali = d["rows"][0]["alibaba"]
    assert ali["price_per_hour"] == 3.5 and ali["price_origin"] == "user"


@pytest.mark.parametrize("body,needle", [
    ("provider,instance_type\nalibaba,x\n", "missing columns"),
    ("provider,instance_type,region,billing,price,currency,price_date\nalibaba,ecs.gn7i-c8g1.2xlarge,r,payg,-1,CNY,"
     "2026-11-01\n", "positive"),
    ("provider,instance_type,region,billing,price,currency,price_date\nalibaba,ecs.gn7i-c8g1.2xlarj,r,payg,1,CNY,"
     "2026-11-01\n", "did you mean"),
    ("provider,instance_type,region,billing,price,currency,price_date\nalibaba,ecs.gn7i-c8g1.2xlarge,r,payg,1,CNY,"
     "last week\n", "YYYY-MM-DD"),
])
def test_bad_user_prices_exit_2_with_one_line(run_cli, cache, tmp_path, body, needle):
    f = tmp_path / "bad.csv"
    f.write_text(body)
    code, out, err = run_cli("prices", "set", str(f))
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and needle in lines[0]


def test_refresh_without_credentials_is_one_clear_line(run_cli, cache):
    code, out, err = run_cli("prices", "refresh", "--provider", "alibaba")
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1 and "ALIBABA_CLOUD_ACCESS_KEY_ID" in lines[0]
    code, out, err = run_cli("prices", "refresh", "--provider", "alibaba", "--json", "--lang", "zh")
    assert code == 2 and "凭证" in err
    assert json.loads(out)["error"]["type"] == "CredentialsMissing"
    assert not cache.exists()


def test_refresh_alibaba_from_recorded_responses_feeds_the_next_plan(run_cli, cache, monkeypatch):
    pytest.importorskip("alibabacloud_ecs20140526")
    import trainfit.catalog.live.alibaba as ali

    clients = {}
    monkeypatch.setattr(ali, "make_client", lambda region: clients.setdefault(region, ReplayClient(region)))
    d = _json(run_cli, "prices", "refresh", "--provider", "alibaba", "--region", "cn-wulanchabu",
              "--instance", "ecs.gn7i-c8g1.2xlarge,ecs.gn7e-c16g1.4xlarge")
    got = {(p["instance_type"], p["billing"]): p for p in d["prices"]}
    assert got[("ecs.gn7i-c8g1.2xlarge", "payg")]["price"] == 6.2  # the instance part, not disk
    assert got[("ecs.gn7i-c8g1.2xlarge", "subscription_month")]["price"] == 3000.0
    assert got[("ecs.gn7i-c8g1.2xlarge", "spot")]["price"] == 1.9  # newest per zone, cheapest zone
    assert got[("ecs.gn7e-c16g1.4xlarge", "payg")]["stock"] == "sold_out"
    assert ("ecs.gn7e-c16g1.4xlarge", "spot") not in got  # no spot history: no spot price
    assert (cache / "alibaba.csv").is_file()
    assert "AccessKey" not in (cache / "alibaba.csv").read_text()
    plan = _json(run_cli, "plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M",
                 "--gpu", "a10", "--region", "cn-wulanchabu")
    best = plan["recommendations"][0]
    assert best["instance_type"] == "ecs.gn7i-c8g1.2xlarge" and best["price_per_hour"] == 6.2
    assert best["price_origin"] == "live" and best["region"] == "cn-wulanchabu"
    # a type the live query found sold out is not offered there (other gn7e sizes still are)
    plan = _json(run_cli, "plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M",
                 "--gpu", "a100-sxm4-80gb", "--region", "cn-wulanchabu")
    offered = {r["instance_type"] for r in plan["recommendations"] + plan["pareto"]}
    assert offered and "ecs.gn7e-c16g1.4xlarge" not in offered


def test_prices_list_leaves_vgpu_slices_out_unless_asked(run_cli, cache):
    rows = _json(run_cli, "prices", "list", "--gpu", "a10", "--region", "cn-hangzhou")["prices"]
    assert rows and not any("vws" in r["instance_type"] for r in rows)
    rows = _json(run_cli, "prices", "list", "--gpu", "a10", "--region", "cn-hangzhou", "--all")["prices"]
    assert any("vws" in r["instance_type"] for r in rows)


def test_refresh_skips_one_refused_price_and_keeps_the_rest(cache, monkeypatch):
    pytest.importorskip("alibabacloud_ecs20140526")
    import trainfit.catalog.live.alibaba as ali
    from trainfit.catalog.live import refresh

    class Refused(Exception):
        code = "InvalidInstanceType.NotSupported"  # what the API answers for a price it does not sell

    class NoMonth(ReplayClient):
        def describe_price(self, req):
            if req.price_unit == "Month":
                raise Refused()
            return super().describe_price(req)

    res = refresh("alibaba", ["cn-wulanchabu"], ["ecs.gn7i-c8g1.2xlarge"], client=NoMonth)
    assert {p.billing for p in res.prices} == {"payg", "spot"}
    assert any("skipped" in n and "Month" in n for n in res.notes)

    class BadKey(ReplayClient):
        def describe_available_resource(self, req):
            raise type("E", (Exception,), {"code": "InvalidAccessKeyId.NotFound"})()

    from trainfit.errors import PriceSourceError

    before = (cache / "alibaba.csv").read_text()
    with pytest.raises(PriceSourceError) as exc:  # a bad key stops the whole refresh: one line, nothing written
        refresh("alibaba", ["cn-wulanchabu"], ["ecs.gn7i-c8g1.2xlarge"], client=BadKey)
    assert "InvalidAccessKeyId" in str(exc.value) and (cache / "alibaba.csv").read_text() == before


def test_bad_quote_file_is_worded_in_chinese_too(run_cli, cache, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("provider,instance_type\nalibaba,x\n")
    code, out, err = run_cli("prices", "set", str(f), "--lang", "zh", "--json")
    assert code == 2 and "缺少列" in err and json.loads(out)["error"]["type"] == "PriceFileError"


def test_every_shipped_price_has_a_date_and_a_known_source():
    """The shipped snapshot: each row dated (YYYY-MM-DD or YYYY-MM) and sourced by ids that resolve."""
    from trainfit.catalog import all_sources
    from trainfit.catalog._io import read_text

    rows = P.read_price_text(read_text("prices.csv"), "catalog", "prices.csv")
    assert len(rows) > 400
    undated = [f"{p.provider}/{p.instance_type}/{p.region}/{p.billing}: {p.price_date!r}" for p in rows
               if P.parse_date(p.price_date) is None]
    assert not undated, undated
    unsourced = [f"{p.provider}/{p.instance_type}/{p.region}" for p in rows
                 if not p.sources or not all(s in all_sources() for s in p.sources)]
    assert not unsourced, unsourced


def test_prices_age_summarises_each_provider(run_cli, cache, monkeypatch):
    from trainfit.catalog._io import read_text

    monkeypatch.setenv("TRAINFIT_TODAY", "2026-11-30")
    d = _json(run_cli, "prices", "age")
    shipped = P.read_price_text(read_text("prices.csv"), "catalog", "prices.csv")
    assert d["as_of"] == "2026-11-30" and d["total"]["rows"] == len(shipped)
    for s in d["providers"]:
        mine = [p for p in shipped if p.provider == s["provider"]]
        dates = sorted(P.parse_date(p.price_date) for p in mine)
        assert s["origin"] == "catalog" and s["rows"] == len(mine) == sum(s["by_billing"].values())
        assert P.parse_date(s["oldest"]) == dates[0] and P.parse_date(s["newest"]) == dates[-1]
        on = P.parse_date("2026-11-30")
        assert s["stale"] == sum(P.is_stale(p, on) for p in mine) and s["fresh"] + s["stale"] == s["rows"]
    code, out, _ = run_cli("prices", "age", "--lang", "zh")
    assert code == 0 and "价格有多旧" in out


def test_prices_age_counts_a_user_quote_apart(run_cli, cache, tmp_path):
    d = _json(run_cli, "prices", "age", "--provider", "alibaba", "--prices", _quote(tmp_path / "q.csv", 7.5))
    user = [s for s in d["providers"] if s["origin"] == "user"]
    assert {s["provider"] for s in d["providers"]} == {"alibaba"}
    assert len(user) == 1 and user[0]["rows"] == 1 and user[0]["newest"] == "2026-11-28"
