"""LMDeploy (TurboMind and its PyTorch engine) as a serving engine: defaults, KV budget, KV bytes per token, the
launch command. Read from github.com/InternLM/lmdeploy (the `fetch`ed mirror: tags v0.2.0-v0.16.0, HEAD 1263d5cd
= 0.16.0) and the PyPI wheel lmdeploy-0.18.0-cp311-cp311-manylinux_2_28_x86_64.whl (Python files only; its C++ is
compiled). The default version is 0.18.0, what `pip install lmdeploy` gives on 2026-12-07; TurboMind's C++ was read
at 0.16.0, the newest source available here.

Defaults (lmdeploy/messages.py TurbomindEngineConfig / PytorchEngineConfig; lmdeploy/cli/utils.py ArgumentHelper):
  - `cache_max_entry_count` 0.8 (>= 0.2.2), 0.5 at 0.2.0-0.2.1 (messages.py v0.2.0 l.115, v0.2.2 l.120).
    What it is a fraction of (TurboMind src/turbomind/models/llama/BlockManager.cc `GetBlockCount`):
    v0.2.0-0.2.1 `total * ratio / block_size` (cudaMemGetInfo's TOTAL); from v0.2.2 `free * ratio / block_size`,
    the FREE memory once the weights are loaded (min over TP ranks, engine.cc `get_free_size` v0.12.0 l.232).
    0.16.0 keeps the rule in its object cache (src/turbomind/turbomind.cc `CreateEngine`: cache_bytes =
    free_bytes x cache_ratio, logged "Object cache budget: ... MB from free ... MB and ratio ...").
  - PyTorch engine (0.18.0 lmdeploy/pytorch/engine/executor/base.py `_get_runtime_size`/`_update_num_gpu_blocks`):
    free memory after building the model, minus a runtime reserve (max_prefill_token_num + 2 x max_batches) x vocab
    x 2 bytes, times cache_max_entry_count, // the block's bytes (min over ranks; at least 16 blocks).
  - block length: TurboMind `cache_block_seq_len` 128 before v0.3.0 (turbomind/deploy/target_model/base.py
    v0.2.6 l.59), 64 from v0.3.0; PyTorch `block_size` 64 (messages.py). On sm80+ TurboMind wants a multiple of 32.
  - `max_batch_size`: 128 before v0.6.0 (messages.py v0.4.0 l.133); from v0.6.0 `None` -> lmdeploy/utils.py
    `get_max_batch_size('cuda')`: 384 on A100/A800, 1024 on H100/H800/H200/L20Y, else 128 (0.18.0 l.404).
  - `max_prefill_token_num` 8192 (cli/utils.py 0.18.0 l.652); `session_len` None = the model's context (trainfit
    uses its own default, 8192 capped at the model's, as for the other engines).
  - `quant_policy` 0 | 4 | 8 = KV as the model dtype | int4 | int8 (messages.py QuantPolicy; TurboMind rejects the
    fp8 policies 16/17, messages.py 0.16.0 l.355). Before v0.4.0 TurboMind's only KV quantisation was int8, switched
    on by quant_policy 4 (docs/en/quantization/kv_int8.md v0.2.6: "modify quant_policy from default 0 to 4").
  - weights: `--model-format awq` (4-bit, group 128; from v0.2.0), gptq (from v0.6.0), fp8 checkpoints (from
    v0.9.0): the choices of cli/utils.py `model_format` at those tags.
    W8A8 int8 (`lmdeploy lite smooth_quant`) runs on the PyTorch engine only.
  - `--backend turbomind` is the CLI default (cli/utils.py 0.18.0 l.394); api_server falls back to pytorch only for
    models TurboMind does not support (`autoget_backend`).

KV bytes per token (TurboMind src/turbomind/kernels/attention/block.h `Layout`, v0.12.0 l.124-150; 0.16.0
src/turbomind/models/llama/unified_attention_layer.cc l.150: kv_head_num / tp_size heads per rank): per layer and KV
head, K and V each take head_dim x bits / 8 bytes, plus, when quantised (t_bits = 16), a 16-bit scale and zero for K
and for V per token ("token_param_size = t_bits * 2 / 8" = 4 bytes each). The PyTorch engine stores the same
(0.18.0 lmdeploy/pytorch/engine/cache_engine/schema.py `build_quant_cache_descs`: scale/zero [..., 2] in the model
dtype). Before v0.4.0 int8 KV had per-tensor scales only (no per-token parameters).

Memory besides weights and KV: the CUDA context, NCCL/cuBLAS workspaces allocated before the free-memory query
(`lmdeploy_pre_kv_gib`, serving.yaml); the forward buffers are allocated after the KV cache out of the other
1 - cache_max_entry_count, so they do not reduce it (0.16.0 turbomind.cc: the LanguageModel is built after the
cache region; before 0.16 it was built before, its buffers then lie in `lmdeploy_pre_kv_gib`).

This module imports nothing from the rest of trainfit.serving (spec.py, engines.py and memory.py call into it).
"""

