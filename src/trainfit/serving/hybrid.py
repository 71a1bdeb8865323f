"""vLLM's hybrid KV cache manager: models whose layers keep different things per request.

Read from vLLM's code (github.com/vllm-project/vllm):

- `v1/core/kv_cache_utils.py` `_get_kv_cache_groups_uniform_page_size`: layers of one kind (full attention, a
  sliding window, a mamba / linear-attention state) form groups of `group_size` layers, the smallest kind's layer
  count (the largest when it is under 1.5 times the smallest); each kind is padded up to whole groups. Every group
  has its own block table, and all blocks have one page size.
- `get_kv_cache_config_from_groups`: `group_size` memory pools, each shared by one layer of every group:
  num_blocks = budget // (page x group_size).
- `_report_kv_cache_config`: "GPU KV cache size: N tokens" with N = num_blocks // groups x block_size, so it
  counts a token's KV in every layer (padding included), as if every layer were full attention.
  Later releases report int(max concurrency x max_model_len) instead (the comment above their
  `get_kv_cache_capacity`: "handles hybrid layouts correctly"); start-up logs of 0.24.0 show it, so trainfit
  reports it for hybrids from 0.24.
- `get_max_concurrency_for_kv_cache_config`: "Maximum concurrency" = num_blocks / the blocks one max_model_len
  request needs in all groups: `v1/kv_cache_interface.py` `max_memory_usage_bytes` - full attention
  ceil(L / block); a sliding window ceil(min(window - 1 + max_num_batched_tokens, L) / block) + 1; a mamba state
  one page (`mamba_cache_mode` "none": prefix caching off, as vLLM set it for hybrids), two in "align" mode,
  which `MambaModelConfig` picks for gated-delta-net models when prefix caching is on (PR #30877, merged
  2026-01-23: trainfit takes it from 0.15). A 0.24.0 log of Qwen3.6-35B-A3B (fp8 KV, 5.98 GiB, 131,072 tokens:
  4.33x, tests/test_serving_hybrid.py) matches two pages and not one.
- `model_executor/models/config.py` `HybridAttentionMambaModelConfig`: the attention block grows to the smallest
  multiple of 16 (64 for MLA) whose page holds a mamba state, and the state page is padded to it.
- `model_executor/layers/mamba/mamba_utils.py`: a gated-delta-net layer (Qwen3-Next, Qwen3.5) keeps a conv state of
  (k_dim x k_heads x 2 + v_dim x v_heads) / tp x (conv_kernel - 1) in the model dtype and a recurrent state of
  v_heads / tp x v_dim x k_dim in `mamba_ssm_cache_dtype` (Qwen3.5's config says float32 as `mamba_ssm_dtype`).

Applies to vLLM's V1 engine from 0.9 (whose kv_cache_interface documents the hybrid allocator). Other engines, and
state layers whose state this module cannot size (mamba types without gated-delta-net fields), are counted as
full-attention KV, as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..spec.model import ModelSpec
from .spec import ServingSpec

ALIGN = 16  # FlashAttention's block-size multiple (HybridAttentionMambaModelConfig.kernel_block_alignment_size)
ALIGN_MLA = 64  # MLA backends other than CUTLASS_MLA
FIRST_VERSION = (0, 9, 0)
ALIGN_MODE_VERSION = (0, 15, 0)  # two pages per mamba state ("align" mode with prefix caching), see above
CAPACITY_REPORT_VERSION = (0, 24, 0)  # "GPU KV cache size" = int(max concurrency x max_model_len), see above


@dataclass(frozen=True)
class Layout:
    """One GPU's view: layer counts by kind and the bytes each holds."""

    full: int  # full-attention layers (MLA included)
    sliding: int
    window: int
    state: int  # linear-attention / mamba layers with a fixed state per request
    state_bytes: int  # one state layer's state, one request
    token_bytes: int  # one token's KV in one attention layer
    mla: bool = False
    state_pages: int = 1  # pages a state layer holds per request (MambaSpec.max_memory_usage_bytes)
    reports_capacity: bool = False  # the log's token count is max concurrency x max_model_len

    @property
    def kinds(self) -> list[tuple[str, int]]:
        return [(k, n) for k, n in (("full", self.full), ("sliding", self.sliding), ("state", self.state)) if n]

    @property
    def group_size(self) -> int:
        counts = [n for _, n in self.kinds]
        low, high = min(counts), max(counts)
        return high if high < 1.5 * low else low

    def groups(self) -> dict[str, int]:
        """KV cache groups of each kind (each of group_size layers, the last padded)."""
        g = self.group_size
        return {k: math.ceil(n / g) for k, n in self.kinds}

    @property
    def padded_layers(self) -> int:
        return self.group_size * sum(self.groups().values())

    def block_size(self, requested: int) -> int:
        """The attention block: the requested one, raised until a page holds a state (and the state padded)."""
        if not self.state:
            return requested
        align = ALIGN_MLA if self.mla else ALIGN
        need = align * math.ceil(self.state_bytes / (align * self.token_bytes))
        return max(requested, need)

    def blocks_per_request(self, tokens: int, block: int, batched: int | None = None) -> int:
        """Blocks (of every group) one request of `tokens` tokens holds: `batched` given, vLLM's worst case for
        its reported concurrency (a sliding window also holds the chunk being prefilled); else while decoding,
        when the blocks behind the window are freed."""
        groups = self.groups()
        full = math.ceil(tokens / block)
        if batched is not None:
            sw = math.ceil(min(self.window - 1 + batched, tokens) / block) + 1
        else:
            sw = min(full, math.ceil(self.window / block) + 1)
        return groups.get("full", 0) * full + groups.get("sliding", 0) * sw + groups.get("state", 0) * self.state_pages

    def request_bytes(self, tokens: int, block: int, batched: int | None = None) -> float:
        return self.blocks_per_request(tokens, block, batched) * self.group_size * block * self.token_bytes

    def read_bytes(self, context: int) -> float:
        """Bytes one decode step reads for one request at `context` tokens: the attention layers' KV (a window at
        most) and each state layer's state, read and written back."""
        return self.token_bytes * (self.full * context + self.sliding * min(context, self.window)) + \
            2.0 * self.state * self.state_bytes


