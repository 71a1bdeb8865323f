"""`generate --serving`: the launch command uses the engines' real flag names.

vLLM and SGLang cannot be installed here, so the flags are pinned against their argument parsers as read:
  - vLLM vllm/engine/arg_utils.py (EngineArgs.add_cli_args, e.g. commit 001999d2f360, 0.7.x): '--tensor-parallel-size'
    ('-tp'), '--max-model-len', '--gpu-memory-utilization', '--kv-cache-dtype' choices ['auto', 'fp8',
    'fp8_e5m2', 'fp8_e4m3'], '--quantization' ('-q'), '--max-num-seqs', '--enforce-eager', '--enable-lora',
    '--max-lora-rank', '--dtype'; vllm/entrypoints/openai/cli_args.py: '--lora-modules', '--served-model-name'.
    Later releases: '--enable-prefix-caching' as an argparse BooleanOptionalAction (so '--no-enable-prefix-caching'
    too) and '--mamba-ssm-cache-dtype' (CacheConfig.mamba_ssm_cache_dtype, vllm/config/cache.py MambaDType).
  - SGLang python/sglang/srt/server_args.py (ServerArgs; flags are the field names with dashes, e.g. commit
    001067fffe33): '--model-path', '--tp-size' (alias '--tensor-parallel-size'), '--context-length',
    '--mem-fraction-static', '--kv-cache-dtype' ('auto', 'fp8_e5m2', 'fp8_e4m3'), '--quantization',
    '--max-running-requests', '--disable-cuda-graph', '--lora-paths' (NAME=PATH), '--served-model-name', '--dtype',
    '--disable-radix-cache' (its prefix cache, on by default), '--mamba-ssm-dtype' (float32 | bfloat16 | float16, a
    hybrid's recurrent states; docs/basic_usage/qwen3.md, PR #15337).
A flag the generator emits that is not in these sets fails the test.
"""

import json
import os
import stat

import pytest

from trainfit.generate.serving import launch_command, serving_files
from trainfit.serving import serve

VLLM_FLAGS = {"--tensor-parallel-size", "--max-model-len", "--gpu-memory-utilization", "--kv-cache-dtype",
              "--quantization", "--max-num-seqs", "--enforce-eager", "--enable-lora", "--max-lora-rank", "--dtype",
              "--lora-modules", "--served-model-name", "--enable-prefix-caching", "--no-enable-prefix-caching",
              "--mamba-ssm-cache-dtype"}
SGLANG_FLAGS = {"--model-path", "--tp-size", "--context-length", "--mem-fraction-static", "--kv-cache-dtype",
                "--quantization", "--max-running-requests", "--disable-cuda-graph", "--lora-paths",
                "--served-model-name", "--dtype", "--disable-radix-cache", "--mamba-ssm-dtype"}
KV_CHOICES = {"vllm": {"auto", "fp8", "fp8_e5m2", "fp8_e4m3"}, "sglang": {"auto", "fp8_e5m2", "fp8_e4m3"}}

SETUPS = [dict(), dict(weights="fp8", kv_cache_dtype="fp8"), dict(weights="awq", cuda_graphs=False),
          dict(weights="fp16", max_model_len=4096, gpu_memory_utilization=0.85),
          dict(prefix_caching=True, mamba_ssm_cache_dtype="float32"), dict(prefix_caching=False)]


def _flags(cmd):
    return {a for a in cmd if a.startswith("--")}


def _value(cmd, flag):
    return cmd[cmd.index(flag) + 1]


@pytest.mark.parametrize("engine,flags", [("vllm", VLLM_FLAGS), ("sglang", SGLANG_FLAGS)])
@pytest.mark.parametrize("setup", SETUPS)
def test_only_real_flags(engine, flags, setup):
    est = serve("qwen2-7b", gpu="l20", engine=engine, **setup)
    cmd = launch_command(est, "/models/merged", adapter="/runs/adapter", lora_rank=16)
    assert _flags(cmd) <= flags, _flags(cmd) - flags
    if "--kv-cache-dtype" in cmd:
        assert _value(cmd, "--kv-cache-dtype") in KV_CHOICES[engine]


