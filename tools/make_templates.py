"""Build src/trainfit/catalog/data/structure_templates.json.gz (needs torch + transformers; see catalog/templates.py).

    PYTHONPATH=src python tools/make_templates.py [--jobs 2]           # all types: writes the data file
    PYTHONPATH=src python tools/make_templates.py --types glm4_moe,llama  # a look at some types (each compared with
                                                                          # the shipped file), writes nothing
    PYTHONPATH=src python tools/make_templates.py --types qwen3_next,ernie4_5_moe --merge  # regenerates those types
                                                                          # only, merged into the shipped file
    PYTHONPATH=src python tools/make_templates.py --reads-only [--types ...] [--jobs 2]  # recomputes only the names
                                                                          # each shipped template reads (step 6)

For each text model type reachable from transformers' causal-LM auto mapping:
  1. the default config (resolved by its config class) cut to the fewest blocks that show every block kind;
  2. one build per config key with that key perturbed alone (ints doubled or halved, floats scaled, bools flipped):
     which dimensions it moves and how (a power of the key, or linearly; two keys that both move a leaf linearly are
     also moved together, for a product term: 2 * k_heads * k_dim + ...) -> one expression per int leaf; a key whose
     change alters anything but int leaves (or cannot be built) is "fixed" (a config must keep its default);
  3. per-layer lists (layer_types, ...) and first_k_dense_replace / mlp_only_layers / decoder_sparse_step pick each
     block's group; keys the config class derives from others (head_dim, layer_types) are recomputed when possible;
  4. keys real config.json files carry beside the class's own (those of the shipped presets' configs: rope_scaling,
     ep_size, ...) are free when none of their values moves the structure; a type whose tie_word_embeddings is
     structural gets a variant template for the other value (used only when the config sets it);
  5. verification: the template's answer must equal fresh meta-device reads (the whole ModelSpec) of the default,
     of two jointly perturbed full configs and of sparse configs (derived defaults, another layer count, factors
     that break divisibility); divisions the model floors become guards (a config must divide evenly);
  6. what the type reads ("reads"): every config attribute name read in the builds above (config class, model code,
     the reader; PreTrainedConfig.__getattribute__ traced, so getattr(config, name, default) and hasattr count),
     with the names its config class consumes (fields, __init__ parameters, kwargs taken by name, properties,
     attribute_map) and those its model code reads by name in any branch; the names every config class consumes are
     the file's "reads_common". A key outside the template's roles and both lists is inert at run time (accepted).
Only verified types are written; the others (and why) are printed.
"""

from __future__ import annotations

import argparse
import gzip
import copy
import json
import os
import random
import sys
import time
import warnings
from fractions import Fraction
from functools import lru_cache

warnings.simplefilter("ignore")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "src"))

from trainfit.catalog import generic, templates as T  # noqa: E402
from trainfit.catalog.generic import _DROP_KEYS, spec_to_dict  # noqa: E402

MAX_BASE_LAYERS = 8


def resolved(model_type: str, **kw) -> dict:
    import transformers

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = transformers.AutoConfig.for_model(model_type, **copy.deepcopy(kw)).to_dict()  # nested dicts: in place
    return {k: v for k, v in d.items() if k not in _DROP_KEYS}


def oracle(text: dict) -> dict | None:
    """spec_to_dict of a fresh meta-device read; None when transformers cannot build it. The config attribute names
    the read touches (config class, model code, the reader) join TRACE's (see reads below)."""
    key = json.dumps({k: v for k, v in text.items() if k not in _DROP_KEYS}, sort_keys=True, default=str)
    _install_tracer()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            TRACE["on"] += 1
            try:
                spec = generic._read_cached.__wrapped__(key, "t", "", None, "", key)
            finally:
                TRACE["on"] -= 1
    except Exception:  # noqa: BLE001
        return None
    return json.loads(json.dumps(spec_to_dict(spec)))


# ---- the config attributes a build reads ---------------------------------------------------------------------------
# A key of a config.json can change the built structure only if the config class consumes it (a field, an __init__
# parameter, a kwarg its code pops or reads by name, a property) or something reads that attribute of the config
# object while the model is built and read. Every oracle() call records the attribute names read on any config object
# (PreTrainedConfig.__getattribute__: plain reads, getattr(conf, name, default), hasattr); a template ships the union
# over its type's builds plus the names its config class consumes ("reads"), and the names every config class
# consumes once for the file ("reads_common"). At run time a key the template has no role for and that is in neither
# is inert: the config object would carry it and nothing would look at it (catalog/templates.py).
TRACE: dict = {"on": 0, "paused": 0, "names": set(), "whole": set()}
# PreTrainedConfig methods that walk every attribute: checking *_token_id values, serialising (the generation config
# is made from to_dict()), comparing, printing. What they read is no key's effect on the parameters; one called from
# anywhere else (model code iterating over its config) leaves the type without a reads list.
_WALKERS = ("validate_token_ids", "to_dict", "to_diff_dict", "to_json_string", "__iter__", "__repr__", "__eq__")
_WALKER_CALLERS = (os.path.join("transformers", "configuration_utils.py"),
                   os.path.join("transformers", "generation", "configuration_utils.py"),
                   os.path.join("huggingface_hub", "dataclasses.py"), os.path.join("transformers", "__init__.py"),
                   "copy.py", "copyreg.py")


