"""Values typed as people write them (issue 33, items 8-9): durations, counts, money, token lengths, one dataset size,
the cap on tokens, --lang spellings (after or before the command) and the LLaMA-Factory / ms-swift stacks. Each value
is checked where the CLI, a request file and the parsers read it, and each refusal is one line in English and Chinese."""

import json

import pytest

from trainfit.cli.common import normalize_lang
from trainfit.errors import SpecError
from trainfit.i18n.errors import FALLBACK_ZH, localize_error
from trainfit.units import DAY, HOUR, parse_count, parse_duration, parse_money, parse_seq_len

# a small plan: one GPU type, one node, one recommendation
SMALL = ("--model", "qwen2.5-0.5b", "--method", "lora", "--gpu", "a10", "--max-nodes", "1", "--top", "1")


def _plan(plan_json, *argv, lang=()):
    return plan_json(*SMALL, *argv, *lang)


def _refused(run_cli, *argv, needle: str, zh_needle: str):
    """Exit code 2 and one line, in English (with `needle`) and in Chinese (with `zh_needle`, no English fallback)."""
    code, out, err = run_cli(*argv)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err
    code, out, err = run_cli(*argv, "--lang", "zh")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert zh_needle in err and FALLBACK_ZH not in err, err
    return err


# ---- 1. durations (--deadline) --------------------------------------------------------------------------------

@pytest.mark.parametrize("text,hours", [
    ("2 days", 48), ("2 day", 48), ("48 hours", 48), ("48 hrs", 48), ("90 minutes", 1.5), ("2天", 48),
    ("48小时", 48), ("90分钟", 1.5), ("1.5周", 252), ("2d", 48), ("48h", 48), ("48", 48), (48, 48), ("7d", 168),
    ("90m", 1.5), ("1d12h", 36), ("1天12小时", 36), ("2h30m", 2.5), ("1 day, 12 hours", 36), ("48个小时", 48),
])
def test_durations(text, hours):
    assert parse_duration(text) == pytest.approx(hours * HOUR)


@pytest.mark.parametrize("text", ["soon", "1d12", "2个月", "", "-1h", "h", "1e400h"])
def test_bad_durations(text):
    with pytest.raises(SpecError, match="not a duration"):
        parse_duration(text)


@pytest.mark.parametrize("text,hours", [("2天", 48), ("48 hours", 48), ("1d12h", 36), ("1.5周", 252)])
def test_deadline_flag(run_cli, text, hours, plan_json):
    assert _plan(plan_json, "--dataset-tokens", "1M", "--deadline", text)["request"]["deadline"] == hours * HOUR


def test_request_file_and_bad_deadline(run_cli, tmp_path):
    path = tmp_path / "req.yaml"
    path.write_text("model: qwen2.5-0.5b\nmethod: lora\ngpu: a10\nmax-nodes: 1\ntop: 1\ndataset-tokens: 5000万\n"
                    "deadline: 2 days\nbudget: 3千元\nseq-len: 1k\n", encoding="utf-8")
    code, out, err = run_cli("plan", str(path), "--json")
    assert code == 0, err
    req = json.loads(out)["request"]
    assert (req["dataset_tokens"], req["deadline"], req["budget"], req["currency"], req["seq_len"]) == (
        5e7, 2 * DAY, 3000, "CNY", 1024)
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1M", "--deadline", "soon", needle="not a duration",
             zh_needle="不是时长")


# ---- 2. counts (--dataset-tokens, --samples) ----------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    ("200 million", 2e8), ("1.5 billion", 1.5e9), ("50 thousand", 5e4), ("200M", 2e8), ("2亿", 2e8),
    ("5000万", 5e7), ("3千", 3e3), ("3k", 3e3), ("1,000,000", 1e6), ("1e9", 1e9), ("2.5亿", 2.5e8),
    ("1.5B", 1.5e9), ("3 millions", 3e6), (1e9, 1e9), (200, 200),
])
def test_counts(text, value):
    assert parse_count(text) == value


@pytest.mark.parametrize("text", ["lots", "1,0000", "k", "5s", "nan", "1e400", "2 亿亿", True])
def test_bad_counts(text):
    with pytest.raises(SpecError, match="not a count"):
        parse_count(text)


def test_count_flags(run_cli, plan_json):
    assert _plan(plan_json, "--dataset-tokens", "2亿")["request"]["dataset_tokens"] == 2e8
    assert _plan(plan_json, "--dataset-tokens", "1,000,000")["request"]["dataset_tokens"] == 1e6
    req = _plan(plan_json, "--samples", "5万", "--avg-len", "900")["request"]
    assert (req["samples"], req["avg_len"]) == (5e4, 900)
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "lots", needle="not a count", zh_needle="不是数量")


