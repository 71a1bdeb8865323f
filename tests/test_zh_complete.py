"""`--lang zh` is complete: every sentence a user reads in Chinese output is Chinese (issue 33 item 8). Many
configurations run in-process (estimate that fits and that does not, qlora, --data, --html; compare; plan with a
recommendation and with nothing meeting the budget, the deadline or the out-of-memory risk, spot prices; serving;
generate's README; validate), and each output is searched for English: after the tokens that stay as they are
(model, GPU and instance names, flags, units, code, numbers, paths, key=value names) are taken out, no run of three
English words may remain. Every offender over all configurations is listed at once."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Words that stay English in Chinese output: names of methods, engines, stacks, units and abbreviations a Chinese
# reader types as they are (each one alone; a run of them with ordinary English words is still caught).
_KEEP = {
    "gib", "gb", "mib", "tb", "gbit", "ms", "s", "h", "min", "tokens", "token", "tok", "mfu", "gpu", "gpus", "cpu",
    "tflop", "tflops", "mb", "nvidia", "amd", "vs", "x", "lora", "qlora", "full", "freeze", "sft", "dpo", "pretrain",
    "classification", "single", "ddp", "fsdp", "zero", "deepspeed", "nccl", "cuda", "pcie", "nvlink", "nvswitch",
    "rdma", "tcp", "eri", "vpc", "ecs", "dlc", "pytorchjob", "skypilot", "slurm", "vllm", "sglang", "tp", "kv",
    "ttft", "tpot", "payg", "spot", "monthly", "bf", "fp", "adamw", "sgd", "lamb", "adafactor", "peft",
    "transformers", "torch", "pytorch", "trainfit", "json", "jsonl", "yaml", "html", "md", "readme", "mape",
    "oom", "ckpt", "offload", "optimizer", "all", "none", "selective", "attention", "flash", "sdpa", "eager",
    "alibaba", "aws", "gcp", "azure", "hugging", "face", "hub", "modelscope", "litgpt", "megatron", "torchtitan",
    "axolotl", "llama", "factory", "unsloth", "trl", "hf", "trainer", "compute", "memory", "communication",
    "overhead", "bandwidth", "fused", "foreach", "forloop", "auto", "awq", "gptq", "int", "nf", "moe", "mla", "ac",
    "sxm", "pcie", "a", "b", "c", "n", "m",
}
_KEEP_RE = re.compile(r"\b(?:" + "|".join(sorted(_KEEP, key=len, reverse=True)) + r")\b", re.I)
_RUN = re.compile(r"\b[a-z]+(?:[ \t]+[a-z]+){2,}\b", re.I)


def english_runs(text: str) -> list[str]:
    """Runs of three or more English words left in `text` once the tokens that stay English are taken out."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)  # code blocks
    text = re.sub(r"`[^`\n]*`", " ", text)  # inline code
    text = re.sub(r"'[^'\s]*'|\"[^\"\n]*\"", " ", text)  # quoted values
    text = re.sub(r"--?[A-Za-z][\w-]*", " ", text)  # flags
    text = re.sub(r"\S*[/=_\\@:]\S*", " ", text)  # paths, key=value, identifiers, urls
    text = re.sub(r"\S*\d\S*", " ", text)  # numbers and names with digits (models, GPUs, instances)
    text = re.sub(r"\S+-\S+", " ", text)  # hyphenated names (cn-beijing, micro-batch is translated where it is prose)
    text = re.sub(r"\b[A-Z]{2,}s?\b", " ", text)  # abbreviations (MFU, KV, CNY)
    text = _KEEP_RE.sub(" ", text)
    return [m.group(0) for m in _RUN.finditer(text)]


def html_text(doc: str) -> str:
    doc = re.sub(r"<(script|style)\b.*?</\1>", " ", doc, flags=re.S | re.I)
    doc = re.sub(r"<[^>]+>", "\n", doc)
    return html.unescape(doc)


