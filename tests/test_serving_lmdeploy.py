"""LMDeploy (TurboMind / PyTorch engine) as `--engine lmdeploy` (issue 37, part 1).

Golden numbers and where they come from:
  - KV bytes per token: worked by hand from TurboMind's block layout (src/turbomind/kernels/attention/block.h
    `Layout`, lmdeploy v0.12.0 l.124-150: per layer and KV head, K and V take head_dim x bits / 8 bytes each, plus
    t_bits * 2 / 8 = 4 bytes of 16-bit scale and zero each when quantised; 0.16.0 unified_attention_layer.cc l.150:
    kv_head_num / tp_size heads per rank).
  - int8 KV saving: docs/en/quantization/kv_int8.md (lmdeploy v0.2.6), "GPU Memory Test" of LLaMA-7B at 2048 tokens:
    fp16 - int8 = 4096 / 8224 / 16448 / 24672 MiB at batch 8 / 16 / 32 / 48 (that int8 had per-tensor scales, the
    layout trainfit uses before v0.4.0). Tolerance 0.5%: the published differences carry 0-0.4% of other buffers.
  - KV budget: TurboMind 0.16.0 src/turbomind/turbomind.cc `CreateEngine` (cache_bytes = free_bytes x cache_ratio),
    v0.2.0 BlockManager.cc `GetBlockCount` (total x ratio / block_size), PyTorch engine 0.18.0
    lmdeploy/pytorch/engine/executor/base.py `_get_runtime_size` ((max_prefill_token_num + 2 max_batches) x vocab x 2
    off the free memory first). No published LMDeploy log with a KV capacity on a known GPU and model was found, so
    the tests check the code's formula worked by hand.
  - the launch command: parsed by the argument table of LMDeploy 0.18.0's own `lmdeploy serve api_server` parser
    (tests/data/lmdeploy_serve_args.json, written by tests/data/lmdeploy_serve_args_extract.py from the PyPI wheel;
    `import lmdeploy` needs torch, so the wheel's CLI modules are loaded with the package __init__ bypassed). With
    LMDEPLOY_SRC pointing at the unpacked wheel, the real parser parses it too.
  - validate: data/validation/serving_lmdeploy_dev.jsonl measured on 2026-12-07 at throughput MAPE 9.5% (n 23,
    worst 37.7%) and TTFT MAPE 47.3% (n 8, worst 92.3%); the limits below are a little above.
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainfit.errors import ServingError
from trainfit.generate.serving import launch_command
from trainfit.serving import serve
from trainfit.serving.spec import ServingSpec
from trainfit.serving.validate import validate

ROOT = Path(__file__).resolve().parents[1]
ARGS = ROOT / "tests" / "data" / "lmdeploy_serve_args.json"
CASES = ROOT / "data" / "validation" / "serving_lmdeploy_dev.jsonl"
LAYERS, HEADS, HEAD_DIM = 32, 32, 128  # llama-2-7b (catalog preset): MHA, 32 KV heads


def _est(**kw):
    kw.setdefault("engine", "lmdeploy")
    return serve("llama-2-7b", gpu=kw.pop("gpu", "a100-sxm4-80gb"), **kw)


# ---- KV bytes per token -----------------------------------------------------------------------------------------

def test_kv_bytes_per_token_from_the_block_layout():
    by_hand = {"auto": LAYERS * HEADS * 2 * (HEAD_DIM * 2),  # 16-bit K and V, no parameters
               "int8": LAYERS * HEADS * 2 * (HEAD_DIM + 4),  # 8-bit data + fp16 scale and zero, K and V
               "int4": LAYERS * HEADS * 2 * (HEAD_DIM // 2 + 4)}
    for kv, expected in by_hand.items():
        assert _est(kv_cache_dtype=kv).memory.kv_per_token == expected, kv
    auto = by_hand["auto"]
    assert by_hand["int8"] / auto == pytest.approx(0.5, abs=0.02)  # halved, plus 4/256 of scales
    assert by_hand["int4"] / auto == pytest.approx(0.25, abs=0.02)  # quartered, plus 4/256


def test_kv_bytes_split_over_tp():
    one = _est(kv_cache_dtype="int8").memory.kv_per_token
    assert _est(kv_cache_dtype="int8", gpus=2).memory.kv_per_token * 2 == one


@pytest.mark.parametrize("batch,saved_mib", [(8, 4096), (16, 8224), (32, 16448), (48, 24672)])
def test_int8_saving_matches_the_published_memory_test(batch, saved_mib):
    fp16 = _est(engine_version="0.2.0", kv_cache_dtype="auto", weights="fp16").memory.kv_per_token
    int8 = _est(engine_version="0.2.0", kv_cache_dtype="int8", weights="fp16").memory.kv_per_token
    saved = (fp16 - int8) * batch * 2048 / 2**20
    assert saved == pytest.approx(saved_mib, rel=0.005)


def test_quant_policy_numbers():
    assert _est(kv_cache_dtype="int8").engine.details["quant_policy"] == 8
    assert _est(kv_cache_dtype="int4").engine.details["quant_policy"] == 4
    assert _est(kv_cache_dtype="int8", engine_version="0.2.6").engine.details["quant_policy"] == 4  # pre-0.4


# ---- KV budget --------------------------------------------------------------------------------------------------

def test_turbomind_budget_is_the_fraction_of_free_memory_after_the_weights():
    est = _est()
    mem, e = est.memory, est.engine
    free = mem.total_gpu - mem.non_torch - mem.weights.total
    assert e.memory_fraction == 0.8 and e.block_size == 64 and e.details["cache_fraction_of"] == "free_after_weights"
    assert mem.kv_budget == pytest.approx(0.8 * free)
    assert mem.num_blocks == int(0.8 * free // (64 * LAYERS * HEADS * 2 * HEAD_DIM * 2))
    assert mem.kv_tokens == mem.num_blocks * 64


def test_turbomind_020_takes_half_of_the_total():
    est = _est(engine_version="0.2.0", weights="fp16")
    mem = est.memory
    assert est.engine.memory_fraction == 0.5 and est.engine.block_size == 128
    assert mem.kv_budget == pytest.approx(0.5 * mem.total_gpu)
    assert mem.num_blocks == int(0.5 * mem.total_gpu // (128 * LAYERS * HEADS * 2 * HEAD_DIM * 2))


def test_pytorch_engine_reserves_runtime_memory_first():
    est = _est(lmdeploy_backend="pytorch")
    mem, e = est.memory, est.engine
    runtime = (8192 + 2 * 384) * 32000 * 2  # max_prefill_token_num 8192, max_batch_size 384 on A100, vocab 32000
    assert e.max_num_seqs == 384 and e.details["backend"] == "pytorch"
    assert mem.activation == runtime
    assert mem.kv_budget == pytest.approx(0.8 * (mem.total_gpu - mem.non_torch - mem.weights.total - runtime))


@pytest.mark.parametrize("gpu,version,batch", [("a100-sxm4-80gb", "0.18.0", 384), ("h100-sxm", "0.18.0", 1024),
                                               ("l20", "0.18.0", 128), ("h100-sxm", "0.4.0", 128)])
def test_max_batch_size_default_by_device_and_version(gpu, version, batch):
    assert _est(gpu=gpu, engine_version=version).engine.max_num_seqs == batch


def test_awq_weights_are_four_bit():
    bf16, awq = _est().memory.weights, _est(weights="awq").memory.weights
    assert awq.linears == pytest.approx(bf16.linears / 4, rel=1e-6)
    assert 0 < awq.scales < awq.linears / 10 and awq.unquantised == bf16.unquantised
    assert _est(weights="awq").memory.kv_tokens > _est().memory.kv_tokens


def test_what_lmdeploy_does_not_offer_is_refused():
    with pytest.raises(ServingError):
        ServingSpec(engine="lmdeploy", kv_cache_dtype="fp8")  # TurboMind rejects fp8 KV
    with pytest.raises(ServingError):
        ServingSpec(engine="lmdeploy", weights="int8")  # W8A8 is the PyTorch engine's
    ServingSpec(engine="lmdeploy", weights="int8", lmdeploy_backend="pytorch")
    with pytest.raises(ServingError):
        ServingSpec(engine="lmdeploy", engine_version="0.1.0")
    with pytest.raises(ServingError):
        ServingSpec(engine="vllm", kv_cache_dtype="int8")
    with pytest.raises(ServingError):
        ServingSpec(engine="lmdeploy", engine_version="0.8.0", weights="fp8")  # --model-format fp8 from v0.9.0
    ServingSpec(engine="lmdeploy", engine_version="0.9.0", weights="fp8")


# ---- the launch command -----------------------------------------------------------------------------------------

def _parser() -> argparse.ArgumentParser:
    """LMDeploy 0.18.0's api_server parser, rebuilt from its argument table (choices, nargs, store_true)."""
    doc = json.loads(ARGS.read_text())
    p = argparse.ArgumentParser(prog=doc["prog"], allow_abbrev=False, exit_on_error=False)
    types = {"int": int, "float": float, "str": str, None: None}
    for a in doc["arguments"]:
        kw = {"dest": a["dest"]} if a["options"] else {}
        if a["action"] == "_StoreTrueAction":
            p.add_argument(*a["options"], action="store_true", **kw)
            continue
        typ = (lambda x, ok=doc["quant_policy_values"]: int(x) if int(x) in ok else int("bad")) \
            if a["type"] == "_parse" else types.get(a["type"], str)
        p.add_argument(*(a["options"] or [a["dest"]]), nargs=a["nargs"], choices=a["choices"], type=typ, **kw)
    return p


