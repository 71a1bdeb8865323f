"""Structure templates (catalog/templates.py, built by tools/make_templates.py) against the oracle: for every templated
model type, the template's ModelSpec equals the generic reader's fresh read of the model transformers builds on the
meta device, for the type's default config and for configs perturbed independently of the generator's own checks
(other factors, other key subsets, sparse config.json files that leave derived keys to the config class). And the
template path imports neither torch nor transformers.
"""

import json
import os
import random
import subprocess
import sys
import warnings

import pytest
from conftest import read_config_in_fresh_process

from trainfit.catalog import templates as T

TYPES = T.names()


def test_templates_ship_for_most_buildable_types():
    import gzip

    with gzip.open(T.FILE, "rt", encoding="utf-8") as fh:
        data = json.load(fh)
    assert len(data["types"]) >= 50, sorted(data["not_templated"].items())
    assert os.path.getsize(T.FILE) < 2_000_000
    assert "glm4_moe" in data["types"]


def _dim_keys(t: dict) -> list[str]:
    """Keys some dimension of the template depends on."""
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if set(node) == {"$"}:
                if isinstance(node["$"], dict):
                    found.update(node["$"]["m"])
                    found.update(p for k in node["$"]["l"] if k for p in k.split("*"))  # "a*b": a product
                return
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(t["groups"])
    walk(t["globals"])
    return sorted(found)