from __future__ import annotations

from ..errors import ServingError, did_you_mean

DEFAULT_VERSION = "0.18.0"  # PyPI's current release on 2026-12-07
BACKENDS = ("turbomind", "pytorch")
KV_DTYPES = ("auto", "int8", "int4")  # quant_policy 0 / 8 / 4
WEIGHTS = {"turbomind": ("bf16", "fp16", "fp8", "awq", "gptq"), "pytorch": ("bf16", "fp16", "fp8", "int8", "awq")}
MODEL_FORMAT = {"awq": "awq", "gptq": "gptq", "fp8": "fp8"}  # trainfit format -> --model-format
QUANT_POLICY = {"auto": 0, "int8": 8, "int4": 4}
KV_BITS = {"auto": 16, "int8": 8, "int4": 4}
PARAM_BYTES = 4  # a 16-bit scale and zero per token, per head, for K and again for V (block.h token_param_size)
MAX_PREFILL_TOKENS = 8192  # cli/utils.py max_prefill_token_num default
MAX_BATCH_BY_GPU = (("a100", 384), ("a800", 384), ("h100", 1024), ("h800", 1024), ("l20y", 1024), ("h200", 1024))
MAX_BATCH_OTHER = 128  # get_max_batch_size for GPUs not in its map; the fixed default before v0.6.0
# --model-format choices (cli/utils.py ArgumentHelper.model_format): awq from v0.2.0, gptq from v0.6.0, fp8 from v0.9.0
FORMAT_SINCE = {"gptq": (0, 6, 0), "fp8": (0, 9, 0)}


