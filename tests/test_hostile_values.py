"""Issue 32, rule 4: every value checked by one schema, finite numbers only in and out, gates that fail on empty
input. Each hostile value below once crashed (exit 70) or was accepted with a wrong answer; now each gives one line
and exit 2 (or, for a gate, exit 1 with the reason), in English and Chinese."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / "data" / "validation" / "published_dev.jsonl"

LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
         "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128}
CONFIGS = [
    # a zero KV-head count went to the generic reader and divided by zero there (exit 70)
    ({"model_type": "falcon", "hidden_size": 64, "num_attention_heads": 4, "num_kv_heads": 0,
      "new_decoder_architecture": True, "num_hidden_layers": 2, "vocab_size": 100},
     "num_kv_heads = 0 is not a plausible size", "不是合理的尺寸"),
    ({"model_type": "chatglm", "hidden_size": 64, "num_attention_heads": 4, "multi_query_group_num": 0,
      "multi_query_attention": True, "num_layers": 2, "padded_vocab_size": 100, "ffn_hidden_size": 128,
      "kv_channels": 16, "seq_length": 512}, "multi_query_group_num = 0", "不是合理的尺寸"),
    ({**LLAMA, "num_key_value_heads": -2}, "num_key_value_heads = -2", "不是合理的尺寸"),
    ({**LLAMA, "model_type": "mixtral", "num_local_experts": 2, "num_experts_per_tok": 4},
     "routed to 4 experts but the model has 2", "每个 token 路由到 4 个专家"),
    ({**LLAMA, "tie_word_embeddings": "no"}, "tie_word_embeddings = 'no' must be true or false", "必须是 true 或 false"),
    ({**LLAMA, "type_vocab_size": 10**12}, "type_vocab_size", "不是合理的尺寸"),
    ({"model_type": "dbrx", "d_model": 64, "n_heads": 4, "n_layers": 2, "vocab_size": 100, "ffn_config": "mptglu",
      "attn_config": {}}, "ffn_config must be an object", "必须是对象"),
]


@pytest.mark.parametrize("cfg,en,zh", CONFIGS, ids=[c[1].split()[0] for c in CONFIGS])
def test_a_broken_config_json_is_one_line(run_cli, tmp_path, cfg, en, zh):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    code, out, err = run_cli("estimate", "--model", str(path), "--gpu", "a10")
    assert code == 2 and en in err and len(err.strip().splitlines()) == 1, err
    code, out, err = run_cli("estimate", "--model", str(path), "--gpu", "a10", "--lang", "zh")
    assert code == 2 and zh in err, err


def test_the_shipped_presets_pass_the_config_checks():
    from trainfit.catalog.models import all_models, check_config_sizes

    for name, preset in all_models().items():
        check_config_sizes(preset.hf_config, name)  # raises on a preset the checks would refuse


@pytest.mark.parametrize("argv,needle", [
    (("serving", "--model", "qwen2-7b", "--target-tokens-per-s", "nan"), "--target-tokens-per-s must be a finite"),
    (("serving", "--model", "qwen2-7b", "--target-tokens-per-s", "500", "--max-tpot-ms", "nan"), "--max-tpot-ms"),
    (("serving", "--model", "qwen2-7b", "--target-tokens-per-s", "500", "--max-tpot-ms", "-3"), "positive"),
    (("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--network-gbps", "inf"), "finite"),
    (("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--set", "attention_efficiency=1e-300"),
     "outside its valid range [0.001, 1]"),
])
def test_numbers_that_are_not_finite_or_not_positive_are_refused(run_cli, argv, needle):
    code, out, err = run_cli(*argv)
    assert code == 2 and needle in err, err
    code, out, err = run_cli(*argv, "--lang", "zh")
    assert code == 2 and ("必须" in err or "超出" in err), err


def test_json_output_is_never_nan(run_cli, monkeypatch):
    from trainfit.cli import common

    with pytest.raises(Exception, match="not finite"):
        common.print_json({"tokens_per_s": float("nan")})
    code, out, err = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--json")
    assert code == 0 and "NaN" not in out and "Infinity" not in out
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))


def test_an_internal_error_says_exit_code_70_in_json_too(run_cli, monkeypatch):
    import trainfit.cli.estimate as estimate

    def boom(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(estimate, "run", boom)
    code, out, err = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--json")
    assert code == 70 and json.loads(out)["error"]["exit_code"] == 70 and "internal error" in err


def test_a_gate_on_an_empty_file_fails(run_cli, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    for gate in (("--min-predicted", "0.9"), ("--max-mape-throughput", "0.2"), ("--max-mape-memory", "0.2")):
        code, out, err = run_cli("validate", str(empty), *gate)
        assert code == 1 and "holds nothing" in err + out, (gate, err, out)
    code, out, err = run_cli("validate", str(empty))  # no gate: a report of nothing, not a failure
    assert code == 0, err


def test_calibrate_refuses_to_fit_nothing(run_cli, tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    out_file = tmp_path / "c.yaml"
    code, out, err = run_cli("calibrate", str(empty), "--out", str(out_file))
    assert code == 2 and "no training case to fit" in err and not out_file.exists(), err


def _dev(n: int) -> list[dict]:
    from trainfit.validate import load_cases, measured_values

    cases = [c for c in load_cases([str(DEV)]) if measured_values(c).get("tokens_per_s_per_gpu")]
    return cases[:n]


def test_duplicate_ids_count_once_and_impossible_measurements_are_skipped():
    from trainfit.catalog.efficiency import Efficiencies
    from trainfit.validate import validate

    eff = Efficiencies.default()
    cases = _dev(3)
    base = validate(cases, eff)
    twice = validate(cases + [json.loads(json.dumps(cases[0]))], eff)
    assert len(twice.rows) == len(base.rows) and twice.skipped["duplicate case id (the first is counted)"] == 1
    odd = []
    for key, value in (("mfu", 5.0), ("tokens_per_s_per_gpu", 1e-300), ("peak_memory_gib", 1e9)):
        case = json.loads(json.dumps(cases[1]))
        case["id"] += f"-{key}"
        case["measured"][key] = value
        odd.append(case)
    report = validate(cases + odd, eff)
    assert len(report.rows) == len(base.rows)
    assert sum(v for k, v in report.skipped.items() if k.startswith("implausible measured")) == 3
    doc = report.to_dict()
    assert doc["throughput"]["mape"] == base.to_dict()["throughput"]["mape"]  # 1e-300 tokens/s weighs nothing


def test_user_text_in_generated_serving_files_is_data(run_cli, tmp_path):
    """A model name holding `$MODEL_PATH`, HTML, a newline and a right-to-left override (from a config file's name):
    serve.sh passes it to the engine as one literal word (the shell expands only the model-path word), and README.md
    shows it escaped, on one line, without the override."""
    import shlex
    import subprocess

    name = 'x$MODEL_PATH<b>"q\'\n\u202eevil'
    cfg = tmp_path / f"{name}.json"
    cfg.write_text(json.dumps({**LLAMA, "hidden_size": 256, "intermediate_size": 512, "max_position_embeddings": 4096}))
    out = tmp_path / "serve"
    code, stdout, err = run_cli("generate", "--serving", "--model", str(cfg), "--gpu", "a10", "--out", str(out),
                                "--json")
    assert code == 0, err
    script = (out / "serve.sh").read_text()
    assert subprocess.run(["bash", "-n", str(out / "serve.sh")], capture_output=True).returncode == 0, script
    line = script[script.index("\nexec ") + 1:]  # the quoted name may hold its newline
    words = shlex.split(line)
    assert words[words.index("--served-model-name") + 1] == name  # one word, "$MODEL_PATH" in it not expanded
    assert words[3] == "$MODEL_PATH" and 'serve "$MODEL_PATH"' in line  # the one word the shell expands
    readme = (out / "README.md").read_text()
    title = readme.splitlines()[0]
    assert "<b>" not in readme and "\u202e" not in readme and "\\<b\\>" in title and "evil" in title
    printed = json.loads(stdout)["command"]
    assert name in printed  # the JSON keeps the exact words


@pytest.mark.parametrize("command", ["estimate", "compare"])
def test_rich_markup_in_a_model_name_is_shown_literally(run_cli, tmp_path, command):
    """A model folder named `x[link=https:evil.example]y` printed a terminal hyperlink in compare's table title (rich
    parsed the name as markup); the name is text, shown as it is."""
    folder = tmp_path / "x[link=https:evil.example]y[bold]"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    code, out, err = run_cli(command, "--model", str(folder), "--gpu", "a10")
    assert code == 0, err
    assert "x[link=https:evil.example]y[bold]" in "".join(out.split()), out[:400]  # wrapped lines joined


def test_the_printed_serving_command_is_shell_quoted(run_cli, tmp_path):
    import shlex

    out = tmp_path / "serve"
    path = "/runs/my model; rm -rf ~"
    code, stdout, err = run_cli("generate", "--serving", "--model", "qwen2-7b", "--gpu", "a10", "--model-path", path,
                                "--out", str(out))
    assert code == 0, err
    line = next(x for x in stdout.splitlines() if x.startswith("vllm serve"))
    assert shlex.split(line)[2] == path


def test_a_hand_edited_plan_json_is_checked(run_cli, tmp_path):
    code, _, err = run_cli("plan", "--model", "qwen2-7b", "--dataset-tokens", "10M", "--epochs", "1",
                           "--out", str(tmp_path / "p"))
    assert code == 0, err
    good = json.loads((tmp_path / "p" / "plan.json").read_text())
    for edit, needle in ((lambda c: c.update(fits="no"), "choice.fits"),
                         (lambda c: c["strategy"].update(global_batch=7), "is not micro_batch")):
        doc = json.loads(json.dumps(good))
        edit(doc["choice"])
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(doc))
        code, _, err = run_cli("generate", "--plan", str(bad), "--out", str(tmp_path / "g"))
        assert code == 2 and needle in err and not (tmp_path / "g").exists(), err


def test_lora_targets_in_a_request_file_are_names(run_cli, tmp_path):
    req = tmp_path / "r.yaml"
    req.write_text("model: qwen2-7b\ndataset_tokens: 10M\nepochs: 1\nmethod: lora\nlora_targets: [[q_proj]]\n")
    code, _, err = run_cli("plan", str(req))
    assert code == 2 and "lora-targets must be text" in err, err


def test_an_ascii_terminal_gets_the_answer_not_a_crash(tmp_path):
    import os
    import sys

    from trainfit import _proc

    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    out = _proc.run([sys.executable, "-m", "trainfit", "estimate", "--model", "qwen2-7b", "--gpu", "a10", "--lang",
                     "zh"], timeout=120, env=env)
    assert out.returncode == 0 and "\\u" in out.stdout and "internal error" not in out.stderr, out.stderr[-500:]


def test_the_structure_cache_stays_bounded_from_the_cli(monkeypatch, tmp_path):
    """Every config read adds a cache file (catalog/generic.py): each write prunes the folder to its caps, oldest
    first, so many distinct configs never fill the disk."""
    from trainfit.catalog import generic
    from trainfit.catalog.models import spec_from_config

    pytest.importorskip("transformers")
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(generic, "prune_cache",
                        lambda folder=None, _real=generic.prune_cache: _real(3, 10**9, folder))
    generic._read_cached.cache_clear()
    base = {"model_type": "opt", "hidden_size": 64, "num_attention_heads": 4, "ffn_dim": 128, "num_hidden_layers": 2,
            "vocab_size": 100, "max_position_embeddings": 64, "word_embed_proj_dim": 64}
    for n in range(6):
        spec_from_config({**base, "vocab_size": 100 + n})
    files = list((tmp_path / "structures").glob("*.json"))
    assert 1 <= len(files) <= 3, files
    generic._read_cached.cache_clear()