# ---- 3. money (--budget) -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,value,currency", [
    ("3000元", 3000, "CNY"), ("¥3,000", 3000, "CNY"), ("￥3000", 3000, "CNY"), ("3000 CNY", 3000, "CNY"),
    ("3000RMB", 3000, "CNY"), ("$500", 500, "USD"), ("500 USD", 500, "USD"), ("3千元", 3000, "CNY"),
    ("1万元", 10000, "CNY"), ("3000", 3000, None), ("3,000", 3000, None), (3000, 3000, None), ("US$500", 500, "USD"),
])
def test_money(text, value, currency):
    assert parse_money(text) == (value, currency)


@pytest.mark.parametrize("text", ["¥500 USD", "元", "lots of money", "$"])
def test_bad_money(text):
    with pytest.raises(SpecError, match="not an amount of money"):
        parse_money(text)


def test_budget_flag_sets_or_checks_the_currency(run_cli, plan_json):
    req = _plan(plan_json, "--dataset-tokens", "1M", "--budget", "1万元")["request"]
    assert (req["budget"], req["currency"]) == (10000, "CNY")
    req = _plan(plan_json, "--dataset-tokens", "1M", "--budget", "¥3,000", "--currency", "rmb")["request"]
    assert (req["budget"], req["currency"]) == (3000, "CNY")
    # a currency in the value that the provider does not price in: converted with --usd-cny, else refused
    req = _plan(plan_json, "--dataset-tokens", "1M", "--budget", "$500", "--usd-cny", "7.1")["request"]
    assert (req["budget"], req["currency"]) == (500, "USD")
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1M", "--budget", "$500", needle="alibaba prices in CNY",
             zh_needle="标价")
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1M", "--budget", "3000元", "--currency", "USD",
             needle="give one currency", zh_needle="只用一种货币")
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1M", "--budget", "¥5 USD", needle="not an amount of money",
             zh_needle="不是金额")


# ---- 4. token lengths (--seq-len: k is 1024; --avg-len: a mean, k is 1000) ------------------------------------

@pytest.mark.parametrize("text,value", [("2k", 2048), ("4k", 4096), ("8K", 8192), ("32k", 32768), ("128k", 131072),
                                        ("2048", 2048), ("2,048", 2048), ("1M", 1048576), ("0.5k", 512)])
def test_seq_len_k_is_1024(text, value):
    assert parse_seq_len(text) == value


def test_seq_len_flags(run_cli, plan_json):
    assert _plan(plan_json, "--dataset-tokens", "1M", "--seq-len", "4k")["request"]["seq_len"] == 4096
    code, out, err = run_cli("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora", "--seq-len",
                             "8k", "--json")
    assert code == 0, err
    assert json.loads(out)["config"]["seq_len"] == 8192
    req = _plan(plan_json, "--samples", "1000", "--avg-len", "1.5k")["request"]  # a mean length is a count
    assert req["avg_len"] == 1500
    _refused(run_cli, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--seq-len", "4 kilo",
             needle="must be a number of tokens", zh_needle="必须是 token 数")
    _refused(run_cli, "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--seq-len", "0.3k",
             needle="must be an integer", zh_needle="必须是整数")


# ---- 5. one dataset size ---------------------------------------------------------------------------------------

def test_samples_with_dataset_tokens(run_cli, plan_json):
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "200M", "--samples", "50k", needle="give one",
             zh_needle="请只给一个")
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "200M", "--samples", "50k", "--avg-len", "900",
             needle="disagree", zh_needle="不一致")
    req = _plan(plan_json, "--dataset-tokens", "45M", "--samples", "50k", "--avg-len", "900")["request"]  # they agree
    assert (req["dataset_tokens"], req["samples"]) == (4.5e7, 5e4)


# ---- 6. more tokens than any published training run -------------------------------------------------------------

def test_tokens_above_any_published_run_are_refused(run_cli, plan_json):
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1e15", needle="more than any published training run",
             zh_needle="超过任何已公开的训练")
    _refused(run_cli, "plan", *SMALL, "--dataset-tokens", "1e13", "--epochs", "20", needle="x --epochs = 2e+14",
             zh_needle="最多 1e+14")
    _refused(run_cli, "plan", *SMALL, "--samples", "1e12", "--avg-len", "1000", needle="--samples x --avg-len",
             zh_needle="最多 1e+14")
    assert _plan(plan_json, "--dataset-tokens", "36T")["request"]["dataset_tokens"] == 3.6e13  # the largest published


