"""TensorRT-LLM as a serving engine (`--engine trtllm`, serving/engine_trtllm.py): KV pool, FP8 KV, trtllm-bench's
batch heuristic, the trtllm-serve command against serve.py's click options, validation against NVIDIA's published
runs, JSON, Chinese, bad input.

Golden numbers cite their source (a TensorRT-LLM file, worked by hand) and their tolerance.
"""

import ast
import json
import math
from pathlib import Path

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.errors import ServingError
from trainfit.serving import serve
from trainfit.serving import engine_trtllm as trt
from trainfit.serving.spec import ServingSpec
from trainfit.units import GiB

DATA = Path(__file__).resolve().parent / "data"
CASES = Path(__file__).resolve().parents[1] / "data" / "validation" / "serving_trtllm_dev.jsonl"


def _json(run_cli, *argv):
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


# ---- KV pool -----------------------------------------------------------------------------------------------------

def test_kv_bytes_per_token_follow_get_cache_size_per_token():
    # resource_manager.py KVCacheManager.get_cache_size_per_token: 2 x layers x kv_heads x head_dim // tp x bytes.
    # Llama-3.1-8B config.json: 32 layers, 8 KV heads, head_dim 4096 / 32 = 128 -> 2 x 32 x 8 x 128 x 2 = 131072
    est = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm")
    assert est.memory.kv_per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    assert serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", tp=2).memory.kv_per_token == 131_072 // 2


def test_kv_pool_is_the_fraction_of_the_free_memory_in_32_token_blocks():
    # _util.py KvCacheCreator._cal_max_memory: available_kv_mem = (total - peak) x free_gpu_memory_fraction, with
    # peak = weights + activations + memory outside torch; max_tokens = available // bytes per token, then whole
    # blocks of KvCacheConfig.tokens_per_block = 32. Worked by hand from the breakdown's own parts:
    est = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm")
    mem = est.memory
    # the weights: Llama-3.1-8B has 8,030,261,248 parameters (catalog), 2 bytes each in bf16
    assert mem.weights.total == pytest.approx(8_030_261_248 * 2, rel=1e-6)
    free = mem.total_gpu - mem.weights.total - mem.activation - mem.non_torch
    assert mem.kv_budget == pytest.approx(0.9 * free, rel=1e-9)
    assert mem.kv_tokens == math.floor(0.9 * free / (131_072 * 32)) * 32
    # not vLLM's rule (0.9 x total - the rest), which would leave 10% of the total, not of the free memory
    assert mem.kv_budget - (0.9 * mem.total_gpu - (mem.total_gpu - free)) == pytest.approx(0.1 * (mem.total_gpu - free))
    assert est.engine.block_size == 32 and est.engine.memory_fraction == 0.9


def test_the_0x_tensorrt_engines_use_64_token_blocks():
    # plugin.py PluginConfig._tokens_per_block = 64 in the 0.x TensorRT flow; 1.x KvCacheConfig.tokens_per_block = 32
    old = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", engine_version="0.17.0")
    assert old.engine.block_size == 64 and old.memory.kv_tokens % 64 == 0
    assert trt.details(old.spec, old.engine, old.memory)["backend"] == "tensorrt"


def test_fp8_kv_halves_the_bytes_and_doubles_the_tokens():
    bf16 = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm")
    fp8 = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", kv_cache_dtype="fp8")
    assert fp8.memory.kv_per_token * 2 == bf16.memory.kv_per_token
    assert fp8.memory.kv_budget == pytest.approx(bf16.memory.kv_budget)  # same pool, smaller tokens
    assert abs(fp8.memory.kv_tokens - 2 * bf16.memory.kv_tokens) <= 32  # whole 32-token blocks


def test_fp8_weights_leave_more_free_memory():
    bf16 = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm")
    fp8 = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", weights="fp8")
    saved = bf16.memory.weights.total - fp8.memory.weights.total
    assert saved > 6 * GiB
    assert fp8.memory.kv_budget - bf16.memory.kv_budget == pytest.approx(0.9 * saved, rel=1e-6)