def _walker(fn):
    import functools

    @functools.wraps(fn)
    def walk(*args, **kwargs):
        if TRACE["on"] and not TRACE["paused"]:
            caller = sys._getframe(1).f_code.co_filename
            if not caller.endswith(_WALKER_CALLERS):
                TRACE["whole"].add(f"{fn.__name__} from {os.path.basename(caller)}")
        TRACE["paused"] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            TRACE["paused"] -= 1

    walk._trainfit_walker = True
    return walk


def _trace_class(cls) -> None:
    """Wrap the attribute walkers defined along cls's MRO (once each)."""
    for c in cls.__mro__:
        if c is object:
            continue
        for name in _WALKERS:
            fn = c.__dict__.get(name)
            if callable(fn) and not getattr(fn, "_trainfit_walker", False):
                setattr(c, name, _walker(fn))


def _install_tracer() -> None:
    from transformers import PreTrainedConfig

    if TRACE.get("installed"):  # (not marked on the class: reads_common() lists its names)
        return
    get = PreTrainedConfig.__getattribute__

    def __getattribute__(self, key):
        if TRACE["on"] and not TRACE["paused"]:
            if key == "__dict__":  # the whole attribute dict, read outside the walkers
                caller = sys._getframe(1).f_code.co_filename
                if not caller.endswith(_WALKER_CALLERS):
                    TRACE["whole"].add(f"__dict__ from {os.path.basename(caller)}")
            elif not (key.startswith("__") and key.endswith("__")):
                TRACE["names"].add(key)
        return get(self, key)

    PreTrainedConfig.__getattribute__ = __getattribute__
    TRACE["installed"] = True
    _trace_class(PreTrainedConfig)


def _trace_start(model_type: str) -> None:
    _install_tracer()
    _trace_class(_config_class(model_type))
    TRACE["names"], TRACE["whole"] = set(), set()


def _identifiers(module) -> set[str]:
    """The string constants of a module's source that could name a config key (kwargs.pop("rope_scaling"), ...)."""
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return set()
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.isidentifier()}


def _consumed_by(cls) -> set[str]:
    """Names a config class consumes or defines: dataclass fields, __init__ parameters, class attributes, properties
    and methods (a key so named would set or shadow them), the identifier-like strings of the modules its MRO is
    defined in (kwargs read by name), attribute_map's both sides and the sub-configs."""
    import dataclasses
    import inspect

    out = set(dir(cls))
    if dataclasses.is_dataclass(cls):
        out |= {f.name for f in dataclasses.fields(cls)}
    for c in cls.__mro__:
        if c is object:
            continue
        try:
            out |= {p for p in inspect.signature(c.__init__).parameters if p not in ("self", "args", "kwargs")}
        except (TypeError, ValueError):
            pass
        module = inspect.getmodule(c)
        if module is not None:
            out |= _identifiers(module)
    amap = dict(getattr(cls, "attribute_map", {}) or {})
    out |= set(amap) | set(amap.values())
    try:
        out |= set(getattr(cls, "sub_configs", {}) or {})
    except Exception:  # noqa: BLE001
        pass
    return {n for n in out if not (n.startswith("__") and n.endswith("__"))}


