"""Every string a user reads has a Chinese form: the message catalog is complete (same placeholders in both
languages), and the English sentences the estimator and the search write (assumptions, warnings, the plan's "why"
lines, rejection reasons) are each matched by a Chinese pattern — generated here over many configurations."""

import itertools
import re
import string

import pytest

import trainfit
from trainfit.errors import TrainfitError
from trainfit.i18n import _MESSAGES
from trainfit.i18n.notes import has_chinese, localize


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_the_message_catalog_is_complete():
    """One message table (issue 38): the CLI's messages, serving's, generate's, the user-file errors', the reports'
    words and the web calculator's labels, every key once, each in both languages with the same placeholders."""
    from trainfit.i18n import generate, report, serving, ui, userfiles

    areas = (serving.SERVING_MESSAGES, generate.GENERATE_MESSAGES, userfiles.USERFILE_MESSAGES, report.REPORT_MESSAGES,
             ui.UI_MESSAGES)
    assert sum(len(a) for a in areas) < len(_MESSAGES)
    for area in areas:
        assert area and all(_MESSAGES[k] is v for k, v in area.items())
    for key, entry in _MESSAGES.items():
        assert entry.get("en") and entry.get("zh"), f"message {key!r} lacks a language"
        assert _fields(entry["en"]) == _fields(entry["zh"]), f"message {key!r}: placeholders differ"


def test_the_web_calculator_reads_its_labels_from_the_table():
    from trainfit.ui.words import words

    zh = words("zh")
    assert zh["title"] == _MESSAGES["ui_title"]["zh"] and words("en")["gpu"] == "GPU"
    assert len(zh) == sum(1 for k in _MESSAGES if k.startswith("ui_"))


def test_unknown_sentences_pass_through_and_english_is_untouched():
    assert localize("some sentence nobody wrote", "zh") == "some sentence nobody wrote"
    from trainfit.i18n import say

    packed = say("es_len_packed", n=2048)  # a sentence of the table: its English as the str, Chinese from the table
    assert packed == "sequences packed to exactly 2048 tokens (no padding)" == localize(packed, "en")
    assert type(localize(packed, "en")) is str
    assert localize(packed, "zh") == "序列打包为恰好 2048 个 token（无填充）"
    # a sentence inside a sentence renders in the same language
    varlen = say("es_len_varlen_from", n=4096, p=900, avg=512, waste=0.43, src=say("es_len_mean_from", avg=512,
                                                                                      src=say("es_src_avg_len")))
    assert varlen.endswith("(mean sample 512; 43% padding); lengths from mean sample 512 tokens from --avg-len")
    assert localize(varlen, "zh").endswith("（样本平均 512；填充占 43%）；长度来自 样本平均 512 个 token，来自 --avg-len")


def _estimate_sentences():
    seen = {}
    for model, gpu, method, gpus, zero, ck, prec, task in itertools.product(
            ["qwen2-7b", "gpt2", "bert-base-uncased", "mixtral-8x7b"], ["a10", "t4", "h100-sxm"],
            ["full", "lora", "qlora", "freeze"], [1, 8], [None, 3], ["none", "full"], ["bf16", "fp16"],
            [None, "dpo"]):
        try:
            est = trainfit.estimate(model, gpu, method=method, gpus=gpus, zero=zero, grad_ckpt=ck, precision=prec,
                                    task=task)
        except TrainfitError:
            continue
        for text in (*est.assumptions, *est.warnings):
            seen.setdefault(re.sub(r"[0-9][0-9.,]*", "#", text), text)
    return sorted(seen.values())


def test_every_estimate_sentence_has_chinese():
    sentences = _estimate_sentences()
    assert len(sentences) >= 10
    missing = [s for s in sentences if not has_chinese(s)]
    assert not missing, missing
    assert not [s for s in sentences if re.search(r"[a-z]{4,} [a-z]{4,} [a-z]{4,}", localize(s, "zh"))
                and not s.startswith(("runner-up", "incompatible"))], "English left inside a Chinese sentence"


