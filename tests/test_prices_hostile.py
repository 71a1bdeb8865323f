"""Price files under hostile conditions (issue 32): parallel `prices set` runs, huge files, non-finite prices, rich
markup and control characters in text fields, a cache file that no longer validates."""

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest

from trainfit import _proc
from trainfit.catalog import prices as P
from trainfit.errors import PriceFileError

HEAD = "provider,instance_type,region,billing,price,currency,price_date,note\n"
ITYPE = "ecs.gn7i-c8g1.2xlarge"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty user cache for this test (as in test_prices.py)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    P.use_price_files([])
    P.clear_cache()
    yield tmp_path / "cache" / "trainfit" / "prices"
    P.use_price_files([])
    P.clear_cache()


def _row(region="cn-hangzhou", price="3.5", note="", billing="payg", date="2026-11-28", itype=ITYPE):
    return f"alibaba,{itype},{region},{billing},{price},CNY,{date},{note}\n"


def _one_line(err):
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _env(tmp_path):
    env = dict(os.environ)
    env.update(XDG_CACHE_HOME=str(tmp_path / "cache"), HOME=str(tmp_path / "home"), TRAINFIT_LANG="en")
    env.pop("TRAINFIT_DEBUG", None)
    return env


def _cli(tmp_path, *argv, timeout=120):
    return _proc.run([sys.executable, "-m", "trainfit", *argv], timeout=timeout, env=_env(tmp_path))


# --- parallel writers ------------------------------------------------------------------------------------------------

def test_eight_parallel_prices_set_keep_every_row(tmp_path, cache):
    files = []
    for i in range(8):
        f = tmp_path / f"q{i}.csv"
        f.write_text(HEAD + _row(region=f"cn-test-{i}", price=str(3 + i)))
        files.append(str(f))
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda f: _cli(tmp_path, "prices", "set", f, "--json"), files))
    for r in results:
        assert r.returncode == 0, r.stderr
    rows = P.read_price_file(cache / "user.csv", "user")
    assert sorted(p.region for p in rows) == [f"cn-test-{i}" for i in range(8)]
    assert {p.region: p.price for p in rows} == {f"cn-test-{i}": 3.0 + i for i in range(8)}
    assert not [n for n in os.listdir(cache) if n.endswith(".tmp")]  # no temporary file left behind


def test_parallel_live_refresh_writers_keep_every_row(cache):
    """The refresh writer (`<provider>.csv`) merges under the same lock: eight threads, eight regions, eight rows."""
    base = P.read_price_text(HEAD + _row(), "live", "q")[0]
    errors = []

    def store(i):
        try:
            P.store_live_prices("alibaba", [replace(base, region=f"cn-live-{i}", price=1.0 + i)])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=store, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    rows = P.read_price_file(cache / "alibaba.csv", "live")
    assert sorted(p.region for p in rows) == [f"cn-live-{i}" for i in range(8)]


def test_refreshed_price_that_would_poison_the_cache_is_not_written(cache):
    base = P.read_price_text(HEAD + _row(), "live", "q")[0]
    for bad in (replace(base, price=float("nan")), replace(base, price=float("inf")),
                replace(base, region="[/bold]"), replace(base, note="\x1b[31mred")):
        with pytest.raises(PriceFileError):
            P.store_live_prices("alibaba", [bad])
    assert not (cache / "alibaba.csv").exists()


# --- size caps -------------------------------------------------------------------------------------------------------

def test_oversize_file_is_refused_before_it_is_read(run_cli, cache, tmp_path, monkeypatch):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of nothing, instantly

    def no_open(*a, **k):
        raise AssertionError(f"opened {a[0]!r}: an oversize file must be refused from its size alone")

    monkeypatch.setattr(P, "open", no_open, raising=False)  # prices.py's `open` (module globals win over builtins)
    t0 = time.monotonic()
    code, out, err = run_cli("prices", "set", str(big))
    assert time.monotonic() - t0 < 2.0
    line = _one_line(err)
    assert code == 2 and str(big) in line and "64.0 MiB" in line and "16.0 MiB" in line
    assert not (cache / "user.csv").exists()


