"""The generic structure reader: any config.json transformers knows -> ModelSpec with its exact Structure.

The model is built with `from_config` under `torch.device("meta")` (no memory, no weights) and its module tree is
read: every parameter tensor (tied weights once), the repeated blocks grouped by layout, each block's Linear layers
by role, experts (fused 3-D tensors or lists of Linear modules), routers, norms, embeddings and the head. The
hand-written families in spec/model.py stay the fast, torch-free path; this reader is the fallback and the oracle.
Results are cached per config hash: in memory (so `plan` builds each model once) and on disk
($TRAINFIT_CACHE_DIR, default ~/.cache/trainfit/structures; one JSON file per config hash and transformers version),
so the next run answers without importing torch.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import os
import re
import warnings
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..errors import MissingDependency, SpecError
from ..i18n import Msg, say
from ..spec.model import ModelSpec, expert_groups_of, is_fast_path, softcap_value
from ..spec.structure import BlockGroup, Linear, Structure, Tensor, structure_from_dict, structure_to_dict
from ._io import prune_json_files
from .preset_data import preset_data

# config.json keys that only describe weights on disk or runtime behaviour (not the architecture)
_DROP_KEYS = ("architectures", "auto_map", "quantization_config", "_name_or_path", "transformers_version",
              "torch_dtype", "dtype")


def text_config(cfg: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The text model of a config: multimodal configs (Gemma 3 4B+, Llama 4, Qwen3.5) carry it as text_config."""
    sub = cfg.get("text_config")
    if isinstance(sub, dict) and sub.get("model_type"):
        return dict(sub), say("va_gen_text_only", model=str(cfg.get("model_type")), text=str(sub["model_type"]))
    return dict(cfg), ""