@pytest.mark.parametrize("flags", [
    ("--method", "lora", "--dataset-tokens", "200M", "--gpu", "a10"),
    ("--method", "full", "--dataset-tokens", "1B", "--max-nodes", "2", "--gpu", "a100-sxm4-80gb,h20"),
    ("--method", "lora", "--dataset-tokens", "20B", "--pricing", "subscription", "--gpu", "t4"),
    ("--method", "lora", "--dataset-tokens", "200M", "--provider", "all", "--usd-cny", "7.1", "--deadline", "2h"),
])
def test_every_plan_sentence_has_chinese(run_cli, flags):
    """The plan's sentences (assumptions, "why" lines, why each other GPU lost, the layouts rejected for risk) as
    the command renders them: sentences of the message table, their English what --json carries, unchanged."""
    import json

    from trainfit.plan import risky_text
    from trainfit.report.plan import plan_dict

    code, out, err = run_cli("plan", "--model", "qwen2-7b", *flags, "--top", "10", "--json")
    assert code == 0, err
    d = json.loads(out)
    request = {k.removeprefix("--").replace("-", "_"): v for k, v in zip(flags[::2], flags[1::2])}
    p = trainfit.plan("qwen2-7b", top=10, **request)
    doc = plan_dict(p)
    assert json.loads(json.dumps(doc["assumptions"])) == d["assumptions"]
    assert [json.loads(json.dumps(rec.get("why"))) for rec in doc["recommendations"]] == \
        [rec.get("why") for rec in d["recommendations"]]
    sentences = list(doc["assumptions"]) + [x for lines in p.why for x in lines] + list(p.excluded.values()) \
        + [risky_text(r) for r in p.too_risky]
    missing = [s for s in sentences if not has_chinese(s)]
    assert not missing, missing
    assert not [s for s in sentences if re.search(r"[a-z]{4,} [a-z]{4,} [a-z]{4,}", localize(s, "zh"))
                and not s.startswith(("runner-up", "incompatible"))], "English left inside a Chinese sentence"


_CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_search_reason_is_worded_in_both_languages():
    """Infeasibility is typed (search/reasons.py) and worded by report/: every Reason has an English and a Chinese
    sentence, and a plan's counted reasons come out in Chinese under zh."""

    from trainfit.i18n import _MESSAGES
    from trainfit.report.plan import reason_text
    from trainfit.search.reasons import Reason, Rejection

    for reason in Reason:
        entry = _MESSAGES.get("rj_" + reason.value)
        assert entry and entry.get("en") and _CJK.search(entry["zh"]), reason
    sample = {"rule": "x", "currency": "USD", "target": "CNY", "region": "cn-hangzhou", "pricing": "spot",
              "micro_batch": 3, "gpus": 8}
    for reason in Reason:
        r = Rejection.of(reason, **sample)
        zh, en = reason_text(r, "zh"), reason_text(r, "en")
        assert _CJK.search(zh) and not _CJK.search(en) and "{" not in zh + en, (reason, zh, en)


def test_plan_reasons_are_typed_and_chinese(run_cli):
    import json

    from trainfit.report.plan import reason_text
    from trainfit.search.reasons import Reason, Rejection

    code, out, err = run_cli("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M",
                             "--provider", "all", "--usd-cny", "7.1", "--deadline", "2h", "--json")
    assert code == 0, err
    d = json.loads(out)
    reasons = d["rejected_reasons"]
    assert {r["reason"] for r in reasons} >= {"no_fit", "too_slow"}
    for item in reasons:
        values = {k: v for k, v in item.items() if k not in ("reason", "count", "skipped_instance_types")}
        r = Rejection.of(Reason(item["reason"]), **values)
        assert reason_text(r, "en") in d["rejected"] or item.get("skipped_instance_types")
        assert _CJK.search(reason_text(r, "zh")), item
    code, out, err = run_cli("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M",
                             "--deadline", "2h", "--lang", "zh")
    assert code == 0, err
    assert "赶不上截止时间" in out or "显存放不下" in out