def _text_config(m: ModelSpec) -> dict:
    hf = (m.extra or {}).get("hf_config") or {}
    return hf.get("text_config") or hf if isinstance(hf, dict) else {}


def gdn_state_bytes(cfg: dict, tp: int, model_bytes: int) -> int:
    """A gated-delta-net layer's state per request on one of `tp` GPUs (0 when the config lacks its fields)."""
    try:
        kh, vh = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
        kd, vd = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"])
        kernel = int(cfg["linear_conv_kernel_dim"])
    except (KeyError, TypeError, ValueError):
        return 0
    ssm_bytes = 4 if str(cfg.get("mamba_ssm_dtype", "")).lower() in ("float32", "fp32") else model_bytes
    conv = (kd * kh * 2 + vd * vh) // tp * (kernel - 1) * model_bytes
    return conv + vh // tp * vd * kd * ssm_bytes


def layout(m: ModelSpec, s: ServingSpec, token_bytes: int, mla: bool) -> Layout | None:
    """The hybrid layout vLLM's manager gives this model, or None where it does not apply (another engine, an
    older vLLM, a hand-written family, or every layer full attention)."""
    if s.engine != "vllm" or not s.vllm_v1 or s.version < FIRST_VERSION or m.structure is None:
        return None
    full = sliding = state = 0
    windows = set()
    cfg = _text_config(m)
    gdn = gdn_state_bytes(cfg, s.tp, 2)
    for g in m.structure.groups:
        if g.mixer == "sliding_attention" and g.window:
            sliding += g.count
            windows.add(g.window)
        elif g.mixer == "linear_attention" and gdn:
            state += g.count
        else:
            full += g.count
    if len(windows) > 1 or not (sliding or state):
        return None
    return Layout(full, sliding, windows.pop() if windows else 0, state, gdn if state else 0, token_bytes, mla,
                  2 if s.version >= ALIGN_MODE_VERSION else 1, s.version >= CAPACITY_REPORT_VERSION)
