"""Structure templates: the generic reader's result for a model type, as a torch-free function of its config.json.

`benchmarks/make_templates.py` (torch + transformers) builds each causal-LM type transformers can build on the meta
device with perturbed configs, finds how every dimension of the read Structure follows the config keys
(coef * prod(key^e) * (c + sum a_k * key + sum b * key1 * key2)), which per-layer keys pick each block's group, and ships only the types
whose template reproduces fresh meta-device reads of independently perturbed configs exactly
(catalog/data/structure_templates.json.gz). At run time a config.json of a templated type is answered here without
importing torch, when every key it sets is one the template understands: a key whose value changes the structure in
a way the template does not model ("fixed"), set to a value other than the default, or a key the template has never
seen, sends the config to the real reader (None here). A key the template has never seen is inert, and accepted,
when the template lists what its type's config class consumes and its builds read ("reads", and the file's
"reads_common": fields, __init__ parameters, kwargs popped by name, properties, every attribute read while the model
was built and read) and the key is in neither: the config object would carry it and nothing would look at it.
"""

from __future__ import annotations

import gzip
import json
import os
from fractions import Fraction
from functools import lru_cache
from typing import Any

FILE = os.path.join(os.path.dirname(__file__), "data", "structure_templates.json.gz")
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
# per-layer rules the templates understand: a block's group is picked by the per-layer lists' values at its index
# and by these keys
PATTERN_RULES = ("first_k_dense_replace", "mlp_only_layers", "decoder_sparse_step", "moe_layer_interval",
                 "moe_layer_start_index", "moe_layer_end_index")
# Ernie 4.5 MoE: block i is sparse when (i + 1) % moe_layer_interval == 0 and start <= i <= end (one signature entry,
# under moe_layer_interval; the config class turns an end of -1 into the last block)


class NoTemplate(Exception):
    """This config is outside what the type's template was verified for."""


@lru_cache(maxsize=1)
def _file() -> dict[str, Any]:
    try:
        with gzip.open(FILE, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) and isinstance(data.get("types"), dict) else {}
    except (OSError, ValueError):
        return {}


def _shipped() -> dict[str, str]:
    """model type -> its template as a JSON string (parsed only when that type is asked for)."""
    return _file().get("types", {})


@lru_cache(maxsize=1)
def _reads_common() -> frozenset[str] | None:
    """Names every config class consumes (PreTrainedConfig's fields, properties, kwargs; the generation parameters);
    None when the file does not say (then no key is inert)."""
    common = _file().get("reads_common")
    return frozenset(common) if isinstance(common, list) else None


def inert(t: dict, key: str) -> bool:
    """A key the template has no role for that cannot change the structure: the template lists what its type reads,
    and the key is not there, not in reads_common, and not an attribute_map alias or target."""
    reads, common = t.get("reads"), _reads_common()
    if not isinstance(reads, list) or common is None:
        return False
    amap = t.get("attribute_map", {})
    return not key.startswith("__") and key not in common and key not in reads and key not in amap \
        and key not in amap.values()


def made_with() -> str:
    """The transformers version the shipped templates were made with, and verified against (tools/make_templates.py
    writes it; tests/test_structure_templates.py checks every template against that version's meta-device read)."""
    return str(_file().get("transformers", ""))


def names() -> list[str]:
    return sorted(_shipped())


@lru_cache(maxsize=None)
def template(model_type: str) -> dict | None:
    text = _shipped().get(model_type)
    return None if text is None else json.loads(text)


def has_template(model_type: str) -> bool:
    return model_type in _shipped()


# ---- expressions ----------------------------------------------------------------------------------------------
def evaluate(expr: Any, env: dict[str, Any]) -> int:
    """An int leaf: a constant, or {"m": {key: exponent}, "l": {"": c, key: a}} = prod(key^e) * (c + sum a*key), where
    a linear term's key may be a product "k1*k2" (2 * heads * head_dim + ...: sums of products)."""
    if isinstance(expr, int):
        return expr
    value = Fraction(1)
    for key, e in expr["m"].items():
        x = _num(env, key)
        if x == 0 and e < 0:
            raise NoTemplate(f"{key} = 0")
        value *= Fraction(x) ** e
    lin = Fraction(0)
    for key, a in expr["l"].items():
        term = Fraction(a)
        for k in (key.split("*") if key else ()):
            term *= _num(env, k)
        lin += term
    value *= lin
    if value.denominator != 1:
        raise NoTemplate("a dimension is not an integer")
    return int(value)