def _bad_inputs(tmp):
    """Bad inputs a new user types (the shapes tests/test_doors.py checks in English)."""
    (tmp / "file").write_text("x")
    (tmp / "bad.json").write_bytes(b"\x00\xff")
    (tmp / "req.yaml").write_text("model: 123\n")
    (tmp / "req2.yaml").write_text("model: qwen2-7b\ndatset-tokens: 1M\n")
    m = ["--model", "qwen2-7b", "--gpu", "a10"]
    d = ["plan", "--model", "qwen2-7b", "--dataset-tokens", "1M"]
    return [
        ["estimate", *m, "--method", "lorra"], ["estimate", *m, "--seq-len", "abc"], ["estimate", *m, "--seq-len", "0"],
        ["estimate", *m, "--seq-len", "1000000"], ["estimate", *m, "--micro-batch", "1.5"],
        ["estimate", *m, "--precision", "fp64"], ["estimate", "--model", "qwen2-7b", "--gpu", "zzz"],
        ["estimate", "--model", "qwenn2-7b", "--gpu", "a10"], ["estimate", *m, "--zero", "7"],
        ["estimate", *m, "--fsdp", "x"], ["estimate", *m, "--zero", "2", "--fsdp", "full_shard"],
        ["estimate", *m, "--offload", "optimizer"], ["estimate", *m, "--gpus", "0"],
        ["estimate", *m, "--network-gbps", "-1"], ["estimate", *m, "--set", "matmul_efficiency=nan"],
        ["estimate", *m, "--set", "foo=1"], ["estimate", *m, "--set", "matmul_efficiency"],
        ["estimate", *m, "--lora-targets", ","], ["estimate", *m, "--modules-to-save", "xx"],
        ["estimate", *m, "--optimizer-in-backward", "--grad-accum", "2"],
        ["estimate", *m, "--paged-optimizer", "--optimizer", "sgd"],
        ["estimate", "--model", str(tmp / "bad.json"), "--gpu", "a10"], ["estimate", "--model", "qwen2-7b"],
        ["estimate", *m, "--calibration", str(tmp / "bad.json")], ["estimate", *m, "--instance", "ecs.zzz"],
        ["estimate", *m, "--modle", "x"],
        ["plan", "--model", "qwen2-7b"], [*d[:-1], "0.5"], [*d[:-1], "nan"], [*d, "--region", "mars"],
        [*d, "--provider", "all"], [*d, "--provider", "moon"], [*d, "--epochs", "5000"], [*d, "--deadline", "soon"],
        ["plan", str(tmp / "req.yaml")], ["plan", str(tmp / "req2.yaml")], ["plan", str(tmp / "nofile.yaml")],
        [*d, "--out", str(tmp / "file")], [*d, "--global-batch", "8", "--global-batch-tokens", "9"],
        [*d, "--max-oom-risk", "2"], [*d, "--gpu", "zzz"],
        ["generate", "--plan", str(tmp / "nofile.json"), "--out", str(tmp / "g")],
        ["generate", "--plan", str(tmp / "bad.json"), "--out", str(tmp / "g")], ["generate", "--out", str(tmp / "g")],
        ["generate", *m, "--method", "full", "--out", str(tmp / "g2")],
        ["generate", *m, "--method", "lora", "--out", str(tmp / "g3"), "--target", "moon"],
        ["compare", "--model", "qwen2-7b", "--gpu", "a10,zzz"], ["trace", "--model", "zzz"],
        ["instances", "--gpu", "zzz"], ["instances", "--provider", "moon"],
    ]


def test_bad_input_errors_are_chinese_under_zh(run_cli, tmp_path):
    """Every bad input above: exit 2, one line, and under --lang zh that line is Chinese (no English sentence)."""
    from trainfit.i18n.errors import FALLBACK_ZH

    english = []
    for argv in _bad_inputs(tmp_path):
        code, out, err = run_cli(*argv, "--lang", "zh")
        assert code == 2, (argv, err)
        line = err.strip().splitlines()[-1]
        assert len(err.strip().splitlines()) == 1, err
        message = line.removeprefix("trainfit: error: ")
        # a shape no pattern knows would come out as FALLBACK_ZH + the English detail: each of these must be known
        if message.startswith(FALLBACK_ZH) or not _CJK.search(message) \
                or re.search(r"[a-z]{3,} [a-z]{3,} [a-z]{3,} [a-z]{3,}", message):
            english.append((argv, message))
    assert not english, english