def test_the_checker_finds_english_and_lets_names_pass():
    assert english_runs("no plan costs ¥500 or less")
    assert english_runs("· over by 100.7 GiB (123.2 needed, 22.5 usable)")
    assert not english_runs("显存：每张 GPU 51.9 / 79.6 GiB（余量 27.7 GiB），micro-batch 2 × 梯度累积 32")
    assert not english_runs("qwen2-7b · full · sft · seq 2048 × mb 1 · NVIDIA A10 · 1 GPU")
    assert not english_runs("--method lora --grad-ckpt full --zero 2 --offload optimizer")
    assert not english_runs("使用的效率参数: allocator_overhead_fraction=0.08, comm_efficiency[pcie]=0.55")


@pytest.fixture
def zh_runs(run_cli, monkeypatch):
    """Run the CLI under --lang zh on a wide terminal (no words cut by wrapping); collect offenders per run."""
    monkeypatch.setenv("COLUMNS", "250")
    offenders: list[tuple[str, str]] = []

    def run(*argv: str, ok=(0, 1), files=()):  # 1: a plan that answers "nothing meets the request"
        code, out, err = run_cli(*argv, "--lang", "zh")
        assert code in ok, (argv, code, err)
        label = " ".join(argv[:1] + tuple(a for a in argv[1:] if not a.startswith("/")))
        for where, text in (("stdout", out), ("stderr", err)) + tuple(
                (str(f), html_text(Path(f).read_text(encoding="utf-8")) if str(f).endswith(".html")
                 else Path(f).read_text(encoding="utf-8")) for f in files):
            offenders.extend((f"{label} [{Path(where).name}]", r) for r in english_runs(text))
        return out

    run.offenders = offenders
    return run


