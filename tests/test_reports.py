"""HTML / Markdown reports (--html, --md): self-contained, deterministic, with the plots each command promises."""

import os
import re

import pytest

from trainfit.cli.main import main

SNAP = os.path.join(os.path.dirname(__file__), "snapshots", "reports")
PLAN = ["plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--epochs", "3",
        "--deadline", "48h", "--budget", "3000", "--gpu", "a10,a100-sxm4-80gb"]
DATE = re.compile(r"<p class=\"dim\" id=\"trainfit-date\">.*</p>|<!-- trainfit-date -->.*")


def _run(tmp_path, argv, name="r.html"):
    out = tmp_path / name
    flag = "--md" if name.endswith(".md") else "--html"
    assert main(argv + [flag, str(out)]) == 0
    return out.read_text(encoding="utf-8")


def _undated(text):
    return DATE.sub("", text)


def _offline(html):
    """No script, no stylesheet or image from elsewhere: the only URL is the SVG namespace."""
    assert "<script" not in html
    assert set(re.findall(r"https?://[^\s\"'<>)]+", html)) <= {"http://www.w3.org/2000/svg"}


def test_plan_html_snapshot(tmp_path):
    html = _undated(_run(tmp_path, PLAN + ["--lang", "en"]))
    _offline(html)
    assert 'class="chart chart-scatter"' in html and 'class="front"' in html  # the Pareto front drawn
    assert html.count('class="pt g2"') == 1  # exactly one recommendation marked
    path = os.path.join(SNAP, "plan-qwen2-7b-lora.html")
    if os.environ.get("TRAINFIT_UPDATE_SNAPSHOTS"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(html)
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == html, "plan report differs from the snapshot (TRAINFIT_UPDATE_SNAPSHOTS=1 to accept)"


def test_plan_html_is_deterministic_and_translated(tmp_path):
    a = _undated(_run(tmp_path, PLAN + ["--lang", "zh"], "a.html"))
    b = _undated(_run(tmp_path, PLAN + ["--lang", "zh"], "b.html"))
    assert a == b
    assert '<html lang="zh-CN">' in a and "帕累托前沿" in a and "推荐方案" in a
    assert "主机内存：加载模型需要每节点" in a and "内存 GiB 需/有" in a  # the reasons and the host-RAM column
    assert "bottleneck:" not in a and "Wall-clock hours between checkpoints" not in a  # reasons, assumptions in zh


def test_estimate_html_memory_bars(tmp_path):
    from trainfit import estimate

    est = estimate("qwen2-7b", "a10", method="lora", grad_ckpt="full")
    html = _run(tmp_path, ["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora",
                           "--grad-ckpt", "full", "--lang", "en"])
    _offline(html)
    assert 'class="chart chart-stacked"' in html and 'class="limit"' in html
    # one labelled bar per phase, and the verdict with the API's numbers
    for phase in est.memory.phases:
        assert f">{phase.name}</text>" in html
    assert f"{est.memory.device / 2**30:.1f} of {est.memory.usable / 2**30:.1f} GiB" in html
    assert f"{est.tokens_per_s:,.0f}" in html


def test_estimate_not_fitting_lists_what_fits(tmp_path):
    html = _run(tmp_path, ["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "full", "--lang", "en"])
    assert "does NOT fit" in html and "What would fit" in html


def test_compare_html_bars_name_instances(tmp_path):
    html = _run(tmp_path, ["compare", "--model", "llama-2-7b", "--method", "lora", "--gpus-list", "a10,h100-sxm",
                           "--lang", "en"])
    _offline(html)
    assert html.count('class="chart chart-hbars"') >= 2  # tokens/s and cost per billion tokens
    assert "Cost per billion tokens" in html
    assert re.search(r"a10 · [\w.-]+ 1<", html)  # the bar names the instance


def test_markdown_report(tmp_path):
    md = _run(tmp_path, PLAN + ["--lang", "en"], "r.md")
    assert md.startswith("# trainfit plan: qwen2-7b")
    assert "| # | instance |" in md and "<svg" not in md


def test_report_path_checked_before_work(tmp_path, capsys):
    folder = tmp_path / "a-dir"
    folder.mkdir()
    assert main(PLAN + ["--html", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and len(err.strip().splitlines()) == 1
    assert main(["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--json", "--md", str(folder)]) == 2
    cap = capsys.readouterr()
    assert "\"error\"" in cap.out + cap.err


def test_validate_html_scatter_per_metric(tmp_path):
    src = os.path.join(os.path.dirname(__file__), "..", "data", "validation", "published_dev.jsonl")
    with open(src, encoding="utf-8") as fh:
        lines = fh.read().splitlines()[:40]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    html = _run(tmp_path, ["validate", str(cases), "--lang", "en"])
    _offline(html)
    assert html.count('class="diagonal"') >= 2  # the 1:1 line, one scatter per metric with data
    assert "Predicted vs measured: tokens/s per GPU" in html and 'class="pt g1"' in html


def test_serving_html(tmp_path):
    html = _run(tmp_path, ["serving", "--model", "qwen2-7b", "--gpu", "a10", "--lang", "en"])
    _offline(html)
    assert 'class="chart chart-stacked"' in html and "KV cache" in html and 'class="limit"' in html
    html = _run(tmp_path, ["serving", "--model", "qwen2-7b", "--compare", "a10,h20", "--lang", "zh"], "c.html")
    assert "chart-hbars" in html and "每百万输出 tokens 费用" in html


def test_trace_doc_trace_vs_analytic():
    """The trace report from a trace document (the tracer itself is tested in test_trace.py): each moment of the
    step paired with the analytic value of the same moment, as grouped bars and a table."""
    from trainfit.report.document import to_html
    from trainfit.report.html_docs import trace_doc

    parts = {"weights": 1.0, "gradients": 0.5, "optimizer": 2.0, "activations": 3.0, "logits": 0.25, "other": 0.0}
    moments = [{"moment": "forward_end", "trace": "forward", "analytic": ["forward_end"], "trace_gib": 5.5,
                "analytic_gib": 5.0},
               {"moment": "backward_start", "trace": "backward:head", "analytic": ["backward_start", "backward_head"],
                "trace_gib": 6.75, "analytic_gib": 7.25},
               {"moment": "peak", "trace": "backward:head", "analytic": ["backward_start"], "trace_gib": 6.75,
                "analytic_gib": 7.25}]
    doc = {"model": "m", "method": "full", "seq_len": 128, "micro_batch": 1, "grad_ckpt": "none",
           "memory_gib": {**parts, "total": 6.75}, "peak_moment": "backward:head", "moments": moments,
           "estimate": {"memory_gib": {**parts, "activations": 3.5}, "allocated_gib": 7.25,
                        "peak_phase": "backward_start"},
           "difference": {"allocated_gib": 0.5, "percent": 7.41}, "notes": []}
    html = to_html(trace_doc(doc, "en"), today="2026-01-01")
    per_moment, by_part = html.split('class="chart chart-grouped"')[1:3]
    assert per_moment.count('class="bar s0"') == 3 and per_moment.count('class="bar s1"') == 3  # trace, analytic
    assert ">forward end</text>" in per_moment and ">backward start</text>" in per_moment and ">peak</text>" in per_moment
    assert "<title>forward end · trace: 5.500</title>" in per_moment
    assert "<title>forward end · analytic: 5.000</title>" in per_moment
    assert by_part.count('class="bar s0"') == 5 and by_part.count('class="bar s1"') == 5  # 5 non-zero parts each
    assert "<td>backward start</td><td class=n>6.750</td><td class=n>7.250</td><td>+0.500</td>" in html  # a row
    assert "backward:head / backward_start, backward_head" in html
    assert "+0.500 GiB (+7.41%)" in html
    zh = to_html(trace_doc(doc, "zh"), today="2026-01-01")
    assert ">前向结束</text>" in zh and "按训练步时刻" in zh


def test_trace_html_snapshot(tmp_path):
    """A real trace (gpt2, full fine-tuning, 2 and 3 blocks extrapolated): its per-moment pairing held by a
    snapshot."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    html = _undated(_run(tmp_path, ["trace", "--model", "gpt2", "--method", "full", "--seq-len", "256",
                                    "--lang", "en"]))
    _offline(html)
    per_moment = html.split('class="chart chart-grouped"')[1]
    for label in ("forward end", "backward start", "top block backward", "backward end", "optimizer step", "peak"):
        assert f">{label}</text>" in per_moment
    assert per_moment.count('class="bar s0"') == 6 and per_moment.count('class="bar s1"') == 6
    path = os.path.join(SNAP, "trace-gpt2-full.html")
    if os.environ.get("TRAINFIT_UPDATE_SNAPSHOTS"):
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(html)
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == html, "trace report differs from the snapshot (TRAINFIT_UPDATE_SNAPSHOTS=1 to accept)"


def test_markdown_leaves_out_chart_notes(tmp_path):
    md = _run(tmp_path, ["estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora", "--lang", "en"],
              "e.md")
    assert "| part | GiB |" in md and "dashed line" not in md