SETUPS = [dict(), dict(kv_cache_dtype="int8", weights="awq"), dict(kv_cache_dtype="int4", gpus=2),
          dict(lmdeploy_backend="pytorch", weights="fp16", cuda_graphs=False), dict(weights="gptq")]


@pytest.mark.parametrize("setup", SETUPS)
def test_launch_command_parses_with_lmdeploys_parser(setup):
    est = _est(**setup)
    cmd = launch_command(est, "/models/merged")
    assert cmd[:3] == ["lmdeploy", "serve", "api_server"]
    ns = _parser().parse_args(cmd[3:])
    e = est.engine
    assert ns.model_path == "/models/merged" and ns.tp == est.spec.tp and ns.session_len == e.max_model_len
    assert ns.cache_max_entry_count == e.memory_fraction and ns.cache_block_seq_len == e.block_size
    assert ns.backend == e.details["backend"] and ns.max_batch_size == e.max_num_seqs
    assert ns.quant_policy == {"auto": 0, "int8": 8, "int4": 4}[est.spec.kv_cache_dtype]
    assert ns.model_format == {"awq": "awq", "gptq": "gptq"}.get(est.spec.weights)
    assert ns.server_port == 23333 and ns.eager_mode == (not est.spec.cuda_graphs)


def test_the_rebuilt_parser_refuses_a_wrong_flag():
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        _parser().parse_args(["/m", "--quant-policy", "3"])
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        _parser().parse_args(["/m", "--kv-cache-dtype", "int8"])  # vLLM's flag, not LMDeploy's