def test_vllm_command_carries_the_estimated_setup():
    est = serve("qwen2-7b", gpu="a10", gpus=None, max_model_len=4096, gpu_memory_utilization=0.85,
                kv_cache_dtype="fp8")
    cmd = launch_command(est, "/m")
    assert cmd[:3] == ["vllm", "serve", "/m"]
    assert _value(cmd, "--max-model-len") == "4096" and _value(cmd, "--gpu-memory-utilization") == "0.85"
    assert _value(cmd, "--tensor-parallel-size") == "1" and _value(cmd, "--kv-cache-dtype") == "fp8"
    # an AWQ checkpoint is detected from its config; naming the method would force vLLM's slower non-Marlin kernel
    assert "--quantization" not in launch_command(serve("qwen2-7b", gpu="a10", weights="awq"), "/m")


def test_sglang_command_and_lora():
    est = serve("qwen2-7b", gpu="h100-sxm", gpus=2, engine="sglang")
    cmd = launch_command(est, "/m", adapter="/a")
    assert cmd[:3] == ["python", "-m", "sglang.launch_server"]
    assert _value(cmd, "--tp-size") == "2" and _value(cmd, "--mem-fraction-static") == "0.87"
    assert _value(cmd, "--lora-paths") == "adapter=/a"


def test_generate_writes_an_executable_serve_script(run_cli, tmp_path):
    out = tmp_path / "serve"
    code, stdout, err = run_cli("generate", "--serving", "--model", "qwen2-7b", "--gpu", "a10", "--model-path",
                                "/runs/merged", "--out", str(out), "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["files"] == ["README.md", "serve.sh"] and doc["command"][:3] == ["vllm", "serve", "/runs/merged"]
    script = (out / "serve.sh").read_text()
    assert script.startswith("#!/usr/bin/env bash") and 'vllm serve "$MODEL_PATH"' in script
    assert os.stat(out / "serve.sh").st_mode & stat.S_IXUSR
    code, _, err = run_cli("generate", "--serving", "--model", "qwen2-7b", "--gpu", "a10", "--out", str(out))
    assert code == 2 and "not empty" in err


def test_readme_in_chinese():
    files = serving_files(serve("qwen2-7b", gpu="a10", weights="awq"), lang="zh")
    assert "部署" in files["README.md"] and "AutoAWQ" in files["README.md"]


def test_generate_refuses_a_setup_that_does_not_fit(run_cli, tmp_path):
    code, out, err = run_cli("generate", "--serving", "--model", "llama-2-70b", "--gpu", "a10",
                             "--out", str(tmp_path / "s"))
    assert code == 2 and "does not fit" in err and not (tmp_path / "s").exists()


@pytest.mark.parametrize("lang,wrote", [("en", "wrote "), ("zh", "已写入 ")])
def test_generate_serving_says_what_it_wrote(run_cli, tmp_path, lang, wrote):
    out = tmp_path / f"serve-{lang}"
    code, stdout, err = run_cli("generate", "--serving", "--model", "qwen2-7b", "--gpu", "a10", "--out", str(out),
                                "--lang", lang)
    assert code == 0, err
    assert stdout.startswith(wrote) and "vllm serve" in stdout


def test_serving_errors_under_json_have_the_cli_shape(run_cli, tmp_path):
    code, stdout, _ = run_cli("generate", "--serving", "--model", "llama-2-70b", "--gpu", "a10",
                              "--out", str(tmp_path / "s"), "--json")
    error = json.loads(stdout)["error"]
    assert code == 2 and error["type"] == "ServingError" and error["key"] == "sv_e_nofit" and error["exit_code"] == 2
