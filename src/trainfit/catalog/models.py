"""Model presets (models/*.json) and model resolution: preset name, local config.json / model dir, or Hub id."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import lru_cache

from .. import userjson
from ..errors import SpecError, unknown_name
from ..i18n import say
from ..spec.model import ModelSpec, is_fast_path
from ._io import norm_name
from .preset_data import preset_data


@dataclass(frozen=True)
class ModelPreset:
    name: str
    aliases: tuple[str, ...]
    hf_id: str
    hf_config: dict
    params: int | None
    source: str
    source_id: str
    source_date: str
    note: str
    structure: dict | None = None  # the generic reader's result, shipped so the preset needs no torch

    def spec(self) -> ModelSpec:
        if self.structure is not None and not self.fast_path:
            from .generic import spec_from_dict

            return spec_from_dict(self.structure, name=self.name, source=self.source,
                                  params_reported=self.params, hf_config=self.hf_config)
        return spec_from_config(self.hf_config, name=self.name, source=self.source, params_reported=self.params)

    @property
    def fast_path(self) -> bool:
        return is_fast_path(self.hf_config)


def spec_from_config(cfg: dict, name: str = "", source: str = "", params_reported: int | None = None) -> ModelSpec:
    """A config.json dict -> ModelSpec: a hand-written family when it is one (torch-free), else the generic reader
    (the real transformers code on the meta device)."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{source or 'the model config'} is not a JSON object")
    if not cfg.get("model_type") and not isinstance(cfg.get("text_config"), dict):
        raise SpecError(f"{source or 'the model config'} has no model_type: is it a Hugging Face config.json?")
    if is_fast_path(cfg):
        spec = ModelSpec.from_hf_config(cfg, name=name, source=source, params_reported=params_reported)
        spec.extra["hf_config"] = cfg  # what trace builds (extra is not part of equality or the hash)
        return spec
    from .generic import read_model

    return read_model(cfg, name=name, source=source, params_reported=params_reported)


@lru_cache(maxsize=1)
def all_models() -> dict[str, ModelPreset]:
    out: dict[str, ModelPreset] = {}
    for name, data in preset_data().items():
        out[name] = ModelPreset(
            name=name, aliases=tuple(data.get("aliases", ())), hf_id=data.get("hf_id", ""),
            hf_config=data["hf_config"], params=data.get("params"), source=data.get("source", ""),
            source_id=data.get("source_id", ""), source_date=data.get("source_date", ""),
            note=data.get("note", ""), structure=data.get("structure"))
    return out


@lru_cache(maxsize=1)
def _alias_index() -> dict[str, str]:
    index: dict[str, str] = {}
    for preset in all_models().values():
        for name in (preset.name, preset.hf_id, *preset.aliases):
            if name:
                index.setdefault(norm_name(name), preset.name)
    return index


def get_model(name: str) -> ModelPreset:
    key = _alias_index().get(norm_name(name))
    if key is None:
        raise unknown_name(say("ei_kind_model"), name, all_models(), hint=say("ei_hint_models"))
    return all_models()[key]


@lru_cache(maxsize=256)
def resolve_model(name: str) -> ModelSpec:
    """A preset name/alias, a path to a config.json or a model directory, or a Hugging Face Hub id."""
    if os.path.isdir(name) or name.endswith(".json") or os.path.isfile(name):
        return _from_path(name)
    key = _alias_index().get(norm_name(name))
    if key is not None:
        return all_models()[key].spec()
    if "/" in name and not name.startswith((".", "/")):
        return _from_hub(name)
    get_model(name)  # raises the 'unknown model ... did you mean' error
    raise AssertionError("unreachable")


def local_config(path: str) -> dict | None:
    """The config.json at `path` (a file, or a model directory holding one); None when there is none."""
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    if not os.path.isfile(file):
        return None
    cfg = userjson.read(file, "config.json")
    if not isinstance(cfg, dict):
        raise SpecError(say("ei_config_not_object", file=file, type=type(cfg).__name__))
    check_config_sizes(cfg, file)
    return cfg


# Whole-number sizes of a config.json and the largest value any real model has come near (x ~100 for margin).
_SIZE_LIMITS = {"hidden_size": 10**6, "n_embd": 10**6, "d_model": 10**6, "intermediate_size": 10**7,
                "moe_intermediate_size": 10**7, "ffn_hidden_size": 10**7, "num_hidden_layers": 10**4,
                "n_layer": 10**4, "num_layers": 10**4, "num_attention_heads": 10**4, "n_head": 10**4,
                "num_key_value_heads": 10**4, "multi_query_group_num": 10**4, "num_kv_heads": 10**4,
                "n_head_kv": 10**4, "head_dim": 10**5, "kv_channels": 10**5, "vocab_size": 10**8,
                "padded_vocab_size": 10**8, "type_vocab_size": 10**4, "max_position_embeddings": 10**9,
                "n_positions": 10**9, "num_local_experts": 10**5, "num_experts": 10**5, "n_routed_experts": 10**5,
                "num_experts_per_tok": 10**4, "moe_topk": 10**4}
