"""A config.json with a shipped preset's architecture (a fine-tune's) is read without importing torch or
transformers: the preset's structure is taken (tests/test_any_architecture.py checks it equals a fresh read)."""

from conftest import read_config_in_fresh_process


def test_fine_tune_config_needs_no_torch(tmp_path):
    from trainfit.catalog import all_models

    cfg = dict(all_models()["qwen3-30b-a3b"].hf_config)
    cfg.update(eos_token_id=151643, max_position_embeddings=131072, _name_or_path="org/qwen3-30b-a3b-sft")
    # nothing built, nothing cached
    assert read_config_in_fresh_process(tmp_path, cfg, "max_positions") == ["qwen3_moe", 131072, False, False, False]
