"""Serving cases transcribed by hand from GitHub issues (startup logs and benchmark tables), one entry per
measurement, each with the quoted text it comes from. Run: python build_issue_cases.py >> ../serving_dev.jsonl

Numbers are copied as printed; derived values say how (e.g. vLLM's '# CUDA blocks' x block size 16 = KV tokens).
Where the engine version is not stated, `engine_version` is null and `engine_version_inferred` says what the log
format or date suggests (read by trainfit's serving validator, ignored by other readers per SERVING_SCHEMA.md).
"""

from __future__ import annotations

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "src"))

QWEN3_1_7B = {  # https://huggingface.co/Qwen/Qwen3-1.7B/blob/main/config.json (transcribed)
    "model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": True, "hidden_act": "silu"}


def preset(name: str) -> tuple[dict, int | None]:
    from trainfit.catalog import get_model

    p = get_model(name)
    return p.hf_config, p.params


def case(id_, source, model_name, hf, params, gpu, n, serving, measured, notes, reliability="medium",
         weight_dtype="bf16", inferred=None):
    sv = {"engine": "vllm", "engine_version": None, "tp": n, "pp": 1, "kv_cache_dtype": "auto",
          "gpu_memory_utilization": None, "max_model_len": None, "max_num_seqs": None,
          "max_num_batched_tokens": None, "cuda_graphs": True, "prefix_caching": None, "workload": "fixed",
          "input_len": None, "output_len": None, "concurrency": None, "request_rate": None, "num_prompts": None}
    sv.update(serving)
    if inferred:
        sv["engine_version_inferred"] = inferred
    return {"id": id_, "source": source, "reliability": reliability, "kind": "serving",
            "model": {"name": model_name, "hf_config": hf, "params": params, "weight_dtype": weight_dtype},
            "hardware": {"gpu": gpu, "num_gpus": n, "gpus_per_node": n}, "serving": sv,
            "measured": measured, "notes": notes}


def kv_cases():
    q32, p32 = preset("qwen2.5-32b")
    q14, p14 = preset("qwen2.5-14b")
    yield case(
        "vllm-15815-l40s-qwen2.5-32b-tp2-kv", "https://github.com/vllm-project/vllm/issues/15815 (2025-04-02)",
        "Qwen2.5-32B-Instruct", q32, p32, "l40s", 2,
        {"tp": 2, "gpu_memory_utilization": 0.9, "max_model_len": 10000},
        {"kv_cache_tokens": 3947 * 16, "kv_cache_gib": 7.71, "weights_gib": 30.71},
        "Log: 'the current vLLM instance can use total_gpu_memory (44.42GiB) x gpu_memory_utilization (0.90) = "
        "39.98GiB' / 'model weights take 30.71GiB; non_torch_memory takes 0.30GiB; PyTorch activation peak memory "
        "takes 1.26GiB; the rest of the memory reserved for KV Cache is 7.71GiB.' / '# CUDA blocks: 3947, # CPU "
        "blocks: 2048' / 'Maximum concurrency for 10000 tokens pe[r request]' (the excerpt is cut there). Title: "
        "'qwen 2.5 32 instruct is hallucinating in L40s GPU with TP=2'. kv_cache_tokens = 3947 blocks x 16 "
        "(vLLM's default block size). max_model_len 10000 read from the concurrency line. Weights 'Loading model "
        "weights took 30.7098 GB' per worker.",
        inferred="0.7.3 (V0 log lines model_runner.py:1116 / worker.py:266 / executor_base.py:108; April 2025)")
    yield case(
        "vllm-13061-4090-r1-distill-qwen-14b-tp2-kv", "https://github.com/vllm-project/vllm/issues/13061 (2025-02-11)",
        "DeepSeek-R1-Distill-Qwen-14B", q14, p14, "rtx4090", 2,
        {"tp": 2, "gpu_memory_utilization": 0.98, "max_model_len": 131072},
        {"kv_cache_tokens": 81536, "kv_cache_gib": 8.69},
        "Command: 'vllm serve --trust-remote-code --tensor_parallel_size 2 --gpu_memory_utilization=0.98 "
        "/root/autodl-tmp/deepseek-ai/DeepSeek-R1-Distill-Qwen-14B' on 'two 4090s'. Error: 'The model's max seq "
        "len (131072) is larger than the maximum number of tokens that can be stored in KV cache (81536).' and "
        "'the model weights only tooks 13.9476 GB, non_torch_memory takes 0.25GiB; PyTorch activation peak memory "
        "takes 0.19GiB; ... the rest of the memory reserved for KV Cache is only 8.69GiB'. The 8.69 GiB is one "
        "worker's; vLLM sizes the cache by the smallest. DeepSeek-R1-Distill-Qwen-14B has Qwen2.5-14B's "
        "architecture (its config.json: Qwen2ForCausalLM, 48 layers, 8 KV heads); trainfit's qwen2.5-14b preset "
        "is used.",
        inferred="0.7.2 (V0 lines model_runner.py:1115 / multiproc_worker_utils.py; February 2025)")


