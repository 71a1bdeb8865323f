"""ServingSpec: what is served and how (engine, weight format, KV dtype, lengths, load). Validated on construction.

Engine defaults (utilisation, block size, batch limits) are resolved in `engines.py`, from the engines' code.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from ..errors import ServingError, did_you_mean
from ..i18n import say
from . import engine_lmdeploy as lmd

ENGINES = ("vllm", "sglang", "trtllm", "lmdeploy")
ENGINE_ALIASES = {"tensorrt-llm": "trtllm", "tensorrt_llm": "trtllm"}  # the validation schema's spelling
WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "awq", "gptq")
KV_DTYPES = ("auto", "fp8", "int8", "int4")  # int8/int4: lmdeploy only (--quant-policy 8/4)
SAMPLERS = ("flashinfer", "pytorch")
MAMBA_SSM_DTYPES = ("auto", "float32", "float16", "bfloat16")  # vLLM config/cache.py MambaDType (bfloat16: later)
WORKLOADS = ("fixed", "uniform", "sharegpt")  # and file:PATH
# bits per weight of a quantised Linear, before scales and zeros (weights.py counts those)
WEIGHT_BITS = {"bf16": 16, "fp16": 16, "fp8": 8, "int8": 8, "awq": 4, "gptq": 4}
DEFAULT_VERSION = {"vllm": "0.10.1", "sglang": "0.4.6", "trtllm": "1.0.0",
                   "lmdeploy": lmd.DEFAULT_VERSION}  # trtllm: engine_trtllm.py; lmdeploy: engine_lmdeploy.py
DEFAULT_MAX_MODEL_LEN = 8192  # trainfit's default (the engines default to the model's full context); stated


# what a 4-bit weight format is called elsewhere -> trainfit's names for it (a closer spelling, int8, is wrong)
MEANT = {"int4": ("awq", "gptq"), "4bit": ("awq", "gptq"), "w4a16": ("awq", "gptq"), "nf4": ("awq", "gptq")}


def choice(flag: str, value: str, choices: tuple[str, ...]) -> str:
    v = str(value).strip().lower()
    if v not in choices:
        meant = [c for c in MEANT.get(v, ()) if c in choices]
        dym = say("ei_dym", close=", ".join(meant)) if meant else did_you_mean(v, choices)
        raise ServingError("sv_e_choice", flag=flag, choices=" | ".join(choices), value=value, dym=dym)
    return v


def positive(flag: str, value, integer: bool = True):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
    if integer:
        ok = ok and int(value) == value
    if not ok:
        raise ServingError("sv_e_positive", flag=flag, value=value)
    return int(value) if integer else float(value)


@lru_cache(maxsize=64)
def parse_version(text: str) -> tuple[int, ...]:
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", str(text).strip())
    if not m:
        raise ServingError("sv_e_version", value=text)
    return tuple(int(x) for x in m.groups(default="0"))


@dataclass(frozen=True)
class ServingSpec:
    engine: str = "vllm"
    engine_version: str = ""  # "" = DEFAULT_VERSION[engine]
    weights: str = "bf16"
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float | None = None  # vLLM gpu_memory_utilization / SGLang mem_fraction_static
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    tp: int = 1
    input_len: int = 512
    output_len: int = 256
    concurrency: int | None = None  # closed loop; None with request_rate None = 1
    request_rate: float | None = None  # open loop, requests/s (float('inf') = all at once)
    cuda_graphs: bool = True
    block_size: int | None = None  # KV block (tokens); None = the engine's default (vLLM 16, TRT-LLM 32/64, ...)
    sampler: str | None = None  # vLLM V1 top-k/top-p sampler: flashinfer | pytorch; None = the version's default
    custom_all_reduce: bool | None = None  # vLLM's custom all-reduce under TP; None = what the GPU allows
    workload: str = "fixed"  # request mix: fixed | uniform | sharegpt | file:PATH (serving/workload.py)
    lmdeploy_backend: str | None = None  # LMDeploy --backend turbomind | pytorch; None = turbomind (its default)
    range_ratio: float = 0.0  # uniform: lengths in [len (1 - r), len (1 + r)] (vLLM --random-range-ratio)
    prefix_caching: bool | None = None  # vLLM --(no-)enable-prefix-caching; None = the version's default
    mamba_ssm_cache_dtype: str = "auto"  # vLLM --mamba-ssm-cache-dtype: a hybrid's recurrent states (hybrid.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "engine", choice("engine", ENGINE_ALIASES.get(str(self.engine).strip().lower(),
                                                                             self.engine), ENGINES))
        object.__setattr__(self, "weights", choice("weights", self.weights, WEIGHT_FORMATS))
        object.__setattr__(self, "kv_cache_dtype", choice("kv-cache-dtype", self.kv_cache_dtype, KV_DTYPES))
        if not self.engine_version:
            object.__setattr__(self, "engine_version", DEFAULT_VERSION[self.engine])
        parse_version(self.engine_version)
        if self.engine == "lmdeploy":
            object.__setattr__(self, "lmdeploy_backend", lmd.check(self.version, self.lmdeploy_backend,
                                                                   self.kv_cache_dtype, self.weights))
        elif self.kv_cache_dtype in ("int8", "int4"):
            raise ServingError("sv_e_lmd_kv_engine", value=self.kv_cache_dtype, engine=self.engine)
        u = self.gpu_memory_utilization
        if u is not None and (isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= 1):
            raise ServingError("sv_e_fraction", flag="gpu-memory-utilization", value=u)
        for flag, value in (("max-model-len", self.max_model_len), ("max-num-seqs", self.max_num_seqs),
                            ("max-num-batched-tokens", self.max_num_batched_tokens)):
            if value is not None:
                positive(flag, value)
        for flag, value in (("gpus", self.tp), ("input-len", self.input_len), ("output-len", self.output_len)):
            positive(flag, value)
        if self.block_size is not None:
            positive("block-size", self.block_size)
        if self.sampler is not None:
            object.__setattr__(self, "sampler", choice("sampler", self.sampler, SAMPLERS))
        if self.concurrency is not None and self.request_rate is not None:
            raise ServingError("sv_e_load")
        if self.concurrency is not None:
            positive("concurrency", self.concurrency)
        if self.request_rate is not None:
            positive("request-rate", self.request_rate, integer=False)
        w = str(self.workload).strip()
        if w.lower() in WORKLOADS:
            w = w.lower()
        elif not w.startswith("file:") or len(w) <= 5:
            raise ServingError("sv_e_workload", value=self.workload)
        object.__setattr__(self, "workload", w)
        object.__setattr__(self, "mamba_ssm_cache_dtype", choice("mamba-ssm-cache-dtype", self.mamba_ssm_cache_dtype,
                                                                 MAMBA_SSM_DTYPES))
        if self.prefix_caching is not None and not isinstance(self.prefix_caching, bool):
            raise ServingError("sv_e_prefix_caching", value=self.prefix_caching)
        r = self.range_ratio
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0 <= r < 1:
            raise ServingError("sv_e_range_ratio", value=r)

    @property
    def all_at_once(self) -> bool:
        """Every request sent at t = 0 (--request-rate inf): benchmarks' offline runs (burst.py with num_prompts)."""
        return self.request_rate is not None and math.isinf(self.request_rate)

    @property
    def version(self) -> tuple[int, ...]:
        return parse_version(self.engine_version)

    @property
    def generation(self) -> str:
        """The engine generation whose overheads apply (serving.yaml by_framework keys): vLLM V0 (< 0.8), V1
        (0.8-0.20) and V1 from 0.21 (the release that started profiling CUDA-graph memory; the step overheads
        measured on 0.30 are much lower than on 0.8-era V1, and 0.21 is where trainfit splits them)."""
        if self.engine in ("sglang", "trtllm"):
            return self.engine
        if self.engine == "lmdeploy":
            return "lmdeploy" if self.lmdeploy_backend == "turbomind" else "lmdeploy-pytorch"
        if self.version >= (0, 21, 0):
            return "vllm-v1-021"
        return "vllm-v1" if self.vllm_v1 else "vllm-v0"

    @property
    def vllm_v1(self) -> bool:
        """vLLM's V1 engine is the default from 0.8.0 (vllm/envs.py VLLM_USE_V1)."""
        return self.engine == "vllm" and self.version >= (0, 8, 0)