# ---- batch settings ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("requests,isl,osl,expected", [
    # tuning.py finetune_setting, worked by hand:
    (5000, 128, 128, (4096, 8192)),    # raw bs min(5000, 4096) -> 256 x 16; raw tokens 8192 (>= 8192) -> 1024 x 8
    (100, 2048, 128, (128, 2048)),     # raw bs 100 < 256 -> max(64, 32 x 4); raw tokens 1700 < 4096 -> max(2048, 1792)
    (600, 1000, 1000, (640, 2048)),    # raw bs 600 < 1024 -> 128 x 5; raw tokens 1200 -> 2048
    (3000, 5000, 500, (3072, 32768)),  # raw bs 3000 -> 256 x 12; raw tokens min(33000, 32768) -> 1024 x 32
    (300, 500, 2000, (384, 2048)),     # raw bs 300 -> 128 x 3; raw tokens 375 -> 2048
    (20, 128, 4096, (64, 2048)),       # raw bs 20 -> 32 x 1, raised to the minimum 64
    (1200, 2048, 2048, (1280, 2560)),  # raw tokens 2400 < 4096 -> 256 x 10
])
def test_trtllm_bench_heuristic(requests, isl, osl, expected):
    assert trt.finetune_setting(requests, isl, osl) == expected


def test_serve_defaults_and_bench_settings():
    m, gpu = resolve_model("llama-3.1-8b"), get_gpu("h100-sxm")
    serve_e = trt.settings(m, ServingSpec(engine="trtllm", concurrency=8), gpu, 8192)
    assert (serve_e.max_num_seqs, serve_e.max_num_batched_tokens) == (2048, 8192)  # builder.py BuildConfig
    s = ServingSpec(engine="trtllm", weights="fp8", kv_cache_dtype="fp8", input_len=128, output_len=128,
                    request_rate=math.inf)
    bench = trt.settings(m, s, gpu, 256)
    # calc_engine_setting: per token 2 x 32 x 8 x 128 x 1 B; (80 GB - 8.03e9 B) x 0.9 / (that x 256) >> 4096 requests
    assert (bench.max_num_seqs, bench.max_num_batched_tokens) == (4096, 8192)
    assert trt.batch_source(s) == "bench"


def test_alias_and_unsupported_weights():
    assert ServingSpec(engine="tensorrt-llm").engine == "trtllm"
    assert ServingSpec(engine="TensorRT-LLM").engine == "trtllm"
    with pytest.raises(ServingError) as exc:
        serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", weights="gptq")
    assert exc.value.key == "sv_e_trt_weights"


# ---- launch command against serve.py -----------------------------------------------------------------------------

def extract_options(source: str, command: str = "serve") -> dict[str, dict]:
    """Every option name of the click command `command` in a serve.py source, with its default (ast, no click)."""
    fn = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == command)
    out = {}
    for deco in fn.decorator_list:
        if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "option"):
            continue
        names = [a.value for a in deco.args if isinstance(a, ast.Constant) and a.value.startswith("--")]
        kw = {k.arg: k.value for k in deco.keywords}
        default = kw.get("default")
        try:
            default = ast.literal_eval(default) if default is not None else None
        except ValueError:
            default = ast.unparse(default)
        for name in names:
            out[name] = {"option": names[0], "default": default, "is_flag": "is_flag" in kw}
    return out


def _serve_options() -> dict:
    doc = json.loads((DATA / "trtllm_serve_options.json").read_text())
    assert "00209af149e7774406881a37283dce303571eb11" in doc["source"]
    return doc["options"]


def test_options_file_is_what_ast_reads_from_the_serve_py_excerpt():
    assert extract_options((DATA / "trtllm_serve_excerpt.py.txt").read_text()) == _serve_options()


@pytest.mark.parametrize("kv", ["auto", "fp8"])
def test_trtllm_serve_command_uses_only_serve_py_options(kv):
    est = serve("llama-3.1-8b", gpu="h100-sxm", engine="trtllm", kv_cache_dtype=kv, gpus=2)
    cmd = trt.launch_command(est, "/models/m")
    assert cmd[:2] == ["trtllm-serve", "/models/m"]
    options = _serve_options()
    flags = [a for a in cmd if a.startswith("--")]
    assert flags and all(f in options for f in flags), [f for f in flags if f not in options]
    value = {cmd[i]: cmd[i + 1] for i in range(2, len(cmd) - 1) if cmd[i].startswith("--")}
    assert value["--backend"] == "pytorch" and value["--tp_size"] == "2"
    assert value["--max_batch_size"] == "2048" and value["--max_num_tokens"] == "8192"
    assert float(value["--kv_cache_free_gpu_memory_fraction"]) == options["--kv_cache_free_gpu_memory_fraction"][
        "default"] == trt.FREE_GPU_MEMORY_FRACTION
    assert int(value["--port"]) == options["--port"]["default"] == trt.PORT
    assert options["--backend"]["default"] == trt.backend(est.spec)
    assert ("--extra_llm_api_options" in value) == (kv == "fp8")