def tt_rows():
    """tenstorrent/tt-inference-server GPU reference sweeps (vLLM on NVIDIA GPUs), concurrency 1."""
    q7, p7 = preset("qwen2.5-7b")
    q72, p72 = preset("qwen2.5-72b")
    src125 = "https://github.com/tenstorrent/tt-inference-server/issues/125 (2025-03-28)"
    rows125 = [  # ISL, OSL, N, TTFT, TPOT, quoted row
        (128, 128, 8, 30.8, 17.1, "|   128 |  128 |           1 |     8 |      30.8 |      17.1 |"),
        (128, 1024, 4, 28.2, 17.2, "|   128 | 1024 |           1 |     4 |      28.2 |      17.2 |"),
        (1024, 128, 8, 99.6, 17.2, "|  1024 |  128 |           1 |     8 |      99.6 |      17.2 |"),
        (2048, 128, 8, 116.4, 17.2, "|  2048 |  128 |           1 |     8 |     116.4 |      17.2 |"),
        (3072, 128, 8, 128.1, 17.3, "|  3072 |  128 |           1 |     8 |     128.1 |      17.3 |"),
    ]
    for isl, osl, n, ttft, tpot, raw in rows125:
        yield case(f"tt125-4090-qwen2.5-7b-in{isl}-out{osl}-c1", src125, "Qwen2.5-7B-Instruct", q7, p7, "rtx4090", 1,
                   {"input_len": isl, "output_len": osl, "concurrency": 1, "num_prompts": n},
                   {"ttft_ms": ttft, "tpot_ms": tpot},
                   "Section 'Performance Benchmarks for Qwen2.5-7B-Instruct on 4090' (columns ISL | OSL | Concurrency "
                   f"| N Req | TTFT (ms) | TPOT (ms) | ...); row {raw!r}. vLLM version and dtype not stated (the "
                   "metadata block above the table is copied from a Tenstorrent run); bf16 assumed, the model's "
                   "released dtype.")
    src143 = "https://github.com/tenstorrent/tt-inference-server/issues/143 (2025-04-01)"
    rows143 = [
        (128, 128, 8, 41.1, 30.9, "|  128 |  128 |           1 |     8 |      41.1 |      30.9 |"),
        (128, 1024, 4, 35.0, 30.9, "|  128 | 1024 |           1 |     4 |      35.0 |      30.9 |"),
        (1024, 128, 8, 129.2, 31.0, "| 1024 |  128 |           1 |     8 |     129.2 |      31.0 |"),
        (2048, 128, 8, 149.5, 31.0, "| 2048 |  128 |           1 |     8 |     149.5 |      31.0 |"),
        (3072, 128, 8, 270.9, 31.1, "| 3072 |  128 |           1 |     8 |     270.9 |      31.1 |"),
        (4096, 128, 8, 505.1, 31.1, "| 4096 |  128 |           1 |     8 |     505.1 |      31.1 |"),
        (8192, 128, 8, 1063.8, 31.3, "| 8192 |  128 |           1 |     8 |    1063.8 |      31.3 |"),
    ]
    for isl, osl, n, ttft, tpot, raw in rows143:
        yield case(f"tt143-2xh100-qwen2.5-72b-in{isl}-out{osl}-c1", src143, "Qwen2.5-72B-Instruct", q72, p72,
                   "h100-sxm", 2, {"tp": 2, "input_len": isl, "output_len": osl, "concurrency": 1, "num_prompts": n},
                   {"ttft_ms": ttft, "tpot_ms": tpot},
                   "Section 'Performance Benchmarks for Qwen2.5-72B-Instruct on 2xH100' (columns ISL | OSL | "
                   f"Concurrency | N Req | TTFT (ms) | TPOT (ms) | ...); row {raw!r}. vLLM version and dtype not "
                   "stated; bf16 and TP 2 assumed (72B bf16 needs both GPUs); H100 form factor not stated, SXM "
                   "assumed.")
    src340 = "https://github.com/tenstorrent/tt-inference-server/issues/340 (2025-06-24)"
    rows340 = [
        (128, 128, 8, 11.4, 4.6, "|   128 |  128 |           1 |     8 |      11.4 |       4.6 |"),
        (128, 1024, 4, 14.0, 4.7, "|   128 | 1024 |           1 |     4 |      14.0 |       4.7 |"),
        (1024, 128, 4, 26.4, 4.8, "|  1024 |  128 |           1 |     4 |      26.4 |       4.8 |"),
        (2048, 128, 4, 30.9, 5.0, "|  2048 |  128 |           1 |     4 |      30.9 |       5.0 |"),
    ]
    for isl, osl, n, ttft, tpot, raw in rows340:
        yield case(f"tt340-a100-qwen3-1.7b-in{isl}-out{osl}-c1", src340, "Qwen3-1.7B", QWEN3_1_7B, None,
                   "a100-sxm4-80gb", 1, {"input_len": isl, "output_len": osl, "concurrency": 1, "num_prompts": n},
                   {"ttft_ms": ttft, "tpot_ms": tpot},
                   "Section 'Performance Benchmark Sweeps for Qwen3-1.7B on A100' (report 'id_gpu_Qwen3-1.7B_gpu_"
                   f"2025-06-24', model_impl 'gpu'); row {raw!r}. A100 memory size and form factor not stated "
                   "(80GB SXM4 assumed); vLLM version not stated; bf16 assumed. Architecture transcribed from "
                   "Qwen/Qwen3-1.7B config.json.", reliability="low")


def main() -> None:
    for c in (*kv_cases(), *tt_rows()):
        print(json.dumps(c, ensure_ascii=False))


if __name__ == "__main__":
    main()