def test_oversize_file_refused_quickly_in_a_real_process(tmp_path, cache):
    big = tmp_path / "big.csv"
    with open(big, "wb") as f:
        f.truncate(64 * 1024 * 1024)
    t0 = time.monotonic()
    r = _cli(tmp_path, "prices", "set", str(big))
    assert r.returncode == 2 and "larger than" in _one_line(r.stderr)
    assert time.monotonic() - t0 < 30  # process start included; the refusal itself is a stat


def test_a_pipe_is_bounded_too(cache, tmp_path, monkeypatch):
    """A file whose size is not known up front (a FIFO, /proc) is cut off once more than the cap was read."""
    monkeypatch.setattr(P, "MAX_BYTES", 4096)
    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)

    def writer():
        try:
            with open(fifo, "w") as f:
                f.write(HEAD)
                for i in range(10_000):
                    f.write(_row(region=f"r{i}"))
        except BrokenPipeError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    with pytest.raises(PriceFileError) as exc:
        P.read_price_file(fifo, "user")
    assert exc.value.key == "pf_too_big" and str(fifo) in str(exc.value)


def test_too_many_rows_is_refused_and_reading_stops_there(run_cli, cache, tmp_path, monkeypatch):
    monkeypatch.setattr(P, "MAX_ROWS", 50)
    f = tmp_path / "many.csv"
    # rows past the cap are not even parsed: the bad price in row 52 is never reached
    f.write_text(HEAD + "".join(_row(region=f"r{i}") for i in range(51)) + _row(price="nan"))
    code, out, err = run_cli("prices", "set", str(f))
    line = _one_line(err)
    assert code == 2 and str(f) in line and "more than 50 rows" in line
    assert not (cache / "user.csv").exists()
    f.write_text(HEAD + "".join(_row(region=f"r{i}") for i in range(50)))
    code, out, err = run_cli("prices", "set", str(f))
    assert code == 0, err


def test_merge_past_the_row_cap_is_refused_and_keeps_the_old_file(run_cli, cache, tmp_path, monkeypatch):
    monkeypatch.setattr(P, "MAX_ROWS", 10)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text(HEAD + "".join(_row(region=f"a{i}") for i in range(8)))
    b.write_text(HEAD + "".join(_row(region=f"b{i}") for i in range(8)))
    assert run_cli("prices", "set", str(a))[0] == 0
    before = (cache / "user.csv").read_text()
    code, out, err = run_cli("prices", "set", str(b))
    assert code == 2 and "more than 10 rows" in _one_line(err)
    assert (cache / "user.csv").read_text() == before


def test_the_real_row_cap(run_cli, cache, tmp_path):
    f = tmp_path / "many.csv"
    f.write_text(HEAD + "".join(_row(region=f"r{i}") for i in range(P.MAX_ROWS + 1)))
    code, out, err = run_cli("prices", "set", str(f))
    assert code == 2 and f"more than {P.MAX_ROWS:,} rows" in _one_line(err)


# --- price values ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400", "-1", "0", "-0.0"])
def test_non_finite_or_non_positive_price_is_refused(run_cli, cache, tmp_path, value):
    f = tmp_path / "bad.csv"
    f.write_text(HEAD + _row(region="cn-ok") + _row(price=value))
    code, out, err = run_cli("prices", "set", str(f))
    line = _one_line(err)
    assert code == 2 and str(f) in line and "line 3" in line and "finite positive" in line and value in line
    assert not (cache / "user.csv").exists()
    code, out, err = run_cli("prices", "list", "--prices", str(f))  # the same check for --prices FILE
    assert code == 2 and "finite positive" in _one_line(err)


