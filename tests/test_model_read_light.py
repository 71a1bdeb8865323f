"""A config.json with a shipped preset's architecture (a fine-tune's) is read without importing torch or
transformers: the preset's structure is taken (tests/test_any_architecture.py checks it equals a fresh read)."""

import json
import os
import subprocess
import sys


def test_fine_tune_config_needs_no_torch(tmp_path):
    from trainfit.catalog import all_models

    cfg = dict(all_models()["qwen3-30b-a3b"].hf_config)
    cfg.update(eos_token_id=151643, max_position_embeddings=131072, _name_or_path="org/qwen3-30b-a3b-sft")
    file = tmp_path / "config.json"
    file.write_text(json.dumps(cfg))
    code = ("import sys, json; from trainfit.catalog.models import resolve_model; "
            f"s = resolve_model({str(file)!r}); "
            "print(json.dumps([s.model_type, s.max_positions, 'torch' in sys.modules, 'transformers' in sys.modules]))")
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["qwen3_moe", 131072, False, False]
    assert not (tmp_path / "empty-cache").exists()  # nothing built, nothing cached