# ---- trainfit generate (launch targets, --model-source, plan.json checks): every line and error in Chinese ----------

def _cjk(text: str) -> bool:
    return bool(re.search(r"[\u4e00-\u9fff]", text))


def _english_left(text: str) -> bool:
    """Three English words in a row outside quoted values, paths and commands."""
    text = re.sub(r"'[^']*'|`[^`]*`|\S*/\S*|--[\w-]+", " ", text)
    return bool(re.search(r"[A-Za-z]{4,} [A-Za-z]{4,} [A-Za-z]{4,}", text))


def test_generate_sources_raise_only_worded_errors():
    """generate's modules and its command raise errors by message key (i18n.generate), never an English sentence."""
    import inspect

    import trainfit.cli.generate
    import trainfit.generate
    from trainfit.generate import configs, docs, setup, targets

    for mod in (trainfit.cli.generate, trainfit.generate, configs, docs, setup, targets):
        src = inspect.getsource(mod)
        raw = re.findall(r"(?:SpecError|TrainfitError)\(\s*f?[\"'][^\"']*[A-Za-z]{4,} [A-Za-z]{4,}", src)
        assert not raw, (mod.__name__, raw)
        printed = re.findall(r"console\(\)\.print\(\s*f?[\"'][^\"']*[A-Za-z]{4,} [A-Za-z]{4,}", src)
        assert not printed, (mod.__name__, printed)


@pytest.fixture
def small_plan(tmp_path, run_cli):
    code, _, err = run_cli("plan", "--model", "qwen2.5-0.5b", "--method", "lora", "--dataset-tokens", "10M",
                           "--out", str(tmp_path / "p"))
    assert code == 0, err
    return tmp_path / "p" / "plan.json"


@pytest.mark.parametrize("target", ["ecs", "dlc", "pytorchjob", "skypilot", "slurm"])
def test_generate_prints_chinese(run_cli, tmp_path, small_plan, target):
    code, out, err = run_cli("generate", "--plan", str(small_plan), "--out", str(tmp_path / target), "--target",
                             target, "--lang", "zh", "--model-source", "modelscope")
    assert code == 0, err
    lines = [x for x in out.splitlines() if x.strip()]
    assert len(lines) >= 2 and all(_cjk(x) and not _english_left(x) for x in lines), lines
    readme = (tmp_path / target / "README.md").read_text()
    assert "## 模型权重" in readme and "## 主机内存" in readme


def test_generate_readme_names_shared_storage_in_chinese():
    from test_generate import _setup

    from trainfit.generate.docs import readme

    for target in ("ecs", "dlc", "pytorchjob", "skypilot", "slurm"):
        text = readme(_setup("qwen2-7b", "a10", 1, 2, "ddp", "lora"), "zh", target)
        line = next(x for x in text.splitlines() if x.startswith("多节点检查点"))
        assert not _english_left(line), line


def _plan_variant(small_plan, tmp_path, edit):
    import json

    doc = edit(json.loads(small_plan.read_text()))
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _drop(doc, *keys):
    target = doc
    for k in keys[:-1]:
        target = target[k]
    target.pop(keys[-1])
    return doc


@pytest.mark.parametrize("case", [
    "no_input", "plan_and_model", "nofit", "out_not_empty", "bad_image", "local_no_path", "path_control",
    "plan_missing", "plan_not_object", "plan_version", "plan_key_missing", "plan_unknown_key", "plan_unknown_close",
    "no_strategy", "no_hf_config", "data_missing"])