# Of those, the ones a model cannot have zero of (a zero head count divides by zero further on).
_POSITIVE = ("hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers", "num_attention_heads",
             "n_head", "num_key_value_heads", "multi_query_group_num", "num_kv_heads", "n_head_kv", "head_dim",
             "kv_channels", "vocab_size", "padded_vocab_size")
# Switches the readers take as booleans: "no" would be read as true.
_BOOLEANS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "bias", "new_decoder_architecture", "multi_query",
             "parallel_attn", "multi_query_attention", "add_bias_linear", "add_qkv_bias", "qkv_bias",
             "use_qk_norm", "tie_embeddings")
# Keys that hold a nested object (or nothing): a string there is a broken file.
_OBJECTS = ("text_config", "rope_scaling", "rope_parameters", "ffn_config", "attn_config", "quantization_config")
_TOP_K = ("num_experts_per_tok", "moe_topk")
_EXPERTS = ("num_local_experts", "num_experts", "n_routed_experts")


def check_config_sizes(cfg: dict, where: str) -> None:
    """Every config.json value the readers use, checked once: sizes whole numbers in a plausible range (a
    hidden_size of 1e12 or a layer count of -3 is a broken file, not a model to estimate), head and layer counts
    positive, the routed top-k within the expert count, switches booleans and nested configs objects."""
    for part in (cfg, cfg.get("text_config")):
        if not isinstance(part, dict):
            continue
        if part.get("model_type") is not None and not isinstance(part["model_type"], str):
            raise SpecError(say("ei_model_type_text", where=where, type=type(part["model_type"]).__name__,
                                value=f"{part['model_type']!r:.40}"))
        for key, limit in _SIZE_LIMITS.items():
            value = part.get(key)
            if value is None:
                continue
            whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
            low = 1 if key in _POSITIVE else 0
            if isinstance(value, bool) or not whole or not low <= value <= limit:
                raise SpecError(say("ei_cfg_size", where=where, key=key, value=value, low=low, limit=limit))
        for key in _BOOLEANS:
            if part.get(key) is not None and not isinstance(part[key], bool):
                raise SpecError(say("ei_cfg_bool", where=where, key=key, value=part[key]))
        for key in _OBJECTS:
            if part.get(key) is not None and not isinstance(part[key], dict):
                raise SpecError(say("ei_cfg_object", where=where, key=key, type=type(part[key]).__name__,
                                    value=f"{part[key]!r:.40}"))
        top_k = next((part[k] for k in _TOP_K if part.get(k)), None)
        experts = next((part[k] for k in _EXPERTS if part.get(k)), None)
        if top_k and experts and top_k > experts:
            raise SpecError(say("ei_cfg_top_k", where=where, top_k=int(top_k), experts=int(experts)))


def _from_path(path: str) -> ModelSpec:
    file = os.path.join(path, "config.json") if os.path.isdir(path) else path
    cfg = local_config(path)
    if cfg is None:
        raise SpecError(f"no config.json at {path!r}")
    stem = os.path.splitext(os.path.basename(file))[0]
    # a model folder, or a file named config.json inside one ("my model/config.json"): the folder names the model
    name = os.path.basename(os.path.dirname(os.path.abspath(file))) if os.path.isdir(path) or stem == "config" \
        else stem
    if not name:
        name = stem
    return spec_from_config(cfg, name=name, source=file)


def _hub_reachable(timeout: float = 3.0) -> str | None:
    """None when the Hub answers, else why not (checked first: offline retries otherwise take ~20 s)."""
    import socket
    from urllib.parse import urlparse

    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((endpoint.hostname or "huggingface.co", endpoint.port or 443), timeout=timeout).close()
    except OSError as exc:
        return say("ei_cannot_reach", host=endpoint.hostname, why=exc.strerror or str(exc))
    return None


def _from_hub(hub_id: str) -> ModelSpec:
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    problem = None if offline else _hub_reachable()
    if problem:
        raise SpecError(say("ei_hub_unreachable", model=hub_id, problem=problem))
    try:
        from transformers import AutoConfig  # heavy: only for Hub ids
    except ImportError:
        raise SpecError(f"{hub_id!r} is not a preset; reading it from the Hugging Face Hub needs "
                        "`pip install 'trainfit[hf]'` (or pass a local config.json)") from None
    try:
        cfg = AutoConfig.from_pretrained(hub_id).to_dict()
    except Exception as exc:  # network errors, missing repos, gated models
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(f"cannot fetch config for {hub_id!r} from the Hugging Face Hub ({first[:200]}); "
                        "use a preset (`trainfit models`) or a local config.json") from None
    return spec_from_config(cfg, name=hub_id, source=f"huggingface.co/{hub_id}")
