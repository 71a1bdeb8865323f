"""vLLM's hybrid KV cache manager (serving/hybrid.py): gated-delta-net states, sliding windows, groups and pages.

The two start-up logs below are the published numbers these tests hold the arithmetic to; the KV pool is taken from
each log's "Available KV cache memory" (rounded to 0.01 GiB there, so each test accepts the pools that rounding
allows).
"""

import math

import pytest

from trainfit.catalog import resolve_model
from trainfit.serving import serve
from trainfit.serving.search import alternatives
from trainfit.serving.memory import kv_read_bytes, layout, token_bytes
from trainfit.serving.spec import ServingSpec
from trainfit.units import GiB


def _pools(gib: float, page: int) -> set[int]:
    """vLLM's num_gpu_blocks for every pool that rounds to `gib` (GiB, two decimals)."""
    return {int((gib + d) * GiB // page) for d in (-0.005, 0.0, 0.00499)}


def test_qwen3_6_35b_a3b_log_on_vllm_0_24():
    """github.com/noonghunna/club-3090 issue #612 (vLLM 0.24.0, RTX 5090, fp8 KV, prefix caching on,
    max_model_len 131072, max_num_batched_tokens 8192): 'Available KV cache memory: 5.98 GiB', 'GPU KV cache size:
    567,978 tokens', 'Maximum concurrency for 131,072 tokens per request: 4.33x'. Qwen3.6-35B-A3B is served by the
    same class as Qwen3.5-35B-A3B (Qwen3_5MoeForConditionalGeneration, vllm-project/vllm issue #51250), so the
    preset's config stands in for it. Two state pages ("align" mode) give 4.33; one would give 4.5."""
    m = resolve_model("qwen3.5-35b-a3b")
    s = ServingSpec(engine_version="0.24.0", kv_cache_dtype="fp8", prefix_caching=True)
    lay = layout(m, s)
    assert (lay.full, lay.state, lay.group_size, lay.state_pages) == (10, 30, 10, 2)
    # conv (128 x 16 x 2 + 128 x 32) x 3 in bf16 + recurrent 32 x 128 x 128 in fp32 (mamba_ssm_dtype)
    assert lay.state_bytes == 8192 * 3 * 2 + 32 * 128 * 128 * 4 == 2_146_304
    assert token_bytes(m, s) == 2 * 2 * 256 * 1  # fp8: one byte
    block = lay.block_size(16)
    assert block == 16 * math.ceil(2_146_304 / (16 * 1024)) == 2096
    need = lay.blocks_per_request(131072, block, 8192)
    assert need == math.ceil(131072 / 2096) + 3 * 2 == 69
    got = {pool / need for pool in _pools(5.98, block * 1024 * 10)}
    assert any(round(c, 2) == 4.33 for c in got)
    assert any(abs(c * 131072 - 567_978) / 567_978 < 2e-3 for c in got)
    one_page = lay.blocks_per_request(131072, block, 8192) - 3
    assert all(round(pool / one_page, 2) != 4.33 for pool in _pools(5.98, block * 1024 * 10))


def test_qwen3_27b_class_log_at_tp2():
    """github.com/mitchross/talos-argocd-proxmox pull request #1995 (a 27B Qwen hybrid, 16 of 64 layers full
    attention with 4 KV heads of 256, TP 2, fp8 KV, max_model_len 131072): 'GPU KV cache size: 302,921 tokens',
    'Maximum concurrency for 131,072 tokens per request: 2.31x', a 1568-token block and 4.99 GiB per GPU. The
    Qwen3.5-27B preset has those attention dimensions; its gated-delta-net fields give the same block. The log's
    concurrency needs two state pages (prefix caching on: its flags are not in the pull request's text)."""
    m = resolve_model("qwen3.5-27b")
    s = ServingSpec(engine_version="0.24.0", kv_cache_dtype="fp8", tp=2, prefix_caching=True)
    lay = layout(m, s)
    block = lay.block_size(16)
    assert block == 1568
    need = lay.blocks_per_request(131072, block, 8192)
    assert need == 84 + 3 * 2
    got = {pool / need for pool in _pools(4.99, block * token_bytes(m, s) * lay.group_size)}
    assert any(round(c, 2) == 2.31 and abs(c * 131072 - 302_921) < 10 for c in got)


def test_qwen3_next_log_on_vllm_0_13_and_the_dev_case():
    """data/validation/serving_hybrid_dev.jsonl (github.com/AetharaAI/aether-agent, startup-logs-vllm.md: vLLM 0.13.0,
    2 x L40S, TP 2, fp8 KV, max_model_len 32768, prefix caching disabled for the hybrid): 'Setting attention block
    size to 1072 tokens', 'Available KV cache memory: 17.58 GiB', 'GPU KV cache size: 767,552 tokens', 'Maximum
    concurrency for 32,768 tokens per request: 84.29x'. Qwen3-Next's config has no mamba_ssm_dtype: its recurrent
    state is in the model dtype (bf16). Before 0.24 the token count is num_blocks // groups x block."""
    import json
    from pathlib import Path

    from trainfit.serving.validate import predict_case

    case = json.loads((Path(__file__).resolve().parents[1] / "data" / "validation" /
                       "serving_hybrid_dev.jsonl").read_text().splitlines()[0])
    est = predict_case(case)
    assert est.engine.block_size == 1072
    m, s = est.model, est.spec
    lay = layout(m, s)
    assert lay.state_bytes == 4096 * 3 * 2 + 16 * 128 * 128 * 2  # TP 2: half the conv channels and value heads
    assert lay.state_pages == 1 and not lay.reports_capacity
    page = 1072 * token_bytes(m, s) * lay.group_size
    need = lay.blocks_per_request(32768, 1072, 8192)
    assert need == 31 + 3
    pools = _pools(17.58, page)
    assert 2866 in pools
    assert 2866 // 4 * 1072 == 767_552 and round(2866 / need, 2) == 84.29
    # the whole prediction: the KV pool is the one term off, as the checkpoint keeps layers unquantised
    # ('Falling back to UnquantizedLinearMethod'; 'Model loading took 22.5313 GiB' against 19.7 predicted as AWQ)
    assert est.memory.kv_tokens == est.memory.num_blocks // 4 * 1072
    assert 0.15 < est.memory.kv_tokens / 767_552 - 1 < 0.22


def test_the_serving_command_uses_the_layout_and_reports_like_the_version():
    m = resolve_model("qwen3.5-27b")
    old, new = serve(m, gpu="h100-sxm"), serve(m, gpu="h100-sxm", engine_version="0.24.0")
    assert old.engine.block_size == new.engine.block_size == 784  # 3,207,168-byte state / 4,096 bytes a token
    every_layer = old.memory.kv_tokens / old.memory.max_model_len  # what counting 64 layers of KV gave
    assert old.memory.max_concurrency > 2.5 * every_layer
    # 0.24 logs max concurrency x max_model_len as its token count
    assert new.memory.kv_tokens == int(new.memory.max_concurrency * new.memory.max_model_len)


def test_sliding_window_layers_free_what_falls_behind_while_decoding():
    m = resolve_model("gpt-oss-20b")  # 12 sliding (128) + 12 full layers, 8 KV heads of 64
    s = ServingSpec()
    lay = layout(m, s)
    assert (lay.full, lay.sliding, lay.window, lay.group_size) == (12, 12, 128, 12)
    # reported concurrency: a window layer also holds the chunk being prefilled (min(127 + 8192, L) tokens)
    assert lay.blocks_per_request(8192, 16, 8192) == 512 + 513
    # decoding: the window and a block
    assert lay.blocks_per_request(8192, 16) == 512 + 9
    assert kv_read_bytes(m, s, 4096) == token_bytes(m, s) * (12 * 4096 + 12 * 128)


@pytest.mark.parametrize("spec", [ServingSpec(engine="sglang"), ServingSpec(engine_version="0.8.5"),
                                  ServingSpec(engine="lmdeploy", engine_version="0.12.1")])
def test_releases_before_hybrids_keep_every_layer(spec):
    """SGLang before 0.5.2 (trainfit's default, 0.4.6), vLLM V0, LMDeploy before Qwen3.5's support: every layer's KV."""
    assert layout(resolve_model("qwen3.5-27b"), spec) is None


@pytest.mark.parametrize("engine", ["trtllm", "lmdeploy", "sglang"])
def test_state_pool_engines_count_the_full_attention_layers_kv(engine):
    from trainfit.serving.memory import kv_bytes_per_token

    m = resolve_model("qwen3.5-27b")
    s = ServingSpec(engine=engine, engine_version="0.5.11" if engine == "sglang" else "")
    lay = layout(m, s)
    assert (lay.engine, lay.full, lay.state) == (engine, 16, 48)
    assert kv_bytes_per_token(m, s) == 16 * token_bytes(m, s)


def test_uniform_models_have_no_layout():
    assert layout(resolve_model("qwen2-7b"), ServingSpec()) is None
    assert layout(resolve_model("llama-3-8b"), ServingSpec(engine_version="0.24.0")) is None


def test_a_moe_decode_reads_its_routed_experts_share_from_the_inventory():
    """The experts' share of the weights a decode step may skip comes from the model (it was 0.9 for every MoE)."""
    from trainfit.estimate.params import count_params, layer_tensors
    from trainfit.serving.speed import routed_fraction

    m = resolve_model("mixtral-8x7b")  # 8 experts of 3 x 4096 x 14336 in each of 32 layers, 46.7B parameters
    assert routed_fraction(m) == pytest.approx(32 * 8 * 3 * 4096 * 14336 / count_params(m), rel=1e-9)
    assert 0.96 < routed_fraction(m) < 0.97
    assert routed_fraction(resolve_model("qwen2-7b")) == 0.0
    assert all(t.count == 1 for t in layer_tensors(resolve_model("qwen2-7b")))


def test_the_output_says_why_concurrency_and_capacity_differ(run_cli):
    import json

    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--json")
    assert code == 0, err
    d = json.loads(out)
    h = d["memory"]["hybrid"]
    assert (h["full_attention_layers"], h["state_layers"], h["groups"]) == (16, 48, 4)
    assert h["blocks_per_max_len_request"] == math.ceil(8192 / 784) + 3
    assert any("16 full-attention and 48 linear-attention" in a for a in d["assumptions"])
    assert any("understates the concurrency" in a for a in d["assumptions"])  # vLLM 0.10.1 counts every layer
    for argv in (("--model", "qwen3.5-27b", "--engine-version", "0.24.0"), ("--model", "gpt-oss-20b")):
        # 0.24 logs concurrency x length; gpt-oss's window layers hold the whole length in vLLM's worst case
        code, out, err = run_cli("serving", *argv, "--gpu", "h100-sxm", "--json")
        assert code == 0, err
        assert not any("understates" in a for a in json.loads(out)["assumptions"]), argv
    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--lang", "zh")
    assert code == 0, err
    assert "48 层线性注意力" in out.replace("\n", "")
    code, out, err = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--json")
    assert "hybrid" not in json.loads(out)["memory"]


def test_other_engines_say_a_hybrid_is_counted_as_full_attention(run_cli):
    import json

    for argv in (["--engine", "sglang"], ["--engine-version", "0.8.5"]):
        code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h200", *argv, "--json")
        assert code == 0, err
        d = json.loads(out)
        assert "hybrid" not in d["memory"]
        assert any("counted in every layer" in a for a in d["assumptions"])
    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h200", "--engine", "sglang", "--lang", "zh")
    assert code == 0 and "混合模型" in out.replace("\n", ""), err
    code, out, _ = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--engine", "sglang", "--json")
    assert not any("hybrid" in a for a in json.loads(out)["assumptions"])


# NVIDIA-Nemotron-Nano-9B-v2 (model_type nemotron_h): the fields vLLM's NemotronHForCausalLM reads, as the model's
# config.json gives them (quoted alike by several repositories: 56 layers "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-
# M-MM-M-M-M-M-M-", 27 Mamba-2, 25 MLP and 4 attention layers)
NEMOTRON_NANO_9B_V2 = {
    "model_type": "nemotron_h", "architectures": ["NemotronHForCausalLM"], "vocab_size": 131072, "hidden_size": 4480,
    "intermediate_size": 15680, "num_hidden_layers": 56,
    "hybrid_override_pattern": "M-M-M-MM-M-M-M*-M-M-M*-M-M-M-M*-M-M-M-M*-M-MM-M-M-M-M-M-",
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
    "mamba_num_heads": 128, "mamba_head_dim": 80, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}


@pytest.fixture(scope="module")
def nemotron():
    from trainfit.catalog.models import spec_from_config

    return spec_from_config(NEMOTRON_NANO_9B_V2, name="nvidia-nemotron-nano-9b-v2")


def test_nemotron_h_mamba2_states_give_vllms_672_token_block(nemotron):
    """vllm-project/vllm issue #24280 (2025-09-04): hybrid mamba/attention models need 'large attention page sizes
    (672 tokens for nvidia/NVIDIA-Nemotron-Nano-9B-v2)'. Mamba-2 (mamba_utils.py mamba2_state_shape): conv
    (128 x 80 + 2 x 8 x 128) x 3 and temporal 128 x 80 x 128, both bf16 ("auto"); a token's KV in one attention
    layer 2 x 8 x 128 x 2 bytes. The MLP layers hold nothing."""
    lay = layout(nemotron, ServingSpec())
    assert (lay.full, lay.sliding, lay.state) == (4, 0, 27)  # the 25 MLP layers: no cache
    assert lay.state_bytes == (10240 + 2 * 8 * 128) * 3 * 2 + 128 * 80 * 128 * 2 == 2_695_168
    assert token_bytes(nemotron, ServingSpec()) == 4096
    assert lay.block_size(16) == 672
    assert lay.group_size == 4 and lay.groups() == {"full": 1, "state": 7}  # 27 states padded to 28
    # fp32 states (NVIDIA's serving instructions for Nemotron models pass --mamba-ssm-cache-dtype float32)
    fp32 = layout(nemotron, ServingSpec(mamba_ssm_cache_dtype="float32"))
    assert fp32.state_bytes == (10240 + 2 * 8 * 128) * 3 * 2 + 128 * 80 * 128 * 4
    assert fp32.block_size(16) == 16 * math.ceil(fp32.state_bytes / (16 * 4096)) == 1312
    # TP 8: the 8 groups split evenly, heads 16 a GPU, KV heads 1 a GPU
    tp8 = layout(nemotron, ServingSpec(tp=8))
    assert tp8.state_bytes == (10240 + 2 * 8 * 128) // 8 * 3 * 2 + 16 * 80 * 128 * 2


def test_prefix_caching_gives_a_state_two_pages_by_default_from_0_28(nemotron):
    """Hybrids serve without prefix caching by default until vLLM PR #50991 (0.28.0), which turns it on with
    states in "align" mode (two pages); stated either way, it is what is said."""
    def pages(**kw):
        return layout(nemotron, ServingSpec(**kw)).state_pages

    assert pages(engine_version="0.27.1") == 1 and pages(engine_version="0.28.0") == 2
    assert pages(engine_version="0.24.0", prefix_caching=True) == 2
    assert pages(engine_version="0.28.0", prefix_caching=False) == 1
    assert pages(engine_version="0.13.0", prefix_caching=True) == 1  # no align mode before 0.15
    blocks = [layout(nemotron, ServingSpec(engine_version=v)).blocks_per_request(8192, 672, 8192)
              for v in ("0.27.1", "0.28.0")]
    assert blocks == [13 + 7, 13 + 14]


@pytest.mark.parametrize("cfg,tp,expect", [
    # Granite-4.0-H / Bamba names (granitemoehybrid.py, bamba.py): inner = mamba_expand x hidden_size; one group
    # is raised to tp groups under TP (extra_groups_for_head_shards)
    ({"hidden_size": 1536, "mamba_expand": 2, "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_n_groups": 1,
      "mamba_d_state": 128, "mamba_d_conv": 4}, 2, (3072 + 2 * 2 * 128) // 2 * 3 * 2 + 24 * 64 * 128 * 2),
    # Falcon-H1: mamba_d_ssm, when set, is the inner width
    ({"hidden_size": 2048, "mamba_expand": 2, "mamba_d_ssm": 3072, "mamba_n_heads": 48, "mamba_d_head": 64,
      "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4}, 1, (3072 + 2 * 256) * 3 * 2 + 48 * 64 * 256 * 2),
    # Zamba2 (zamba2.py): n_mamba_heads, mamba_headdim, mamba_ngroups
    ({"hidden_size": 2560, "mamba_expand": 2, "n_mamba_heads": 80, "mamba_headdim": 64, "mamba_ngroups": 1,
      "mamba_d_state": 64, "mamba_d_conv": 4}, 1, (5120 + 2 * 64) * 3 * 2 + 80 * 64 * 64 * 2),
    # Jamba (Mamba-1, jamba.py): conv inner x (d_conv - 1), temporal inner x d_state
    ({"hidden_size": 4096, "mamba_expand": 2, "mamba_d_state": 16, "mamba_d_conv": 4}, 2,
     4096 * 3 * 2 + 4096 * 16 * 2),
])
def test_each_model_class_states_its_mamba_fields_as_vllm_reads_them(cfg, tp, expect):
    from trainfit.serving.hybrid import state_bytes

    assert state_bytes(cfg, tp) == expect
    assert state_bytes({"hidden_size": 4096}, 1) == 0  # nothing to size: counted as before


def test_the_cli_takes_the_state_dtype_and_prefix_caching_and_generate_passes_them(run_cli, tmp_path):
    import json

    base = ("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--engine-version", "0.24.0", "--json")
    code, out, err = run_cli(*base)
    one = json.loads(out)["memory"]
    code, out, err = run_cli(*base, "--enable-prefix-caching", "--mamba-ssm-cache-dtype", "bfloat16")
    assert code == 0, err
    two = json.loads(out)["memory"]
    assert (one["hybrid"]["state_pages_per_request"], two["hybrid"]["state_pages_per_request"]) == (1, 2)
    assert two["hybrid"]["state_bytes_per_request"] < one["hybrid"]["state_bytes_per_request"]  # fp32 in its config
    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--mamba-ssm-cache-dtype",
                             "float33")
    assert code == 2 and "float32" in err and "Traceback" not in err
    code, out, err = run_cli("generate", "--serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm",
                             "--no-enable-prefix-caching", "--mamba-ssm-cache-dtype", "float32", "--out",
                             str(tmp_path / "s"))
    assert code == 0, err
    script = (tmp_path / "s" / "serve.sh").read_text()
    assert "--no-enable-prefix-caching" in script and "--mamba-ssm-cache-dtype float32" in script


@pytest.mark.parametrize("model_type,full,state", [("falcon_h1", 32, 32), ("zamba2", 9, 54)])
def test_parallel_hybrid_blocks_hold_both_a_state_and_kv(model_type, full, state):
    """Falcon-H1 runs attention and a Mamba-2 mixer side by side in every block, Zamba2 adds its shared attention to
    every sixth: vLLM registers both layers of such a block. A bare config.json ({"model_type": T}) is read with its
    type's defaults, as transformers' config class fills them."""
    from trainfit.catalog.models import spec_from_config

    m = spec_from_config({"model_type": model_type}, name=model_type)
    lay = layout(m, ServingSpec())
    assert (lay.full, lay.state) == (full, state) and lay.state_bytes > 0


def test_other_engines_say_a_mamba_hybrid_is_counted_as_full_attention(nemotron):
    est = serve(nemotron, gpu="h100-sxm", engine="sglang")
    assert "hybrid" not in est.memory.to_dict()
    assert ("sv_hybrid_not_modelled", {"engine": "sglang", "version": est.engine.version}) in est.assumptions


# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B config.json (the structural fields; two published copies of the file agree,
# data/validation/serving_hybrid_sources.md): 23 Mamba-2, 23 MoE and 6 attention layers
NEMOTRON_3_NANO_30B_A3B = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "attention_bias": False, "chunk_size": 128,
    "conv_kernel": 4, "expand": 2, "head_dim": 128, "hidden_size": 2688,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME", "intermediate_size": 1856,
    "layer_norm_epsilon": 1e-05, "mamba_head_dim": 64, "mamba_hidden_act": "silu", "mamba_num_heads": 64,
    "mamba_proj_bias": False, "mamba_ssm_cache_dtype": "float32", "max_position_embeddings": 262144,
    "mlp_bias": False, "mlp_hidden_act": "relu2", "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "n_groups": 8, "n_routed_experts": 128,
    "n_shared_experts": 1, "norm_eps": 1e-05, "norm_topk_prob": True, "num_attention_heads": 32,
    "num_experts_per_tok": 6, "num_hidden_layers": 52, "num_key_value_heads": 2, "partial_rotary_factor": 1.0,
    "rope_theta": 10000, "routed_scaling_factor": 2.5, "sliding_window": None, "ssm_state_size": 128,
    "tie_word_embeddings": False, "topk_group": 1, "torch_dtype": "bfloat16", "use_bias": False, "use_conv_bias": True,
    "vocab_size": 131072,
}


@pytest.fixture(scope="module")
def nano30b():
    from trainfit.catalog.models import spec_from_config

    return spec_from_config(NEMOTRON_3_NANO_30B_A3B, name="nvidia-nemotron-3-nano-30b-a3b")


@pytest.mark.parametrize("version,gib,max_len,tokens,concurrency", [
    ("0.19.1", 68.97, 262144, 4_819_104, 86.16),  # num_blocks // groups x block
    ("0.20.1rc1.dev91", 3.72, 256000, 1_206_303, 4.71),  # int(concurrency x max_model_len)
])
def test_nemotron_3_nano_logs(nano30b, version, gib, max_len, tokens, concurrency):
    """Published vLLM logs of Nemotron-Cascade-2-30B-A3B (the Nemotron-3-Nano-30B-A3B architecture), TP 1, fp8 KV,
    --mamba-ssm-cache-dtype float32, prefix caching off (serving_hybrid_sources.md): 'Setting attention block size
    to 4176 tokens', 'Padding mamba page size by 0.19%', 'Add 1 padding layers, may waste at most 4.35% KV cache
    memory', then the KV memory, token count and concurrency in the parametrisation. The config's own
    mamba_ssm_cache_dtype says float32 too: "auto" gives the same."""
    for ssm in ("float32", "auto"):
        s = ServingSpec(engine_version=version, kv_cache_dtype="fp8", mamba_ssm_cache_dtype=ssm)
        lay = layout(nano30b, s)
        assert (lay.full, lay.state, lay.group_size, lay.groups()) == (6, 23, 6, {"full": 1, "state": 4})
        assert lay.state_bytes == (4096 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * 4 == 2_134_016
        assert lay.block_size(16) == 4176
        assert round(100 * (4176 * token_bytes(nano30b, s) - lay.state_bytes) / lay.state_bytes, 2) == 0.19
    assert round(100 * (lay.padded_layers - lay.full - lay.state) / lay.state, 2) == 4.35
    need = lay.blocks_per_request(max_len, 4176, 8192)
    assert need == math.ceil(max_len / 4176) + 4
    page = 4176 * token_bytes(nano30b, s) * lay.group_size
    got = []
    for pool in _pools(gib, page):
        c = pool / need
        reported = int(c * max_len) if lay.reports_capacity else pool // 5 * 4176
        got.append((round(c, 2), reported))
    assert (concurrency, tokens) in got


def _sglang_check(m, s, states, tokens, ssm_gib, conv_gib, k_gib):
    """A logged SGLang start-up ('Mamba Cache is allocated. max_mamba_cache_size: N, conv_state size: X GB,
    ssm_state size: Y GB', 'KV Cache is allocated. #tokens: T, K size: Z GB'; GB = 2^30 bytes, the pool allocates
    N + 1 states and T + 1 token slots): the state and KV sizes from the model, and the ratio split giving N states
    for every rest memory that leaves T tokens."""
    from trainfit.serving.hybrid_sglang import pools

    lay = layout(m, s)
    assert lay.engine == "sglang"
    per, cell = lay.state * lay.state_bytes, lay.full * token_bytes(m, s)
    assert abs(per * (states + 1) / GiB - (ssm_gib + conv_gib)) <= 0.01  # two values rounded to 0.01 each
    assert round((tokens + 1) * cell / 2 / GiB, 2) == k_gib
    for slack in (0, cell // 2, cell - 1):  # every rest that leaves exactly `tokens` tokens after the states
        rest = tokens * cell + states * per + slack
        got = pools(rest, per, cell, s.prefix_caching is not False, s.max_num_seqs, s.version)
        assert (got.states, got.tokens) == (states, tokens), slack
    return got


def test_sglang_qwen3_5_397b_log():
    """kvcache-ai/ktransformers issue #1870 (SGLang 0.5.9, 2 x RTX 4090, TP 2, bf16 KV, radix cache on,
    max_running_requests 1): 'max_mamba_cache_size: 82, conv_state size: 0.13GB, ssm_state size: 7.29GB',
    '#tokens: 580364, K size: 4.15 GB'. 45 gated-delta-net layers of 2,134,016 bytes a request at TP 2 (the recurrent
    state in fp32, Qwen3.5's mamba_ssm_dtype), 15 full-attention layers of one KV head of 256 a GPU."""
    m = resolve_model("qwen3.5-397b-a17b")
    s = ServingSpec(engine="sglang", engine_version="0.5.9", tp=2, max_num_seqs=1)
    lay = layout(m, s)
    conv = (16 * 128 * 2 + 64 * 128) // 2 * 3 * 2
    assert (lay.full, lay.state, lay.state_bytes) == (15, 45, 32 * 128 * 128 * 4 + conv)
    _sglang_check(m, s, 82, 580_364, 7.29, 0.13, 4.15)


def test_sglang_qwen3_6_27b_log():
    """A published SGLang 0.5.11 log of Qwen/Qwen3.6-27B-FP8 on one RTX PRO 6000 96 GB (the Qwen3.5-27B architecture):
    'max_mamba_cache_size: 154, conv_state size: 0.43GB, ssm_state size: 21.80GB', '#tokens: 403904, K size:
    12.33 GB': the states take 0.9 / 1.9 of the rest."""
    m = resolve_model("qwen3.5-27b")
    s = ServingSpec(engine="sglang", engine_version="0.5.11")
    got = _sglang_check(m, s, 154, 403_904, 21.80, 0.43, 12.33)
    assert got.max_running == 154 // 3


def test_sglang_nemotron_3_nano_without_the_radix_cache(nano30b):
    """SGLang's own test report for NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 at TP 4 with --disable-radix-cache and
    --max-running-requests 8: 'max_mamba_cache_size: 8, conv_state size: 0.00 GB, ssm_state size: 0.10 GB',
    '#tokens: 1557504, K size: 2.23 GB': without the radix cache the states are the running requests, one each."""
    s = ServingSpec(engine="sglang", engine_version="0.5.9", tp=4, max_num_seqs=8, prefix_caching=False)
    got = _sglang_check(nano30b, s, 8, 1_557_504, 0.10, 0.00, 2.23)
    assert got.max_running == 8


def test_sglang_serving_reports_its_pools(run_cli):
    import json

    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "sglang",
                             "--engine-version", "0.5.11", "--json")
    assert code == 0, err
    d = json.loads(out)
    h = d["memory"]["hybrid"]
    assert (h["full_attention_layers"], h["state_layers"]) == (16, 48) and h["max_running_requests"] == \
        h["state_slots"] // 3
    assert d["memory"]["kv_bytes_per_token"] == 16 * 2 * 4 * 256 * 2  # the full-attention layers only
    assert d["memory"]["max_concurrency"] <= h["max_running_requests"]
    assert any("SGLang's hybrid pools" in a for a in d["assumptions"])
    code, out, err = run_cli("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "sglang",
                             "--engine-version", "0.5.11", "--lang", "zh")
    assert code == 0 and "SGLang 混合模型内存池" in out.replace("\n", ""), err


@pytest.mark.parametrize("engine,version,backend,slots,ssm_bytes", [
    ("trtllm", "1.0.0", None, 2048, 4),  # max_batch_size states; the config's mamba_ssm_cache_dtype, float32
    ("lmdeploy", "0.12.2", "turbomind", 1024, 2),  # H100's max_batch_size; the model dtype (its config unread)
    ("lmdeploy", "0.12.2", "pytorch", 1024 + 2, 2),
])
def test_trtllm_and_lmdeploy_keep_a_state_per_request_before_the_kv(nano30b, engine, version, backend, slots,
                                                                     ssm_bytes):
    """Read from their code (hybrid.py; no published log of a hybrid was found): a state pool of one state per
    request of the batch size, then KV of the full-attention layers only; too many states leave no KV, and the
    answer names the batch size that fits."""
    kw = {"lmdeploy_backend": backend} if backend else {}
    est = serve(nano30b, gpu="h100-sxm", engine=engine, engine_version=version, **kw)
    h = est.memory.hybrid
    per_layer = (4096 + 2 * 8 * 128) * 3 * 2 + 64 * 64 * 128 * ssm_bytes
    assert h["state_bytes_per_request"] == per_layer and h["state_slots"] == slots
    assert h["state_pool_gib"] == round(slots * 23 * per_layer / GiB, 3)
    assert est.memory.kv_per_token == 6 * 2 * 2 * 128 * 2  # six attention layers of two KV heads
    assert est.memory.kv_tokens == 0 and est.reasons  # the default batch's states take the memory
    fewer = [a for a in alternatives(est) if "max_num_seqs" in a.change]
    assert fewer and fewer[0].change["max_num_seqs"] < est.engine.max_num_seqs and fewer[0].kv_tokens > 8192
    ok = serve(nano30b, gpu="h100-sxm", engine=engine, engine_version=version, max_num_seqs=64, **kw)
    assert ok.memory.kv_tokens > 0 and ok.memory.hybrid["state_slots"] == 64 + slots - est.engine.max_num_seqs
    assert any(n[0] == "sv_hybrid_pool" for n in ok.assumptions if isinstance(n, tuple))


def test_the_memory_table_shows_the_state_pool_and_adds_up(run_cli):
    """The rows under the engine's budget sum to it: SGLang's request states are a row of their own (en and zh)."""
    import json

    base = ("serving", "--model", "qwen3.5-27b", "--gpu", "h100-sxm", "--engine", "sglang",
            "--engine-version", "0.5.11")
    code, out, err = run_cli(*base, "--json")
    m = json.loads(out)["memory"]
    parts = m["weights_gib"] + m["weight_buffers_gib"] + m["non_torch_gib"] + m["hybrid"]["state_pool_gib"] + \
        m["kv_cache_gib"] + m["activation_peak_gib"] + m["cuda_graphs_gib"]
    assert parts == pytest.approx(m["total_gpu_gib"] * m["memory_fraction"], abs=0.01)
    for lang, words in (("en", "request states"), ("zh", "请求状态")):
        code, out, err = run_cli(*base, "--lang", lang)
        assert code == 0 and words in out.replace("\n", ""), err