def test_generate_errors_in_chinese(run_cli, tmp_path, small_plan, case):
    plan = str(small_plan)
    edits = {
        "plan_not_object": lambda d: [1], "plan_version": lambda d: {**d, "trainfit_plan_version": 9},
        "plan_key_missing": lambda d: _drop(d, "workload"), "plan_unknown_key": lambda d: {**d, "zzz": 1},
        "plan_unknown_close": lambda d: {**d, "modell": 1}, "no_strategy": lambda d: _drop(d, "choice", "strategy"),
        "no_hf_config": lambda d: _drop(d, "model", "hf_config")}
    if case in edits:  # one edited plan.json per case
        plan = _plan_variant(small_plan, tmp_path, edits[case])
    argv = {
        "no_input": [],
        "plan_and_model": ["--plan", plan, "--model", "gpt2"],
        "nofit": ["--model", "llama-3-70b", "--gpu", "a10"],
        "out_not_empty": ["--plan", plan],
        "bad_image": ["--plan", plan, "--target", "dlc", "--image", "bad image;rm"],
        "local_no_path": ["--plan", plan, "--model-source", "local"],
        "path_control": ["--plan", plan, "--model-source", "local", "--model-path", "a\x01b"],
        "plan_missing": ["--plan", str(tmp_path / "none.json")],
        "data_missing": ["--plan", plan, "--data", str(tmp_path / "none.jsonl")],
        **{name: ["--plan", plan] for name in edits},
    }[case]
    out = tmp_path / "run"
    if case == "out_not_empty":
        out.mkdir()
        (out / "x").write_text("x")
    code, _, err = run_cli("generate", *argv, "--out", str(out), "--lang", "zh")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert _cjk(err) and not _english_left(err.split("error:", 1)[-1]), err


@pytest.mark.parametrize("cases", ["data/validation/published_dev.jsonl", "data/validation/serving_dev.jsonl"])
def test_validate_speaks_chinese(run_cli, cases):
    """validate's frame (counts, table, coverage, OOM) and every reason a case was skipped, under --lang zh."""
    import json
    import os

    path = os.path.join(os.path.dirname(__file__), "..", cases)
    code, out, err = run_cli("validate", path, "--lang", "zh")
    assert code == 0, err
    assert "预测误差" in out and "个案例中预测了" in out and "error of the predictions" not in out
    code, js, err = run_cli("validate", path, "--json")
    # the report as the command renders it (its sentences are sentences of the message table, worded in each
    # language from the table; the JSON carries their English, unchanged)
    from trainfit.catalog.efficiency import load_efficiencies
    from trainfit.serving.validate import is_serving
    from trainfit.serving.validate import validate as validate_serving
    from trainfit.validate import load_cases, validate

    all_cases = load_cases([path])
    serving = [c for c in all_cases if is_serving(c)]
    doc = validate([c for c in all_cases if not is_serving(c)], load_efficiencies()).to_dict()
    doc["serving"] = validate_serving(serving) if serving else None
    assert json.loads(json.dumps(doc["skipped"])) == json.loads(js)["skipped"]
    skipped = dict(doc.get("skipped") or {}, **((doc.get("serving") or {}).get("skipped") or {}))
    missing = [r for r in skipped if not _CJK.search(localize(r, "zh"))]
    assert not missing, missing
    # every note under the report and every reason a value was excluded (power limit, above the peak, below the
    # resident states, an impossible TTFT), as printed: Chinese where the printed line is
    parts = [doc] + ([doc["serving"]] if isinstance(doc.get("serving"), dict) else [])
    sentences = [n for d in parts for n in d.get("notes") or []] + \
        [e["reason"] for d in parts for e in d.get("excluded") or []]
    assert sentences and any(e.get("excluded") for e in parts)
    untranslated = [x for x in sentences if not has_chinese(x)]
    assert not untranslated, untranslated


# ---- trainfit trace: every note beside the traced step in Chinese ----------------------------------------------------

_TINY_MLA_MOE = {  # MLA + routed and shared experts: the routing and SDPA-kernel notes
    "model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
    "num_hidden_layers": 2, "first_k_dense_replace": 1, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "n_shared_experts": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 16,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "vocab_size": 256, "n_group": 1, "topk_group": 1}
_TINY_MULTIMODAL = {  # a text_config inside a multimodal config, with dropout: the text-model-only and dropout notes
    "model_type": "gemma3", "mm_tokens_per_image": 4,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256,
                    "sliding_window": 16, "attention_dropout": 0.1},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32, "intermediate_size": 64,
                      "num_hidden_layers": 1, "num_attention_heads": 2, "image_size": 28, "patch_size": 14}}