def _data_file(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(60):
            fh.write(json.dumps({"text": "tokens of a sample " * (20 + 7 * i)}) + "\n")
    return path


def test_zh_output_has_no_english_sentence(zh_runs, tmp_path):
    run = zh_runs
    m = ("--model", "qwen2-7b")
    a10 = (*m, "--gpu", "a10")
    # estimate: fits, does not fit (full fine-tune on an A10: model states alone too big), qlora, variable-length data
    # (--data, --avg-len), multi-node, warnings, a training stack, DPO, and the HTML report of both verdicts
    run("estimate", *a10, "--method", "lora", "--grad-ckpt", "full")
    run("estimate", *a10, "--method", "full")
    run("estimate", *a10, "--method", "lora")
    run("estimate", *a10, "--method", "qlora", "--micro-batch", "2")
    run("estimate", *m, "--gpu", "t4", "--method", "qlora", "--precision", "fp16", "--gpus", "2", "--zero", "3")
    run("estimate", *a10, "--method", "lora", "--grad-ckpt", "full", "--data", str(_data_file(tmp_path)))
    run("estimate", *a10, "--method", "lora", "--grad-ckpt", "full", "--avg-len", "600", "--max-len", "2048")
    run("estimate", *m, "--gpu", "a100-sxm4-80gb", "--method", "full", "--gpus", "8", "--nodes", "2", "--zero", "3")
    run("estimate", *a10, "--method", "lora", "--paged-optimizer", "--optimizer", "adamw-8bit")
    run("estimate", *a10, "--method", "qlora", "--gpus", "2", "--zero", "3", "--offload", "optimizer")
    run("estimate", "--model", "bert-base-uncased", "--gpu", "a10", "--method", "full", "--attention", "flash")
    run("estimate", *m, "--gpu", "h100-sxm", "--method", "lora", "--framework", "litgpt")
    run("estimate", *a10, "--method", "freeze", "--task", "dpo")
    run("estimate", "--model", "gpt2", "--gpu", "t4", "--precision", "fp16", "--method", "full", "--task", "dpo")
    for name, flags in (("fits", ("--method", "lora", "--grad-ckpt", "full")), ("nofit", ("--method", "full"))):
        page = tmp_path / f"estimate-{name}.html"
        run("estimate", *a10, *flags, "--html", str(page), files=(page,))
    # compare (and its report)
    page = tmp_path / "compare.html"
    run("compare", *m, "--gpu", "a10,a100-sxm4-80gb,h100-sxm,t4", "--method", "lora", "--html", str(page),
        files=(page,))
    # plan: recommendations (with the layouts rejected for their out-of-memory risk, the reports), nothing within the
    # budget, the deadline, both, the risk, GPU memory, the catalog or the given layout; spot prices; multi-node
    lora = ("plan", *m, "--method", "lora")
    page, md = tmp_path / "plan.html", tmp_path / "plan.md"
    run(*lora, "--dataset-tokens", "200M", "--html", str(page), "--md", str(md), files=(page, md))
    run(*lora, "--dataset-tokens", "2B", "--budget", "500")
    page = tmp_path / "plan-deadline.html"
    run(*lora, "--dataset-tokens", "2B", "--deadline", "1h", "--html", str(page), files=(page,))
    run(*lora, "--dataset-tokens", "2B", "--deadline", "3h", "--budget", "4000")
    run(*lora, "--dataset-tokens", "20M", "--gpu", "a10", "--max-oom-risk", "0.01")
    run("plan", "--model", "qwen2-72b", "--method", "full", "--dataset-tokens", "200M", "--gpu", "t4", "--max-nodes", "1")
    run("plan", "--model", "qwen2-72b", "--method", "full", "--dataset-tokens", "200M", "--gpu", "t4", "--max-nodes", "1",
        "--seq-len", "32768")
    run(*lora, "--dataset-tokens", "200M", "--gpu", "h100-sxm", "--region", "cn-hangzhou")
    run(*lora, "--dataset-tokens", "200M", "--gpus", "3")
    run(*lora, "--dataset-tokens", "9e13", "--gpu", "a10", "--max-nodes", "1")  # more than ten years
    run(*lora, "--dataset-tokens", "200M", "--pricing", "spot", "--provider", "all", "--usd-cny", "7.1")
    run("plan", *m, "--task", "pretrain", "--method", "full", "--dataset-tokens", "1B", "--max-nodes", "2", "--gpu",
        "a100-sxm4-80gb")
    # serving (fits, does not fit, the search over GPUs) and its reports
    page = tmp_path / "serving.html"
    run("serving", *a10, "--html", str(page), files=(page,))
    run("serving", "--model", "qwen2-72b", "--gpu", "a10")
    page = tmp_path / "serving-compare.html"
    run("serving", *m, "--compare", "a10,l20", "--target-tokens-per-s", "500", "--html", str(page), files=(page,))
    # generate: what it prints and the README it writes
    out = tmp_path / "setup"
    run("generate", *a10, "--method", "lora", "--grad-ckpt", "full", "--out", str(out), files=(out / "README.md",))
    # validate: a few published cases, and the report
    cases = tmp_path / "cases.jsonl"
    lines = (ROOT / "data" / "validation" / "published_dev.jsonl").read_text(encoding="utf-8").splitlines()
    cases.write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")
    page = tmp_path / "validate.html"
    run("validate", str(cases), "--html", str(page), ok=(0, 1), files=(page,))
    # the catalogs: the named efficiencies (with their bases and descriptions), GPUs, instances
    run("efficiencies")
    run("gpus")
    run("instances", "--provider", "alibaba")

    offenders = sorted(set(run.offenders))
    for where, text in offenders:
        print(f"{where}: {text}")
    assert not offenders, f"{len(offenders)} English runs in --lang zh output (printed above)"


def test_every_efficiency_has_chinese():
    """Each description and basis of efficiency.yaml has a current Chinese form (i18n/efficiencies.py: a changed
    English text needs its Chinese updated)."""
    from trainfit.i18n.efficiencies import missing_chinese

    assert not missing_chinese()