def test_lora_needs_the_pytorch_engine():
    with pytest.raises(ServingError):
        launch_command(_est(), "/m", adapter="/runs/adapter")
    cmd = launch_command(_est(lmdeploy_backend="pytorch"), "/m", adapter="/runs/adapter")
    assert _parser().parse_args(cmd[3:]).adapters == ["adapter=/runs/adapter"]


@pytest.mark.skipif(not os.path.isdir(os.path.join(os.environ.get("LMDEPLOY_SRC", "/nonexistent"), "lmdeploy")),
                    reason="LMDEPLOY_SRC (the unpacked lmdeploy 0.18.0 wheel) not set")
def test_launch_command_parses_with_the_real_parser():
    cmd = launch_command(_est(kv_cache_dtype="int4", weights="awq"), "/m")
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "data" / "lmdeploy_serve_args_extract.py"),
                          "--validate", *cmd], capture_output=True, text=True, check=True).stdout
    ns = json.loads(out)
    assert ns["quant_policy"] == 4 and ns["model_format"] == "awq" and ns["backend"] == "turbomind"


def test_generate_serving_writes_the_lmdeploy_command(run_cli, tmp_path):
    code, out, err = run_cli("generate", "--serving", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb",
                             "--engine", "lmdeploy", "--kv-cache-dtype", "int8", "--out", str(tmp_path / "s"))
    assert code == 0, err
    script = (tmp_path / "s" / "serve.sh").read_text()
    assert "exec lmdeploy serve api_server \"$MODEL_PATH\"" in script and "--quant-policy 8" in script


# ---- the CLI ----------------------------------------------------------------------------------------------------

