"""`trainfit serving`: the serving model's unit facts, engine defaults, acceptance commands, search and validation.

Golden numbers cite their source; every assertion can fail when the formula it checks changes.
"""

import json
import math
from dataclasses import replace

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.errors import ServingError
from trainfit.serving import serve
from trainfit.serving.engines import resolve
from trainfit.serving.memory import kv_bytes_for_request, kv_bytes_per_token, weights_per_gpu
from trainfit.serving.spec import ServingSpec
from trainfit.units import GiB


def _json(run_cli, *argv):
    code, out, err = run_cli(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


# ---- memory ------------------------------------------------------------------------------------------------------

def test_kv_bytes_per_token_qwen2_7b_is_exact():
    # Qwen2-7B config.json: 28 layers, 4 KV heads, head_dim 3584 / 28 = 128; bf16 -> 2 x 28 x 4 x 128 x 2 bytes
    assert kv_bytes_per_token(resolve_model("qwen2-7b"), ServingSpec()) == 2 * 28 * 4 * 128 * 2 == 57_344


def test_fp8_kv_halves_the_bytes_and_tp_splits_kv_heads_until_they_run_out():
    m = resolve_model("qwen2-7b")  # 4 KV heads
    assert kv_bytes_per_token(m, ServingSpec(kv_cache_dtype="fp8")) == 57_344 // 2
    assert kv_bytes_per_token(m, ServingSpec(tp=2)) == 57_344 // 2
    assert kv_bytes_per_token(m, ServingSpec(tp=4)) == 57_344 // 4
    # TP 8 > 4 KV heads: vLLM replicates them, one head per GPU (max(1, kv_heads // tp))
    assert kv_bytes_per_token(m, ServingSpec(tp=8)) == 57_344 // 4


def test_bf16_weights_are_two_bytes_per_parameter():
    m = resolve_model("qwen2-7b")
    w = weights_per_gpu(m, "bf16", 1)
    assert w.total == 2 * 7_615_616_512  # HF's parameter count (preset), 2 bytes each
    assert round(w.total / GiB, 1) == 14.2  # the "weights ~ 14.2 GiB"



def _decoder_presets():
    from trainfit.catalog.models import all_models

    return [n for n in sorted(all_models()) if not resolve_model(n).is_encoder]


@pytest.mark.parametrize("name", _decoder_presets())
def test_bf16_weights_of_every_preset_are_two_bytes_per_parameter(name):
    """Every shipped decoder, hybrids included: a read structure's mean block weighs each Linear by the share of
    blocks that hold it. Counting every group's Linears in every block put Qwen3.5-27B at 94.8 GiB (2 bytes x 26.9B
    parameters is 50.1 GiB), gpt-oss-20b at 75.7 GiB and Gemma-3-12B at 42.0 GiB. The parameter count is the
    model's own inventory (count_params, equal to HF's num_parameters() on the meta device:
    tests/test_params_oracle.py); within 0.1%."""
    from trainfit.estimate.params import count_params

    m = resolve_model(name)
    assert weights_per_gpu(m, "bf16", 1).total == pytest.approx(2 * count_params(m), rel=1e-3)


def test_tp_beyond_the_kv_heads_replicates_only_the_kv_projections():
    """Llama-3-70B has 8 KV heads: at TP 16 each GPU holds one K and one V head (vLLM replicates them), so the
    16 GPUs hold the K/V projections twice over and everything else once."""
    from trainfit.estimate.params import layer_linears

    m = resolve_model("llama-3-70b")
    kv = sum(lin.in_features * lin.out_features * lin.share for lin in layer_linears(m)
             if lin.roles in (("k",), ("v",)))
    extra = 2.0 * m.layers * kv  # bf16 bytes of one more copy of every K/V projection
    assert 16 * weights_per_gpu(m, "bf16", 16).linears == pytest.approx(
        8 * weights_per_gpu(m, "bf16", 8).linears + extra, rel=1e-9)

def test_quantised_formats_keep_embeddings_and_head_in_16_bit():
    m = resolve_model("qwen2-7b")
    bf16, awq, gptq, int8 = (weights_per_gpu(m, f, 1) for f in ("bf16", "awq", "gptq", "int8"))
    assert awq.unquantised == gptq.unquantised == int8.unquantised == bf16.unquantised  # embed + lm_head + norms
    assert awq.linears == bf16.linears / 4  # 4 bits vs 16
    # AWQ group 128: fp16 scales (2 bytes) + packed int4 zeros (0.5 byte) per 128 input features per output
    assert awq.scales == pytest.approx(bf16.linears / 2 * 2.5 / 128, rel=1e-3)
    assert gptq.scales > awq.scales  # + g_idx, one int32 per input feature
    assert bf16.total / 4 < awq.total < bf16.total / 2


def test_sliding_window_layers_keep_only_the_window():
    m = resolve_model("mistral-7b")
    window = (m.extra or {}).get("sliding_window")
    if not window:
        pytest.skip("the mistral-7b preset has no sliding window")
    s = ServingSpec()
    assert kv_bytes_for_request(m, s, 4 * window, 16) == kv_bytes_for_request(m, s, window, 16)


def test_mla_uses_the_compressed_latent():
    m = resolve_model("llama-3-8b")
    mla = replace(m, extra={**m.extra, "kv_lora_rank": 512, "qk_rope_head_dim": 64})
    assert kv_bytes_per_token(mla, ServingSpec()) == m.layers * (512 + 64) * 2


def test_kv_capacity_is_whole_blocks_within_the_budget():
    est = serve("qwen2-7b", gpu="a10")
    mem = est.memory
    assert mem.kv_tokens % 16 == 0 and mem.kv_tokens == mem.num_blocks * 16
    assert mem.num_blocks * 16 * mem.kv_per_token <= mem.kv_budget < (mem.num_blocks + 1) * 16 * mem.kv_per_token
    assert mem.max_concurrency == pytest.approx(mem.kv_tokens / 8192)  # 8192 = default max_model_len


def test_more_utilisation_and_fp8_kv_give_more_kv_tokens():
    base = serve("qwen2-7b", gpu="a10").memory
    assert serve("qwen2-7b", gpu="a10", gpu_memory_utilization=0.95).memory.kv_tokens > base.kv_tokens
    assert serve("qwen2-7b", gpu="a10", kv_cache_dtype="fp8").memory.kv_tokens == pytest.approx(2 * base.kv_tokens,
                                                                                                abs=16)


# ---- engines -----------------------------------------------------------------------------------------------------

def test_vllm_batch_defaults_follow_get_batch_defaults():
    # vllm/engine/arg_utils.py get_batch_defaults: >= 70 GiB and not A100 -> 8192 / 1024 (OpenAI server); else 2048 / 256
    s = ServingSpec()
    h100 = resolve(s, get_gpu("h100-sxm"), 8192)
    a100 = resolve(s, get_gpu("a100-sxm4-80gb"), 8192)
    a10 = resolve(s, get_gpu("a10"), 8192)
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert (a10.max_num_batched_tokens, a10.max_num_seqs, a10.memory_fraction, a10.block_size) == (2048, 256, 0.9, 16)


def test_vllm_v0_profiles_max_model_len_tokens_without_chunked_prefill():
    v0 = ServingSpec(engine_version="0.6.3")
    assert resolve(v0, get_gpu("a10"), 10000).max_num_batched_tokens == 10000  # max(max_model_len, 2048)
    assert resolve(v0, get_gpu("a10"), 1024).max_num_batched_tokens == 2048
    assert resolve(v0, get_gpu("a10"), 65536).max_num_batched_tokens == 2048  # chunked prefill above 32K


@pytest.mark.parametrize("tp,fraction", [(1, 0.88), (2, 0.87), (4, 0.85), (8, 0.81)])
def test_sglang_mem_fraction_static_by_tp(tp, fraction):
    # sglang python/sglang/srt/server_args.py __post_init__ (0.4.x)
    assert resolve(ServingSpec(engine="sglang", tp=tp), get_gpu("h100-sxm"), 8192).memory_fraction == fraction


def test_sglang_budget_has_no_activation_term():
    est = serve("qwen2-7b", gpu="l20", engine="sglang")
    assert est.memory.activation == 0 and est.fits


# ---- speed -------------------------------------------------------------------------------------------------------

def test_decode_at_concurrency_1_is_below_the_bandwidth_bound():
    est = serve("qwen2-7b", gpu="a10", concurrency=1)
    bound = 600e9 / (2 * 7_615_616_512)  # A10 datasheet 600 GB/s / bf16 weight bytes
    assert est.bandwidth_bound_tps == pytest.approx(bound)
    assert 1 / est.load.tpot_s < bound
    assert est.load.decode_bound == "memory"


def test_throughput_rises_and_tpot_grows_with_concurrency():
    one, many = (serve("qwen2-7b", gpu="a10", concurrency=c).load for c in (1, 32))
    assert many.output_tokens_per_s > 5 * one.output_tokens_per_s
    assert many.tpot_s > one.tpot_s


def test_tp_over_pcie_costs_more_than_over_nvlink():
    pcie = serve("qwen2-7b", instance="ecs.gn7i-c32g1.16xlarge", gpus=2)  # 2 x A10, PCIe
    assert pcie.cluster.intra_link == "pcie"
    one = serve("qwen2-7b", gpu="a10")
    assert pcie.load.tpot_s > 0.5 * one.load.tpot_s  # half the weights per GPU, plus all-reduces
    nv = serve("qwen2-7b", gpu="a100-sxm4-80gb", gpus=2)
    assert nv.cluster.intra_link in ("nvlink", "nvswitch")


def test_open_loop_queues_and_flags_overload():
    low = serve("qwen2-7b", gpu="a10", request_rate=0.5).load
    cap = low.capacity_requests_per_s
    near = serve("qwen2-7b", gpu="a10", request_rate=0.9 * cap).load
    assert near.queue_s > low.queue_s > 0 and near.ttft_s > low.ttft_s
    over = serve("qwen2-7b", gpu="a10", request_rate=2 * cap).load
    assert over.stable is False


# ---- does not fit ------------------------------------------------------------------------------------------------

def test_70b_on_one_a10_does_not_fit_and_lists_what_would(run_cli):
    d = _json(run_cli, "serving", "--model", "llama-2-70b", "--gpu", "a10")
    assert d["fits"] is False and d["reasons"][0]["key"] == "sv_r_weights"
    changes = [a["change"] for a in d["alternatives"]]
    assert any(c.get("weights") in ("awq", "gptq") and c.get("tp", 1) > 1 for c in changes)  # 4-bit over A10s
    assert any("gpu" in c for c in changes)  # or a larger GPU
    for a in d["alternatives"]:
        assert a["max_concurrency"] >= 1


# ---- CLI ---------------------------------------------------------------------------------------------------------

def test_help(run_cli):
    with pytest.raises(SystemExit) as exc:
        run_cli("serving", "--help")
    assert exc.value.code == 0


def test_acceptance_qwen2_7b_on_a10(run_cli):
    d = _json(run_cli, "serving", "--model", "qwen2-7b", "--gpu", "a10")
    mem = d["memory"]
    assert d["fits"] and mem["weights_gib"] == pytest.approx(14.2, abs=0.05)
    assert mem["kv_bytes_per_token"] == 57_344 and mem["max_model_len"] == 8192
    assert mem["kv_cache_tokens"] > 8192 and mem["max_concurrency"] > 1
    assert d["speed"]["output_tokens_per_s"] <= d["decode_bandwidth_bound_tokens_per_s"]


@pytest.mark.parametrize("argv,key", [
    (("--gpu", "a10", "--weights", "int4"), "sv_e_choice"),
    (("--gpu", "a10", "--gpu-memory-utilization", "1.5"), "sv_e_fraction"),
    (("--gpu", "a10", "--concurrency", "4", "--request-rate", "2"), "sv_e_load"),
    (("--gpu", "a10", "--max-model-len", "999999"), "sv_e_len"),
    (("--gpu", "a10", "--gpus", "3"), "sv_e_tp_heads"),
    ((), "sv_e_where"),
])
def test_bad_input_is_one_line_exit_2_and_a_json_error(run_cli, argv, key):
    code, out, err = run_cli("serving", "--model", "qwen2-7b", *argv)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    code, out, _ = run_cli("serving", "--model", "qwen2-7b", *argv, "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == key


def test_errors_speak_chinese(run_cli):
    code, out, _ = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--weights", "int4", "--json",
                           "--lang", "zh")
    assert code == 2 and "必须是" in json.loads(out)["error"]["message"]


def test_every_serving_message_has_en_and_zh():
    from trainfit.i18n.serving import SERVING_MESSAGES

    for key, entry in SERVING_MESSAGES.items():
        assert entry.get("en") and entry.get("zh"), key


def test_rendered_tables_in_both_languages(run_cli):
    for lang, word in (("en", "KV capacity"), ("zh", "KV 容量")):
        code, out, _ = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--lang", lang)
        assert code == 0 and word in out


def test_compare_smallest_tp_that_fits_per_gpu(run_cli):
    d = _json(run_cli, "serving", "--model", "qwen2.5-72b", "--compare", "a10,a100-sxm4-80gb,h20", "--weights", "awq")
    rows = {r["gpu"]: r for r in d["rows"]}
    assert rows["a100-sxm4-80gb"]["tp"] == 1 and rows["a10"]["tp"] >= 2
    assert all(r["fits"] for r in rows.values())


def test_search_meets_the_target_and_ranks_by_cost(run_cli):
    d = _json(run_cli, "serving", "--model", "qwen2-7b", "--target-tokens-per-s", "2000", "--max-tpot-ms", "60",
              "--formats", "bf16,awq", "--top", "20")
    opts = d["options"]
    assert opts and d["setups_tried"] > len(opts) // 2
    costs = [o["cost_per_m_output_tokens"] for o in opts]
    assert costs == sorted(costs)
    for o in opts:
        assert o["tpot_ms"] <= 60 and o["output_tokens_per_s"] >= 2000 and o["currency"] == "CNY"


def test_search_needs_no_gpu_flag(run_cli):
    code, out, _ = run_cli("serving", "--model", "qwen2-7b", "--gpu", "a10", "--max-ttft-ms", "100", "--json")
    assert code == 2 and json.loads(out)["error"]["key"] == "sv_e_both"


def test_api_errors_are_serving_errors():
    with pytest.raises(ServingError):
        serve("qwen2-7b", gpu="a10", engine="trt")
    assert math.isfinite(serve("qwen2-7b", gpu="h100-sxm", engine="sglang", concurrency=8).load.ttft_s)


def test_overload_is_said_out_loud(run_cli):
    d = _json(run_cli, "serving", "--model", "qwen2-7b", "--gpu", "a10", "--request-rate", "100")
    assert d["speed"]["stable"] is False and d["warnings"] and "exceeds" in d["warnings"][0]
    d = _json(run_cli, "serving", "--model", "qwen2-7b", "--gpu", "a10", "--request-rate", "1")
    assert d["speed"]["stable"] is True and d["warnings"] == []


def test_vllm_v1_profiling_peak_is_the_forward_pass_or_the_sampler():
    """V1 runs the forward pass, then the sampler on max_num_seqs rows of full-vocabulary logits: the PyTorch
    top-k/top-p path (sorting) costs more than FlashInfer's, and which one runs depends on the version."""
    from trainfit.catalog import get_gpu, resolve_model
    from trainfit.serving.engines import resolve
    from trainfit.serving.estimate import max_len_for
    from trainfit.serving.knobs import knobs
    from trainfit.serving.memory import activation_peak, forward_peak
    from trainfit.serving.spec import ServingSpec

    m, gpu = resolve_model("llama-3.1-8b"), get_gpu("h100-sxm")
    peaks = {}
    for version, sampler in (("0.10.1", None), ("0.11.0", None), ("0.11.0", "flashinfer"), ("0.30.0", None)):
        s = ServingSpec(engine_version=version, sampler=sampler)
        e = resolve(s, gpu, max_len_for(m, s))
        view = knobs().for_framework(s.generation).for_gpu(gpu)
        peaks[(version, sampler)] = (e.sampler, activation_peak(m, e, 1, view))
    assert peaks[("0.10.1", None)][0] == "flashinfer" and peaks[("0.11.0", None)][0] == "pytorch"
    assert peaks[("0.30.0", None)][0] == "flashinfer"
    assert peaks[("0.11.0", None)][1] > 2 * peaks[("0.11.0", "flashinfer")][1]
    # H100 defaults: 8192 tokens, 1024 sequences; the PyTorch sampler's peak is far above the forward pass's
    s = ServingSpec(engine_version="0.11.0")
    e = resolve(s, gpu, 16000)
    assert e.max_num_batched_tokens == 8192 and e.max_num_seqs == 1024
    assert peaks[("0.11.0", None)][1] > 4 * forward_peak(m, 8192, 1)


def test_custom_all_reduce_follows_the_interconnect():
    from trainfit.catalog import get_gpu
    from trainfit.serving.engines import custom_all_reduce
    from trainfit.serving.spec import ServingSpec

    assert custom_all_reduce(ServingSpec(tp=2), get_gpu("h100-sxm"))
    assert not custom_all_reduce(ServingSpec(tp=2), get_gpu("rtx4090"))  # GeForce: no P2P
    assert not custom_all_reduce(ServingSpec(tp=4), get_gpu("l20"))  # more than two PCIe GPUs
    assert not custom_all_reduce(ServingSpec(tp=1), get_gpu("h100-sxm"))
    assert not custom_all_reduce(ServingSpec(tp=2, custom_all_reduce=False), get_gpu("h100-sxm"))


def test_sglang_pool_is_the_fraction_of_memory_after_the_context_minus_the_weights():
    """SGLang's profile_max_num_token: fraction x (free memory once the context exists) - what loading took."""
    from trainfit.catalog import get_gpu, resolve_model
    from trainfit.serving.estimate import estimate
    from trainfit.serving.spec import ServingSpec

    m, gpu = resolve_model("qwen2.5-32b"), get_gpu("l4")
    a = estimate(m, gpu, ServingSpec(engine="sglang", tp=4, gpu_memory_utilization=0.85, max_model_len=4096)).memory
    b = estimate(m, gpu, ServingSpec(engine="sglang", tp=4, gpu_memory_utilization=0.80, max_model_len=4096)).memory
    context = a.non_torch / 0.85
    assert abs((a.kv_budget - b.kv_budget) - 0.05 * (a.total_gpu - context)) < 1e6
    assert a.kv_budget == pytest.approx(0.85 * (a.total_gpu - context) - a.weights.total - a.buffers, rel=1e-9)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "lmdeploy", "trtllm"])
