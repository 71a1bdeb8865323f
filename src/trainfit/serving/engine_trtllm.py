"""TensorRT-LLM as a serving engine (`--engine trtllm`): its defaults, KV pool and launch command, read from its code.

Modelled version: DEFAULT_VERSION = 1.0.0, the PyTorch backend (the default backend of `trtllm-serve` and
`trtllm-bench` from 1.0). Files of github.com/NVIDIA/TensorRT-LLM, read through trainfit's code index (the stored
version of each file is named by its commit where the index gave one):

  - KV pool, PyTorch backend: tensorrt_llm/_torch/pyexecutor/_util.py `KvCacheCreator.configure_kv_cache_capacity`
    and `_cal_max_memory` (the version merged with PR #5933 "improve kvcache allocation in PyTorch runtime",
    2025-08, before 1.0.0; https://github.com/NVIDIA/TensorRT-LLM/pull/5933). Once the weights are loaded the executor
    runs dummy context requests of max_num_tokens tokens in all (`_create_dummy_context_requests`) against a small
    temporary KV cache, then
        peak_memory      = torch peak (weights + activations) + memory outside torch ("e.g., NCCL and CUDA graphs")
        available_kv_mem = (total_gpu_memory - peak_memory + temporary KV bytes) x free_gpu_memory_fraction
        max_tokens       = available_kv_mem // kv size per token
    i.e. KV = fraction x (device total - weights - activations - runtime memory): 0.9 of the FREE memory, not of
    the total (vLLM's gpu_memory_utilization is a share of the total). The KV cache manager then allocates whole
    blocks of tokens_per_block tokens; its log line is "[MemUsageChange] Allocated X GiB for max tokens in paged KV
    cache (N)".
  - KV bytes per token: tensorrt_llm/_torch/pyexecutor/resource_manager.py `KVCacheManager.get_cache_size_per_token`:
    2 (K, V) x layers x num_kv_heads x head_dim // tp x (1 byte when `quant_mode.has_fp8_kv_cache()`, else 2).
  - KvCacheConfig defaults, tensorrt_llm/llmapi/llm_args.py: free_gpu_memory_fraction 0.9 (None -> 0.9),
    tokens_per_block 32, max_tokens None (no cap; when set, the pool is min(fraction x free, max_tokens x bytes)),
    dtype "auto" = the checkpoint's kv_cache_quant_algo; "fp8" stores K/V in one byte (FP8 KV).
  - trtllm-serve, tensorrt_llm/commands/serve.py (a click command; read at commit 00209af1 of the index): MODEL,
    --backend (default pytorch), --tp_size (alias of --tensor_parallel_size), --max_batch_size and --max_num_tokens
    (default BuildConfig's: 2048 and 8192, tensorrt_llm/builder.py `BuildConfig`, commit 008b2b8d), --max_seq_len,
    --kv_cache_free_gpu_memory_fraction (alias of --free_gpu_memory_fraction, default 0.9), --port (8000), --config /
    --extra_llm_api_options YAML (where `kv_cache_config: {dtype: fp8}` turns on the FP8 KV cache). The scheduler is
    GUARANTEED_NO_EVICT with in-flight batching; the KV cache is paged. tests/data/trtllm_serve_options.json keeps
    the option names (tests/test_serving_trtllm.py checks the generated command against them).
  - trtllm-bench throughput (tensorrt_llm/bench/build/tuning.py `calc_engine_setting`, `finetune_setting`; called from
    tensorrt_llm/bench/benchmark/utils/general.py `get_settings` when neither --max_batch_size nor --max_num_tokens is
    given): bytes per token = 2 x layers x max(tp, kv_heads) x head_dim x (1 for an FP8 KV cache, else 2);
    free = GPU memory x GPUs - params x (1 byte FP8, else 2); requests = free x fraction / (bytes per token x
    (ISL + OSL)); raw batch = min(requests, 4096) / pp; raw tokens = min(raw batch x (1 + ISL / OSL), 32768);
    batch rounded up to 32 (at least 64) below 256, to 128 below 1024, else to 256; tokens rounded up to 256 (at
    least 2048) below 4096, to 512 below 8192, else to 1024. The same file's `_KV_CACHE_MAP` gives an FP8 (or NVFP4)
    checkpoint without a kv_cache_quant_algo an FP8 KV cache. Its default kv_cache_free_gpu_mem_fraction is 0.9
    (docs/source/performance/perf-overview.md: "the default setting of 0.90"; the published runs often use 0.95).
  - Weights: bf16 / fp16, fp8 (ModelOpt FP8 checkpoints, W8A8 on Ada/Hopper), int8 (INT8 weight-only or SmoothQuant
    W8A8), awq (int4_awq: W4A16, group 128). GPTQ checkpoints are not modelled here and are refused.

Older 0.x (the TensorRT backend: engines built by trtllm-build; e.g. the v0.17 perf-overview), where it differs:
  - the KV pool is sized by the C++ executor, cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp
    `BaseKVCacheManager::calculateMaxNumBlocks`: maxTokens = freeGpuMemoryFraction x (free memory + the buffer
    manager's free pool) / bytes per token, after the engine (weights, its activation "execution context memory"
    sized by max_num_tokens) and the runtime buffers are allocated: the same shape as 1.x, with no profiling pass;
  - tokens_per_block 64 (tensorrt_llm/plugin/plugin.py `PluginConfig._tokens_per_block`, 0.x); a block size the
    spec gives (e.g. `build.py --tokens_per_block 16`, NVIDIA/TensorRT-LLM#224) is honoured by every version;
  - max_num_tokens: 8192 by default from v0.11; before, with packed input and no --max_num_tokens, the engine's
    activations are sized for max_batch_size x max_input_len tokens (docs/source/memory.md "Activation size"): a
    case of such an engine states it as max_num_batched_tokens (trainfit's own default stays 8192);
  - `trtllm-bench build --quantization FP8` also sets the KV cache to FP8 (perf-overview v0.17: "If you specify FP8
    quantization, the KV cache will automatically be set to FP8 as well!").

What trainfit adds (not in TensorRT-LLM's code): the activation peak of the profiling pass is trainfit's
forward-pass model (memory.forward_peak over max_num_tokens tokens); the memory outside the weights and activations
(CUDA graphs, NCCL, cuBLAS workspaces, sampler and decoder buffers) is one named value, `trtllm_runtime_gib` in
catalog/data/serving.yaml, provisional (no published TensorRT-LLM log with the split was found). Against the published
KV capacities of data/validation/serving_kvcap_dev.jsonl it is too large for the 0.5 engine of #224 (-35%; ~0 GiB
fits) and about right for the 0.13 one of #2268 (+2%): see data/validation/serving_kvcap_sources.md.
"""