# ---- 7. --lang ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,lang", [
    ("zh", "zh"), ("zh-CN", "zh"), ("zh_CN", "zh"), ("zh-Hans", "zh"), ("zh-hans", "zh"), ("cn", "zh"),
    ("chinese", "zh"), ("Chinese", "zh"), ("中文", "zh"), ("ZH_cn.UTF-8", "zh"), ("en", "en"), ("en-US", "en"),
    ("en_US", "en"), ("english", "en"), ("ENGLISH", "en"), ("fr", None), ("chinse", None), ("", None),
])
def test_lang_spellings(text, lang):
    assert normalize_lang(text) == lang


def test_lang_before_and_after_the_command(run_cli):
    code, out, err = run_cli("--lang", "zh", "plan", *SMALL, "--dataset-tokens", "1M")
    assert code == 0, err
    assert "推荐方案" in out
    code, out, err = run_cli("--lang", "zh_CN", "estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10")
    assert code == 0 and "参数量" in out, err
    code, out, err = run_cli("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--lang", "Chinese")
    assert code == 0 and "参数量" in out, err
    code, out, err = run_cli("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--lang", "en-US")
    assert code == 0 and "parameters" in out, err
    # an error in the language asked for, whichever spelling and place
    code, out, err = run_cli("--lang", "中文", "plan", *SMALL, "--dataset-tokens", "lots")
    assert code == 2 and "不是数量" in err, err
    code, out, err = run_cli("plan", *SMALL, "--dataset-tokens", "lots", "--lang=zh-Hans")
    assert code == 2 and "不是数量" in err, err


def test_unknown_lang_is_one_line_with_did_you_mean(run_cli):
    for argv in (("--lang", "chinse", "plan", *SMALL, "--dataset-tokens", "1M"),
                 ("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--lang", "chinse")):
        code, out, err = run_cli(*argv)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "--lang must be en or zh" in err and "did you mean: chinese" in err, err
    from trainfit.cli.common import check_lang
    from trainfit.errors import SpecError, sentence_of

    with pytest.raises(SpecError) as info:
        check_lang("fr")
    assert str(info.value) == ("--lang must be en or zh (or another name of either: zh-CN, zh-Hans, chinese, 中文, "
                               "en-US, english), got 'fr'")
    assert localize_error(sentence_of(info.value), "zh").startswith("--lang 必须是 en 或 zh")


# ---- 8. LLaMA-Factory and ms-swift ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,name", [("llama-factory", "llama-factory"), ("LLaMA-Factory", "llama-factory"),
                                       ("llamafactory", "llama-factory"), ("ms-swift", "ms-swift"),
                                       ("swift", "ms-swift"), ("ms_swift", "ms-swift")])
def test_llama_factory_and_ms_swift(run_cli, text, name):
    code, out, err = run_cli("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora",
                             "--framework", text, "--json")
    assert code == 0, err
    assert json.loads(out)["uncertainty"]["framework"] == name


def test_llama_factory_and_ms_swift_take_hf_trainers_defaults():
    """hf-trainer's defaults where their code does the same; where it does not, their own (each read from their code,
    the basis in frameworks.yaml; tests/test_stack_dtypes.py holds the dtypes)."""
    from trainfit.catalog.frameworks import framework_defaults

    stacks = framework_defaults()
    for name in ("llama-factory", "ms-swift"):
        own = stacks[name]
        assert "hf-trainer" in own["basis"] and ("not yet fitted" in own["basis"] or "is fitted yet" in own["basis"])
        assert own["param_dtype"] == stacks["hf-trainer"]["param_dtype"]  # LoRA adapters in fp32 under autocast
    # ms-swift: PEFT's prepare_model_for_kbit_training as hf-trainer; a full fine-tune kept in bf16
    assert stacks["ms-swift"]["kbit_fp32_upcast"] == stacks["hf-trainer"]["kbit_fp32_upcast"]
    assert stacks["ms-swift"]["param_dtype_full"] == "bf16" and "param_dtype_full" not in stacks["llama-factory"]
    # LLaMA-Factory's QLoRA never calls prepare_model_for_kbit_training: its 16-bit parameters stay 16-bit
    assert stacks["llama-factory"]["kbit_fp32_upcast"] is False
    # read from their code: ms-swift's LoRA dropout is 0.05 (tuner_args.py), LLaMA-Factory's PEFT's 0
    assert stacks["ms-swift"]["lora_dropout"] == 0.05 and "lora_dropout" not in stacks["llama-factory"]


def test_ms_swift_lora_carries_its_dropout(run_cli):
    """--framework ms-swift: LoRA with dropout 0.05 (PEFT keeps a mask and a dropped input copy per adapted module):
    more memory than the same job under hf-trainer's dropout 0."""
    mem = {}
    for stack in ("hf-trainer", "ms-swift"):
        code, out, err = run_cli("estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora",
                                 "--framework", stack, "--json")
        assert code == 0, err
        mem[stack] = json.loads(out)["memory_gib"]["total"]
    assert mem["ms-swift"] > mem["hf-trainer"]