def test_trace_notes_are_chinese(run_cli, tmp_path, monkeypatch):
    """`trace --lang zh` prints every note in Chinese (and the HTML report carries the same lines): QLoRA and
    FlashAttention stand-ins, MoE routing, MLA's SDPA kernel, a multimodal config's text model, CPU dropout masks,
    paged optimizer states the trace keeps on the device, and the notes every trace carries."""
    import html
    import json

    pytest.importorskip("torch")
    monkeypatch.setenv("COLUMNS", "1000")  # one note, one line
    configs = {}
    for name, cfg in (("mla_moe", _TINY_MLA_MOE), ("multimodal", _TINY_MULTIMODAL)):
        configs[name] = str(tmp_path / f"{name}.json")
        (tmp_path / f"{name}.json").write_text(json.dumps(cfg))
    runs = [("--model", "tiny-llama", "--method", "qlora", "--attention", "flash", "--html", str(tmp_path / "r.html")),
            ("--model", configs["mla_moe"], "--method", "full"),
            ("--model", configs["multimodal"], "--method", "full", "--paged-optimizer")]
    seen = set()
    for argv in runs:
        code, out, err = run_cli("trace", *argv, "--seq-len", "32", "--lang", "zh")
        assert code == 0, err
        notes = [line[2:].strip() for line in out.splitlines() if line.startswith("- ")]
        assert notes, out
        english = [n for n in notes if not _cjk(n) or _english_left(n)]
        assert not english, english
        assert not _english_left(out), out
        seen.update(notes)
        if "--html" in argv:
            page = html.unescape((tmp_path / "r.html").read_text(encoding="utf-8"))
            assert all(n in page for n in notes), notes
    assert len(seen) >= 10, seen  # the notes of the three setups, each once


def test_a_sentence_of_the_table_renders_in_each_language_from_the_table(monkeypatch):
    """trainfit.i18n.say: the English text is the str (printing, joining and JSON as before); Chinese comes from the
    table's own entry, with a sentence inside it in the same language; it survives pickling; an unknown key fails
    where the sentence is made."""
    import json
    import pickle

    from trainfit.i18n import Msg, say

    monkeypatch.setitem(_MESSAGES, "x_outer", {"en": "{n} GPUs set aside: {why}", "zh": "{n} 张 GPU 被排除：{why}"})
    sentence = say("x_outer", n=2, why=say("rj_no_price"))
    assert isinstance(sentence, Msg) and sentence == "2 GPUs set aside: no price in the catalog"
    assert json.dumps({"s": sentence}) == '{"s": "2 GPUs set aside: no price in the catalog"}'
    assert localize(sentence, "zh") == "2 张 GPU 被排除：目录中无价格" == sentence.render("zh")
    assert localize(sentence, "en") == sentence
    assert pickle.loads(pickle.dumps(sentence)).render("zh") == "2 张 GPU 被排除：目录中无价格"
    with pytest.raises(KeyError):
        say("x_no_such_key")


def test_plan_says_where_it_wrote_in_chinese(run_cli, tmp_path):
    code, out, err = run_cli("plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--gpu",
                             "a10", "--lang", "zh", "--out", str(tmp_path / "p"))
    assert code == 0, err
    flat = "".join(out.split())  # the terminal wraps a long path
    assert f"计划已写入{tmp_path / 'p'}" in flat and "planwritten" not in flat


def test_no_language_is_made_by_rewriting_english():
    """Issue 38: every sentence is a table entry rendered in the asked language; no module of trainfit.i18n matches
    English text with patterns to produce another language (the regex layers over the estimator's sentences and the
    errors are gone)."""
    import ast
    from pathlib import Path

    import trainfit.i18n as i18n

    folder = Path(i18n.__file__).parent
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "re" not in imported, f"{path.name} imports re"
    from trainfit.i18n.errors import FALLBACK_ZH, localize_error
    from trainfit.i18n.notes import localize

    assert localize("an English sentence", "zh") == "an English sentence"
    assert localize_error("an English sentence", "zh") == FALLBACK_ZH + "an English sentence"