def _num(env: dict[str, Any], key: str) -> int:
    x = env.get(key)
    if not isinstance(x, int) or isinstance(x, bool):
        raise NoTemplate(f"{key} is not an integer")
    return x


def encode(expr_m: dict[str, int], expr_l: dict[str, Fraction]) -> Any:
    lin = {k: (str(v) if Fraction(v).denominator != 1 else int(v)) for k, v in expr_l.items() if v != 0}
    if not expr_m and set(lin) <= {""}:
        return int(Fraction(lin.get("", 0)))
    return {"m": dict(expr_m), "l": lin}


# ---- the resolved config ----------------------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def _kind(v: Any) -> str:
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return type(v).__name__


def resolve(t: dict, text: dict[str, Any]) -> dict[str, Any]:
    """The config the model would be built from: the type's defaults, the user's keys over them, derived keys
    recomputed. Raises NoTemplate for a key outside the template; an inert key (see inert) is kept as it is, as the
    config object keeps it."""
    defaults = t["defaults"]
    roles = t["keys"]
    layer_key = t["layer_key"]
    env = dict(defaults)
    for key, value in t.get("override", {}).items():  # a variant's switch: the config must set it so
        if key not in text or not _same(text[key], value):
            raise NoTemplate(f"{key} is not {value}")
    null_absent = t.get("null_absent", ())
    for key, value in text.items():
        if value is None and key in null_absent:  # the same build as without the key (checked when made)
            continue
        role = roles.get(key)
        if role is None:
            if not inert(t, key):
                raise NoTemplate(f"unknown key {key}")
            env[key] = value
            continue
        default = defaults.get(key)
        if role == "fixed":
            if not _same(value, default):
                raise NoTemplate(f"{key} differs from the default")
        elif role in ("var", "rule", "layers"):
            if key == "moe_layer_end_index" and value == -1:  # the config class: the last block
                value = text.get(layer_key, defaults.get(layer_key))
                value = value - 1 if isinstance(value, int) and not isinstance(value, bool) else value
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise NoTemplate(f"{key} is not a count")
        elif role == "rule_list":
            if not isinstance(value, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in value):
                raise NoTemplate(f"{key} is not a list of layer indices")
        elif role == "layer_list":
            if not isinstance(value, list):
                raise NoTemplate(f"{key} is not a per-layer list")
        elif role == "free":
            if default is not None and not key.endswith("_token_id") and _kind(value) != _kind(default) and not (
                    {_kind(value), _kind(default)} <= {"int", "float"}):
                raise NoTemplate(f"{key} has another type")
        env[key] = value
    for alias, real in t["attribute_map"].items():  # the config object stores an alias under its real key
        if alias in text:
            if real in text and not _same(text[real], text[alias]):
                raise NoTemplate(f"{alias} and {real} differ")
            env[real] = text[alias]
    n = env.get(layer_key)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise NoTemplate("no layer count")
    for key, rule in t["derived"].items():  # keys the config class computes from others when absent
        if key in text:
            continue
        changed = [s for s in rule["sources"] if s in text and not _same(text[s], defaults.get(s))]
        if rule.get("optional"):  # absent from the config class's defaults: the model code falls back to it
            env.pop(key, None)
        if not changed and key in env:
            continue
        if "floor" in rule:
            a, b = (_num(env, k) for k in rule["floor"])
            if not b:
                raise NoTemplate(f"{rule['floor'][1]} = 0")
            env[key] = a // b
        elif "expr" in rule:
            env[key] = evaluate(rule["expr"], env)
        elif "period" in rule and changed == [rule["by"]]:
            env[key] = [rule["period"][i % len(rule["period"])] for i in range(n)]
        else:
            raise NoTemplate(f"{key} derives from {changed}")
    for key in t["layer_lists"]:
        if not isinstance(env.get(key), list) or len(env[key]) != n:
            raise NoTemplate(f"{key} does not have {n} entries")
    for a, b in t.get("guards", ()):  # the model code divides a by b with a floor the template does not model
        if not isinstance(env.get(a), int) or not isinstance(env.get(b), int) or not env[b] or env[a] % env[b]:
            raise NoTemplate(f"{a} is not a multiple of {b}")
    return env