from __future__ import annotations

import math

from ..errors import ServingError
from ..estimate.params import count_params
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..units import GiB
from .engines import EngineSettings
from .memory import (MemoryBreakdown, forward_peak, kv_bytes_for_request, kv_bytes_per_token, layout, state_pooled,
                     state_slots, weights_per_gpu)
from .spec import ServingSpec

ENGINE = "trtllm"
DEFAULT_VERSION = "1.0.0"
FREE_GPU_MEMORY_FRACTION = 0.9  # llm_args.py KvCacheConfig.free_gpu_memory_fraction; serve.py default 0.9
TOKENS_PER_BLOCK = 32  # llm_args.py KvCacheConfig.tokens_per_block (1.x)
TOKENS_PER_BLOCK_0X = 64  # plugin.py PluginConfig._tokens_per_block (0.x TensorRT engines)
MAX_BATCH_SIZE = 2048  # builder.py BuildConfig.max_batch_size (trtllm-serve's default)
MAX_NUM_TOKENS = 8192  # builder.py BuildConfig.max_num_tokens (trtllm-serve's default)
BENCH_MAX_BATCH, BENCH_MAX_TOKENS = 4096, 32768  # tuning.py finetune_setting caps
WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "awq")
PORT = 8000  # serve.py --port default
SOURCE_WORDS = {"serve": "trtllm-serve", "bench": "trtllm-bench", "given": "--max-num-seqs / --max-num-batched-tokens"}
OPTIONS_FILE = "trtllm_options.yaml"  # the --extra_llm_api_options file generate --serving writes beside serve.sh


