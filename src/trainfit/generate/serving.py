"""`generate --serving`: the engine's launch command for a serving setup, written as serve.sh + README.md.

Flag names are the engines' own (pinned by tests/test_serving_generate.py):
  vLLM `vllm serve MODEL`: vllm/engine/arg_utils.py (--tensor-parallel-size, --max-model-len,
    --gpu-memory-utilization, --kv-cache-dtype {auto,fp8,fp8_e5m2,fp8_e4m3}, --quantization, --max-num-seqs,
    --enforce-eager, --enable-lora, --max-lora-rank, --served-model-name, --enable-prefix-caching and its
    --no- form, --mamba-ssm-cache-dtype) and
    vllm/entrypoints/openai/cli_args.py (--lora-modules NAME=PATH).
  SGLang `python -m sglang.launch_server`: python/sglang/srt/server_args.py (--model-path, --tp-size,
    --context-length, --mem-fraction-static, --kv-cache-dtype {auto,fp8_e5m2,fp8_e4m3}, --quantization,
    --max-running-requests, --disable-cuda-graph, --lora-paths NAME=PATH, --served-model-name, --disable-radix-cache,
    --mamba-ssm-dtype).
Quantised checkpoints (AWQ, GPTQ, int8 W8A8) carry a quantization_config that both engines read, and vLLM then
picks its fastest kernel (awq_marlin, gptq_marlin); naming `--quantization awq` would force the slower one, so
only fp8 (quantised at load time from a 16-bit checkpoint) is passed explicitly.
  LMDeploy `lmdeploy serve api_server MODEL`: serving/engine_lmdeploy.py launch_command (0.18.0 flag names).
"""

from __future__ import annotations

import glob
import os
import shlex
from dataclasses import dataclass

from ..serving.estimate import ServingEstimate
from ..textsafe import markdown
from ..train.runner import ADAPTER_DIR, ARTIFACT_FILE, DEFAULT_OUTPUT_DIR, MERGED_DIR

# where train.py writes the merged model (its default output dir, then MERGED_DIR); overridable with --model-path
DEFAULT_MODEL_PATH = f"{DEFAULT_OUTPUT_DIR}/{MERGED_DIR}"
LORA_NAME = "adapter"
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


@dataclass(frozen=True)
class TrainedModel:
    """What `generate --serving --from RUN_DIR` serves: the folder (config.json + weights), its config, the name to
    serve it under and the artefact file train.py wrote beside it (None for a folder without one)."""
    path: str
    config: dict
    name: str
    artifact: dict | None

    @property
    def dtype(self) -> str | None:
        return (self.artifact or {}).get("dtype") or self.config.get("dtype") or self.config.get("torch_dtype")


def _candidates(run_dir: str, sub: str) -> list[str]:
    """RUN_DIR itself, RUN_DIR/SUB (RUN_DIR is train.py's output dir) and RUN_DIR/output/SUB (RUN_DIR is the folder
    `trainfit generate` wrote, trained there with the default output dir)."""
    return [run_dir, os.path.join(run_dir, sub), os.path.join(run_dir, DEFAULT_OUTPUT_DIR, sub)]


def find_trained_model(run_dir: str) -> TrainedModel:
    """The model a training run wrote (train.py's MERGED_DIR, see train/runner.py save_final_model), or a folder
    that holds a Hugging Face model itself; one clear error when there is none."""
    from .. import userjson
    from ..catalog.models import local_config
    from ..errors import GenerateError

    if not os.path.isdir(run_dir):
        raise GenerateError("gen_e_from_missing", path=run_dir)
    for folder in _candidates(run_dir, MERGED_DIR):
        if not os.path.isfile(os.path.join(folder, "config.json")):
            continue
        if not any(glob.glob(os.path.join(glob.escape(folder), pattern)) for pattern in WEIGHT_FILES):
            raise GenerateError("gen_e_from_no_weights", path=folder)
        config = local_config(folder)
        marker = os.path.join(folder, ARTIFACT_FILE)
        artifact = userjson.read(marker, ARTIFACT_FILE, cap_bytes=1024 * 1024) if os.path.isfile(marker) else None
        artifact = artifact if isinstance(artifact, dict) else None
        base = (artifact or {}).get("base_model")
        name = base.get("name") if isinstance(base, dict) else None
        if not isinstance(name, str) or not name.strip():
            name = os.path.basename(os.path.abspath(folder))
        return TrainedModel(path=os.path.abspath(folder), config=config, name=name, artifact=artifact)
    for folder in _candidates(run_dir, ADAPTER_DIR):
        if os.path.isfile(os.path.join(folder, "adapter_config.json")):
            raise GenerateError("gen_e_from_adapter_only", path=folder)
    raise GenerateError("gen_e_from_none", path=run_dir, merged=MERGED_DIR)


