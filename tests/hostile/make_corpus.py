"""Writes the hostile-input corpus (issue 32) into this folder: one file per hostile input, and cases.json, which says
for each the command it is given to and what must come out. Run it again after editing the list below
(`python tests/hostile/make_corpus.py`); tests/test_hostile_corpus.py runs every case and measures each one's peak
memory and time. Files too large to commit (sizes past the caps) are described in cases.json ("make") and created
by the test as sparse files or streamed text."""

from __future__ import annotations

import json
import os
import shutil

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "files")

_BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f'{c}: &{c} [{",".join([f"*{p}"] * 9)}]\n' for p, c in zip("abcdefgh", "bcdefghi"))
LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 4096}
PLAN = {"trainfit_plan_version": 1,
        "model": {"name": "tiny-llama", "source": "tiny-llama", "hf_config": LLAMA},
        "workload": {"task": "sft", "seq_len": 512, "global_batch": 8, "processed_tokens": 1e6, "epochs": 1.0},
        "choice": {"rank": 1, "provider": "alibaba", "instance_type": "ecs.gn7i-c8g1.2xlarge", "gpu": "a10",
                   "gpus_per_node": 1, "gpus_per_instance": 1, "nodes": 1,
                   "strategy": {"method": "lora", "task": "sft", "seq_len": 512, "micro_batch": 2, "grad_accum": 4,
                                "precision": "bf16", "param_dtype": "fp32", "optimizer": "adamw",
                                "optimizer_impl": "fused", "grad_ckpt": "full", "selective_ac": None,
                                "attention": "sdpa", "lora_rank": 16, "lora_targets": ["all-linear"],
                                "lora_dropout": 0.0, "modules_to_save": [], "num_labels": None,
                                "optimizer_in_backward": False, "liger_kernel": False, "paged_optimizer": False,
                                "avg_len": None,
                                "variable_length": False, "padded_len": None, "expandable_segments": False,
                                "zero_stage": 0, "fsdp": None, "offload": "none", "global_batch": 8,
                                "engine": "single", "freeze_trainable_layers": None},
                   "memory_gib": 6.0, "gpu_memory_gib": 22.5, "fits": True, "tokens_per_s": 3000.0, "hours": 1.0,
                   "cost": 10.0, "currency": "CNY"},
        "alternatives": []}
PRICE_HEAD = "provider,instance_type,region,billing,price,currency,price_date\n"

CASES: list[dict] = []


def case(cid, category, argv, files=None, code=2, says=None, make=None, lang=True):
    """files: {name: text or bytes} written here; argv: '{f}' is this folder of files, '{tmp}' a fresh folder."""
    for name, body in (files or {}).items():
        path = os.path.join(FILES, name)
        mode = "wb" if isinstance(body, bytes) else "w"
        with open(path, mode, **({} if mode == "wb" else {"encoding": "utf-8", "newline": ""})) as fh:
            fh.write(body)
    CASES.append({"id": cid, "category": category, "argv": argv, "code": code, "says": says, "make": make,
                  "zh": lang})


def jdump(obj) -> str:
    return json.dumps(obj, allow_nan=True)


def plan_with(**changes):
    doc = json.loads(json.dumps(PLAN))
    for dotted, value in changes.items():
        keys = dotted.split("__")
        node = doc
        for k in keys[:-1]:
            node = node[k]
        if value is KeyError:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return jdump(doc)


