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
  `get_kv_cache_capacity`: "handles hybrid layouts correctly"). Published start-up logs show the old count on
  0.19.1 and 0.20.0 and the new one on a 0.20.1rc1 development build and on 0.24.0
  (data/validation/serving_hybrid_sources.md), so trainfit reports it for hybrids from 0.20.1.
- `get_max_concurrency_for_kv_cache_config`: "Maximum concurrency" = num_blocks / the blocks one max_model_len
  request needs in all groups: `v1/kv_cache_interface.py` `max_memory_usage_bytes` - full attention
  ceil(L / block); a sliding window ceil(min(window - 1 + max_num_batched_tokens, L) / block) + 1; a mamba state
  one page (`mamba_cache_mode` "none": prefix caching off), two in "align" mode, which `MambaModelConfig` picks
  when prefix caching is on (for gated-delta-net models from PR #30877, merged 2026-01-23: trainfit takes it from
  0.15). Prefix caching is off by default for hybrids ("keep it opt-in for now", `arg_utils.py`) until PR #50991,
  "enable prefix cache for hybrid model by default and change the default mode to align" (merged 2026-08-04,
  first in 0.28.0 per vllm-project/vllm-metal PR #645); `--enable-prefix-caching` turns it on before. A 0.24.0
  log of Qwen3.6-35B-A3B run with prefix caching on (fp8 KV, 5.98 GiB, 131,072 tokens: 4.33x,
  tests/test_serving_hybrid.py) matches two pages and not one. The "all" mode (a state per block, for Mamba-2
  models that support it when prefix caching is turned on before 0.28) is not modelled: counted as "align".
- `model_executor/models/config.py` `HybridAttentionMambaModelConfig`: the attention block grows to the smallest
  multiple of 16 (64 for MLA) whose page holds a mamba state, and the state page is padded to it.
- `model_executor/layers/mamba/mamba_utils.py` (`MambaStateShapeCalculator`), with the config names each model
  class passes it (`get_mamba_state_shape_from_config` in `models/*.py`):
  - a gated-delta-net layer (Qwen3-Next, Qwen3.5) keeps a conv state of (k_dim x k_heads x 2 + v_dim x v_heads) /
    tp x (conv_kernel - 1) and a recurrent state of v_heads / tp x v_dim x k_dim;
  - a Mamba-2 layer a conv state of (inner + 2 x groups x state) / tp x (conv_kernel - 1), the groups raised to tp
    when tp does not divide them, and a temporal state of heads / tp x head_dim x state. Nemotron-H:
    inner = mamba_num_heads x mamba_head_dim, n_groups, ssm_state_size, conv_kernel; Granite-4 (granitemoehybrid),
    Bamba and Falcon-H1: inner = mamba_d_ssm (Falcon-H1, when set) or mamba_expand x hidden_size, mamba_n_heads,
    mamba_d_head, mamba_n_groups, mamba_d_state, mamba_d_conv; Zamba2: n_mamba_heads, mamba_headdim,
    mamba_ngroups, mamba_d_state, mamba_d_conv;
  - a Mamba-1 layer (Jamba) a conv state of inner / tp x (d_conv - 1) and a temporal state of inner / tp x d_state,
    inner = mamba_expand x hidden_size.
  The conv state is in the model dtype; the recurrent / temporal one in `--mamba-ssm-cache-dtype`. "auto" takes
  the config's own (`mamba_ssm_dtype`, float32 in Qwen3.5's; `mamba_ssm_cache_dtype` in Nemotron-H's, which vLLM
  logs as "Updating mamba_ssm_cache_dtype to 'float32' for NemotronH model"), else the model dtype.
  NVIDIA-Nemotron-Nano-9B-v2's
  672-token block (vLLM issue #24280) is this arithmetic with bf16 states (tests/test_serving_hybrid.py).
- Layers that hold neither attention nor a state (Nemotron-H's MLP and MoE layers) hold nothing.

TensorRT-LLM and LMDeploy keep a hybrid's states in a pool of their own beside a KV pool of the full-attention layers
(read from their code, with no published start-up log of a hybrid to check it; serving_hybrid_sources.md):
TensorRT-LLM counts the attention layers' bytes per token from PR #5371 (June 2025) and allocates max_batch_size
states before the KV pool (`MambaHybridCacheManager`: the conv state in the model dtype, the temporal one in
`mamba_ssm_cache_dtype`, auto = the config's, else the model's); its 2026 code prices them as a fixed cost subtracted
after the fraction, trainfit takes them off the free memory the fraction applies to, as the 2025 code's profiling
pass did. LMDeploy (Qwen3.5 from 0.12.2): the PyTorch engine takes max_batch_size + 2 states off the free memory
before cache_max_entry_count (its latest code; + 8 and + 1 before), TurboMind max_batch_size states inside
cache_max_entry_count's share; both in the model dtype (fp32 recurrent states only with an environment variable).

Applies to vLLM's V1 engine from 0.9 (whose kv_cache_interface documents the hybrid allocator). Other engines, and
state layers whose state this module cannot size (a config without any of the fields above), are counted as
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
LMDEPLOY_FIRST_VERSION = (0, 12, 2)  # Qwen3.5 on LMDeploy's PyTorch engine and TurboMind (#4351, #4389)
LMDEPLOY_PYTORCH_EXTRA_STATES = 2  # num_state_caches = max_batches + 2 (its latest code; + 8 and + 1 before)
PREFIX_DEFAULT_VERSION = (0, 28, 0)  # prefix caching on by default for hybrids (PR #50991), see above
CAPACITY_REPORT_VERSION = (0, 20, 1)  # "GPU KV cache size" = int(max concurrency x max_model_len), see above


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
    engine: str = "vllm"  # otherwise a state pool beside a KV pool of the full-attention layers, no groups or pages

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
        if not self.state or self.engine != "vllm":
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
    """The (text) config as the model class reads it: its type's defaults (the shipped structure template's, where
    there is one) under the keys the config.json gives, as transformers' config class fills them."""
    from ..catalog.templates import template

    hf = (m.extra or {}).get("hf_config") or {}
    cfg = (hf.get("text_config") or hf) if isinstance(hf, dict) else {}
    if not isinstance(cfg, dict):
        return {}
    t = template(str(cfg.get("model_type", ""))) if cfg.get("model_type") else None
    return {**t["defaults"], **cfg} if t and isinstance(t.get("defaults"), dict) else cfg


SSM_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def _ints(cfg: dict, *names: str) -> list[int] | None:
    """The named config values as positive integers, or None when one is missing or not one."""
    try:
        got = [int(cfg[n]) for n in names]
    except (KeyError, TypeError, ValueError, OverflowError):
        return None
    return got if all(v > 0 for v in got) else None


def _inner_from_expand(cfg: dict) -> int:
    """mamba_d_ssm when set (Falcon-H1), else int(mamba_expand x hidden_size); 0 when neither reads."""
    try:
        if cfg.get("mamba_d_ssm") is not None:
            return max(0, int(cfg["mamba_d_ssm"]))
        return max(0, int(float(cfg.get("mamba_expand") or 0) * int(cfg.get("hidden_size") or 0)))
    except (TypeError, ValueError, OverflowError):
        return 0


def gdn_state_bytes(cfg: dict, tp: int, model_bytes: int, ssm_bytes: int | None = None) -> int:
    """A gated-delta-net layer's state per request on one of `tp` GPUs (0 when the config lacks its fields).
    `ssm_bytes` None: the recurrent state's dtype as vLLM takes it for "auto" (the config's mamba_ssm_dtype)."""
    got = _ints(cfg, "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                "linear_conv_kernel_dim")
    if got is None:
        return 0
    kh, vh, kd, vd, kernel = got
    if ssm_bytes is None:
        ssm_bytes = config_ssm_bytes(cfg, model_bytes)
    conv = (kd * kh * 2 + vd * vh) // tp * (kernel - 1) * model_bytes
    return conv + vh // tp * vd * kd * ssm_bytes


# Mamba-2 config names by model class: (heads, head_dim, groups, state, conv kernel), and the inner width's source
_MAMBA2_NAMES = (
    (("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "conv_kernel"), "heads"),  # Nemotron-H
    (("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_d_conv"), "expand"),  # Granite-4,
    # Bamba, Falcon-H1
    (("n_mamba_heads", "mamba_headdim", "mamba_ngroups", "mamba_d_state", "mamba_d_conv"), "expand"),  # Zamba2
)


def mamba2_state_bytes(cfg: dict, tp: int, model_bytes: int, ssm_bytes: int) -> int:
    """A Mamba-2 layer's conv and temporal state per request on one of `tp` GPUs (0 without its fields)."""
    for names, inner_from in _MAMBA2_NAMES:
        got = _ints(cfg, *names)
        if got is None:
            continue
        heads, head_dim, groups, state, kernel = got
        inner = heads * head_dim if inner_from == "heads" else _inner_from_expand(cfg)
        if inner <= 0:
            return 0
        groups += 0 if groups % tp == 0 else tp - groups  # extra_groups_for_head_shards
        conv = (inner + 2 * groups * state) // tp * (kernel - 1) * model_bytes
        return conv + heads // tp * head_dim * state * ssm_bytes
    return 0


def mamba1_state_bytes(cfg: dict, tp: int, model_bytes: int, ssm_bytes: int) -> int:
    """A Mamba-1 layer's (Jamba's) conv and temporal state per request on one of `tp` GPUs (0 without its fields)."""
    got = _ints(cfg, "hidden_size", "mamba_d_state", "mamba_d_conv")
    inner = _inner_from_expand({k: cfg.get(k) for k in ("mamba_expand", "hidden_size")}) // tp
    if got is None or inner <= 0:
        return 0
    _, state, kernel = got
    return inner * (kernel - 1) * model_bytes + inner * state * ssm_bytes


def config_ssm_bytes(cfg: dict, model_bytes: int) -> int:
    """Bytes of a recurrent-state element under --mamba-ssm-cache-dtype auto: the dtype the config names for it
    (Qwen3.5 `mamba_ssm_dtype`, Nemotron-H `mamba_ssm_cache_dtype`; vLLM's model configs take it), else the
    model's."""
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        name = str(cfg.get(key) or "").lower().replace("fp32", "float32").replace("torch.", "")
        if name in SSM_DTYPE_BYTES:
            return SSM_DTYPE_BYTES[name]
    return model_bytes


def state_bytes(cfg: dict, tp: int, ssm_dtype: str = "auto", model_bytes: int = 2, auto_bytes: int | None = None,
                reads_config: bool = True) -> int:
    """One state layer's state per request on one GPU, by whichever kind of state the config describes (gated delta
    net, Mamba-2, Mamba-1), or 0. `ssm_dtype`: vLLM's --mamba-ssm-cache-dtype (SGLang's --mamba-ssm-dtype);
    `auto_bytes`: the engine's own default when neither it nor the config names one (vLLM: the model dtype; SGLang:
    float32); `reads_config`: whether the engine takes the config's own (LMDeploy does not)."""
    auto = auto_bytes or model_bytes
    ssm = SSM_DTYPE_BYTES.get(ssm_dtype) or (config_ssm_bytes(cfg, auto) if reads_config else auto)
    return gdn_state_bytes(cfg, tp, model_bytes, ssm) or \
        mamba2_state_bytes(cfg, tp, model_bytes, ssm) or \
        mamba1_state_bytes(cfg, tp, model_bytes, ssm)


def _holds_attention(group) -> bool:
    """A block whose state layer runs beside attention (Falcon-H1's parallel hybrid: both in every block)."""
    return any({"q", "k", "v"} & set(lin.roles) for lin in group.linears)


def layout(m: ModelSpec, s: ServingSpec, token_bytes: int, mla: bool) -> Layout | None:
    """The hybrid layout vLLM's manager gives this model, or the state pool beside full-attention KV that SGLang
    (hybrid_sglang.py), TensorRT-LLM and LMDeploy keep (no sliding window there); None where it does not apply (an
    older release, a hand-written family, or every layer full attention)."""
    from .hybrid_sglang import FIRST_VERSION as SGLANG_FIRST

    pools = (s.engine == "sglang" and s.version >= SGLANG_FIRST) or s.engine == "trtllm" or \
        (s.engine == "lmdeploy" and s.version >= LMDEPLOY_FIRST_VERSION)  # a state pool beside the KV pool
    if m.structure is None or not (pools or (s.engine == "vllm" and s.vllm_v1 and s.version >= FIRST_VERSION)):
        return None
    full = sliding = state = 0
    windows = set()
    per_state = state_bytes(_text_config(m), s.tp, s.mamba_ssm_cache_dtype,
                            auto_bytes=SSM_DTYPE_BYTES["float32"] if s.engine == "sglang" else None,
                            reads_config=s.engine != "lmdeploy")
    for g in m.structure.groups:
        if g.mixer == "sliding_attention" and g.window:
            sliding += g.count
            windows.add(g.window)
        elif g.mixer in ("linear_attention", "mamba") and per_state:
            state += g.count
            full += g.count if _holds_attention(g) else 0
        elif g.mixer == "other" and per_state:
            continue  # neither attention nor a state (Nemotron-H's MLP and MoE layers): no cache
        else:
            full += g.count
    if len(windows) > 1 or not (sliding or state) or (pools and (sliding or not state)):
        return None
    if pools:
        return Layout(full, 0, 0, state, per_state, token_bytes, mla, engine=s.engine)
    return Layout(full, sliding, windows.pop() if windows else 0, state, per_state if state else 0, token_bytes,
                  mla, 2 if align_mode(s) else 1, s.version >= CAPACITY_REPORT_VERSION)


def align_mode(s: ServingSpec) -> bool:
    """Whether vLLM keeps a hybrid's states in "align" mode (two pages a request): prefix caching on, as stated or
    by the version's default for hybrids, in a release that has the mode."""
    on = s.prefix_caching if s.prefix_caching is not None else s.version >= PREFIX_DEFAULT_VERSION
    return on and s.version >= ALIGN_MODE_VERSION