def _pair(cfg: dict, t: dict):
    """(template's spec dict, oracle's spec dict); the oracle's is None when transformers cannot build the config."""
    from trainfit.catalog import generic

    text = {k: v for k, v in cfg.items() if k not in generic._DROP_KEYS}
    key = json.dumps(text, sort_keys=True, default=str)
    ours = generic.from_template(cfg, "t", "", None, "", cfg, template=t)
    ours = None if ours is None else json.loads(json.dumps(generic.spec_to_dict(ours)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = generic._read_cached.__wrapped__(key, "t", "", None, "", key)
    except Exception:  # noqa: BLE001 - a config transformers itself cannot build: not a check
        return ours, None
    return ours, json.loads(json.dumps(generic.spec_to_dict(ref)))


def _cut(t: dict, n: int) -> dict:
    d = json.loads(json.dumps(t["defaults"]))
    full = d[t["layer_key"]]
    d[t["layer_key"]] = min(n, full)
    for k in t["layer_lists"]:
        d[k] = d[k][:min(n, full)]
    return d


@pytest.mark.parametrize("model_type", TYPES)
def test_template_equals_the_meta_read(model_type):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    t = T.template(model_type)
    base = _cut(t, 8)
    ours, ref = _pair(base, t)
    assert ref is not None and ours == ref  # the default config, up to 8 blocks
    rng = random.Random(f"test-{model_type}")  # independent of the generator's seeds and factors (x2, /2)
    keys = _dim_keys(t)
    checked = 0
    for attempt in range(12):
        factor = (4, 3, 8)[attempt % 3]
        pick = {k: base[k] * factor for k in keys if rng.random() < 0.6}
        if not pick:
            continue
        sparse = attempt % 2 == 1  # a config.json naming only what it changes: derived keys left to the class
        cfg = {"model_type": model_type, t["layer_key"]: base[t["layer_key"]] + 1, **pick} if sparse \
            else {**base, **pick}
        ours, ref = _pair(cfg, t)
        if ref is None or ours is None:
            continue  # unbuildable, or the template declines (falls back to the reader): nothing to compare
        assert ours == ref, (cfg, pick)
        checked += 1
        if checked >= 2:
            break
    assert checked >= 1, f"no perturbed {model_type} config could be built"


def test_template_path_imports_no_torch(tmp_path):
    """A glm4_moe config.json with other sizes (no preset has this architecture) is answered from the template."""
    t = T.template("glm4_moe")
    cfg = dict(t["defaults"], hidden_size=2048, num_hidden_layers=20, n_routed_experts=64, moe_intermediate_size=768,
               architectures=["Glm4MoeForCausalLM"], _name_or_path="org/new-glm")
    file = tmp_path / "config.json"
    file.write_text(json.dumps(cfg))
    code = ("import sys, json; from trainfit.catalog.models import resolve_model; "
            "from trainfit.estimate.params import count_params; "
            f"s = resolve_model({str(file)!r}); "
            "print(json.dumps([s.model_type, s.layers, count_params(s), 'torch' in sys.modules, "
            "'transformers' in sys.modules]))")
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    model_type, layers, params, torch_loaded, transformers_loaded = json.loads(out.stdout)
    assert (model_type, layers, torch_loaded, transformers_loaded) == ("glm4_moe", 20, False, False)
    assert not (tmp_path / "empty-cache").exists()  # nothing built, nothing cached
    if "torch" in sys.modules or _importable("torch"):  # and the count is the oracle's
        ours, ref = _pair({k: v for k, v in cfg.items()}, t)
        assert ref is not None and ours == ref
        from trainfit.catalog.generic import read_model
        from trainfit.estimate.params import count_params

        assert params == count_params(read_model(cfg))


def _importable(name: str) -> bool:
    from importlib.util import find_spec

    return find_spec(name) is not None


def test_a_key_the_template_does_not_cover_falls_back():
    t = T.template("glm4_moe")
    # a variant answers a switch the presets flip together (GLM-4.7: attention_bias and use_qk_norm, both true):
    # one of them flipped alone is neither the default nor the variant
    pair = next(v["override"] for v in t["variants"] if "attention_bias" in v["override"])
    assert set(pair) == {"attention_bias", "use_qk_norm"}
    base = dict(t["defaults"])
    assert T.read(base) is not None
    assert T.read({**base, **pair}) is not None
    assert T.read({**base, "attention_bias": pair["attention_bias"]}) is None  # a structural switch away from both
    assert T.read({**base, "hidden_size": 2048}) is not None  # a dimension
    assert T.read({**base, "some_new_switch": 3}) is not None  # a key nothing reads: inert (tests below)
    assert T.read({**base, "qk_nope_head_dim": 3}) is None  # a key the type has no role for but the reader reads


@pytest.mark.parametrize("model_type,key", [("ministral", "head_dim"), ("hunyuan_v1_dense", "head_dim"),
                                            ("nemotron", "num_key_value_heads")])
def test_a_type_made_from_filled_defaults_answers_set_values_and_sends_a_null_to_the_reader(model_type, key):
    """make_templates.FILL_NONE: these types' default configs leave `key` null, which their model code cannot build
    with; the template is made from the default with the usual value filled. A config.json that sets it is
    answered (and equals the meta read: test_template_equals_the_meta_read runs over every shipped type); one that
    leaves it null is not the template's to answer."""
    t = T.template(model_type)
    base = dict(t["defaults"])
    assert isinstance(base[key], int) and base[key] > 0
    assert T.read(base) is not None
    assert T.read({**base, key: None}) is None


def test_a_null_key_is_read_as_absent_only_where_the_type_was_built_so():
    """make_templates.NULL_KEYS: a type records in "null_absent" a key whose null its own build takes as the key left
    out; templates.resolve skips such a null there, and nowhere else."""
    import gzip

    with gzip.open(T.FILE, "rt", encoding="utf-8") as fh:
        types = json.load(fh)["types"]
    recorded = [mt for mt in types if "rope_scaling" in T.template(mt).get("null_absent", ())]
    assert "glm4_moe" in recorded and len(recorded) >= 50
    t = T.template("glm4_moe")
    base = dict(t["defaults"])
    assert T.read({**base, "rope_scaling": None}) is not None
    assert T.read({**base, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}) is None  # a value: the reader
    bare = dict(t, null_absent=[])
    assert T.read({**base, "rope_scaling": None}, bare) is None


def test_real_config_files_answered_by_templates_equal_the_meta_read():
    """The presets' verbatim Hugging Face config.json files (legacy keys, token ids, rope_scaling, tied heads, ...):
    where a template answers, its ModelSpec equals the meta-device read of the same file."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainfit.catalog import all_models, generic

    answered, declined = [], []
    for name, preset in sorted(all_models().items()):
        if not preset.hf_config:
            continue
        text, note = generic.text_config(preset.hf_config)
        if not T.has_template(str(text.get("model_type", "")).lower()):
            continue
        ours = generic.from_template(text, name, "", None, note, preset.hf_config)
        if ours is None:
            declined.append(name)
            continue
        key = json.dumps({k: v for k, v in text.items() if k not in generic._DROP_KEYS}, sort_keys=True, default=str)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = generic._read_cached.__wrapped__(key, name, "", None, note, json.dumps(preset.hf_config))
        assert json.loads(json.dumps(generic.spec_to_dict(ours))) == \
            json.loads(json.dumps(generic.spec_to_dict(ref))), name
        answered.append(name)
    print(f"templates answer {len(answered)} preset config files, decline {len(declined)}: {declined}")
    assert answered


def test_an_absurd_layer_count_is_the_readers_error_not_a_long_walk():
    from trainfit.catalog.generic import from_template
    from trainfit.errors import SpecError

    cfg = dict(T.template("glm4_moe")["defaults"], num_hidden_layers=10**9)
    with pytest.raises(SpecError, match="plausible layer count"):
        from_template(cfg, "x", "", None, "", cfg)


# qwen3_next: gated-DeltaNet widths are sums of products (in_proj_qkvz = 2 * k_heads * k_dim + 2 * v_heads * v_dim,
# conv = 2 * k_heads * k_dim + v_heads * v_dim); ernie4_5_moe: sparse blocks are (i + 1) % moe_layer_interval == 0
# with moe_layer_start_index <= i <= moe_layer_end_index. Configs the generator's checks do not use: other factors,
# both terms of a product moved together, other layer patterns; each answered by the template and equal to the read.
NEW_CASES = {
    "qwen3_next": [
        {"linear_num_key_heads": 8, "linear_key_head_dim": 64, "linear_num_value_heads": 24, "linear_value_head_dim": 96},
        {"linear_num_key_heads": 4, "linear_key_head_dim": 192, "hidden_size": 1024, "num_experts": 24,
         "moe_intermediate_size": 384, "shared_expert_intermediate_size": 768, "linear_conv_kernel_dim": 3},
        {"num_hidden_layers": 7, "linear_num_value_heads": 48, "linear_value_head_dim": 32, "num_attention_heads": 12,
         "num_key_value_heads": 4, "head_dim": 64, "num_experts": 16},
    ],
    "ernie4_5_moe": [
        {"num_hidden_layers": 9, "moe_layer_start_index": 2, "moe_layer_interval": 2, "moe_layer_end_index": 6},
        {"num_hidden_layers": 5, "moe_layer_start_index": 0, "moe_layer_end_index": -1, "moe_num_experts": 12,
         "moe_num_shared_experts": 1, "moe_intermediate_size": 256, "hidden_size": 1280},
        {"num_hidden_layers": 6, "moe_layer_start_index": 3, "moe_layer_interval": 3, "intermediate_size": 3000,
         "num_attention_heads": 10, "num_key_value_heads": 5},
    ],
}


@pytest.mark.parametrize("model_type", sorted(NEW_CASES))
def test_sums_of_products_and_moe_layer_ranges_equal_the_meta_read(model_type):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    t = T.template(model_type)
    assert t is not None, model_type
    for case in NEW_CASES[model_type]:
        n = case.get(t["layer_key"], 4)
        for cfg in ({**_cut(t, n), **case}, {"model_type": model_type, t["layer_key"]: n, **case}):  # full, sparse
            ours, ref = _pair(cfg, t)
            assert ref is not None, cfg
            assert ours is not None, cfg  # the template answers (no fallback to the reader)
            assert ours == ref, cfg
    if model_type == "ernie4_5_moe":  # the pattern is the one the case asks for: dense, then sparse every 2nd to 6
        from trainfit.catalog import generic

        case = NEW_CASES[model_type][0]
        spec = generic.from_template(case | {"model_type": model_type}, "t", "", None, "", case, template=t)
        s = generic.spec_to_dict(spec)["structure"]
        moe = [bool(s["groups"][g]["moe"]) for g in s["pattern"]]
        assert moe == [False, False, False, True, False, True, False, False, False], moe


@pytest.mark.parametrize("model_type", sorted(NEW_CASES))
def test_cut_config_of_the_new_types_imports_no_torch(tmp_path, model_type):
    t = T.template(model_type)
    cfg = dict(_cut(t, 4), architectures=[t["model_class"]], _name_or_path=f"org/{model_type}-cut4")
    assert read_config_in_fresh_process(tmp_path, cfg, "layers") == [model_type, 4, False, False, False]


# google/gemma-2-2b's config.json (Hugging Face hub), as shipped
GEMMA2_2B = {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
             "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
             "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
             "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
             "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2",
             "num_attention_heads": 8, "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0,
             "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
             "torch_dtype": "float32", "transformers_version": "4.42.4", "use_cache": True, "vocab_size": 256000}


def test_gemma_soft_capping_is_read_on_every_path():
    """Soft-capping (attn_logit_softcapping on the attention scores, final_logit_softcapping on the logits) reaches
    the ModelSpec through the hand-written Gemma-2 family (Gemma2Config's defaults, 50 and 30, where config.json is
    silent; none where it says null), the gemma2 template, and the shipped presets' recorded specs (Gemma-3 has
    none; Gemma-4 caps its logits at 30, its config.json's text_config)."""
    from trainfit.catalog import generic
    from trainfit.catalog.models import resolve_model, spec_from_config

    m = spec_from_config(dict(GEMMA2_2B))
    assert (m.attn_softcap, m.final_softcap) == (50.0, 30.0) and not m.is_generic
    silent = {k: v for k, v in GEMMA2_2B.items() if not k.endswith("_softcapping")}
    assert (spec_from_config(silent).attn_softcap, spec_from_config(silent).final_softcap) == (50.0, 30.0)
    off = spec_from_config(dict(GEMMA2_2B, attn_logit_softcapping=None, final_logit_softcapping=None))
    assert (off.attn_softcap, off.final_softcap) == (0.0, 0.0)
    assert spec_from_config(dict(GEMMA2_2B, attn_logit_softcapping=20.0)).attn_softcap == 20.0
    t = T.template("gemma2")
    cut = _cut(t, 4)
    templated = generic.from_template(cut, "t", "", None, "", cut, template=t)
    assert (templated.attn_softcap, templated.final_softcap) == (cut["attn_logit_softcapping"],
                                                                  cut["final_logit_softcapping"]) == (50.0, 30.0)
    assert (resolve_model("gemma-3-1b-it").attn_softcap, resolve_model("gemma-3-1b-it").final_softcap) == (0, 0)
    assert (resolve_model("gemma-4-26b-a4b").attn_softcap, resolve_model("gemma-4-26b-a4b").final_softcap) == (0, 30)


def test_gemma2_estimate_sees_soft_capping(run_cli, tmp_path):
    """`trainfit estimate --model <gemma-2 config.json> --json`: the model's soft-capping values, eager attention's
    s x s tensors where SDPA is asked for (with a warning saying why), tanh's saved scores and logits."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GEMMA2_2B))
    docs = {}
    for attention in ("sdpa", "eager", "flash"):
        code, out, err = run_cli("estimate", "--model", str(path), "--gpu", "h100-sxm", "--method", "lora",
                                 "--seq-len", "2048", "--attention", attention, "--json")
        assert code == 0, err
        docs[attention] = json.loads(out)
    sdpa, eager, flash = docs["sdpa"], docs["eager"], docs["flash"]
    assert sdpa["model"]["attn_logit_softcapping"] == 50.0 and sdpa["model"]["final_logit_softcapping"] == 30.0
    assert sdpa["memory_gib"] == eager["memory_gib"] and flash["memory_gib"]["total"] < sdpa["memory_gib"]["total"]
    assert any("soft-caps its attention logits" in w for w in sdpa["warnings"])
    assert not any("soft-caps" in w for w in eager["warnings"] + flash["warnings"])
    detail = sdpa["memory_detail_gib"]
    assert detail["activations/attn/softcap_tanh"] > 0 and detail["logits/final_softcap_tanh"] > 0
    assert "activations/attn/softcap_tanh" not in flash["memory_detail_gib"]


# ---- the templates under another transformers version --------------------------------------------------------------
# A template is what transformers `T.made_with()` builds (the version of the lock). Under another installed version it
# is not trusted silently: read_model checks it against that version's meta-device read, which wins where they differ.
def _glm_config(**sizes) -> dict:
    t = T.template("glm4_moe")
    return {**t["defaults"], "hidden_size": 2048, "num_hidden_layers": 6, "n_routed_experts": 32,
            "moe_intermediate_size": 512, "architectures": ["Glm4MoeForCausalLM"], "_name_or_path": "org/other-glm",
            **sizes}


@pytest.fixture
def other_transformers(monkeypatch, tmp_path):
    """Simulates an installed transformers newer than the lock's: the version the reader sees, a fresh disk cache,
    and a count of the meta-device reads made."""
    from trainfit.catalog import generic

    monkeypatch.setattr(generic, "_transformers_version", lambda: "99.0.0")
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path / "cache"))
    reads = []
    real = generic._read_cached.__wrapped__

    def counted(*args):
        reads.append(args[0])
        return real(*args)

    monkeypatch.setattr(generic, "_read_cached", counted)
    return reads


def test_a_version_mismatch_takes_the_verified_path(other_transformers):
    pytest.importorskip("torch")
    from trainfit.catalog import generic
    from trainfit.estimate.params import count_params

    cfg = _glm_config()
    text = {k: v for k, v in cfg.items() if k not in generic._DROP_KEYS}
    templated = generic.from_template(text, "x", "", None, "", cfg)
    spec = generic.read_model(cfg, name="x")
    assert len(other_transformers) == 1  # checked against a meta-device read
    assert generic.spec_to_dict(spec) == generic.spec_to_dict(templated)  # they agree (the same transformers here)
    assert count_params(spec) == count_params(templated) and not spec.structure.notes
    again = generic.read_model(cfg, name="x")
    assert len(other_transformers) == 1 and count_params(again) == count_params(spec)  # the disk cache answers


def test_the_matching_version_uses_the_template_without_a_read(monkeypatch, tmp_path):
    from trainfit.catalog import generic

    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(generic, "_transformers_version", lambda: T.made_with())
    monkeypatch.setattr(generic, "_read_cached", lambda *a: pytest.fail("a read under the template's own version"))
    assert generic.read_model(_glm_config(), name="x").model_type == "glm4_moe"


def _corrupted(monkeypatch, model_type: str, scale: int):
    """The shipped template of `model_type` with the count of its routed experts' tensors and Linears multiplied by
    `scale` (as a template made with a transformers that built zero-compute experts as weights would have it)."""
    t = json.loads(json.dumps(T.template(model_type)))
    hits = 0
    for group in t["groups"].values():
        for entry in group["tensors"] + group["linears"]:
            if entry.get("role") == "expert" or entry.get("kind") == "routed":
                expr = entry["count"]["$"]
                entry["count"]["$"] = {"m": expr["m"], "l": {k: v * scale for k, v in expr["l"].items()}}
                hits += 1
    assert hits, "no routed-expert count found to corrupt"
    shipped = {**T._shipped(), model_type: json.dumps(t)}
    monkeypatch.setattr(T, "_shipped", lambda: shipped)
    T.template.cache_clear()
    monkeypatch.setattr(T, "template", lambda mt: json.loads(shipped[mt]) if mt in shipped else None)


def test_a_template_that_differs_from_the_installed_transformers_loses(other_transformers, monkeypatch):
    """The installed transformers builds 32 routed experts where the (corrupted) template says 64: the read's count is
    used, and a warning says which and why; under the template's own version the template would have answered."""
    pytest.importorskip("torch")
    from trainfit.catalog import generic
    from trainfit.estimate.params import count_params

    cfg = _glm_config()
    text = {k: v for k, v in cfg.items() if k not in generic._DROP_KEYS}
    truth = count_params(generic.from_template(text, "x", "", None, "", cfg))
    _corrupted(monkeypatch, "glm4_moe", 2)
    wrong = count_params(generic.from_template(text, "x", "", None, "", cfg))
    assert wrong > truth  # the corrupted template alone would overcount
    spec = generic.read_model(cfg, name="x")
    assert count_params(spec) == truth and len(other_transformers) == 1
    (note,) = spec.structure.notes
    assert note.startswith("glm4_moe: transformers 99.0.0 builds this config otherwise than trainfit's template made "
                           f"with transformers {T.made_with()} (") and note.endswith(
        "the structure read from transformers 99.0.0 is used")
    from trainfit.i18n.notes import has_chinese

    assert has_chinese(note)


def test_without_torch_a_mismatched_template_is_used_and_says_so(monkeypatch, tmp_path):
    from trainfit.catalog import generic
    from trainfit.i18n.notes import has_chinese

    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(generic, "_transformers_version", lambda: "99.0.0")
    monkeypatch.setattr(generic, "_transformers", lambda: None)
    spec = generic.read_model(_glm_config(), name="x")
    (note,) = spec.structure.notes
    assert "cannot check it without torch" in note and has_chinese(note)
    monkeypatch.setattr(generic, "_transformers_version", lambda: "none")  # no transformers at all: the template
    assert not generic.read_model(_glm_config(hidden_size=1024), name="y").structure.notes


def test_a_mismatch_in_a_fresh_process_reads_once_then_needs_no_torch(tmp_path):
    """Under another transformers version the first resolve builds the model on the meta device (torch imported);
    the second, in a new process with the same cache, answers from the disk cache without torch."""
    pytest.importorskip("torch")
    file = tmp_path / "config.json"
    file.write_text(json.dumps(_glm_config()))
    code = ("import sys, json; from trainfit.catalog import generic; "
            "generic._transformers_version = lambda: '99.0.0'; "
            "from trainfit.catalog.models import resolve_model; from trainfit.estimate.params import count_params; "
            f"s = resolve_model({str(file)!r}); "
            "print(json.dumps([count_params(s), 'torch' in sys.modules]))")
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path / "cache")}
    first = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                      check=True).stdout)
    second = json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                       check=True).stdout)
    assert first[1] is True and second[1] is False and first[0] == second[0]