def test_generate_serving_writes_trtllm_serve_and_its_options_file(run_cli, tmp_path):
    out = tmp_path / "serve"
    code, stdout, err = run_cli("generate", "--serving", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine",
                                "trtllm", "--kv-cache-dtype", "fp8", "--model-path", "/runs/merged", "--out", str(out),
                                "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["command"][:2] == ["trtllm-serve", "/runs/merged"] and doc["engine"] == "trtllm"
    assert "trtllm_options.yaml" in doc["files"]
    assert 'trtllm-serve "$MODEL_PATH"' in (out / "serve.sh").read_text()
    assert "dtype: fp8" in (out / "trtllm_options.yaml").read_text()


# ---- validation --------------------------------------------------------------------------------------------------

def _cases(tag: str = "") -> list[dict]:
    return [c for c in map(json.loads, CASES.read_text().splitlines()) if tag in c["id"]]


def test_validate_predicts_every_trtllm_case_within_the_measured_error():
    from trainfit.serving.validate import validate

    doc = validate(_cases())
    assert doc["cases"] == doc["predicted"] == 160 and not doc["skipped"]
    # measured 2026-12-07 (data/validation/serving_trtllm_sources.md): throughput 9.4%, TTFT 38.5%, TPOT 30.2%;
    # with the runs that send every request at once simulated step by step (burst.py): 9.4%, 23.5%, 22.9%
    assert doc["throughput"]["mape"] <= 0.10
    assert doc["ttft"]["mape"] <= 0.24 and doc["tpot"]["mape"] <= 0.235
    # the 40 fitted v1.0 runs (4.1%) and the 72 held-out v0.17 runs (6.8%)
    assert validate(_cases("v1.0"))["throughput"]["mape"] <= 0.045
    assert validate(_cases("v0.17"))["throughput"]["mape"] <= 0.075


def test_every_case_cites_a_pinned_source_and_says_how_it_was_read():
    for c in _cases():
        assert "github.com/NVIDIA/TensorRT-LLM/blob/" in c["source"] and len(c["notes"]) > 200, c["id"]
        assert c["serving"]["engine"] == "tensorrt-llm" and c["measured"]["output_tokens_per_s"] > 0


# ---- CLI: JSON, Chinese, bad input -------------------------------------------------------------------------------

def test_json_carries_the_engine_settings(run_cli):
    doc = _json(run_cli, "serving", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "tensorrt-llm")
    eng = doc["engine"]
    assert eng["name"] == "trtllm" and eng["version"] == "1.0.0" and eng["backend"] == "pytorch"
    assert eng["free_gpu_memory_fraction"] == 0.9 and eng["tokens_per_block"] == 32
    assert (eng["max_batch_size"], eng["max_num_tokens"], eng["batch_settings_from"]) == (2048, 8192, "serve")
    mem = doc["memory"]
    assert eng["free_memory_before_kv_gib"] == pytest.approx(mem["kv_cache_gib"] / 0.9, abs=0.01)
    assert eng["runtime_memory_gib"] == doc["values_used"]["trtllm_runtime_gib"]["value"]
    assert any("TensorRT-LLM 1.0.0" in a for a in doc["assumptions"])


def test_renders_in_chinese(run_cli):
    code, out, err = run_cli("serving", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "trtllm",
                             "--lang", "zh")
    assert code == 0, err
    assert "KV 缓存取剩余" in out and "后端" in out and "KV 容量" in out


@pytest.mark.parametrize("argv,key", [
    (("--engine", "trtllm", "--weights", "gptq"), "sv_e_trt_weights"),
    (("--engine", "trtllm", "--gpu-memory-utilization", "1"), "sv_e_trt_fraction"),
    (("--engine", "tensorrt"), "sv_e_choice"),
])
def test_bad_input_exits_2_with_one_line(run_cli, argv, key):
    code, out, err = run_cli("serving", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, _ = run_cli("serving", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *argv, "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == key