def _v(version: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(version[:3])


def check(engine_version: tuple[int, ...], backend: str | None, kv_dtype: str, weights: str) -> str:
    """The backend after its default; raises ServingError on what LMDeploy at that version does not offer."""
    b = str(backend or "turbomind").strip().lower()
    if b not in BACKENDS:
        raise ServingError("sv_e_choice", flag="lmdeploy-backend", choices=" | ".join(BACKENDS), value=backend,
                           dym=did_you_mean(b, BACKENDS))
    if _v(engine_version) < (0, 2, 0):
        raise ServingError("sv_e_lmd_version", value=".".join(map(str, engine_version)))
    if kv_dtype not in KV_DTYPES:
        raise ServingError("sv_e_lmd_kv", value=kv_dtype, choices=" | ".join(KV_DTYPES))
    if kv_dtype == "int4" and _v(engine_version) < (0, 4, 0):
        raise ServingError("sv_e_lmd_kv_old", value=kv_dtype)
    if weights not in WEIGHTS[b]:
        raise ServingError("sv_e_lmd_weights", value=weights, backend=b, choices=" | ".join(WEIGHTS[b]))
    if _v(engine_version) < FORMAT_SINCE.get(weights, (0, 0, 0)):
        raise ServingError("sv_e_lmd_format_old", value=weights, since=".".join(map(str, FORMAT_SINCE[weights])))
    return b


def serves(engine: str, backend: str | None, weights: str) -> bool:
    """Whether a weight format can be tried (the search's alternatives): any for the other engines."""
    return engine != "lmdeploy" or weights in WEIGHTS[backend or "turbomind"]


def block_len(version: tuple[int, ...], backend: str, block_size: int, spec_default: int) -> int:
    """cache_block_seq_len / block_size: the given one, else (ServingSpec's default, None = "not given") LMDeploy's
    own default."""
    if block_size and block_size != spec_default:
        return block_size
    if backend == "turbomind" and _v(version) < (0, 3, 0):
        return 128
    return 64


def max_batch(version: tuple[int, ...], gpu_id: str) -> int:
    """lmdeploy/utils.py get_max_batch_size (>= 0.6.0, matched on the device name); 128 before."""
    if _v(version) < (0, 6, 0):
        return MAX_BATCH_OTHER
    name = gpu_id.lower()
    return next((n for key, n in MAX_BATCH_BY_GPU if key in name), MAX_BATCH_OTHER)


def entry_count(version: tuple[int, ...], given: float | None) -> float:
    """cache_max_entry_count: 0.5 (of total) at 0.2.0-0.2.1, 0.8 (of free) after."""
    if given is not None:
        return given
    return 0.5 if _v(version) < (0, 2, 2) else 0.8


def of_total(version: tuple[int, ...], backend: str) -> bool:
    """TurboMind 0.2.0-0.2.1 takes the fraction of the device's total memory; every later version of the free."""
    return backend == "turbomind" and _v(version) < (0, 2, 2)


def settings(version: tuple[int, ...], backend: str, gpu_id: str, block_size: int, spec_default_block: int,
             cache_max_entry_count: float | None, max_batch_size: int | None, max_prefill: int | None) -> dict:
    """The numbers LMDeploy runs with, as EngineSettings' fields (engines.resolve builds it)."""
    frac = entry_count(version, cache_max_entry_count)
    return {"memory_fraction": frac, "block_size": block_len(version, backend, block_size, spec_default_block),
            "max_num_seqs": max_batch_size or max_batch(version, gpu_id),
            "max_num_batched_tokens": max_prefill or MAX_PREFILL_TOKENS, "profiles_activations": False,
            "subtracts_cuda_graphs": False, "sampler": backend,
            "details": {"backend": backend, "cache_max_entry_count": frac,
                        "cache_fraction_of": "total" if of_total(version, backend) else "free_after_weights",
                        "session_len": None, "max_batch_size": max_batch_size or max_batch(version, gpu_id),
                        "max_prefill_token_num": max_prefill or MAX_PREFILL_TOKENS}}


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, tp: int, kv_dtype: str,
                       version: tuple[int, ...]) -> int:
    """Per GPU, all layers: layers x (kv_heads / tp) x 2 (K, V) x (head_dim x bits / 8 + scale/zero bytes)."""
    bits = KV_BITS[kv_dtype]
    params = PARAM_BYTES if bits < 16 and _v(version) >= (0, 4, 0) else 0
    per_head = 2 * (head_dim * bits // 8 + params)
    return layers * max(1, kv_heads // tp) * per_head


def runtime_reserve(backend: str, max_prefill: int, max_batch_size: int, vocab: int) -> float:
    """PyTorch engine: (max_prefill_token_num + 2 x max_batches) x vocab x 2 bytes, taken off the free memory before
    the fraction (executor/base.py `_get_runtime_size`, 0.18.0); TurboMind reserves nothing."""
    if backend != "pytorch":
        return 0.0
    return float((max_prefill + 2 * max_batch_size) * vocab * 2)


def kv_budget(total: float, weights: float, pre_kv: float, runtime: float, fraction: float, by_total: bool) -> float:
    """Bytes of KV cache: fraction x total (TurboMind 0.2.0-0.2.1), else fraction x (free after the weights and the
    pre-KV allocations - the PyTorch engine's runtime reserve). Negative when the weights do not fit."""
    free = total - pre_kv - weights
    if free <= 0:
        return free
    if by_total:  # the engine asks for it whatever the weights left: more than is free fails to allocate
        want = fraction * total
        return want if want <= free else free - want
    return fraction * (free - runtime)


def blocks(budget: float, per_token: int, block: int) -> int:
    return max(0, int(budget // (per_token * block))) if budget > 0 else 0


def budget_row(est, text) -> tuple[str, str]:
    """The memory table's first row: the device total, and what cache_max_entry_count is a fraction of."""
    mem, d = est.memory, est.engine.details
    key = "sv_lmd_budget_total" if d["cache_fraction_of"] == "total" else "sv_lmd_budget_free"
    label = text(key).format(total=mem.total_gpu / 2**30, frac=mem.fraction, backend=d["backend"])
    return label, f"{mem.total_gpu / 2**30:.2f}"


DEFAULT_PORT = 23333  # api_server's effective default port (cli/serve.py --server-port help, 0.18.0)


def launch_command(est, model_path: str, adapter: str | None = None, port: int = DEFAULT_PORT) -> list[str]:
    """`lmdeploy serve api_server MODEL ...` for an estimate (a ServingEstimate; flag names of lmdeploy/cli/serve.py
    and cli/utils.py ArgumentHelper at 0.18.0, pinned by tests/test_serving_lmdeploy.py against that parser).
    LoRA adapters (`--adapters NAME=PATH`) are a PyTorch-engine argument; TurboMind cannot serve them."""
    s, e = est.spec, est.engine
    d = e.details
    cmd = ["lmdeploy", "serve", "api_server", model_path, "--model-name", est.model.name, "--backend", d["backend"],
           "--tp", str(s.tp), "--session-len", str(e.max_model_len),
           "--cache-max-entry-count", f"{e.memory_fraction:g}", "--cache-block-seq-len", str(e.block_size),
           "--max-batch-size", str(e.max_num_seqs), "--max-prefill-token-num", str(e.max_num_batched_tokens),
           "--quant-policy", str(quant_policy(s.version, s.kv_cache_dtype))]
    if s.weights in MODEL_FORMAT:
        cmd += ["--model-format", MODEL_FORMAT[s.weights]]
    if s.weights == "fp16":
        cmd += ["--dtype", "float16"]
    if not s.cuda_graphs and d["backend"] == "pytorch":
        cmd.append("--eager-mode")
    if adapter:
        if d["backend"] != "pytorch":
            raise ServingError("sv_e_lmd_lora")
        cmd += ["--adapters", f"adapter={adapter}"]
    return cmd + ["--server-port", str(port)]


def case_fields(sv: dict) -> dict:
    """ServingSpec fields of an lmdeploy validation case: quant_policy (or kv_cache_dtype) -> KV dtype, backend,
    block length."""
    qp = sv.get("quant_policy")
    kv = {0: "auto", 4: "int4", 8: "int8"}.get(qp) if isinstance(qp, int) else None
    if kv is None:
        raw = str(sv.get("kv_cache_dtype") or "auto").lower()
        kv = raw if raw in KV_DTYPES else "auto"
    out = {"kv_cache_dtype": kv, "lmdeploy_backend": sv.get("backend") or "turbomind"}
    if sv.get("block_size"):
        out["block_size"] = int(sv["block_size"])
    if sv.get("cache_max_entry_count") is not None:
        out["gpu_memory_utilization"] = float(sv["cache_max_entry_count"])
    return out


def quant_policy(version: tuple[int, ...], kv_dtype: str) -> int:
    """--quant-policy for a KV dtype: 8 = int8, 4 = int4; before v0.4.0, 4 meant int8 (the only KV quantisation)."""
    if kv_dtype == "int8" and _v(version) < (0, 4, 0):
        return 4
    return QUANT_POLICY[kv_dtype]