def test_non_finite_price_is_worded_in_chinese(run_cli, cache, tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(HEAD + _row(price="nan"))
    code, out, err = run_cli("prices", "set", str(f), "--lang", "zh")
    assert code == 2 and "有限的正数" in _one_line(err)


# --- markup and control characters -----------------------------------------------------------------------------------

@pytest.mark.parametrize("region,note", [("[/bold]", ""), ("[bold]x", ""), ("cn-hangzhou", "[link=https://evil]x"),
                                         ("cn-hangzhou", "see [/]"), ("cn-hangzhou", "[#ff0000]red")])
def test_markup_in_a_price_file_is_refused_with_one_line(run_cli, cache, tmp_path, region, note):
    f = tmp_path / "markup.csv"
    f.write_text(HEAD + _row(region=region, note=note))
    code, out, err = run_cli("prices", "set", str(f))
    line = _one_line(err)
    assert code == 2 and str(f) in line and "markup" in line
    code, out, err = run_cli("prices", "list", "--gpu", "a10")  # nothing stored: later commands are fine
    assert code == 0 and "Traceback" not in err


def test_brackets_that_are_not_markup_are_kept(run_cli, cache, tmp_path):
    f = tmp_path / "ok.csv"
    f.write_text(HEAD + _row(note="quote [1] of 3; tab\tok"))
    code, out, err = run_cli("prices", "set", str(f))
    assert code == 0, err
    assert P.read_price_file(cache / "user.csv", "user")[0].note == "quote [1] of 3; tab\tok"


def test_markup_poisoned_cache_gives_one_line_with_the_way_out(run_cli, cache, tmp_path):
    """A user.csv written before these checks (or by hand) no longer crashes every command."""
    cache.mkdir(parents=True)
    (cache / "user.csv").write_text(HEAD + _row(region="[/bold]"))
    for argv in (("prices", "list"), ("prices", "age"), ("plan", "--model", "qwen2.5-0.5b", "--method", "lora",
                                                          "--dataset-tokens", "10M", "--gpu", "a10")):
        P.clear_cache()
        code, out, err = run_cli(*argv)
        line = _one_line(err)
        assert code == 2, (argv, err)
        assert str(cache / "user.csv") in line and f"rm {cache / 'user.csv'}" in line and "markup" in line
    P.clear_cache()
    code, out, err = run_cli("prices", "list", "--lang", "zh")
    assert code == 2 and "删除" in _one_line(err)
    os.remove(cache / "user.csv")  # the way out the message names works
    P.clear_cache()
    assert run_cli("prices", "list")[0] == 0


@pytest.mark.parametrize("bad", [b"\xff\xfe not utf-8", None])
def test_unreadable_or_oversize_cache_gives_one_line(run_cli, cache, bad):
    cache.mkdir(parents=True)
    path = cache / "aws.csv"
    if bad is None:
        with open(path, "wb") as f:
            f.truncate(17 * 1024 * 1024)
    else:
        path.write_bytes(HEAD.encode() + bad)
    code, out, err = run_cli("prices", "list")
    line = _one_line(err)
    assert code == 2 and f"rm {path}" in line


def test_prices_list_shows_markup_literally(run_cli, cache, monkeypatch):
    """Output escapes what it prints, whatever reached the rows (defence in depth behind the file checks)."""
    import trainfit.catalog.prices as prices_mod

    real = prices_mod.listing

    def hostile(*a, **k):
        rows = real(*a, **k)[:1]
        return [dict(r, region="[/bold]", price_sources=["[link=https://evil]x"]) for r in rows]

    monkeypatch.setattr(prices_mod, "listing", hostile)
    monkeypatch.setenv("COLUMNS", "400")  # one table row on one line
    code, out, err = run_cli("prices", "list", "--gpu", "a10")
    assert code == 0, err
    assert "[/bold]" in out and "[link=https://evil]x" in out


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\x07", "\x7f", "\n", "\r", "\u202a", "\u202e", "\u2066", "\u2069"])
def test_control_and_bidi_characters_are_refused(run_cli, cache, tmp_path, char):
    f = tmp_path / "ctl.csv"
    f.write_text(HEAD + _row(note=f'"a{char}b"'), newline="")
    code, out, err = run_cli("prices", "set", str(f))
    line = _one_line(err)
    assert code == 2 and str(f) in line
    assert "control" in line or "CSV" in line
    assert char not in line  # the error itself never carries the character
    assert not (cache / "user.csv").exists()


@pytest.mark.parametrize("col", ["region", "instance_type"])
def test_bidi_override_in_an_identifier_is_refused(run_cli, cache, tmp_path, col):
    row = _row(region="cn-\u202ehangzhou") if col == "region" else _row(itype="ecs.gn7i\u202e-c8g1.2xlarge")
    f = tmp_path / "bidi.csv"
    f.write_text(HEAD + row)
    code, out, err = run_cli("prices", "set", str(f))
    line = _one_line(err)
    assert code == 2 and "U+202E" in line and f"column {col}" in line