def build() -> None:
    est = ["estimate", "--gpu", "a10", "--method", "lora", "--seq-len", "512"]
    # ---- YAML: request files (plan FILE) and calibration files (estimate --calibration) ------------------------------
    y = "yaml"
    case("req-alias-bomb", y, ["plan", "{f}/req_alias_bomb.yaml"], {"req_alias_bomb.yaml": _BOMB + "model: qwen2-7b\n"},
         says="aliases")
    case("cal-alias-bomb", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_alias_bomb.yaml"],
         {"cal_alias_bomb.yaml": "values:\n" + "".join(f"  {r}\n" for r in _BOMB.splitlines())}, says="aliases")
    case("req-one-anchor", y, ["plan", "{f}/req_anchor.yaml"], {"req_anchor.yaml": "model: &m qwen2-7b\n"},
         says="aliases")
    case("req-merge-key", y, ["plan", "{f}/req_merge.yaml"],
         {"req_merge.yaml": "base: &b {epochs: 1}\n<<: *b\nmodel: qwen2-7b\n"}, says="aliases")
    case("req-duplicate-key", y, ["plan", "{f}/req_dup.yaml"], {"req_dup.yaml": "model: qwen2-7b\nmodel: gpt2\n"},
         says="duplicate key")
    case("cal-duplicate-key", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_dup.yaml"],
         {"cal_dup.yaml": "values:\n  matmul_efficiency: 0.5\n  matmul_efficiency: 0.6\n"}, says="duplicate key")
    case("req-deep-flow", y, ["plan", "{f}/req_deep_flow.yaml"],
         {"req_deep_flow.yaml": "model: " + "[" * 5000 + "]" * 5000 + "\n"}, says="nested more than")
    case("req-deep-block", y, ["plan", "{f}/req_deep_block.yaml"],
         {"req_deep_block.yaml": "".join("  " * i + f"k{i}:\n" for i in range(200)) + "  " * 200 + "v\n"},
         says="nested more than")
    case("req-latin1", y, ["plan", "{f}/req_latin1.yaml"], {"req_latin1.yaml": b"model: qwen2-7b\n# caf\xe9\n"},
         says="not UTF-8")
    case("req-nul", y, ["plan", "{f}/req_nul.yaml"], {"req_nul.yaml": b"model: qwen2-7b\x00\n"}, says="NUL")
    case("req-utf16", y, ["plan", "{f}/req_utf16.yaml"], {"req_utf16.yaml": "model: qwen2-7b\n".encode("utf-16")},
         says="UTF-8")
    case("req-bom", y, ["plan", "{f}/req_bom.yaml", "--json"],
         {"req_bom.yaml": "\ufeffmodel: qwen2.5-0.5b\nmethod: lora\ndataset_tokens: 1M\nseq_len: 512\n"}, code=0)
    case("req-list", y, ["plan", "{f}/req_list.yaml"], {"req_list.yaml": "- model: qwen2-7b\n"})
    case("req-scalar", y, ["plan", "{f}/req_scalar.yaml"], {"req_scalar.yaml": "qwen2-7b\n"})
    case("req-syntax", y, ["plan", "{f}/req_syntax.yaml"], {"req_syntax.yaml": "model: [unclosed\n"},
         says="not valid YAML")
    case("req-tabs", y, ["plan", "{f}/req_tabs.yaml"], {"req_tabs.yaml": "model: qwen2-7b\njob:\n\tepochs: 1\n"})
    case("req-python-tag", y, ["plan", "{f}/req_python.yaml"],
         {"req_python.yaml": 'model: !!python/object/apply:os.system ["echo pwned"]\n'})
    case("req-binary-tag", y, ["plan", "{f}/req_binary.yaml"], {"req_binary.yaml": "model: !!binary aGVsbG8=\n"})
    case("req-long-name", y, ["plan", "{f}/req_long_name.yaml"], {"req_long_name.yaml": "dataset_tokens: 1M\nmodel: " + "q" * 200_000 + "\n"},
         says="unknown model")
    case("req-too-large", y, ["plan", "{tmp}/big.yaml"], make={"sparse": "big.yaml", "bytes": 2 << 30},
         says="more than")
    case("req-huge-int", y, ["plan", "{f}/req_huge_int.yaml"],
         {"req_huge_int.yaml": "model: qwen2-7b\ndataset_tokens: " + "9" * 400 + "\n"})
    case("req-nan", y, ["plan", "{f}/req_nan.yaml"], {"req_nan.yaml": "model: qwen2-7b\ndataset_tokens: 1M\nepochs: .nan\n"})
    case("req-inf-budget", y, ["plan", "{f}/req_inf.yaml"], {"req_inf.yaml": "model: qwen2-7b\nbudget: .inf\n"})
    case("req-nested-targets", y, ["plan", "{f}/req_targets.yaml"],
         {"req_targets.yaml": "model: qwen2-7b\nmethod: lora\nlora_targets: [[q_proj]]\n"}, says="lora-targets")
    case("req-rich-markup", y, ["plan", "{f}/req_markup.yaml"], {"req_markup.yaml": "model: '[/bold]x[link=http://e.x]'\ndataset_tokens: 1M\n"},
         says="[/bold]")
    case("req-bidi", y, ["plan", "{f}/req_bidi.yaml"], {"req_bidi.yaml": "model: \"qwen\\u202e2-7b\"\ndataset_tokens: 1M\n"})
    case("req-negative-seq", y, ["plan", "{f}/req_negseq.yaml"], {"req_negseq.yaml": "model: qwen2-7b\nseq_len: -1\n"})
    case("req-bool-epochs", y, ["plan", "{f}/req_bool.yaml"], {"req_bool.yaml": "model: qwen2-7b\ndataset_tokens: 1M\nepochs: true\n"})
    case("req-nested-gpu", y, ["plan", "{f}/req_gpu.yaml"], {"req_gpu.yaml": "model: qwen2-7b\ndataset_tokens: 1M\ngpu: [[a10]]\n"})
    case("req-unknown-key", y, ["plan", "{f}/req_unknown.yaml"], {"req_unknown.yaml": "model: qwen2-7b\nepoch: 2\n"},
         says="epoch")
    case("cal-nan", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_nan.yaml"],
         {"cal_nan.yaml": "values:\n  matmul_efficiency: .nan\n"})
    case("cal-tiny-efficiency", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_tiny.yaml"],
         {"cal_tiny.yaml": "values:\n  attention_efficiency: 1.0e-300\n"})
    case("cal-values-list", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_list.yaml"],
         {"cal_list.yaml": "values: [1, 2, 3]\n"})
    case("cal-unknown-key", y, est + ["--model", "gpt2", "--calibration", "{f}/cal_unknown.yaml"],
         {"cal_unknown.yaml": "values:\n  matmul_efficency: 0.5\n"})

    # ---- config.json (estimate --model FILE) -------------------------------------------------------------------------
    c = "config.json"

    def cfg(cid, name, body, **kw):
        case(cid, c, est + ["--model", "{f}/" + name], {name: body}, **kw)

    cfg("cfg-zero-heads", "cfg_zero_heads.json", jdump({**LLAMA, "num_attention_heads": 0}), says="num_attention_heads")
    cfg("cfg-negative-kv", "cfg_neg_kv.json", jdump({**LLAMA, "num_key_value_heads": -4}), says="num_key_value_heads")
    cfg("cfg-chatglm-groups-0", "cfg_chatglm.json", jdump({
        "model_type": "chatglm", "hidden_size": 256, "ffn_hidden_size": 688, "num_layers": 2, "num_attention_heads": 4,
        "multi_query_attention": True, "multi_query_group_num": 0, "padded_vocab_size": 1000, "seq_length": 4096}))
    cfg("cfg-falcon-kv-0", "cfg_falcon.json", jdump({
        "model_type": "falcon", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "new_decoder_architecture": True, "num_kv_heads": 0, "vocab_size": 1000}))
    cfg("cfg-dbrx-ffn-string", "cfg_dbrx.json", jdump({
        "model_type": "dbrx", "d_model": 256, "n_heads": 4, "n_layers": 2, "vocab_size": 1000, "ffn_config": "mptglu",
        "attn_config": {"kv_n_heads": 2}}), says="ffn_config")
    cfg("cfg-bert-type-vocab", "cfg_bert.json", jdump({
        "model_type": "bert", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 1024, "vocab_size": 1000, "type_vocab_size": 10 ** 12}), says="type_vocab_size")
    cfg("cfg-topk-over-experts", "cfg_mixtral.json", jdump({
        **LLAMA, "model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 8}), says="experts")
    cfg("cfg-tie-string", "cfg_tie.json", jdump({**LLAMA, "tie_word_embeddings": "no"}), says="tie_word_embeddings")
    cfg("cfg-nan", "cfg_nan.json", jdump({**LLAMA, "rope_theta": float("nan"), "hidden_size": float("nan")}))
    cfg("cfg-deep", "cfg_deep.json", "[" * 100_000 + "]" * 100_000, says="nested more than")
    cfg("cfg-duplicate-key", "cfg_dup.json", jdump(LLAMA)[:-1] + ', "hidden_size": 512}', says="duplicate key")
    cfg("cfg-list", "cfg_list.json", "[1, 2]")
    cfg("cfg-huge-int", "cfg_huge_int.json", jdump(LLAMA)[:-1] + ', "vocab_size": ' + "9" * 5000 + "}")
    cfg("cfg-latin1", "cfg_latin1.json", b'{"model_type": "llama", "name": "caf\xe9"}', says="not UTF-8")
    cfg("cfg-heads-not-dividing", "cfg_heads.json", jdump({**LLAMA, "hidden_size": 250, "num_attention_heads": 3}))
    cfg("cfg-huge-layers", "cfg_layers.json", jdump({**LLAMA, "num_hidden_layers": 10 ** 7}),
        says="num_hidden_layers")
    cfg("cfg-text-config-string", "cfg_text_config.json", jdump({"model_type": "llava", "text_config": "llama"}))
    cfg("cfg-type-object", "cfg_type_obj.json", jdump({**LLAMA, "model_type": {"a": 1}}))
    cfg("cfg-unknown-type", "cfg_unknown.json", jdump({**LLAMA, "model_type": "no_such_type"}),
        says="no_such_type")
    case("cfg-too-large", c, est + ["--model", "{tmp}/config.json"],
         make={"sparse": "config.json", "bytes": 64 << 20}, says="more than")
    case("cfg-markup-folder", c, est + ["--model", "{tmp}/x[link=http://e.x]y[/bold]"],
         make={"config_in": "x[link=http://e.x]y[/bold]", "config": LLAMA}, code=0)

    # ---- --data (lengths of the user's samples) ---------------------------------------------------------------------
    d = "data"
    dat = ["estimate", "--model", "qwen2.5-0.5b", "--gpu", "a10", "--method", "lora", "--seq-len", "1024", "--data"]
    case("data-deep", d, dat + ["{f}/data_deep.jsonl"],
         {"data_deep.jsonl": '{"text": ' + "[" * 990 + '"hello world"' + "]" * 990 + "}\n"}, code=0)
    case("data-latin1", d, dat + ["{f}/data_latin1.jsonl"], {"data_latin1.jsonl": b'{"text": "caf\xe9"}\n'},
         says="not UTF-8")
    case("data-numbers-only", d, dat + ["{f}/data_numbers.json"], {"data_numbers.json": "[1, 2]\n"}, says="no text")
    case("data-no-strings", d, dat + ["{f}/data_no_strings.jsonl"],
         {"data_no_strings.jsonl": '{"a": 1}\n{"b": [2, 3]}\nnull\n'}, says="no text")
    case("data-nul", d, dat + ["{f}/data_nul.jsonl"], {"data_nul.jsonl": b'{"text": "hi"}\n\x00\x00\n'}, says="NUL")
    case("data-empty", d, dat + ["{f}/data_empty.jsonl"], {"data_empty.jsonl": "\n\n"}, says="no samples")
    case("data-long-line", d, dat + ["{tmp}/long.jsonl"], make={"text": "long.jsonl", "line": "word ",
                                                               "bytes": 12 << 20}, says="longer than")
    case("data-gigabyte-nul", d, dat + ["{tmp}/nul.jsonl"], make={"sparse": "nul.jsonl", "bytes": 1 << 30},
         says="NUL")
    case("data-many-lines", d, dat + ["{tmp}/many.jsonl"],
         make={"text": "many.jsonl", "line": '{"text": "the quick brown fox jumps over the lazy dog"}\n',
               "bytes": 300 << 20}, code=0)
    case("data-json-array", d, dat + ["{f}/data_array.json"],
         {"data_array.json": '[\n  {"text": "hello there"},\n  {"text": "general kenobi"}\n]\n'}, code=0)

    # ---- plan.json (generate --plan) --------------------------------------------------------------------------------
    p = "plan.json"
    gen = ["generate", "--out", "{tmp}/out", "--plan"]

    def plan(cid, name, body, **kw):
        case(cid, p, gen + ["{f}/" + name], {name: body}, **kw)

    plan("plan-missing-choice", "plan_missing.json", plan_with(choice=KeyError), says="choice")
    plan("plan-missing-field", "plan_missing_field.json", plan_with(choice__strategy__attention=KeyError),
         says="attention")
    plan("plan-engine-disagrees", "plan_engine.json", plan_with(choice__strategy__engine="deepspeed"), says="engine")
    plan("plan-wrong-type", "plan_type.json", plan_with(choice__strategy__micro_batch="two"), says="micro_batch")
    plan("plan-fits-string", "plan_fits.json", plan_with(choice__fits="no"), says="fits")
    plan("plan-batch-mismatch", "plan_batch.json", plan_with(choice__strategy__global_batch=7), says="global_batch")
    plan("plan-targets", "plan_targets.json", plan_with(choice__strategy__lora_targets=["$(reboot)"]))
    plan("plan-nan", "plan_nan.json", plan_with(choice__hours=float("nan")))
    plan("plan-list", "plan_list.json", "[]")
    plan("plan-deep", "plan_deep.json", '{"a": ' + "[" * 5000 + "]" * 5000 + "}", says="nested more than")

    # ---- price files (prices set FILE, --prices FILE) ---------------------------------------------------------------
    pr = "prices"
    row = "alibaba,ecs.gn7i-c8g1.2xlarge,cn-hangzhou,payg,{p},CNY,2026-11-01\n"

    def price(cid, name, body, **kw):
        case(cid, pr, ["prices", "set", "{f}/" + name], {name: body}, **kw)

    price("price-nan", "price_nan.csv", PRICE_HEAD + row.format(p="nan"))
    price("price-inf", "price_inf.csv", PRICE_HEAD + row.format(p="inf"))
    price("price-negative", "price_neg.csv", PRICE_HEAD + row.format(p="-3"))
    price("price-markup-region", "price_markup.csv",
          PRICE_HEAD + "alibaba,ecs.gn7i-c8g1.2xlarge,[/bold],payg,10,CNY,2026-11-01\n")
    price("price-bidi", "price_bidi.csv",
          PRICE_HEAD + "alibaba,ecs.gn7i-c8g1.2xlarge,cn-hang\u202ezhou,payg,10,CNY,2026-11-01\n")
    price("price-missing-columns", "price_cols.csv", "provider,price\nalibaba,10\n")
    price("price-latin1", "price_latin1.csv", (PRICE_HEAD + row.format(p="10")).encode() + b"caf\xe9\n")
    price("price-formula", "price_formula.csv",
          PRICE_HEAD + '=cmd|" /C calc"!A0,ecs.gn7i-c8g1.2xlarge,cn-hangzhou,payg,10,CNY,2026-11-01\n')
    case("price-gigabyte", pr, ["prices", "set", "{tmp}/big.csv"], make={"sparse": "big.csv", "bytes": 1 << 30},
         says="larger than")
    case("price-many-rows", pr, ["prices", "list", "--gpu", "a10", "--prices", "{tmp}/rows.csv"],
         make={"text": "rows.csv", "head": PRICE_HEAD, "line": row.format(p="10"), "rows": 150_000}, says="rows")

    # ---- validation cases (validate / calibrate) ---------------------------------------------------------------------
    v = "cases"
    good = {"id": "x", "source": "hostile corpus", "model": {"name": "tiny", "hf_config": LLAMA},
            "hardware": {"gpu": "a10", "num_gpus": 1, "gpus_per_node": 1},
            "training": {"method": "full", "seq_len": 512, "micro_batch": 1, "grad_accum": 1, "global_batch": 1,
                         "precision": "bf16", "optimizer": "adamw", "grad_ckpt": "none"},
            "parallel": {"dp": 1, "tp": 1, "pp": 1, "cp": 1, "zero_stage": None, "fsdp": None, "offload": "none"},
            "measured": {"tokens_per_s_per_gpu": 1e-300}}
    case("cases-empty-gate", v, ["validate", "{f}/cases_empty.jsonl", "--min-predicted", "0.9"],
         {"cases_empty.jsonl": ""}, code=1)
    case("cases-not-json", v, ["validate", "{f}/cases_text.jsonl"], {"cases_text.jsonl": "hello\n"})
    case("cases-deep", v, ["validate", "{f}/cases_deep.jsonl"],
         {"cases_deep.jsonl": "[" * 5000 + "]" * 5000 + "\n"}, says="nested more than")
    case("cases-tiny-measurement", v, ["validate", "{f}/cases_tiny.jsonl", "--json"],
         {"cases_tiny.jsonl": jdump(good) + "\n"}, code=0)
    case("cases-duplicate-ids", v, ["validate", "{f}/cases_dup.jsonl", "--json"],
         {"cases_dup.jsonl": (jdump({**good, "measured": {"tokens_per_s_per_gpu": 1000.0}}) + "\n") * 2}, code=0)
    case("calibrate-zero-cases", v, ["calibrate", "{f}/cases_none.jsonl", "--out", "{tmp}/cal.yaml"],
         {"cases_none.jsonl": "\n"})

    # ---- monitor records (monitor --replay) --------------------------------------------------------------------------
    m = "monitor"
    case("replay-not-list", m, ["monitor", "--replay", "{f}/replay_obj.json"],
         {"replay_obj.json": '{"samples": {"a": 1}}'})
    case("replay-nan", m, ["monitor", "--replay", "{f}/replay_nan.json"],
         {"replay_nan.json": '{"samples": [{"t": NaN, "gpus": []}]}'})
    case("replay-deep", m, ["monitor", "--replay", "{f}/replay_deep.json"],
         {"replay_deep.json": '{"samples": ' + "[" * 5000 + "]" * 5000 + "}"}, says="nested more than")
    case("replay-huge", m, ["monitor", "--replay", "{tmp}/replay.json"], make={"sparse": "replay.json",
                                                                              "bytes": 1 << 30}, says="more than")

    # ---- values typed on the command line ---------------------------------------------------------------------------
    a = "options"
    case("opt-tokens-nan", a, ["serving", "--model", "qwen2-7b", "--gpu", "a10", "--target-tokens-per-s", "nan"])
    case("opt-tpot-nan", a, ["serving", "--model", "qwen2-7b", "--gpu", "a10", "--max-tpot-ms", "nan"])
    case("opt-efficiency-tiny", a, ["estimate", "--model", "gpt2", "--gpu", "a10", "--set",
                                   "attention_efficiency=1e-300"])
    case("opt-seq-huge", a, ["estimate", "--model", "gpt2", "--gpu", "a10", "--seq-len", "1000000000"])
    case("opt-tokens-huge", a, ["plan", "--model", "qwen2.5-0.5b", "--dataset-tokens", "1e30"])
    case("opt-budget-negative", a, ["plan", "--model", "qwen2.5-0.5b", "--dataset-tokens", "1M", "--budget", "-1"])
    case("opt-model-markup", a, ["estimate", "--model", "[/bold][link=http://e.x]x", "--gpu", "a10"],
         says="[/bold]")
    case("opt-model-long", a, ["estimate", "--model", "x" * 100_000, "--gpu", "a10"], says="unknown model")
    case("opt-gpu-long-list", a, ["compare", "--model", "gpt2", "--gpu", ",".join(["a10"] * 5000)],
         code=0)


def main() -> None:
    if os.path.isdir(FILES):
        shutil.rmtree(FILES)
    os.makedirs(FILES)
    build()
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    with open(os.path.join(HERE, "cases.json"), "w", encoding="utf-8") as fh:
        json.dump(CASES, fh, indent=1, ensure_ascii=True)
        fh.write("\n")
    print(f"{len(CASES)} cases, {len(os.listdir(FILES))} files in {FILES}")


if __name__ == "__main__":
    main()
