"""Engine defaults and how each engine sizes its KV cache, read from the engines' code.

vLLM (github.com/vllm-project/vllm):
  - `gpu_memory_utilization` 0.9, `block_size` 16: vllm/config.py CacheConfig (0.6-0.10; vllm/config/cache.py later).
  - KV budget: vllm/v1/worker/gpu_worker.py `determine_available_memory` (and the V0 worker's
    `determine_num_available_blocks`): total_gpu_memory x gpu_memory_utilization - peak torch memory of a
    profiling forward pass (weights + activations) - non-torch memory (cuBLAS, NCCL). CUDA graphs are captured
    after the KV cache is allocated, in the headroom, until v0.21.0, which estimates their memory first and
    subtracts it (its log: "CUDA graph memory profiling is enabled (default since v0.21.0)").
  - the profiling pass runs `max_num_batched_tokens` tokens as `max_num_seqs` sequences (V0
    `ModelRunner.profile_run`; V1 `GPUModelRunner.profile_run` then `_dummy_sampler_run` over max_num_seqs logits).
  - `max_num_batched_tokens` for `vllm serve`: V1 (>= 0.8) vllm/engine/arg_utils.py `get_batch_defaults`: 8192 on
    GPUs with >= 70 GiB that are not A100, else 2048; `max_num_seqs` 1024 / 256 likewise. V0: without chunked
    prefill max(max_model_len, 2048) (vllm/config.py SchedulerConfig); chunked prefill is switched on by default
    when max_model_len > 32K, with 2048 tokens per step (0.6.x arg_utils.py).
  - the profiling pass's peak (V1, vllm/v1/worker/gpu_model_runner.py `profile_run`): the forward pass over
    max_num_batched_tokens, then `_dummy_sampler_run` on the max_num_seqs last hidden states: fp32 logits over the
    whole vocabulary on every TP rank (V1 all-gathers them), sampled with top-p 0.9 and top-k vocab-1, so the
    top-k/top-p sampler runs on them: FlashInfer's kernels (vllm/v1/sample/ops/topk_topp_sampler.py; the log says
    "Using FlashInfer for top-p & top-k sampling.") or the PyTorch-native path, which sorts the logits (values and
    int64 indices) and keeps softmax and cumsum copies. Which one runs by default changed with the versions: 0.10
    logs show FlashInfer whenever it is installed, the 0.11 profiles of llm-d/llm-d-benchmark show the native
    path's memory (38 bytes per logit element on four models), and the current code turns FlashInfer on again
    ("The sampler is on by default"); a case or `sampler` states it when the log does.
  - custom all-reduce under TP (vllm/distributed/device_communicators/custom_all_reduce.py): off on more than two
    PCIe GPUs and where P2P is missing (GeForce cards); its buffers show up as non-torch memory.
  - KV capacity: num_gpu_blocks = budget // (block_size x bytes per token); printed "GPU KV cache size: N tokens"
    (V1, vllm/v1/core/kv_cache_utils.py) or "# GPU blocks: N" (V0); "Maximum concurrency for L tokens per
    request" = capacity / L (V0) or blocks / ceil(L / block_size) (V1).
SGLang (github.com/sgl-project/sglang, python/sglang/srt/server_args.py, model_executor/model_runner.py):
  - `mem_fraction_static` 0.88 at TP 1, 0.87 at TP 2, 0.85 at TP 4, 0.81 at TP 8 (0.4.x `__post_init__`);
  - KV pool: `profile_max_num_token`: free memory after loading the weights - total x (1 - mem_fraction_static),
    divided by the bytes per token; page size 1; `chunked_prefill_size` 2048 below 25 GB, else 8192. Its "total"
    is not the device's: it is the free memory `init_torch_distributed` measures once the CUDA context and NCCL
    exist (the log's "Load weight begin. avail mem=..."), so the pool is
    fraction x (device total - context) - (weights and what loading them allocates).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..spec.hardware import GpuSpec
from ..units import GiB
from . import engine_lmdeploy as lmd
from .spec import ServingSpec

VLLM_UTILIZATION = 0.9  # vllm CacheConfig.gpu_memory_utilization
VLLM_BLOCK_SIZE = 16  # vllm CacheConfig.block_size on CUDA
VLLM_V0_MIN_BATCHED_TOKENS = 2048  # vllm SchedulerConfig: max(max_model_len, 2048) without chunked prefill
VLLM_V0_CHUNKED_ABOVE = 32 * 1024  # arg_utils.py 0.6: chunked prefill on by default for max_model_len > 32K
SGLANG_MEM_FRACTION = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))  # (tp >=, fraction)


@dataclass(frozen=True)
class EngineSettings:
    """The numbers the engine runs with once its defaults are filled in."""

    engine: str
    version: str
    memory_fraction: float
    block_size: int
    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    profiles_activations: bool  # the KV budget subtracts a profiling pass's activation peak (vLLM)
    subtracts_cuda_graphs: bool  # vLLM >= 0.21
    sampler: str = "v0"  # vLLM's profiled sampler: v0 | flashinfer | pytorch (V1's top-k/top-p implementations)
    custom_all_reduce: bool = False  # vLLM's custom all-reduce buffers exist (TP > 1)
    details: dict = field(default_factory=dict, compare=False)  # engine-specific settings shown in --json (LMDeploy)


def _big_gpu(gpu: GpuSpec) -> bool:
    """vLLM get_batch_defaults: device_memory >= 70 GiB and 'a100' not in the device name."""
    return gpu.memory_bytes >= 70 * GiB and "a100" not in gpu.id and "a800" not in gpu.id


def default_sampler(s: ServingSpec) -> str:
    """V0 (< 0.8) has its own sampler; V1 profiles FlashInfer's top-k/top-p up to 0.10 and from 0.21, the PyTorch
    path from 0.11 to 0.20 (see the module docstring for the evidence)."""
    if not s.vllm_v1:
        return "v0"
    if s.sampler:
        return s.sampler
    return "pytorch" if (0, 11, 0) <= s.version < (0, 21, 0) else "flashinfer"


def custom_all_reduce(s: ServingSpec, gpu: GpuSpec) -> bool:
    """vLLM enables its custom all-reduce for TP 2-8 over NVLink, and over PCIe only for two GPUs that can reach
    each other (P2P): GeForce cards cannot."""
    if s.custom_all_reduce is not None:
        return s.custom_all_reduce and s.tp > 1
    if s.tp < 2 or s.tp not in (2, 4, 6, 8):
        return False
    if gpu.nvlink_gbs:
        return True
    return s.tp == 2 and not gpu.id.startswith("rtx")


def resolve(s: ServingSpec, gpu: GpuSpec, max_model_len: int) -> EngineSettings:
    if s.engine == "lmdeploy":  # engine_lmdeploy.py
        got = lmd.settings(s.version, s.lmdeploy_backend, gpu.id, s.block_size, ServingSpec.block_size,
                           s.gpu_memory_utilization, s.max_num_seqs, s.max_num_batched_tokens)
        got["details"].update(session_len=max_model_len, quant_policy=lmd.quant_policy(s.version, s.kv_cache_dtype))
        return EngineSettings("lmdeploy", s.engine_version, max_model_len=max_model_len, **got)
    if s.engine == "sglang":
        frac = s.gpu_memory_utilization or next(f for tp, f in SGLANG_MEM_FRACTION if s.tp >= tp)
        chunk = 2048 if gpu.memory_bytes < 25e9 else 8192
        return EngineSettings("sglang", s.engine_version, frac, 1, max_model_len, s.max_num_seqs or 1024,
                              s.max_num_batched_tokens or chunk, False, False)
    frac = s.gpu_memory_utilization or VLLM_UTILIZATION
    if s.vllm_v1:
        big = _big_gpu(gpu)
        seqs = s.max_num_seqs or (1024 if big else 256)
        batched = s.max_num_batched_tokens or (8192 if big else 2048)
    else:
        seqs = s.max_num_seqs or 256
        chunked = max_model_len > VLLM_V0_CHUNKED_ABOVE
        batched = s.max_num_batched_tokens or (VLLM_V0_MIN_BATCHED_TOKENS if chunked else
                                               max(max_model_len, VLLM_V0_MIN_BATCHED_TOKENS))
    return EngineSettings("vllm", s.engine_version, frac, s.block_size or VLLM_BLOCK_SIZE, max_model_len, seqs,
                          batched, True, s.version >= (0, 21, 0) and s.cuda_graphs, default_sampler(s),
                          custom_all_reduce(s, gpu))