@pytest.mark.parametrize("model_type", TYPES)
def test_a_newer_transformers_changes_no_parameter_count(model_type, other_transformers):
    """Every templated type's default config (cut to 4 blocks) counts the same under a simulated newer transformers
    (the verified path) as under the lock's (the template)."""
    pytest.importorskip("torch")
    from trainfit.catalog import generic
    from trainfit.estimate.params import count_params

    t = T.template(model_type)
    cfg = _cut(t, 4)
    text = {k: v for k, v in cfg.items() if k not in generic._DROP_KEYS}
    templated = generic.from_template(text, "t", "", None, "", cfg)
    if templated is None:
        pytest.skip(f"{model_type}: the template declines its own cut default")
    try:
        checked = generic.read_model(cfg, name="t")
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"{model_type}: {exc}")
    assert count_params(checked) == count_params(templated)
    assert not checked.structure.notes or checked.structure.notes == templated.structure.notes


# ---- keys the template never saw: inert unless the config class or a build reads them (issue 36) ------------------
# tools/make_templates.py records, per template, the config attribute names its type's config class consumes and its
# meta-device builds read ("reads"; "reads_common" for every config class). A key outside both changes nothing the
# reader sees: the template answers, the key kept on the config view as the config object keeps it.
NONSENSE = {"trainfit_test_key_nothing_reads": 7, "another_made_up_flag": True, "made_up_table": {"a": [1, 2]}}
INERT_TYPES = ["llama", "glm4_moe", "qwen3_5_moe_text", "ernie4_5_moe", "gemma2", "qwen3_next", "mistral", "phi3"]