def trained_spec(trained: TrainedModel):
    """The ModelSpec the serving estimate reads: the trained model's own config.json, under the run's model name."""
    from ..catalog.models import spec_from_config

    return spec_from_config(trained.config, name=trained.name, source=os.path.join(trained.path, "config.json"))


def vllm_command(est: ServingEstimate, model_path: str, adapter: str | None, lora_rank: int | None) -> list[str]:
    s, e = est.spec, est.engine
    cmd = ["vllm", "serve", model_path, "--served-model-name", est.model.name,
           "--tensor-parallel-size", str(s.tp), "--max-model-len", str(e.max_model_len),
           "--gpu-memory-utilization", f"{e.memory_fraction:g}", "--max-num-seqs", str(e.max_num_seqs)]
    if s.weights == "fp8":
        cmd += ["--quantization", "fp8"]
    if s.weights == "fp16":
        cmd += ["--dtype", "float16"]
    if s.kv_cache_dtype == "fp8":
        cmd += ["--kv-cache-dtype", "fp8"]
    if not s.cuda_graphs:
        cmd.append("--enforce-eager")
    if s.prefix_caching is not None:  # stated: passed as stated (the version's default otherwise)
        cmd.append("--enable-prefix-caching" if s.prefix_caching else "--no-enable-prefix-caching")
    if s.mamba_ssm_cache_dtype != "auto":
        cmd += ["--mamba-ssm-cache-dtype", s.mamba_ssm_cache_dtype]
    if adapter:
        cmd += ["--enable-lora", "--lora-modules", f"{LORA_NAME}={adapter}"]
        if lora_rank:
            cmd += ["--max-lora-rank", str(lora_rank)]
    return cmd


def sglang_command(est: ServingEstimate, model_path: str, adapter: str | None) -> list[str]:
    s, e = est.spec, est.engine
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", model_path, "--served-model-name", est.model.name,
           "--tp-size", str(s.tp), "--context-length", str(e.max_model_len),
           "--mem-fraction-static", f"{e.memory_fraction:g}", "--max-running-requests", str(e.max_num_seqs)]
    if s.weights == "fp8":
        cmd += ["--quantization", "fp8"]
    if s.weights == "fp16":
        cmd += ["--dtype", "float16"]
    if s.kv_cache_dtype == "fp8":
        cmd += ["--kv-cache-dtype", "fp8_e4m3"]
    if not s.cuda_graphs:
        cmd.append("--disable-cuda-graph")
    if s.prefix_caching is False:  # SGLang's radix (prefix) cache is on unless disabled
        cmd.append("--disable-radix-cache")
    if s.mamba_ssm_cache_dtype != "auto":  # a hybrid's recurrent states (SGLang's default: float32)
        cmd += ["--mamba-ssm-dtype", s.mamba_ssm_cache_dtype]
    if adapter:
        cmd += ["--lora-paths", f"{LORA_NAME}={adapter}"]
    return cmd


def launch_command(est: ServingEstimate, model_path: str = DEFAULT_MODEL_PATH, adapter: str | None = None,
                   lora_rank: int | None = None) -> list[str]:
    if est.spec.engine == "sglang":
        return sglang_command(est, model_path, adapter)
    if est.spec.engine == "lmdeploy":
        from ..serving.engine_lmdeploy import launch_command as lmdeploy_command

        return lmdeploy_command(est, model_path, adapter)
    if est.spec.engine == "trtllm":
        from ..serving.engine_trtllm import launch_command as trtllm_command

        return trtllm_command(est, model_path, adapter)
    return vllm_command(est, model_path, adapter, lora_rank)


