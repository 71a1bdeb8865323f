"""SGLang's pools for a hybrid model (linear attention or Mamba beside full attention: Qwen3-Next, Qwen3.5,
Nemotron-H, Granite-4.0-H): a pool of per-request states beside a KV pool of the full-attention layers only.

Read from sgl-project/sglang `python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py` (at 226149ac and
001ccef0) and `python/sglang/srt/configs/mamba_utils.py` (at 02e208de):

- `profile_max_num_token`: the rest = free memory after the weights - total x (1 - mem_fraction_static), as for any
  model; the KV cell counts the full-attention layers only (`full_attention_layer_ids`).
- `handle_max_mamba_cache`: with the radix (prefix) cache on, the state pool takes rest x r / (1 + r) of it,
  r = `--mamba-full-memory-ratio` (0.9), in whole per-request states: `max_mamba_cache_size` =
  int(that // mamba_cache_per_req). With `--disable-radix-cache` it holds `--max-running-requests` states; without
  that flag too, 512 until PR #18786 (merged 2026-02-13), the ratio split after it. The KV pool takes the rest
  less the states.
- `init_memory_pool`: `max_running_requests` is at most max_mamba_cache_size // 3 with the radix cache on
  (MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO, the `no_buffer` strategy that `auto` resolves to; `extra_buffer`
  adds 2), // 1 without it.
- `mamba_utils.py`: `mamba_cache_per_req` = (conv elements x conv dtype + temporal elements x ssm dtype) x state
  layers, the same shapes as vLLM's (hybrid.py); the conv state in bf16, the temporal state in the config's
  `mamba_ssm_dtype`, else `--mamba-ssm-dtype`'s default, float32.

Three published start-up logs agree with this to the printed digit (tests/test_serving_hybrid.py: Qwen3.5-397B-A17B
on 0.5.9, Qwen3.6-27B on 0.5.11, Nemotron-3-Nano-30B-A3B at TP 4 without the radix cache). Hybrid models are served
by SGLang from 0.5.2 (Qwen3-Next, PR #10233); the first releases forced the radix cache off for them (PR #11214,
October 2025, added it), which trainfit does not separate: it models every release from 0.5.2 as above. Speculative
decoding's extra states are not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_VERSION = (0, 5, 2)  # Qwen3-Next on SGLang (PR #10233)
NO_FALLBACK_VERSION = (0, 5, 9)  # PR #18786 (2026-02-13) removed the 512-state fallback; 0.5.9 is the next release
MAMBA_FULL_MEMORY_RATIO = 0.9  # server_args.py mamba_full_memory_ratio
FALLBACK_STATES = 512
STATES_PER_RUNNING_REQUEST = 3  # MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO (no_buffer)


@dataclass(frozen=True)
class Pools:
    states: int  # max_mamba_cache_size
    state_pool: float  # bytes the states take (what the KV pool does not get)
    kv: float  # bytes of the full-attention KV pool
    tokens: int  # its tokens (page size 1)
    max_running: int  # max_running_requests' cap from the states


def pools(rest: float, per_request: int, cell: int, radix: bool, max_running: int | None,
          version: tuple[int, ...]) -> Pools:
    """The state and KV pools of `rest` bytes (`profile_max_num_token`'s rest memory). `per_request`: one request's
    states in every state layer; `cell`: one token's KV in every full-attention layer."""
    if per_request <= 0 or rest <= 0:
        return Pools(0, 0.0, max(0.0, rest), int(max(0.0, rest) // cell) if cell else 0, 0)
    if not radix and max_running:
        states = int(max_running)
    elif not radix and version < NO_FALLBACK_VERSION:
        states = FALLBACK_STATES
    else:
        states = int(rest * MAMBA_FULL_MEMORY_RATIO / (1 + MAMBA_FULL_MEMORY_RATIO) // per_request)
    state_pool = float(states * per_request)
    kv = rest - state_pool
    tokens = int(kv // cell) if kv > 0 and cell else 0
    running = states // (STATES_PER_RUNNING_REQUEST if radix else 1)
    return Pools(states, state_pool, kv, tokens, running)