def test_every_template_lists_what_it_reads():
    assert T._reads_common() is not None and "rope_scaling" in T._reads_common()  # init-consumed: never inert
    for model_type in TYPES:
        t = T.template(model_type)
        for one in (t, *t.get("variants", ())):
            assert isinstance(one.get("reads"), list) and one["reads"], model_type
            assert set(_dim_keys(one)) <= set(one["reads"]) | T._reads_common(), model_type  # what moves dims
            assert not set(NONSENSE) & set(one["reads"]), model_type
        assert T.read({**_cut(t, 4), **NONSENSE}, t) is not None, model_type  # each type answers the made-up keys


@pytest.mark.parametrize("model_type", INERT_TYPES)
def test_an_inert_key_is_answered_by_the_template_and_equals_the_meta_read(model_type):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    t = T.template(model_type)
    for cfg in ({**_cut(t, 4), **NONSENSE},  # full, and sparse (derived keys left to the config class)
                {"model_type": model_type, t["layer_key"]: 3, "trainfit_test_key_nothing_reads": [1, 2, 3]}):
        ours, ref = _pair(cfg, t)
        assert ours is not None, cfg  # the template answers (no fallback to the reader)
        assert ref is not None and ours == ref, cfg
        _, view = T.read(cfg, t)
        assert all(getattr(view, k) == v for k, v in cfg.items() if k not in t["keys"])  # kept, as the config keeps it