def serve_script(est: ServingEstimate, model_path: str, adapter: str | None, lora_rank: int | None) -> str:
    cmd = launch_command(est, "$MODEL_PATH", adapter, lora_rank)
    # the model path is the one word the shell expands; every other word is quoted as it is, "$MODEL_PATH" inside
    # one included (a served name or an adapter path the user chose)
    quoted = " ".join('"$MODEL_PATH"' if a == "$MODEL_PATH" else shlex.quote(a) for a in cmd)
    lines = ["#!/usr/bin/env bash", "# Written by `trainfit generate --serving`; see README.md.", "set -euo pipefail",
             f"MODEL_PATH=${{MODEL_PATH:-{shlex.quote(model_path)}}}"]
    if est.spec.weights in ("awq", "gptq", "int8"):
        lines.append(f"# MODEL_PATH must hold a {est.spec.weights} checkpoint of the trained model "
                     "(quantised after training; see README.md)")
    lines.append(f'exec {quoted} "$@"')
    return "\n".join(lines) + "\n"


def _trained_line(trained: TrainedModel | None, lang: str) -> list[str]:
    """Where the served model came from, when it is a training run's (--from)."""
    if trained is None:
        return []
    a = trained.artifact or {}
    what = ", ".join(str(x) for x in (a.get("method"), f"step {a['step']}" if a.get("step") is not None else None,
                                      trained.dtype) if x)
    if lang == "zh":
        return ["", f"模型：训练结果 {markdown(trained.path)}" + (f"（{markdown(what)}）" if what else "") + "。"]
    return ["", f"Model: the trained model at {markdown(trained.path)}" + (f" ({markdown(what)})" if what else "") + "."]


def readme(est: ServingEstimate, model_path: str, adapter: str | None, lang: str = "en",
           trained: TrainedModel | None = None) -> str:
    s, mem = est.spec, est.memory
    quant = {"awq": "AutoAWQ (4-bit, group 128)", "gptq": "GPTQModel / AutoGPTQ (4-bit, group 128)",
             "int8": "llm-compressor W8A8 int8"}.get(s.weights)
    if lang == "zh":
        head = [f"# 部署 {markdown(est.model.name)}（{s.engine}）", "",
                f"- {s.tp} 张 {est.gpu.id}（张量并行 {s.tp}），权重 {s.weights}，KV 缓存 {s.kv_cache_dtype}",
                f"- 预计 KV 容量 {mem.kv_tokens:,} tokens；{mem.max_model_len:,} tokens 时最大并发 "
                f"{mem.max_concurrency:.1f}", "", "启动：`./serve.sh`（可用环境变量 MODEL_PATH 覆盖模型路径）",
                *_trained_line(trained, lang)]
        if quant:
            head += ["", f"注意：{s.weights} 需要先用 {quant} 量化训练得到的模型。"]
        if adapter:
            head += ["", f"LoRA 适配器 {markdown(adapter)} 以名称 `{LORA_NAME}` 提供（请求时 model=\"{LORA_NAME}\"）。"]
        return "\n".join(head) + "\n"
    head = [f"# Serving {markdown(est.model.name)} with {s.engine}", "",
            f"- {s.tp} x {est.gpu.id} (tensor parallel {s.tp}), weights {s.weights}, KV cache {s.kv_cache_dtype}",
            f"- predicted KV capacity {mem.kv_tokens:,} tokens; max concurrency {mem.max_concurrency:.1f} at "
            f"{mem.max_model_len:,} tokens", "", "Start: `./serve.sh` (MODEL_PATH overrides the model directory)",
            *_trained_line(trained, lang)]
    if quant:
        head += ["", f"Note: {s.weights} needs the trained model quantised first with {quant}."]
    if adapter:
        head += ["", f"The LoRA adapter {markdown(adapter)} is served as `{LORA_NAME}` (request model=\"{LORA_NAME}\")."]
    return "\n".join(head) + "\n"


def serving_files(est: ServingEstimate, model_path: str = DEFAULT_MODEL_PATH, adapter: str | None = None,
                  lora_rank: int | None = None, lang: str = "en", trained: TrainedModel | None = None) -> dict[str, str]:
    return {"serve.sh": serve_script(est, model_path, adapter, lora_rank),
            "README.md": readme(est, model_path, adapter, lang, trained), **_engine_files(est)}


def _engine_files(est: ServingEstimate) -> dict[str, str]:
    """Files an engine's command names beside serve.sh (TensorRT-LLM's LLM-API options for an FP8 KV cache)."""
    from ..serving.engine_trtllm import extra_files

    return extra_files(est)