def config_hash(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _transformers():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return None
    return transformers


def read_model(cfg: dict[str, Any], name: str = "", source: str = "", params_reported: int | None = None) -> ModelSpec:
    """A ModelSpec for any model type transformers can build (torch + transformers imported here, lazily)."""
    text, note = text_config(cfg)
    model_type = str(text.get("model_type", "")).lower()
    key = json.dumps({k: v for k, v in text.items() if k not in _DROP_KEYS}, sort_keys=True, default=str)
    name = name or str(cfg.get("_name_or_path") or model_type)
    shipped = _shipped_match(text)
    if shipped is not None:  # the architecture of a shipped preset (a fine-tune's config.json): no torch needed
        return spec_from_dict(shipped, name=name, source=source, params_reported=params_reported, hf_config=cfg)
    cached = _disk_get(key)
    if cached is not None:
        return spec_from_dict(cached, name=name, source=source, params_reported=params_reported, hf_config=cfg)
    templated = from_template(text, name, source, params_reported, note, cfg)
    if templated is not None:  # a model type whose structure template covers this config: no torch needed
        return _checked_template(templated, key, name, source, params_reported, note, cfg)
    if _transformers() is None:
        raise MissingDependency(
            f"model_type {model_type!r} is not one of trainfit's built-in families; reading any other architecture "
            "needs torch and transformers (pip install 'trainfit[torch]'); see `trainfit models --families`")
    spec = _read_cached(key, name, source, params_reported, note, json.dumps(cfg, sort_keys=True, default=str))
    _disk_put(key, spec)
    return spec


# ---- shipped structures: a config with a preset's architecture ---------------------------------------------------
# Keys that change nothing the reader records (token ids, runtime switches, initialisation, auxiliary-loss weights).
_RUNTIME_KEYS = ("bos_token_id", "eos_token_id", "use_cache", "initializer_range", "output_router_logits",
                 "router_aux_loss_coef", "aux_loss_alpha", "seq_aux", "tokenizer_class", "output_attentions",
                 "output_hidden_states", "return_dict", "use_bfloat16", "finetuning_task", "problem_type")
# Keys whose value only feeds a scalar of the ModelSpec (re-set from the user's config) when the model has rotary
# positions (no position-embedding table whose size they would set).
_ROPE_KEYS = ("max_position_embeddings", "rope_theta", "rope_scaling", "rope_parameters")


def _arch_key(text: dict[str, Any]) -> str:
    """The architecture of a text config: what the reader's result depends on. Rope keys keep their presence, not
    their value."""
    arch = {k: ("<present>" if k in _ROPE_KEYS else v) for k, v in text.items()
            if k not in _DROP_KEYS and k not in _RUNTIME_KEYS}
    return json.dumps(arch, sort_keys=True, default=str)


@lru_cache(maxsize=1)
def _shipped_index() -> dict[str, dict]:
    """Architecture key -> the read structure shipped in a preset (presets outside the fast path carry it)."""
    out: dict[str, dict] = {}
    for data in preset_data().values():
        structure = data.get("structure")
        if structure is not None and not is_fast_path(data["hf_config"]) \
                and structure.get("position", "rope") == "rope":
            out.setdefault(_arch_key(text_config(data["hf_config"])[0]), structure)
    return out


def _shipped_match(text: dict[str, Any]) -> dict | None:
    shipped = _shipped_index().get(_arch_key(text))
    if shipped is None:
        return None
    out = dict(shipped)
    out["structure"] = {**shipped["structure"],
                        "config_hash": config_hash({k: v for k, v in text.items() if k not in _DROP_KEYS})}
    out["extra"] = {k: v for k, v in shipped.get("extra", {}).items() if k != "rope_theta"}
    if "rope_theta" in text:
        out["extra"]["rope_theta"] = text["rope_theta"]
    if isinstance(text.get("max_position_embeddings"), int):
        out["max_positions"] = text["max_position_embeddings"]
    return out


# ---- structure templates: a model type's read structure as a function of its config (catalog/templates.py) -----
def from_template(text: dict[str, Any], name: str, source: str, params_reported: int | None, note: str,
                  cfg: dict[str, Any], template: dict | None = None) -> ModelSpec | None:
    """What the reader would read, from the model type's shipped template; None when the type has none or the
    config sets a key the template does not cover."""
    from . import templates

    args = {k: v for k, v in text.items() if k not in _DROP_KEYS}
    if not templates.has_template(str(args.get("model_type", "")).lower()) and template is None:
        return None
    _check_sizes(args)  # before walking the layers: an absurd count is an error, as in the reader
    got = templates.read(args, template)
    if got is None:
        return None
    sd, conf = got
    sd["config_hash"] = config_hash(args)
    sd["notes"] = [note] if note else []
    full = json.loads(json.dumps(cfg, sort_keys=True, default=str))
    return spec_from_structure(conf, structure_from_dict(sd), name, source, params_reported, args, full)


def _checked_template(spec: ModelSpec, key: str, name: str, source: str, params_reported: int | None, note: str,
                      cfg: dict[str, Any]) -> ModelSpec:
    """A template's answer is what transformers `templates.made_with()` builds. Used as it is when that version is
    installed, or when none is (the template is then the only reader there is); under another transformers version
    it is checked against that version's meta-device read, which wins where they differ (and says so). The checked
    answer goes to the disk cache, keyed with the installed version, so the check runs once per config."""
    from . import templates

    made, installed = templates.made_with(), _transformers_version()
    if installed in ("none", made):
        return spec
    model_type = spec.model_type
    if _transformers() is None:
        return _with_note(spec, say("va_gen_no_torch", model=model_type, made=made, installed=installed))
    try:
        ref = _read_cached(key, name, source, params_reported, note, json.dumps(cfg, sort_keys=True, default=str))
    except SpecError as exc:
        return _with_note(spec, say("va_gen_cannot_build", model=model_type, made=made, installed=installed,
                                    error=str(exc)))
    differs = templates.first_difference(spec_to_dict(spec), spec_to_dict(ref))
    if differs:
        ref = _with_note(ref, say("va_gen_otherwise", model=model_type, installed=installed, made=made,
                                  difference=differs))
    _disk_put(key, ref)
    return ref


def _with_note(spec: ModelSpec, text: str) -> ModelSpec:
    structure = replace(spec.structure, notes=(*spec.structure.notes, text))
    return replace(spec, structure=structure)


# ---- the disk cache -----------------------------------------------------------------------------------------------
READER_VERSION = 8  # bump when what the reader records changes: old cache files are then ignored
def _transformers_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("transformers")
    except PackageNotFoundError:
        return "none"


def _cache_file(key: str) -> str:
    root = os.environ.get("TRAINFIT_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "trainfit")
    digest = hashlib.sha256(f"{key}|{_transformers_version()}|{READER_VERSION}".encode()).hexdigest()[:24]
    return os.path.join(root, "structures", f"{digest}.json")


def _disk_get(key: str) -> dict | None:
    try:
        with open(_cache_file(key), encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _disk_put(key: str, spec: ModelSpec) -> None:
    file = _cache_file(key)
    try:
        os.makedirs(os.path.dirname(file), exist_ok=True)
        tmp = f"{file}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({**spec_to_dict(spec), "said": _said(spec.structure.notes)}, fh)
        os.replace(tmp, file)
    except OSError:  # a read-only home: no cache, same answer
        return
    prune_cache(folder=os.path.dirname(file))


# The cache is bounded: every config a user (or the web page) reads adds a file. Oldest files go first.
CACHE_MAX_FILES = 256
CACHE_MAX_BYTES = 64 * 2**20


def prune_cache(max_files: int = CACHE_MAX_FILES, max_bytes: int = CACHE_MAX_BYTES, folder: str | None = None) -> int:
    """Keep the structure cache within max_files and max_bytes, removing the oldest cached structures (*.json; a
    writer's temporary file is left alone); returns how many went."""
    return prune_json_files(folder or os.path.dirname(_cache_file("")), max_files, max_bytes)


_NOT_SAVED = ("name", "source", "params_reported", "structure", "extra", "expert_shards")


def spec_to_dict(spec: ModelSpec) -> dict:
    """The read fields of a generic ModelSpec, JSON-ready (presets ship this; the disk cache stores it)."""
    from dataclasses import fields

    out = {f.name: getattr(spec, f.name) for f in fields(spec) if f.name not in _NOT_SAVED}
    out["structure"] = structure_to_dict(spec.structure)
    out["extra"] = {k: v for k, v in spec.extra.items() if k != "hf_config"}
    return out


def _said(notes) -> list:
    """The notes that are sentences of the message table, as [key, values]: the disk cache keeps them beside their
    English, so a cached structure's notes render in any language again."""
    return [[n.key, n.values] for n in notes if isinstance(n, Msg)]


def _notes_said(notes: tuple, said: list, note: str) -> tuple:
    """A stored structure's notes (English text) with each one made again from its facts (the config's text-model
    note, the cache's [key, values]) where it is that sentence: the same English, rendered in any language."""
    made = [note] if note else []
    for entry in said if isinstance(said, list) else []:
        try:
            made.append(say(entry[0], **entry[1]))
        except (KeyError, TypeError, IndexError, ValueError):  # an older or foreign cache file: its English stays
            continue
    return tuple(next((m for m in made if m == n), n) for n in notes)


def spec_from_dict(d: dict, name: str, source: str, params_reported: int | None, hf_config: dict) -> ModelSpec:
    fields = {k: v for k, v in d.items() if k not in ("structure", "extra", "said", "expert_groups", "group_topk")}
    text, note = text_config(hf_config) if isinstance(hf_config, dict) else ({}, "")
    fields.update(expert_groups_of(text, fields.get("num_experts", 0)))  # the config's own, whatever was cached
    for field, key in (("attn_softcap", "attn_logit_softcapping"), ("final_softcap", "final_logit_softcapping")):
        if field not in fields:  # a preset's or cache's spec recorded before soft-capping was read: the config's
            fields[field] = softcap_value(text.get(key), key)
    structure = structure_from_dict(d["structure"])
    structure = replace(structure, notes=_notes_said(structure.notes, d.get("said"), note))
    return ModelSpec(name=name, source=source, params_reported=params_reported, structure=structure,
                     extra={**d.get("extra", {}), "hf_config": hf_config}, **fields)


@lru_cache(maxsize=64)
def _read_cached(key: str, name: str, source: str, params_reported: int | None, note: str, full: str) -> ModelSpec:
    text = json.loads(key)
    _check_sizes(text)
    conf = hf_config_object(json.loads(key))  # a copy: config classes rewrite some values in place (rope_scaling)
    model = _build_meta(conf)
    try:
        structure = read_structure(model, conf, config_hash(text), note)
        return spec_from_structure(conf, structure, name, source, params_reported, text, json.loads(full))
    except (TypeError, ValueError, AttributeError, KeyError, ZeroDivisionError) as exc:
        raise SpecError(say("ei_structure_unreadable", model_type=conf.model_type, kind=type(exc).__name__,
                            why=_first_line(exc))) from None


MAX_LAYERS = 1024  # far above any published model; a larger count is a typo and would take minutes to build


def _check_sizes(text: dict[str, Any]) -> None:
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        value = text.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 < value <= MAX_LAYERS:
            raise SpecError(f"{key} = {value} is not a plausible layer count (1 to {MAX_LAYERS})")
    # transformers builds a zero-sized embedding or attention without complaint; no step can run on one
    for key in ("vocab_size", "hidden_size", "n_embd", "d_model", "num_attention_heads", "n_head"):
        value = text.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value <= 0:
            raise SpecError(f"{key} = {value} must be positive")


def hf_config_object(text: dict[str, Any]):
    from transformers import AutoConfig

    model_type = str(text.get("model_type", "")).lower()
    # a deep copy: transformers' config classes standardise nested dicts (rope_scaling / rope_parameters: adding
    # rope_theta, rope_type, ...) in place, which would rewrite a preset's or a user's config for the whole run
    args = copy.deepcopy({k: v for k, v in text.items() if k not in _DROP_KEYS})
    try:
        with _quiet():
            return AutoConfig.for_model(**args)
    except ValueError as exc:
        if "Unrecognized model" in str(exc) or "model_type" in str(exc) or model_type not in _known_types():
            import transformers

            raise SpecError(say("ei_model_type_unknown", model_type=model_type,
                                version=transformers.__version__)) from None
        raise SpecError(say("ei_transformers_rejects", model_type=model_type, why=_first_line(exc))) from None
    except Exception as exc:  # noqa: BLE001 - config classes validate in their own ways; one line for all
        raise SpecError(say("ei_transformers_rejects", model_type=model_type, why=_first_line(exc))) from None


def _known_types() -> set[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return set(CONFIG_MAPPING_NAMES)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


def model_class_for(conf):
    """The causal-LM class for the config, else the masked-LM one (an encoder)."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    for auto in (AutoModelForCausalLM, AutoModelForMaskedLM):
        if type(conf) in auto._model_mapping:
            return auto
    raise SpecError(say("ei_not_a_language_model", model_type=str(conf.model_type)))


@contextlib.contextmanager
def _quiet():
    """transformers' warnings and its own log lines ("[transformers] Model config: pad_token_id must be ...") kept out
    of trainfit's output while it reads a config: an error stays one line on stderr, an answer has none."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        hf_logging.set_verbosity(level)


def _build_meta(conf):
    import torch

    auto = model_class_for(conf)
    try:
        with _quiet(), torch.device("meta"):
            return auto.from_config(conf)
    except Exception as exc:  # noqa: BLE001 - any failure of third-party model code becomes one line
        raise SpecError(say("ei_transformers_cannot_build", model_type=str(conf.model_type),
                            kind=type(exc).__name__, why=_first_line(exc))) from None


# ---- reading the module tree --------------------------------------------------------------------------------------
def _blocks(model) -> tuple[str, Any]:
    """The repeated blocks: the top-level ModuleList with the most parameters."""
    import torch

    best, best_n = ("", None), -1
    for name, mod in model.named_modules():
        if not isinstance(mod, torch.nn.ModuleList) or len(mod) < 1:
            continue
        if any(name.startswith(other + ".") for other, _ in [best] if other):
            continue
        n = sum(p.numel() for p in mod.parameters())
        if n > best_n:
            best, best_n = (name, mod), n
    return best


_EXPERT_INDEX = re.compile(r"\.(experts|local_experts)\.\d+\.")

# last component of a Linear module's name -> canonical roles
_LINEAR_ROLES = {
    "q_proj": ("q",), "query": ("q",), "wq": ("q",), "q": ("q",), "k_proj": ("k",), "key": ("k",), "wk": ("k",),
    "k": ("k",), "v_proj": ("v",), "value": ("v",), "wv": ("v",), "v": ("v",), "o_proj": ("o",), "wo": ("o",),
    "out_proj": ("o",), "o": ("o",), "qkv_proj": ("q", "k", "v"), "c_attn": ("q", "k", "v"),
    "query_key_value": ("q", "k", "v"), "w_pack": ("q", "k", "v"), "wqkv": ("q", "k", "v"),
    "gate_proj": ("gate",), "w1": ("gate",), "up_proj": ("up",), "w3": ("up",), "fc1": ("up",), "c_fc": ("up",),
    "fc_in": ("up",), "dense_h_to_4h": ("up",), "down_proj": ("down",), "w2": ("down",), "fc2": ("down",),
    "fc_out": ("down",), "dense_4h_to_h": ("down",), "gate_up_proj": ("gate", "up"),
    "q_a_proj": ("q_a",), "q_b_proj": ("q_b",), "kv_a_proj_with_mqa": ("kv_a",), "kv_b_proj": ("kv_b",),
}


def _linear_roles(path: str, out_features: int, experts: int) -> tuple[str, ...]:
    parts = path.lower().split(".")
    last = parts[-1]
    in_attention = any("attn" in p or "attention" in p for p in parts[:-1])
    in_mixer = any(p in ("linear_attn", "mamba", "mixer", "ssm", "conv") or "linear_attn" in p for p in parts[:-1])
    if in_mixer:
        return ("mixer",)
    if experts and last in ("gate", "router", "router_proj", "w_gate", "gate_proj") and out_features == experts \
            and not any("expert" in p for p in parts):
        return ("router",)
    if last in ("c_proj", "dense"):
        return ("o",) if in_attention else ("down",)
    return _LINEAR_ROLES.get(last, ("other",))


def _num_experts(conf) -> int:
    for key in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_routed_experts"):
        v = _text_attr(conf, key)
        if isinstance(v, int) and v > 1:
            return v
    return 0


def _read_block(block, conf, hidden: int, seen: set[int]) -> tuple[tuple[Tensor, ...], tuple[Linear, ...]]:
    """One block's tensors and Linear layers; parameters already seen in an earlier block (a block shared across
    the stack, as in Zamba) are counted once, in the first block holding them."""
    import torch

    experts = _num_experts(conf)
    if isinstance(block, torch.nn.Linear):  # a stack of plain Linear modules
        block = torch.nn.ModuleDict({"linear": block})
    linear_types = (torch.nn.Linear, *_conv1d())
    linear_of: dict[str, Any] = {n: m for n, m in block.named_modules() if isinstance(m, linear_types)}
    # convolutions (a Mamba mixer's or a gated DeltaNet's depthwise conv1d, weight channels x 1 x kernel): 3-D
    # weights that are not fused experts
    conv_of = {n for n, m in block.named_modules() if isinstance(m, torch.nn.modules.conv._ConvNd)}
    tensors: dict[str, Tensor] = {}
    linears: dict[str, Linear] = {}
    for pname, p in block.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        mod_name, _, leaf = pname.rpartition(".")
        collapsed = _EXPERT_INDEX.sub(r".\1.*.", "." + pname)[1:]
        mod_collapsed = collapsed.rpartition(".")[0]
        shape = tuple(p.shape)
        routed = ".*." in collapsed or (p.dim() == 3 and "expert" in pname.lower())
        kind = "shared" if "shared" in pname.lower() else ("routed" if routed else "")
        if mod_name in linear_of and leaf == "weight":
            lin = linear_of[mod_name]
            in_f, out_f = _in_out(lin)
            roles = _linear_roles(mod_name, out_f, experts)
            prev = linears.get(mod_collapsed)
            linears[mod_collapsed] = Linear(mod_collapsed, roles, in_f, out_f,
                                            lin.bias is not None, (prev.count + 1) if prev else 1, kind=kind)
            role = "router" if roles == ("router",) else ("expert" if routed else "linear")
            _add(tensors, collapsed, shape, role, mod_collapsed)
        elif p.dim() == 3 and mod_name not in conv_of:  # fused experts: (E, out, in) or (E, in, out)
            e, a, b = shape
            base = pname.rsplit(".", 1)[-1]
            in_f, out_f = _orient(base, a, b, hidden)
            roles = _LINEAR_ROLES.get(base.lower(), ("other",))
            linears[collapsed] = Linear(collapsed, roles, in_f, out_f, False, e, kind=kind or "routed")
            tensors[collapsed] = Tensor(collapsed, out_f, in_f, "expert", collapsed, count=e)
        else:
            role = "norm" if "norm" in pname.lower() or "ln" in pname.lower().split(".")[-2:-1] else (
                "bias" if leaf == "bias" else "other")
            if routed and p.dim() == 2 and "bias" in leaf:  # fused expert biases (E, out)
                _add(tensors, collapsed, (shape[0] * shape[1],), "bias", "")
            elif experts and p.dim() == 2 and shape == (experts, hidden) and leaf == "weight" and not routed:
                _add(tensors, collapsed, shape, "router", mod_collapsed)  # a router that is not an nn.Linear
            else:
                _add(tensors, collapsed, shape, role, "")
    return tuple(tensors.values()), tuple(linears.values())


def _conv1d() -> tuple[type, ...]:
    """transformers' Conv1D (GPT-2, GPT-SW3, OpenAI GPT, ImageGPT): a Linear whose weight is stored (in, out), which
    PEFT adapts like one (fan_in_fan_out)."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - every transformers the reader supports has it
        return ()
    return (Conv1D,)


def _in_out(module) -> tuple[int, int]:
    """(in, out) features of an nn.Linear or a Conv1D (weight (in, out), out = nf)."""
    if hasattr(module, "in_features"):
        return module.in_features, module.out_features
    return int(module.weight.shape[0]), int(module.nf)


def _add(tensors: dict[str, Tensor], name: str, shape: tuple[int, ...], role: str, module: str) -> None:
    rows = shape[0] if shape else 1
    cols = 1
    for d in shape[1:]:
        cols *= d
    prev = tensors.get(name)
    tensors[name] = Tensor(name, rows, cols, role, module, count=(prev.count + 1) if prev else 1)


def _orient(base: str, a: int, b: int, hidden: int) -> tuple[int, int]:
    """(in, out) of a fused expert tensor (E, a, b): transformers 5 mostly stores (out, in); gpt-oss (in, out)."""
    if "down" in base.lower():
        return (b, a) if a == hidden else (a, b)
    return (b, a) if b == hidden else (a, b)


def _mixer(block_names: list[str], conf, index: int) -> tuple[str, int]:
    layer_types = _text_attr(conf, "layer_types")
    lt = layer_types[index] if isinstance(layer_types, (list, tuple)) and index < len(layer_types) else ""
    window = _text_attr(conf, "sliding_window", default=0)
    window = int(window) if isinstance(window, (int, float)) and not isinstance(window, bool) else 0
    names = " ".join(block_names).lower()
    if "kv_a_proj" in names or "kv_b_proj" in names:
        return "mla", 0
    if "linear_attn" in names or "linear_attention" in str(lt):
        return "linear_attention", 0
    if any(k in names for k in ("mamba", "mixer.a_log", "ssm", ".a_log")):
        return "mamba", 0
    if lt == "sliding_attention" and window:
        return "sliding_attention", window
    if not any(k in names for k in ("attn", "attention")) and lt not in ("full_attention", "attention"):
        return "other", 0  # a block the layer types call attention is one, whatever its names (nemotron_h's mixer)
    return "attention", 0


def read_structure(model, conf, chash: str, note: str = "") -> Structure:
    blocks_name, blocks = _blocks(model)
    hidden = int(_text_attr(conf, "hidden_size", "n_embd", "d_model", default=0) or 0)
    in_blocks: set[int] = set()
    groups: dict[tuple, list] = {}
    order: list[tuple] = []
    pattern: list[int] = []
    for i, block in enumerate(blocks or []):
        tensors, linears = _read_block(block, conf, hidden, in_blocks)
        mixer, window = _mixer([n for n, _ in block.named_parameters()], conf, i)
        key = (tensors, linears, mixer, window)
        if key not in groups:
            groups[key] = [0]
            order.append(key)
        groups[key][0] += 1
        pattern.append(order.index(key))
    out_groups = tuple(BlockGroup(groups[k][0], k[0], k[1], k[2], k[3],
                                  moe=any(x.count > 1 for x in k[1])) for k in order)
    glob = _read_globals(model, in_blocks)
    notes = (note,) if note else ()
    return Structure(out_groups, glob, chash, type(model).__name__, notes, tuple(pattern),
                     peft_target_map(conf.model_type))


def peft_target_map(model_type: str) -> tuple[tuple[str, str], ...]:
    """How PEFT renames LoRA target names for this MoE type under transformers 5 (private tables of PEFT and
    transformers; empty when either is missing or they moved)."""
    try:
        from transformers.conversion_mapping import _MODEL_TO_CONVERSION_PATTERN
    except Exception:  # noqa: BLE001 - optional, private API
        return ()
    base = _MODEL_TO_CONVERSION_PATTERN.get(model_type)
    if not base:
        return ()
    return tuple(sorted((_peft_moe_target_mapping().get(base) or {}).items()))


@lru_cache(maxsize=1)
def _peft_moe_target_mapping() -> dict:
    """PEFT's `_MOE_TARGET_MODULE_MAPPING` (peft/utils/transformers_weight_conversion.py), read from the installed
    file as the literal it is, without importing PEFT (~0.3 s of a first read); imported when it is not a literal."""
    import ast
    from importlib.util import find_spec

    try:
        spec = find_spec("peft")
        if spec is None or not spec.submodule_search_locations:
            return {}
        file = os.path.join(list(spec.submodule_search_locations)[0], "utils", "transformers_weight_conversion.py")
        with open(file, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
        for node in tree.body:
            target = node.target if isinstance(node, ast.AnnAssign) else \
                (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
            if isinstance(target, ast.Name) and target.id == "_MOE_TARGET_MODULE_MAPPING" and node.value is not None:
                value = ast.literal_eval(node.value)
                if isinstance(value, dict):
                    return value
    except (OSError, ValueError, SyntaxError, TypeError):
        pass
    try:
        from peft.utils.transformers_weight_conversion import _MOE_TARGET_MODULE_MAPPING
    except Exception:  # noqa: BLE001 - optional, private API
        return {}
    return dict(_MOE_TARGET_MODULE_MAPPING)


def with_layers(cfg: dict[str, Any], layers: int) -> dict[str, Any]:
    """A config cut (or grown) to `layers` blocks: per-layer lists (layer_types, ...) cut with it."""
    text, _ = text_config(cfg)
    text = copy.deepcopy({k: v for k, v in text.items() if k not in _DROP_KEYS})  # shares no nested dict with cfg
    for key in ("num_hidden_layers", "n_layer", "num_layers", "n_layers"):
        n = text.get(key)
        if isinstance(n, int) and not isinstance(n, bool):
            text[key] = layers
            for k, v in list(text.items()):
                if isinstance(v, list) and len(v) == n and n >= layers:
                    text[k] = v[:layers]
            return text
    text["num_hidden_layers"] = layers
    return text


def _read_globals(model, in_blocks: set[int]) -> tuple[Tensor, ...]:
    import torch

    out: list[Tensor] = []
    seen: set[int] = set(in_blocks)
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    head_w = getattr(head, "weight", None) if head is not None else None
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        shape = tuple(p.shape)
        if id(p) in embeddings:  # a tied head is the embedding (counted once)
            role = "position" if "pos" in name.lower() else "embedding"
        elif head_w is not None and p is head_w:
            role = "head"
        elif "norm" in name.lower() or name.lower().endswith(("ln_f.weight", "ln_f.bias")):
            role = "norm"
        elif name.endswith("bias"):
            role = "bias"
        else:
            role = "other"
        rows = shape[0] if shape else 1
        cols = 1
        for d in shape[1:]:
            cols *= d
        out.append(Tensor(name, rows, cols, role, "lm_head" if role == "head" else "", per_layer=False))
    return tuple(out)


def _text_attr(conf, *keys: str, default: Any = None) -> Any:
    """The first config attribute set; per-layer lists give their largest value."""
    for k in keys:
        try:
            v = getattr(conf, k, None)
        except Exception:  # noqa: BLE001 - per-layer attributes refuse a global read in some configs
            continue
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, (int, float)) for x in v):
            v = max(v)
        if v is not None:
            return v
    return default


def _hidden_norms(s: Structure, hidden: int) -> int:
    """Norms over the hidden size per block (2 pre-norms; 4 for sandwich norms as in Gemma 2/3), the most common."""
    counts = [sum(t.count for t in g.tensors if t.role == "norm" and t.rows == hidden and t.name.endswith("weight")
                  and not any(q in t.name for q in ("q_norm", "k_norm", "q_layernorm", "k_layernorm")))
              for g in s.groups]
    return max(1, max(counts, default=2))


def spec_from_structure(conf, s: Structure, name: str, source: str, params_reported: int | None,
                        text: dict[str, Any], full: dict[str, Any]) -> ModelSpec:
    """The scalar fields of the ModelSpec (the geometry the activation and FLOP formulas read) from the config."""
    hidden = int(_text_attr(conf, "hidden_size", "n_embd", "d_model", default=0) or 0)
    heads = int(_text_attr(conf, "num_attention_heads", "n_head", "num_heads", "n_heads", default=1) or 1)
    kv_heads = int(_text_attr(conf, "num_key_value_heads", "num_kv_heads", default=heads) or heads)
    head_dim = int(_text_attr(conf, "head_dim", default=0) or 0) or (hidden // heads if heads else 0)
    if _text_attr(conf, "qk_nope_head_dim") is not None:  # MLA: q/k are nope + rope dims, v its own
        head_dim = int(conf.qk_nope_head_dim) + int(conf.qk_rope_head_dim)
        kv_heads = heads
    experts = _num_experts(conf)
    inter = int(_text_attr(conf, "moe_intermediate_size", "expert_intermediate_size", default=0) or 0) if experts \
        else 0
    inter = inter or int(_text_attr(conf, "intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim",
                                    default=4 * hidden) or 4 * hidden)
    topk = int(_text_attr(conf, "num_experts_per_tok", "moe_topk", "top_k", "num_experts_per_token",
                          default=0) or 0) if experts else 0
    embed = next((t for t in s.globals if t.role == "embedding"), None)
    vocab = int(_text_attr(conf, "vocab_size", default=embed.rows if embed else 0) or 0)
    linears = s.mean_linears()
    tie = not any(t.role == "head" for t in s.globals)
    act = str(_text_attr(conf, "hidden_act", "hidden_activation", "activation_function", default="silu"))
    gated = any("gate" in x.roles for x in linears)
    norm_bias = any(t.role == "norm" and t.name.endswith("bias") for g in s.groups for t in g.tensors)
    extra = {k: text[k] for k in ("rope_theta", "sliding_window", "pad_token_id", "v_head_dim", "kv_lora_rank",
                                  "q_lora_rank") if k in text}
    extra["hf_config"] = full
    return ModelSpec(
        name=name, model_type=str(conf.model_type), kind="decoder", hidden=hidden, layers=s.layers, heads=heads,
        kv_heads=kv_heads if kv_heads and heads % kv_heads == 0 else heads, head_dim=head_dim, intermediate=inter,
        vocab=vocab, gated_mlp=gated, activation=act, norm="layernorm" if norm_bias else "rmsnorm",
        qkv_bias=any(x.bias for x in linears if set(x.roles) & {"q", "k", "v"}),
        o_bias=any(x.bias for x in linears if "o" in x.roles),
        mlp_bias=any(x.bias for x in linears if set(x.roles) & {"gate", "up", "down"}),
        position="learned" if any(t.role == "position" for t in s.globals) else "rope",
        max_positions=int(_text_attr(conf, "max_position_embeddings", "n_positions", default=0) or 0),
        tie_embeddings=tie, norm_bias=norm_bias,
        qk_norm=any("q_norm" in t.name or "k_norm" in t.name for g in s.groups for t in g.tensors),
        norms_per_layer=_hidden_norms(s, hidden),
        attention_dropout=float(_text_attr(conf, "attention_dropout", "attn_pdrop", default=0.0) or 0.0),
        hidden_dropout=float(_text_attr(conf, "hidden_dropout", "resid_pdrop", default=0.0) or 0.0),
        attn_softcap=softcap_value(_text_attr(conf, "attn_logit_softcapping"), "attn_logit_softcapping"),
        final_softcap=softcap_value(_text_attr(conf, "final_logit_softcapping"), "final_logit_softcapping"),
        num_experts=experts, experts_per_tok=topk, params_reported=params_reported, source=source,
        **expert_groups_of(text, experts),
        structure=s, extra=extra)