def backend(s: ServingSpec) -> str:
    """pytorch from 1.0 (serve.py's default backend); the TensorRT engine flow before."""
    return "pytorch" if s.version >= (1, 0, 0) else "tensorrt"


def check_weights(s: ServingSpec) -> None:
    if s.weights not in WEIGHT_FORMATS:
        raise ServingError("sv_e_trt_weights", value=s.weights, choices=" | ".join(WEIGHT_FORMATS))


def _round_up(x: float, step: int) -> int:
    return step * math.ceil(x / step)


def finetune_setting(requests: float, isl: int, osl: int, pp: int = 1) -> tuple[int, int]:
    """tuning.py finetune_setting (optimistic tuning on): (max_batch_size, max_num_tokens)."""
    raw_bs = min(requests, BENCH_MAX_BATCH) / pp
    raw_token = min(raw_bs * (1 + isl / osl), BENCH_MAX_TOKENS)
    if raw_bs < 256:
        bs = max(64, _round_up(raw_bs, 32))
    elif raw_bs < 1024:
        bs = _round_up(raw_bs, 128)
    else:
        bs = _round_up(raw_bs, 256)
    if raw_token < 4096:
        tokens = max(2048, _round_up(raw_token, 256))
    elif raw_token < 8192:
        tokens = _round_up(raw_token, 512)
    else:
        tokens = _round_up(raw_token, 1024)
    return bs, tokens


def bench_settings(m: ModelSpec, s: ServingSpec, gpu: GpuSpec, fraction: float) -> tuple[int, int]:
    """tuning.py calc_engine_setting: trtllm-bench's max_batch_size and max_num_tokens for the workload's ISL/OSL."""
    kv_bytes = 1 if s.kv_cache_dtype == "fp8" else 2
    per_token = 2 * m.layers * max(s.tp, m.kv_heads) * m.head_dim * kv_bytes / GiB
    engine = count_params(m) * (1 if s.weights == "fp8" else 2) / GiB
    available = gpu.memory_bytes / GiB * s.tp - engine
    requests = available * fraction / (per_token * (s.input_len + s.output_len))
    return finetune_setting(max(requests, 0.0), s.input_len, s.output_len)


def batch_source(s: ServingSpec) -> str:
    """Where max_batch_size / max_num_tokens come from: given, trtllm-bench's heuristic (all requests at once, the
    offline throughput run of `trtllm-bench throughput`), or trtllm-serve's defaults."""
    if s.max_num_seqs or s.max_num_batched_tokens:
        return "given"
    return "bench" if s.all_at_once else "serve"


def settings(m: ModelSpec, s: ServingSpec, gpu: GpuSpec, max_model_len: int) -> EngineSettings:
    """TensorRT-LLM's defaults filled in: free-memory fraction, tokens per block, max_batch_size, max_num_tokens."""
    check_weights(s)
    frac = s.gpu_memory_utilization or FREE_GPU_MEMORY_FRACTION
    if s.gpu_memory_utilization is not None and s.gpu_memory_utilization >= 1:
        raise ServingError("sv_e_trt_fraction", value=s.gpu_memory_utilization)
    block = s.block_size or (TOKENS_PER_BLOCK if backend(s) == "pytorch" else TOKENS_PER_BLOCK_0X)  # given: honoured
    bs, tokens = MAX_BATCH_SIZE, MAX_NUM_TOKENS
    if batch_source(s) == "bench":
        bs, tokens = bench_settings(m, s, gpu, frac)
    return EngineSettings(ENGINE, s.engine_version, frac, block, max_model_len, s.max_num_seqs or bs,
                          s.max_num_batched_tokens or tokens, True, False)