def _signature(t: dict, env: dict[str, Any], i: int) -> str:
    sig: list[Any] = [env[k][i] for k in t["layer_lists"]]
    for rule in t["rules"]:
        v = env.get(rule)
        if rule == "first_k_dense_replace":
            sig.append(i < int(v or 0))
        elif rule == "mlp_only_layers":
            sig.append(i in (v or []))
        elif rule == "decoder_sparse_step":
            sig.append(bool(v) and (i + 1) % int(v) == 0)
        elif rule == "moe_layer_interval":
            start, end = int(env.get("moe_layer_start_index") or 0), env.get("moe_layer_end_index")
            end = int(env[t["layer_key"]]) - 1 if end is None else int(end)
            sig.append((i + 1) % int(v) == 0 and start <= i <= end)  # 0: the model's ZeroDivisionError too
    return json.dumps(sig, default=str)


def _fill(node: Any, env: dict[str, Any]) -> Any:
    """A structure fragment with its int leaves ({"$": expr}) evaluated."""
    if isinstance(node, dict):
        if set(node) == {"$"}:
            return evaluate(node["$"], env)
        return {k: _fill(v, env) for k, v in node.items()}
    if isinstance(node, list):
        return [_fill(v, env) for v in node]
    return node


def structure_dict(t: dict, env: dict[str, Any]) -> dict:
    """structure_to_dict of what the generic reader would read (config_hash and notes left to the caller)."""
    n = env[t["layer_key"]]
    groups: list[dict] = []
    keys: list[str] = []
    pattern: list[int] = []
    for i in range(n):
        sig = _signature(t, env, i)
        group = t["groups"].get(sig)
        if group is None:
            raise NoTemplate(f"layer {i}: a block kind the template has not seen")
        filled = _fill(group, env)
        key = json.dumps(filled, sort_keys=True)
        if key not in keys:
            keys.append(key)
            groups.append({"count": 0, **filled})
        j = keys.index(key)
        groups[j]["count"] += 1
        pattern.append(j)
    out_groups = [{"count": g["count"], "tensors": g["tensors"], "linears": g["linears"], "mixer": g["mixer"],
                   "window": g["window"], "moe": g["moe"]} for g in groups]
    return {"groups": out_groups, "globals": _fill(t["globals"], env), "config_hash": "",
            "model_class": t["model_class"], "notes": [], "pattern": pattern,
            "peft_target_map": [list(x) for x in t["peft_target_map"]]}


def flatten(node: Any, path: str = ""):
    """(path, leaf) pairs of a nested dict/list, in a stable order."""
    if isinstance(node, dict):
        for k in sorted(node):
            yield from flatten(node[k], f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from flatten(v, f"{path}[{i}]")
    else:
        yield path, node


def first_difference(a: Any, b: Any) -> str:
    """The first leaf where two nested values differ, as 'path: a vs b'; '' when they are equal."""
    fa, fb = dict(flatten(a)), dict(flatten(b))
    for k in sorted(set(fa) | set(fb)):
        if fa.get(k) != fb.get(k):
            return f"{k}: {fa.get(k)!r} vs {fb.get(k)!r}"
    return ""


class ConfigView:
    """The attributes of the config object the reader would have built (defaults + the user's keys, aliases)."""

    def __init__(self, env: dict[str, Any], attribute_map: dict[str, str]):
        self.__dict__.update(env)
        for alias, real in attribute_map.items():  # read through to the real key, as the config object does
            if real in env:
                self.__dict__[alias] = env[real]

    def __getattr__(self, name: str) -> Any:  # only for names not set: absent on the real config too
        raise AttributeError(name)


def read(text: dict[str, Any], t: dict | None = None) -> tuple[dict, ConfigView] | None:
    """(structure dict, config view) for a text config of a templated type; None when it is not templated or a key
    is outside its template."""
    t = t if t is not None else template(str(text.get("model_type", "")).lower())
    if t is None:
        return None
    for one in (t, *t.get("variants", ())):  # a variant: the same type with a structural switch flipped
        try:
            env = resolve(one, text)
            return structure_dict(one, env), ConfigView(env, one["attribute_map"])
        except (NoTemplate, TypeError, ValueError, KeyError, IndexError, ZeroDivisionError):
            continue
    return None