def test_a_config_without_attention_dimensions_is_one_clear_line(run_cli, tmp_path, engine):
    """A composite config (BLT: its text model under other keys) reads with hidden size 0 and head dim 0: serving
    says so in one line with exit 2 (it divided by its zero KV bytes per token, 2026-12-07's fuzz), in either
    language, while the training estimate still answers from the read structure."""
    pytest.importorskip("transformers")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "blt"}))
    code, out, err = run_cli("serving", "--model", str(tmp_path), "--gpu", "h100-sxm", "--engine", engine, "--json")
    assert code == 2 and "no attention dimensions" in err and err.count("\n") == 1, err
    assert json.loads(out)["error"]["type"] == "ServingError"
    code, _, err = run_cli("--lang", "zh", "serving", "--model", str(tmp_path), "--gpu", "h100-sxm")
    assert code == 2 and "注意力维度" in err, err
    code, _, err = run_cli("estimate", "--model", str(tmp_path), "--gpu", "h100-sxm", "--method", "lora", "--json")
    assert code == 0, err


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "falcon_mamba"])
def test_a_state_space_model_is_refused_in_one_line(run_cli, tmp_path, model_type):
    """Mamba-type models have no attention layer (no q/k/v projection in any block): serving sized a KV cache for
    them from a placeholder head (a bare Mamba config served at 1,893 tokens/s on an A10 before). Hybrids keep
    answering: Falcon-H1's blocks hold attention beside their mamba mixer, Qwen3-Next's full-attention layers
    beside its linear-attention ones."""
    (tmp_path / "config.json").write_text(json.dumps({"model_type": model_type}))
    code, out, err = run_cli("serving", "--model", str(tmp_path), "--gpu", "a10", "--json")
    assert code == 2 and "no attention layers" in err and err.count("\n") == 1, err
    assert json.loads(out)["error"]["type"] == "ServingError"
    code, _, err = run_cli("--lang", "zh", "serving", "--model", str(tmp_path), "--gpu", "a10")
    assert code == 2 and "没有注意力层" in err, err
    hybrid = tmp_path / "h"
    hybrid.mkdir()
    (hybrid / "config.json").write_text(json.dumps({"model_type": "falcon_h1"}))
    assert run_cli("serving", "--model", str(hybrid), "--gpu", "a10", "--json")[0] == 0
    assert run_cli("serving", "--model", "qwen3-next-80b-a3b", "--gpu", "h200", "--gpus", "2", "--json")[0] == 0


def test_bf16_weights_are_two_bytes_of_every_parameter():
    """At TP 1 in bf16 the weights a GPU holds are the model's parameters at 2 bytes each, for every decoder preset:
    before 2026-12-07 a block's conv1d / A_log / dt_bias (Mamba mixers, gated DeltaNet) were left out once the
    reader stopped taking conv1d for an expert set, and a router that is an nn.Linear (Llama 4) was counted twice."""
    from trainfit.catalog import all_models
    from trainfit.estimate.params import count_params
    from trainfit.serving.memory import weights_per_gpu

    checked = 0
    for name, preset in sorted(all_models().items()):
        m = preset.spec()
        if m.is_encoder:
            continue
        assert weights_per_gpu(m, "bf16", 1).total == pytest.approx(2 * count_params(m), rel=1e-9), name
        checked += 1
    assert checked >= 70