def _model_code_names(model_type: str) -> set[str]:
    """Names the type's model code could read from its config, whether or not a build took that branch: attributes
    of anything named *config (config.x, self.config.x, text_config.x) and getattr / hasattr(*config, "x") in the
    modules of its model class's MRO and the transformers.models modules they take classes or functions from."""
    import ast
    import inspect

    from transformers.models.auto import modeling_auto

    modules = set()
    for mapping in (modeling_auto.MODEL_FOR_CAUSAL_LM_MAPPING, modeling_auto.MODEL_FOR_MASKED_LM_MAPPING):
        try:
            cls = mapping[_config_class(model_type)]
        except Exception:  # noqa: BLE001
            continue
        for c in cls.__mro__:
            if c.__module__.startswith("transformers.models."):
                modules.add(sys.modules.get(c.__module__))
        for module in list(modules - {None}):  # and what those take from other model code
            for value in vars(module).values():
                owner = getattr(value, "__module__", None)
                if isinstance(owner, str) and owner.startswith("transformers.models."):
                    modules.add(sys.modules.get(owner))
        break
    out: set[str] = set()
    for module in modules - {None}:
        try:
            tree = ast.parse(inspect.getsource(module))
        except (OSError, TypeError, SyntaxError):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and ast.unparse(n.value).endswith("config"):
                out.add(n.attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("getattr", "hasattr") \
                    and len(n.args) >= 2 and ast.unparse(n.args[0]).endswith("config") \
                    and isinstance(n.args[1], ast.Constant) and isinstance(n.args[1].value, str):
                out.add(n.args[1].value)
    return out


@lru_cache(maxsize=1)
def reads_common() -> frozenset[str]:
    """What every config class consumes: PreTrainedConfig's names, and the generation parameters its __post_init__
    drops from the kwargs (a config.json's max_length never reaches the config object)."""
    from transformers import GenerationConfig, PreTrainedConfig

    return frozenset(_consumed_by(PreTrainedConfig) | set(GenerationConfig._get_default_generation_params()))


def _trace_reads(model_type: str, t: dict) -> str:
    """Attach "reads" to template t from the builds traced since _trace_start: the names read, those the config class
    consumes, minus reads_common(); none where a walk over the whole config came from elsewhere (what it reads is
    unknown). Returns a note."""
    t.pop("reads", None)
    if TRACE["whole"]:
        return f"no reads list ({', '.join(sorted(TRACE['whole']))})"
    names = (set(TRACE["names"]) | _consumed_by(_config_class(model_type)) | _model_code_names(model_type)) \
        - reads_common()
    t["reads"] = sorted(names)
    return f"{len(names)} names read"


def ours(text: dict, t: dict) -> dict | None:
    spec = generic.from_template(text, "t", "", None, "", text, template=t)
    return None if spec is None else json.loads(json.dumps(spec_to_dict(spec)))


def cut(d: dict, layer_key: str, n: int, lists: list[str]) -> dict:
    d = json.loads(json.dumps(d))
    full = d[layer_key]
    d[layer_key] = n
    for k in lists:
        v = d[k]
        d[k] = v[:n] if n <= full else [v[i % len(v)] for i in range(n)]
    return d


# ---- leaves -------------------------------------------------------------------------------------------------------
def per_sig(sd: dict, t: dict, env: dict) -> dict | None:
    """signature -> group dict (count dropped) for the blocks of a read; None if one signature has two groups."""
    out: dict[str, dict] = {}
    for i, g in enumerate(sd["structure"]["pattern"]):
        sig = T._signature(t, env, i)
        grp = {k: v for k, v in sd["structure"]["groups"][g].items() if k != "count"}
        if sig in out and out[sig] != grp:
            return None
        out[sig] = grp
    return out


flatten = T.flatten


def split(view: dict) -> tuple[str, list[int]]:
    skel, ints = [], []
    for path, v in flatten(view):
        if isinstance(v, int) and not isinstance(v, bool):
            skel.append((path, "#"))
            ints.append(v)
        else:
            skel.append((path, v))
    return json.dumps(skel, default=str), ints


def view_of(sd: dict, t: dict, env: dict) -> dict | None:
    groups = per_sig(sd, t, env)
    if groups is None:
        return None
    return {"groups": groups, "globals": sd["structure"]["globals"], "model_class": sd["structure"]["model_class"],
            "peft": sd["structure"]["peft_target_map"]}


def power(v0: int, x0: int, x1: int, v1: int) -> int | None:
    """e when v1 / v0 == (x1 / x0) ** e for e in 1, 2, -1 (the key enters the leaf as a power), else None."""
    r = Fraction(v1, v0) if v0 else None
    t = Fraction(x1, x0) if x0 else None
    return next((e for e in (1, 2, -1) if r is not None and t is not None and t ** e == r), None)


def fit(v0: int, moves: dict[str, tuple[int, int, int]],
        pairs: dict[tuple[str, str], int] | None = None) -> dict | int | None:
    """An expression for a leaf from its base value and, per key, (x0, x1, v1) when the key moved it; pairs: the
    leaf's value with two of its additive keys moved together (a, b) -> v11, for a product term a*b in the linear
    part (2 * heads * head_dim + 2 * v_heads * v_head_dim: a sum of products), which one-key moves cannot see."""
    m: dict[str, int] = {}
    additive = {}
    for key, (x0, x1, v1) in moves.items():
        e = power(v0, x0, x1, v1)
        if e is not None:
            m[key] = e
        else:
            additive[key] = (x0, x1, v1)
    mono0 = Fraction(1)
    for key, e in m.items():
        mono0 *= Fraction(moves[key][0]) ** e
    lin: dict[str, Fraction] = {}
    l0 = Fraction(v0) / mono0
    for key, (x0, x1, v1) in additive.items():
        if x1 == x0:
            return None
        lin[key] = (Fraction(v1) / mono0 - l0) / (x1 - x0)
    cross: dict[tuple[str, str], Fraction] = {}
    for (a, b), v11 in sorted((pairs or {}).items()):
        if a not in additive or b not in additive:
            continue
        (a0, a1, va), (b0, b1, vb) = additive[a], additive[b]
        c = (Fraction(v11) - Fraction(va) - Fraction(vb) + v0) / mono0 / ((a1 - a0) * (b1 - b0))
        if c:
            cross[a, b] = c
    for (a, b), c in cross.items():  # the one-key slopes hold the product term at the other key's default
        lin[a] -= c * additive[b][0]
        lin[b] -= c * additive[a][0]
    lin[""] = l0 - sum(lin[k] * additive[k][0] for k in additive) - sum(
        c * additive[a][0] * additive[b][0] for (a, b), c in cross.items())
    for (a, b), c in cross.items():
        lin[f"{a}*{b}"] = c
    return T.encode(m, lin)


def template_ints(node, exprs, it):
    if isinstance(node, dict):
        return {k: template_ints(node[k], exprs, it) for k in node}
    if isinstance(node, list):
        return [template_ints(v, exprs, it) for v in node]
    if isinstance(node, int) and not isinstance(node, bool):
        return {"$": exprs[next(it)]}
    return node


def ordered(node):
    """node with dict keys sorted the way flatten walks them (so leaf i of flatten is the i-th int placed)."""
    if isinstance(node, dict):
        return {k: ordered(node[k]) for k in sorted(node)}
    if isinstance(node, list):
        return [ordered(v) for v in node]
    return node


# ---- one type -----------------------------------------------------------------------------------------------------
def extra_keys() -> dict[str, list]:
    """Keys real config.json files carry beside the config class's own (from the shipped presets' Hugging Face
    configs), with the values seen: probed per type, a key is free when none of its values (and a few others) moves
    the structure."""
    from trainfit.catalog import all_models
    from trainfit.catalog.generic import text_config

    out: dict[str, list] = {"rope_theta": [12345.0]}
    for preset in all_models().values():
        if not preset.hf_config:
            continue
        for k, v in text_config(preset.hf_config)[0].items():
            if k in _DROP_KEYS or k in T.LAYER_KEYS or k == "model_type" or isinstance(v, list):
                continue
            vals = out.setdefault(k, [])
            if v not in vals and len(vals) < 3:
                vals.append(v)
    for k, vals in out.items():  # other values of the same kind
        for v in list(vals):
            if isinstance(v, bool):
                vals.append(not v)
            elif isinstance(v, int):
                vals.append(2 * v + 1)
            elif isinstance(v, float):
                vals.append(v * 1.5 + 0.5)
    return out


EXTRA_KEYS: dict[str, list] = {}


def make(model_type: str, override: dict | None = None) -> tuple[dict | None, str]:
    try:
        _trace_start(model_type)
    except Exception as exc:  # noqa: BLE001
        return None, f"no config class ({type(exc).__name__})"
    t, msg = _make(model_type, override)
    if t is not None:  # every build above read the config: the union of what they read
        msg += f"; {_trace_reads(model_type, t)}"
    return t, msg


# Keys whose default is None in a config class whose model code cannot build with None (transformers 5.25:
# ministral and hunyuan_v1_* read config.head_dim for the rotary embedding, nemotron divides by
# num_key_value_heads). Every published config.json of those types sets them; the template is made from the default
# with the usual value filled in, and a config.json that leaves the key null still goes to the meta-device read
# (`templates.resolve`: a null where the template has a number is not its value), where transformers fails as it
# would. Tried only when the default itself cannot be built.
FILL_NONE = {
    "head_dim": lambda d: d["hidden_size"] // d["num_attention_heads"],
    "num_key_value_heads": lambda d: d["num_attention_heads"],
}


# Keys a real config.json may set to null; a type whose build is the same with the key null as without it records
# the key in "null_absent", and templates.resolve then reads a null there as the key left out.
NULL_KEYS = ("rope_scaling",)


def _same_build(a: dict | None, b: dict | None) -> bool:
    """Two oracle() answers for configs that differ only in their text: the same build (the structure's config_hash
    is a hash of the text itself)."""
    if a is None or b is None:
        return False

    def bare(x: dict) -> dict:
        return {**x, "structure": {k: v for k, v in (x.get("structure") or {}).items() if k != "config_hash"}}

    return bare(a) == bare(b)


def _filled(defaults: dict) -> dict:
    """The defaults with FILL_NONE's keys that are None filled (the keys they derive from present)."""
    out = dict(defaults)
    for key, fill in FILL_NONE.items():
        if key in out and out[key] is None:
            try:
                out[key] = fill(out)
            except (KeyError, TypeError, ZeroDivisionError):
                continue
    return out


def _make(model_type: str, override: dict | None = None) -> tuple[dict | None, str]:
    try:
        defaults = resolved(model_type, **(override or {}))
    except Exception as exc:  # noqa: BLE001
        return None, f"no default config ({type(exc).__name__})"
    filled = _filled(defaults)
    if filled != defaults:
        layer_key = next((k for k in T.LAYER_KEYS if isinstance(defaults.get(k), int)
                          and not isinstance(defaults.get(k), bool)), None)
        n_full = defaults.get(layer_key) if layer_key else None
        lists = [k for k, v in defaults.items() if isinstance(v, list) and len(v) == n_full and (n_full or 0) > 1]
        if layer_key and oracle(cut(defaults, layer_key, min(n_full, MAX_BASE_LAYERS), lists)) is None:
            defaults = filled
    layer_key = next((k for k in T.LAYER_KEYS if isinstance(defaults.get(k), int)
                      and not isinstance(defaults.get(k), bool)), None)
    if layer_key is None:
        return None, "no layer count key"
    n_full = defaults[layer_key]
    lists = [k for k, v in defaults.items() if isinstance(v, list) and len(v) == n_full and n_full > 1]
    rules = [r for r in T.PATTERN_RULES if r in defaults]
    t = {"layer_key": layer_key, "layer_lists": lists, "rules": rules}
    n8 = min(n_full, MAX_BASE_LAYERS)
    base8 = cut(defaults, layer_key, n8, lists)
    sd8 = oracle(base8)
    if sd8 is None:
        return None, "transformers cannot build the default config"
    sigs = [T._signature(t, base8, i) for i in range(n8)]
    if per_sig(sd8, t, base8) is None:
        return None, "blocks of one per-layer kind differ (a pattern the template cannot express)"
    p = max(sigs.index(s) for s in set(sigs)) + 1
    base = cut(defaults, layer_key, p, lists)
    sd0 = oracle(base) if p != n8 else sd8
    if sd0 is None:
        return None, f"cannot build the default cut to {p} blocks"
    v0 = view_of(sd0, t, base)
    if v0 is None:
        return None, "blocks of one per-layer kind differ"
    skel0, ints0 = split(v0)
    # keys a config.json may carry as null with the same effect as leaving them out (GLM-4.7's "rope_scaling":
    # null, which transformers 5's config classes take as a legacy kwarg): checked on this type's own build
    null_absent = [k for k in NULL_KEYS if k not in defaults and _same_build(oracle({**base, k: None}), sd0)]

    hd_rule = None
    if "head_dim" not in base and isinstance(base.get("hidden_size"), int) and \
            isinstance(base.get("num_attention_heads"), int) and base["num_attention_heads"] > 0:
        floor = base["hidden_size"] // base["num_attention_heads"]
        same = oracle({**base, "head_dim": floor})  # the model code reads head_dim, else hidden // heads
        other = oracle({**base, "head_dim": 2 * floor})
        if same is not None and other is not None and view_of(same, t, base) == v0 and view_of(other, t, base) != v0:
            base["head_dim"] = defaults["head_dim"] = floor
            hd_rule = {"sources": ["hidden_size", "num_attention_heads"],
                       "floor": ["hidden_size", "num_attention_heads"], "optional": True}
    roles: dict[str, str] = {layer_key: "layers", "model_type": "fixed"}
    for k in lists:
        roles[k] = "layer_list"
    for r in rules:
        roles[r] = "rule_list" if r == "mlp_only_layers" else "rule"
    moves: dict[str, tuple[int, int, list[int]]] = {}
    for key, x0 in base.items():
        if key in roles:
            continue
        tries = perturbations(key, x0)
        if tries is None:
            roles[key] = "fixed"
            continue
        roles[key] = "fixed"
        for x1 in tries:
            sd = oracle({**base, key: x1})
            v = view_of(sd, t, base) if sd is not None else None
            if v is None:
                continue
            skel, ints = split(v)
            if skel != skel0:
                continue
            if x0 is None:
                if ints == ints0:
                    roles[key] = "free"
            elif isinstance(x0, int) and not isinstance(x0, bool):
                if ints != ints0 and x0 == 0:
                    break  # moves dimensions from 0: no ratio to read
                roles[key] = "var"
                if ints != ints0:
                    moves[key] = (x0, x1, ints)
            elif ints == ints0:
                roles[key] = "free"
            break
    for key, x0 in base.items():  # token ids may be lists or null in a config.json
        if key.endswith("_token_id") and roles.get(key) == "var" and key not in moves:
            roles[key] = "free"
    extras = {k: v for k, v in EXTRA_KEYS.items() if k not in base}
    together = []
    for i in range(max((len(v) for v in extras.values()), default=0)):  # all at once first (one build per value)
        sd = oracle({**base, **{k: v[i % len(v)] for k, v in extras.items()}})
        together.append(sd is not None and view_of(sd, t, base) == v0)
    if together and all(together):
        for extra in extras:
            roles[extra] = "free"
        extras = {}
    for extra, values in extras.items():  # else one by one
        for value in values:
            sd = oracle({**base, extra: value})
            if sd is None or view_of(sd, t, base) != v0:
                break
        else:
            roles[extra] = "free"
    third: dict[str, tuple[int, list[int]]] = {}  # a third value per moving key: checks the fitted law
    for key, (x0, x1, _) in list(moves.items()):
        for x2 in (4 * x0, x0 // 2 if x0 % 2 == 0 else 0, 3 * x0):
            if x2 in (0, x0, x1):
                continue
            sd = oracle({**base, key: x2})
            v = view_of(sd, t, base) if sd is not None else None
            if v is not None and split(v)[0] == skel0:
                third[key] = (x2, split(v)[1])
                break
        else:  # no third point: the law cannot be checked, the key keeps its default
            roles[key] = "fixed"
            del moves[key]
    pair_ints: dict[tuple[str, str], list[int]] = {}  # two keys that both move a leaf additively, moved together
    for a in sorted(moves):
        for b in sorted(moves):
            if a >= b:
                continue
            (a0, a1, ia), (b0, b1, ib) = moves[a], moves[b]
            if not any(ia[j] != v and ib[j] != v and power(v, a0, a1, ia[j]) is None
                       and power(v, b0, b1, ib[j]) is None for j, v in enumerate(ints0)):
                continue
            sd = oracle({**base, a: a1, b: b1})
            v = view_of(sd, t, base) if sd is not None else None
            if v is not None and split(v)[0] == skel0:
                pair_ints[a, b] = split(v)[1]
    for _ in range(8):
        exprs = []
        for j, v in enumerate(ints0):
            mv = {k: (x0, x1, ints[j]) for k, (x0, x1, ints) in moves.items() if ints[j] != v}
            e = fit(v, mv, {ab: ints[j] for ab, ints in pair_ints.items() if ab[0] in mv and ab[1] in mv})
            if e is None:
                return None, f"leaf {j} fits no expression"
            exprs.append(e)
        bad = set()
        for key, (x2, ints) in third.items():
            if key not in moves:
                continue
            env = {**base, key: x2}
            for j, e in enumerate(exprs):
                try:
                    ok = T.evaluate(e, env) == ints[j]
                except T.NoTemplate:
                    ok = False
                if not ok:
                    bad.add(key)
                    break
        if not bad:
            break
        for key in bad:  # a law the fit does not capture: the key keeps its default
            roles[key] = "fixed"
            del moves[key]
    else:
        return None, "laws do not settle"
    it = iter(range(len(exprs)))
    glob = template_ints(ordered(v0["globals"]), exprs, it)  # flatten's order: globals, then groups by signature
    groups = {sig: template_ints(ordered(g), exprs, it) for sig, g in sorted(v0["groups"].items())}
    assert next(it, None) is None
    if null_absent:
        t["null_absent"] = null_absent
    t.update(defaults=defaults, keys=roles, groups=groups, globals=glob, model_class=v0["model_class"],
             peft_target_map=v0["peft"], attribute_map=dict(getattr(_config_class(model_type), "attribute_map", {})),
             derived=derived_rules(model_type, defaults, layer_key, roles), guards=[])
    if hd_rule is not None:
        t["derived"]["head_dim"] = hd_rule
    t["guards"] = guards(t, base, moves)
    normalised_strings(model_type, t)
    if override:
        t["override"] = override
    return verify(model_type, t, base, defaults, moves, p)


def perturbations(key: str, x0) -> list | None:
    """The other values a key is built with, alone (None: none tried, the key keeps its default)."""
    if isinstance(x0, bool):
        return [not x0]
    if isinstance(x0, int):
        return [2 * x0] + ([x0 // 2] if x0 >= 2 and x0 % 2 == 0 else []) if x0 >= 1 else [2]
    if isinstance(x0, float):
        return [x0 * 1.5 if x0 else 0.5]
    if isinstance(x0, str) and "act" in key:
        return ["gelu" if x0 != "gelu" else "silu"]
    if x0 is None:
        return [1024]
    if isinstance(x0, dict) and isinstance(x0.get("rope_theta"), (int, float)):
        return [{**x0, "rope_theta": x0["rope_theta"] * 2}]
    return None


def reads_only(model_type: str, t: dict) -> str:
    """Recompute a shipped template's "reads" (and its variants') from the builds that read the config most: the
    default cut to 8 blocks and to the blocks that show every kind, each key perturbed alone (every value
    perturbations() gives) and the presets' extra keys all at once; nothing else in the template changes."""
    notes = []
    for one in (t, *t.get("variants", ())):
        _trace_start(model_type)
        defaults, lk, lists = one["defaults"], one["layer_key"], one["layer_lists"]
        n8 = min(defaults[lk], MAX_BASE_LAYERS)
        base8 = cut(defaults, lk, n8, lists)
        if oracle(base8) is None:
            one.pop("reads", None)
            notes.append("the default does not build: no reads list")
            continue
        sigs = [T._signature(one, base8, i) for i in range(n8)]
        base = cut(defaults, lk, max(sigs.index(s) for s in set(sigs)) + 1, lists)
        oracle(base)
        fixed = {lk, "model_type", *lists, *one["rules"]}
        for key, x0 in base.items():
            if key not in fixed:
                for x1 in perturbations(key, x0) or ():
                    oracle({**base, key: x1})
        extras = {k: v for k, v in EXTRA_KEYS.items() if k not in base}
        for i in range(max((len(v) for v in extras.values()), default=0)):
            oracle({**base, **{k: v[i % len(v)] for k, v in extras.items()}})
        notes.append(_trace_reads(model_type, one))
    return "; ".join(notes)


ACTIVATIONS = ("gelu", "silu", "gelu_new", "relu", "gelu_pytorch_tanh", "swish", "gelu_fast")


def normalised_strings(model_type: str, t: dict) -> None:
    """A free string key whose value the config class rewrites (Gemma: hidden_act "gelu" -> "gelu_pytorch_tanh")
    would reach the ModelSpec unrewritten: such keys keep their default."""
    for key, role in t["keys"].items():
        if role != "free" or not isinstance(t["defaults"].get(key), str):
            continue
        for value in ACTIVATIONS:
            try:
                kept = resolved(model_type, **(t.get("override") or {}), **{key: value}).get(key) == value
            except Exception:  # noqa: BLE001
                kept = False
            if not kept:
                t["keys"][key] = "fixed"
                break


def guards(t: dict, base: dict, moves: dict) -> list[list[str]]:
    """Divisions the model takes with a floor (head_dim = hidden // heads inside the model code): for each pair of
    dimension keys a, b with b dividing a by default, a config with a not a multiple of b is read; where the template
    answers and its answer is not the read's, the template requires a % b == 0 (else the reader answers)."""
    out = []
    for b in sorted(moves):
        xb = base[b]
        if not 2 <= xb <= 1024:
            continue
        for a in sorted(moves):
            xa = base[a]
            if a == b or xa <= xb or xa % xb:
                continue
            cfg = {**base, a: xa + xb // 2}
            got = ours(cfg, t)
            if got is not None and got != oracle(cfg):
                out.append([a, b])
    return out


def _config_class(model_type: str):
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    return CONFIG_MAPPING[model_type]


def derived_rules(model_type: str, defaults: dict, layer_key: str, roles: dict) -> dict:
    """Keys the config class computes from other keys when absent: their sources and, where found, the rule."""
    out: dict[str, dict] = {}
    probes: dict[str, tuple] = {}
    for key, x0 in defaults.items():
        if key == "model_type":
            continue
        if isinstance(x0, bool):
            x1 = not x0
        elif isinstance(x0, int):
            x1 = 2 * x0 if x0 else 2
        elif isinstance(x0, float):
            x1 = x0 * 1.5 if x0 else 0.5
        else:
            continue
        try:
            d = resolved(model_type, **{key: x1})
        except Exception:  # noqa: BLE001
            d = None
        if d is None:
            continue
        probes[key] = (x0, x1, d)
        for k2, v in d.items():
            if k2 != key and json.dumps(v, default=str) != json.dumps(defaults.get(k2), default=str):
                out.setdefault(k2, {"sources": []})["sources"].append(key)
    for key, rule in out.items():
        v0 = defaults.get(key)
        if isinstance(v0, int) and not isinstance(v0, bool) and all(
                isinstance(probes[s][0], int) and not isinstance(probes[s][0], bool) for s in rule["sources"]):
            pr = {s: (probes[s][0], probes[s][1], probes[s][2].get(key)) for s in rule["sources"]}
            pair = [(a, b) for a in pr for b in pr if a != b and isinstance(defaults.get(a), int)
                    and isinstance(defaults.get(b), int) and defaults[b] and defaults[a] // defaults[b] == v0]
            for a, b in pair:  # key = a // b (head_dim = hidden_size // num_attention_heads)
                env = dict(defaults)
                if all(pr[s][2] == {**env, s: pr[s][1]}[a] // {**env, s: pr[s][1]}[b] for s in pr):
                    rule["floor"] = [a, b]
                    break
            else:
                e = fit(v0, {s: v for s, v in pr.items() if isinstance(v[2], int)}) if all(
                    isinstance(v[2], int) for v in pr.values()) else None
                if e is not None:
                    rule["expr"] = e
        elif isinstance(v0, list) and layer_key in rule["sources"]:
            period = _period(v0)
            ok = True
            for n in (defaults[layer_key] + 1, defaults[layer_key] + 3, 3):
                try:
                    got = resolved(model_type, **{layer_key: n}).get(key)
                except Exception:  # noqa: BLE001
                    ok = False
                    break
                if got != [period[i % len(period)] for i in range(n)]:
                    ok = False
            if ok:
                rule["period"] = period
                rule["by"] = layer_key
    return out


def _period(v: list) -> list:
    for p in range(1, len(v) + 1):
        if all(v[i] == v[i % p] for i in range(len(v))):
            return v[:p]
    return v


def verify(model_type: str, t: dict, base: dict, defaults: dict, moves: dict, p: int) -> tuple[dict | None, str]:
    checks = [("default", base)]
    rng = random.Random(model_type)
    var = [k for k, r in t["keys"].items() if r == "var" and k in moves]
    for seed in range(6):
        pick = {k: moves[k][1] for k in var if rng.random() < 0.5}
        checks.append((f"joint {seed}", {**base, **pick}))
    lk = t["layer_key"]
    n2 = min(defaults[lk], p + 3) if not t["layer_lists"] else p + 3
    sparse = {"model_type": model_type, lk: n2}
    if "first_k_dense_replace" in t["rules"] and isinstance(defaults.get("first_k_dense_replace"), int):
        sparse["first_k_dense_replace"] = 1
    checks.append(("sparse", sparse))
    for seed in range(3):
        pick = {k: moves[k][1] for k in var if rng.random() < 0.5}
        checks.append((f"sparse joint {seed}", {**sparse, **pick}))
    for seed in range(3):  # other factors: dimensions that no longer divide each other
        pick = {k: moves[k][0] * 3 for k in var if rng.random() < 0.5}
        checks.append((f"sparse x3 {seed}", {**sparse, **pick}))
        checks.append((f"joint x3 {seed}", {**base, **pick}))
    done = {"joint": 0, "sparse": 0}
    for label, cfg in checks:
        kind = label.split()[0]
        if label.startswith("joint") and label.split()[1].isdigit() and done["joint"] >= 2:
            continue
        ref = oracle(cfg)
        if ref is None:
            if label == "default":
                return None, "default not buildable"
            continue
        got = ours(cfg, t)
        if got is None:
            if label.startswith("sparse") or "x3" in label:
                continue  # the template declines: a fallback, not a wrong answer
            return None, f"{label}: the template declines its own config"
        if got != ref:
            return None, f"{label}: template != meta read ({_diff(got, ref)})"
        if kind in done:
            done[kind] += 1
    if done["joint"] < 2:
        return None, f"only {done['joint']} joint perturbations buildable"
    return t, f"ok (p={p}, {len(moves)} keys move dims, sparse checks passed {done['sparse']})"


def _diff(a, b) -> str:
    return T.first_difference(a, b) or "?"


def text_types() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = set()
    for mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        try:
            d = resolved(mt)
        except Exception:  # noqa: BLE001
            out.add(mt)
            continue
        sub = d.get("text_config")
        out.add(sub["model_type"] if isinstance(sub, dict) and sub.get("model_type") else mt)
    return sorted(out)


def preset_switches(mt: str, t: dict) -> list[dict]:
    """The structural switches (a key the template keeps fixed, a bool or a string) that the shipped presets' own
    config.json files of this type set otherwise than the default (GLM-4.5 to 4.7: attention_bias true; Gemma 2B/7B:
    hidden_act gelu), one override per distinct combination: each becomes a variant made from that switch, so a
    fine-tune of those models is answered without torch. The head layout and a null sliding window have their own."""
    from trainfit.catalog import all_models
    from trainfit.catalog.generic import text_config

    seen: list[dict] = []
    for preset in all_models().values():
        if not preset.hf_config:
            continue
        text = text_config(preset.hf_config)[0]
        if str(text.get("model_type", "")).lower() != mt:
            continue
        override = {k: v for k, v in sorted(text.items())
                    if t["keys"].get(k) == "fixed" and k not in ("model_type", "tie_word_embeddings")
                    and isinstance(v, (bool, str)) and v != t["defaults"].get(k)}
        if override and override not in seen:
            seen.append(override)
    return seen


def one_type(mt: str) -> tuple[str, dict | None, str]:
    if not EXTRA_KEYS:
        EXTRA_KEYS.update(extra_keys())
    t0 = time.perf_counter()
    try:
        t, msg = make(mt)
        if t is not None and t["keys"].get("tie_word_embeddings") == "fixed":  # both head layouts
            flip = {"tie_word_embeddings": not t["defaults"]["tie_word_embeddings"]}
            t2, msg2 = make(mt, flip)
            if t2 is not None:
                t["variants"] = [t2]
            msg += f"; tie_word_embeddings={flip['tie_word_embeddings']}: {msg2}"
        if t is not None and t["keys"].get("sliding_window") == "var" and \
                isinstance(t["defaults"].get("sliding_window"), int):
            # a config.json with "sliding_window": null (full attention in every block: Mistral-Small-24B,
            # Magistral-Small) is a structural switch of its own, answered by a variant made from it
            t3, msg3 = make(mt, {"sliding_window": None})
            if t3 is not None:
                t.setdefault("variants", []).append(t3)
            msg += f"; sliding_window=null: {msg3}"
        if t is not None:
            for override in preset_switches(mt, t):  # the switches the presets' own config.json files flip
                t4, msg4 = make(mt, override)
                if t4 is not None:
                    t.setdefault("variants", []).append(t4)
                msg += f"; {override}: {msg4}"
    except Exception as exc:  # noqa: BLE001
        t, msg = None, f"generator error {type(exc).__name__}: {exc}"[:200]
    print(f"{mt:28s} {time.perf_counter() - t0:6.1f}s  {msg}", flush=True)
    return mt, t, msg


def one_reads(item: tuple[str, str]) -> tuple[str, str, str]:
    """(type, its shipped template with "reads" recomputed, a note)."""
    mt, text = item
    if not EXTRA_KEYS:
        EXTRA_KEYS.update(extra_keys())
    t0 = time.perf_counter()
    t = json.loads(text)
    try:
        msg = reads_only(mt, t)
    except Exception as exc:  # noqa: BLE001
        msg = f"generator error {type(exc).__name__}: {exc}"[:200]
        print(f"{mt:28s} {msg} (kept as shipped)", flush=True)
        return mt, text, msg
    new = json.dumps(t, separators=(",", ":"), sort_keys=True)
    if _without_reads(new) != _without_reads(text):
        raise SystemExit(f"{mt}: --reads-only changed more than the reads")
    print(f"{mt:28s} {time.perf_counter() - t0:6.1f}s  {msg}", flush=True)
    return mt, new, msg


def _without_reads(text: str) -> str:
    t = json.loads(text)
    for one in (t, *t.get("variants", ())):
        one.pop("reads", None)
    return json.dumps(t, separators=(",", ":"), sort_keys=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--types", default="")
    ap.add_argument("--out", default=T.FILE)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--merge", action="store_true", help="with --types: regenerate those types only and merge them "
                    "into --out (the others kept as shipped; needs the same transformers version)")
    ap.add_argument("--reads-only", action="store_true", help="recompute only the config names each shipped template "
                    "reads (for --types, or all shipped types) and write them into --out; nothing else changes "
                    "(needs the transformers version --out was made with)")
    args = ap.parse_args()
    import transformers

    if args.reads_only:
        return main_reads_only(args)
    types = args.types.split(",") if args.types else text_types()
    out, why = {}, {}
    done = _map(one_type, types, args.jobs)
    for mt, t, msg in done:
        if t is not None:
            out[mt] = t
        else:
            why[mt] = msg
    shipped = None
    if os.path.exists(args.out):
        with gzip.open(args.out, "rt", encoding="utf-8") as fh:
            shipped = json.load(fh)
    new = {mt: json.dumps(t, separators=(",", ":"), sort_keys=True) for mt, t in out.items()}
    if args.types and shipped is not None:  # each chosen type against the shipped file
        for mt in types:
            old = shipped["types"].get(mt)
            print(f"{mt:28s} {'not shipped' if old is None else 'shipped'} -> "
                  f"{'not templated' if mt not in new else 'new' if old is None else 'identical' if old == new[mt] else 'CHANGED'}")
    if args.types and args.merge:
        if shipped is None or shipped["transformers"] != transformers.__version__:
            sys.exit(f"--merge needs {args.out} built with transformers {transformers.__version__}")
        for mt in types:
            shipped["types"].pop(mt, None)
            shipped["not_templated"].pop(mt, None)
        shipped["types"].update(new)
        shipped["not_templated"].update(why)
        shipped["reads_common"] = sorted(reads_common())
        data = shipped
    elif not args.types:
        data = {"transformers": transformers.__version__, "not_templated": why, "types": new,
                "reads_common": sorted(reads_common())}
    else:
        return
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(data, fh, separators=(",", ":"), sort_keys=True)
    print(f"{len(data['types'])}/{len(data['types']) + len(data['not_templated'])} types templated -> {args.out} "
          f"({os.path.getsize(args.out)} bytes)")


def _map(fn, items: list, jobs: int) -> list:
    """fn over items, in `jobs` processes when more than one."""
    if jobs > 1:
        from multiprocessing import Pool

        with Pool(jobs) as pool:
            return pool.map(fn, items, chunksize=1)
    return [fn(x) for x in items]


def main_reads_only(args) -> None:
    import transformers

    with gzip.open(args.out, "rt", encoding="utf-8") as fh:
        shipped = json.load(fh)
    if shipped.get("transformers") != transformers.__version__:
        sys.exit(f"--reads-only needs transformers {shipped.get('transformers')} ({args.out} was made with it); "
                 f"{transformers.__version__} is installed")
    types = args.types.split(",") if args.types else sorted(shipped["types"])
    missing = [mt for mt in types if mt not in shipped["types"]]
    if missing:
        sys.exit(f"not shipped: {', '.join(missing)}")
    items = [(mt, shipped["types"][mt]) for mt in types]
    done = _map(one_reads, items, args.jobs)
    for mt, text, _ in done:
        shipped["types"][mt] = text
    common = sorted(reads_common())
    if shipped.get("reads_common") not in (None, common):
        sys.exit("reads_common differs from the shipped one under the same transformers version")
    shipped["reads_common"] = common
    with gzip.open(args.out, "wt", encoding="utf-8", compresslevel=9) as fh:
        json.dump(shipped, fh, separators=(",", ":"), sort_keys=True)
    with_reads = sum("reads" in json.loads(text) for text in shipped["types"].values())
    print(f"{with_reads}/{len(shipped['types'])} templates with a reads list -> {args.out} "
          f"({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