def test_json_carries_the_engine_settings(run_cli):
    code, out, err = run_cli("serving", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--engine", "lmdeploy",
                             "--kv-cache-dtype", "int4", "--lmdeploy-backend", "pytorch", "--json")
    assert code == 0, err
    eng = json.loads(out)["engine"]
    assert eng["name"] == "lmdeploy" and eng["version"] == "0.18.0" and eng["backend"] == "pytorch"
    assert eng["quant_policy"] == 4 and eng["cache_max_entry_count"] == 0.8 and eng["max_batch_size"] == 1024
    assert eng["cache_fraction_of"] == "free_after_weights" and eng["max_prefill_token_num"] == 8192
    assert json.loads(out)["memory"]["activation_peak_gib"] > 0  # the PyTorch engine's runtime reserve


def test_chinese_output_renders(run_cli):
    code, out, err = run_cli("serving", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb", "--engine", "lmdeploy",
                             "--lang", "zh")
    assert code == 0, err
    assert "lmdeploy" in out and "KV 缓存" in out


@pytest.mark.parametrize("argv", [("--lmdeploy-backend", "vllm"), ("--kv-cache-dtype", "fp8"),
                                  ("--engine-version", "0.1.0"), ("--weights", "int8")])
def test_bad_values_exit_2(run_cli, argv):
    code, _, err = run_cli("serving", "--model", "llama-2-7b", "--gpu", "a100-sxm4-80gb", "--engine", "lmdeploy",
                           *argv)
    assert code == 2 and "Traceback" not in err and err.strip()


def test_int4_kv_is_refused_in_chinese_too(run_cli):
    code, _, err = run_cli("serving", "--model", "llama-2-7b", "--gpu", "a10", "--kv-cache-dtype", "int4",
                           "--lang", "zh")
    assert code == 2 and "LMDeploy" in err and "仅用于" in err


# ---- validation -------------------------------------------------------------------------------------------------

def test_validate_predicts_the_lmdeploy_cases():
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line.strip()]
    doc = validate(cases)
    assert doc["cases"] == 25 and doc["predicted"] == 23  # the two v0.0.5 rows predate the paged KV cache
    assert doc["throughput"]["n"] == 23 and doc["throughput"]["mape"] <= 0.11  # measured 9.5%
    assert doc["ttft"]["n"] == 8 and doc["ttft"]["mape"] <= 0.50  # measured 47.3%
    assert all(r["engine"] == "lmdeploy" for r in doc["rows"])


def test_alternatives_offer_what_lmdeploy_serves(run_cli):
    """llama-2-7b fp16 on a T4 (16 GB) leaves under 4,096 tokens of KV: the int8 KV cache (its quant_policy 8, not
    fp8) and only weight formats TurboMind takes (no int8 W8A8) are offered."""
    code, out, err = run_cli("serving", "--model", "llama-2-7b", "--gpu", "t4", "--engine", "lmdeploy", "--weights",
                             "fp16", "--json")
    assert code == 0, err
    changes = [a["change"] for a in json.loads(out)["alternatives"]]
    assert {"kv_cache_dtype": "int8"} in changes
    assert all(c.get("weights") in (None, "fp16", "fp8", "awq", "gptq") for c in changes)
    code, _, err = run_cli("serving", "--model", "llama-2-70b", "--gpu", "a100-sxm4-80gb", "--engine", "lmdeploy")
    assert code == 0, err


def test_search_runs_with_lmdeploy(run_cli):
    code, out, err = run_cli("serving", "--model", "llama-2-7b", "--engine", "lmdeploy", "--target-tokens-per-s",
                             "3000", "--formats", "bf16,awq", "--top", "2", "--json")
    assert code == 0, err
    assert json.loads(out)["options"]


def test_turbomind_blocks_match_published_logs():
    """TurboMind logs its block in MB ('[TM][INFO] [BlockManager] block_size = ...'): 9.000 for Qwen3-8B with fp16
    KV (InternLM/lmdeploy#3825) and 0.844 for gpt-oss-20b with int4 KV, its 16-bit scale and zero per token and head
    included (#3950), both at 64 tokens a block; data/validation/serving_lmdeploy_kvcap_sources.md."""
    from trainfit.catalog import resolve_model
    from trainfit.serving.memory import kv_bytes_per_token
    from trainfit.serving.spec import ServingSpec

    fp16 = kv_bytes_per_token(resolve_model("qwen3-8b"), ServingSpec(engine="lmdeploy", engine_version="0.10.0"))
    assert fp16 * 64 / 2**20 == 9.0
    int4 = kv_bytes_per_token(resolve_model("gpt-oss-20b"),
                              ServingSpec(engine="lmdeploy", engine_version="0.10.0", kv_cache_dtype="int4"))
    assert round(int4 * 64 / 2**20, 3) == 0.844