def _forced_inert(monkeypatch, t: dict) -> dict:
    """A copy of template t that takes every key it has no role for as inert (what a template without reads lists
    must not do)."""
    forced = json.loads(json.dumps(t))
    for one in (forced, *forced.get("variants", ())):
        one["reads"] = []
    monkeypatch.setattr(T, "_reads_common", lambda: frozenset())
    return forced


def test_a_key_that_is_read_but_has_no_role_goes_to_the_reader(monkeypatch):
    """A read key the template has no role for is not inert: LongCat-Flash's model code reads
    getattr(config, "router_bias", False) (its config class has no such field) for the router's bias; ernie4_5_moe's
    config has no num_local_experts, but the reader takes it for the expert count (before moe_num_experts) and finds
    another router; and glm4_moe's attention_bias (a fixed key) taken out of a copy's roles still sends a config
    setting it to the reader. Taken as inert, each would be answered wrongly."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    cases = []
    for model_type, key, value in (("longcat_flash", "router_bias", True), ("ernie4_5_moe", "num_local_experts", 3)):
        t = T.template(model_type)
        assert key not in t["keys"] and key in t["reads"], (model_type, key)
        cases.append(({**_cut(t, 4), key: value}, t, key))
    glm = json.loads(json.dumps(T.template("glm4_moe")))
    for one in (glm, *glm["variants"]):
        assert one["keys"].pop("attention_bias") == "fixed" and "attention_bias" in one["reads"]
    cases.append(({**_cut(glm, 4), "attention_bias": True}, glm, "attention_bias"))
    for cfg, t, key in cases:
        assert T.read(cfg, t) is None  # declined: the reader answers
        ours, ref = _pair(cfg, t)
        assert ours is None and ref is not None
        with monkeypatch.context() as m:
            wrong, _ = _pair(cfg, _forced_inert(m, t))
        assert wrong is not None and wrong != ref, cfg  # what accepting it would have answered
        assert T.read({k: v for k, v in cfg.items() if k != key} | NONSENSE, t) is not None  # the rest: inert


def test_a_template_without_reads_declines_every_unknown_key():
    t = json.loads(json.dumps(T.template("glm4_moe")))
    base = _cut(t, 4)
    assert T.read({**base, **NONSENSE}, t) is not None
    for one in (t, *t["variants"]):
        del one["reads"]
    assert T.read(base, t) is not None and T.read({**base, **NONSENSE}, t) is None


def test_init_consumed_and_alias_keys_are_not_inert():
    """rope_scaling (transformers 5 turns it into rope_parameters in __init__), a generation parameter the config
    class drops (max_length), an attribute_map alias (internlm3's bias -> mlp_bias), a dunder name: none is inert."""
    phi3, internlm3 = T.template("phi3"), T.template("internlm3")
    assert "rope_scaling" not in phi3["keys"] and not T.inert(phi3, "rope_scaling")
    scaled = {"rope_type": "longrope", "short_factor": [1.0] * 48, "long_factor": [1.0] * 48}
    assert T.read({**_cut(phi3, 4), "rope_scaling": scaled}, phi3) is None
    # a null one is the key left out where the type's build says so (null_absent, checked when the template was made)
    assert "rope_scaling" in phi3["null_absent"] and T.read({**_cut(phi3, 4), "rope_scaling": None}, phi3) is not None
    assert not T.inert(phi3, "max_length") and not T.inert(phi3, "__class__")
    assert internlm3["attribute_map"]["bias"] == "mlp_bias" and not T.inert(internlm3, "bias")
    assert T.inert(phi3, "trainfit_test_key_nothing_reads")


def test_an_inert_key_imports_no_torch(tmp_path):
    """A glm4_moe config.json with other sizes and keys nothing reads (the benchmark's untemplated key, a vendor's
    own fields) is answered from the template without torch or transformers."""
    t = T.template("glm4_moe")
    cfg = dict(_cut(t, 4), hidden_size=2048, architectures=[t["model_class"]], _name_or_path="org/glm-extra-keys",
               benchmark_key_no_template_knows=1, **NONSENSE)
    assert read_config_in_fresh_process(tmp_path, cfg, "layers") == ["glm4_moe", 4, False, False, False]


def test_preset_config_files_with_inert_keys_are_answered_by_their_template():
    """The presets' verbatim config.json files that carry a key their template has no role for but nothing reads
    (Qwen3.5's mlp_only_layers, ERNIE 4.5's moe_capacity) are answered by the template (and equal the meta read:
    test_real_config_files_answered_by_templates_equal_the_meta_read)."""
    from trainfit.catalog import all_models, generic

    answered = set()
    for name, preset in all_models().items():
        if preset.hf_config:
            text, note = generic.text_config(preset.hf_config)
            if T.has_template(str(text.get("model_type", "")).lower()) and \
                    generic.from_template(text, name, "", None, note, preset.hf_config) is not None:
                answered.add(name)
    assert {"qwen3.5-27b", "qwen3.5-35b-a3b", "qwen3.5-122b-a10b", "qwen3.5-397b-a17b",
            "ernie-4.5-21b-a3b-thinking"} <= answered
    assert not {"phi-4-mini", "internlm3-8b-instruct"} & answered  # rope_scaling set; bias / qkv_bias aliases
    assert "phi-4" in answered  # "rope_scaling": null
    # "sliding_window": null (full attention in every block): the type's variant made from that switch
    assert {"mistral-small-24b", "magistral-small-2509", "mistral-small-3.1-24b"} <= answered
    # GLM-4.7's attention_bias and use_qk_norm: the switches a preset flips (make_templates.preset_switches), and its
    # "rope_scaling": null read as left out (the type's "null_absent", checked on its build)
    assert "glm-4.7" in answered
    assert any(v.get("override") == {"sliding_window": None} for v in T.template("mistral")["variants"])