def memory(m: ModelSpec, s: ServingSpec, e: EngineSettings, gpu: GpuSpec, view) -> MemoryBreakdown:
    """KV = fraction x (device total - weights - the profiling pass's activations - runtime memory), in whole
    blocks (see the module docstring)."""
    total = gpu.memory_bytes * (1.0 - view("memory_reserved_fraction")) - view("cuda_driver_reserved_gib") * GiB
    w = weights_per_gpu(m, s.weights, s.tp)
    act = forward_peak(m, e.max_num_batched_tokens, s.tp)
    runtime = view("trtllm_runtime_gib") * GiB
    free = total - w.total - act - runtime
    lay = layout(m, s)  # a hybrid's max_batch_size states come off the free memory first (hybrid.py)
    if lay:
        free -= state_slots(e) * lay.state * lay.state_bytes
    budget = e.memory_fraction * free if free > 0 else free
    if lay:
        return state_pooled(m, s, e, lay, total, w, act, runtime, budget)
    per_token = kv_bytes_per_token(m, s)
    blocks = max(0, int(budget // (per_token * e.block_size)))
    return MemoryBreakdown(total, e.memory_fraction, w, act, runtime, 0.0, budget, per_token, blocks, e.block_size,
                           blocks * e.block_size, e.max_model_len,
                           kv_bytes_for_request(m, s, e.max_model_len, e.block_size), 0.0)


def free_before_kv(mem: MemoryBreakdown) -> float:
    """Bytes free once the weights, activations and runtime memory are allocated (what the fraction applies to)."""
    return mem.total_gpu - mem.weights.total - mem.buffers - mem.activation - mem.non_torch


def details(s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown) -> dict:
    """The TensorRT-LLM numbers `--json` carries beside the common engine fields."""
    return {"backend": backend(s), "free_gpu_memory_fraction": e.memory_fraction, "tokens_per_block": e.block_size,
            "max_batch_size": e.max_num_seqs, "max_num_tokens": e.max_num_batched_tokens,
            "batch_settings_from": batch_source(s),
            "free_memory_before_kv_gib": round(free_before_kv(mem) / GiB, 3),
            "runtime_memory_gib": round(mem.non_torch / GiB, 3),
            "kv_dtype_bytes": 1 if s.kv_cache_dtype == "fp8" else 2}


def note_values(s: ServingSpec, e: EngineSettings, mem: MemoryBreakdown) -> tuple[str, dict]:
    """The assumption line (i18n key and values) the report prints and `--json` carries."""
    d = details(s, e, mem)
    return ("sv_trt_note", {"version": e.version, "backend": d["backend"], "frac": d["free_gpu_memory_fraction"],
                            "free": d["free_memory_before_kv_gib"], "bs": d["max_batch_size"],
                            "tokens": d["max_num_tokens"], "source": SOURCE_WORDS[d["batch_settings_from"]]})


def budget_row(est, text) -> tuple[str, str]:
    """The memory table's first row for TensorRT-LLM: the device total (the fraction applies to the free rest)."""
    mem = est.memory
    label = text("sv_trt_budget").format(total=mem.total_gpu / GiB, frac=mem.fraction,
                                         free=free_before_kv(mem) / GiB)
    return label, f"{mem.total_gpu / GiB:.2f}"


def launch_command(est, model_path: str, adapter: str | None = None) -> list[str]:
    """`trtllm-serve MODEL` with the settings the estimate assumed (flag names from serve.py, see above). serve.py
    has no LoRA flag (adapters go through the LLM-API options), so a LoRA adapter is refused: merge it first."""
    if adapter:
        raise ServingError("sv_e_trt_lora")
    s, e = est.spec, est.engine
    cmd = ["trtllm-serve", model_path, "--backend", backend(s), "--tp_size", str(s.tp),
           "--max_batch_size", str(e.max_num_seqs), "--max_num_tokens", str(e.max_num_batched_tokens),
           "--max_seq_len", str(e.max_model_len),
           "--kv_cache_free_gpu_memory_fraction", f"{e.memory_fraction:g}", "--port", str(PORT)]
    if s.kv_cache_dtype == "fp8":
        cmd += ["--extra_llm_api_options", OPTIONS_FILE]
    return cmd


def extra_files(est) -> dict[str, str]:
    """The LLM-API options file the command names (FP8 KV cache: kv_cache_config.dtype, llm_args.py)."""
    if est.spec.engine != ENGINE or est.spec.kv_cache_dtype != "fp8":
        return {}
    return {OPTIONS_FILE: "# Written by `trainfit generate --serving` (trtllm-serve --extra_llm_api_options)\n"
                          "kv_cache_config:\n  dtype: fp8\n"}
