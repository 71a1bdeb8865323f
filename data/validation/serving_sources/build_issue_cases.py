"""Serving cases transcribed by hand from GitHub issues and repositories (engine start-up logs and benchmark tables),
one entry per measurement, each with the quoted text it comes from. Run: python build_issue_cases.py >> ../serving_dev.jsonl

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


QWEN3_32B = {  # https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json (transcribed)
    "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64,
    "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "hidden_act": "silu"}

DENNIS = "https://github.com/dennislee22/vLLM-benchmarking/blob/{commit}/log/{name}"
LLMD = ("https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/"
        "empirical-vllm-memory-results.md")
LLMD_VERSION = ("0.11.0 (the same document states 'vLLM version: 0.11.0 (V1 engine)' for its Mistral-Small run and "
                "the image vllm/vllm-openai:latest for all runs)")


def kv_log_cases():
    """Start-up logs kept in repositories: vLLM 0.10.1.1 on A100 (dennislee22/vLLM-benchmarking, one log per run),
    vLLM 0.11 on H100 (llm-d/llm-d-benchmark's table of logged values), SGLang 0.4.3 on 4 x L4, vLLM 0.2.4 on
    2 x RTX 4090 (vllm-project/vllm#2136)."""
    q7, p7 = preset("qwen2-7b")
    runs = [  # file, commit, gpu, tp, utilisation, sampler line, loaded GiB, KV GiB, tokens, concurrency, blocks
        ("vllm-7B-1gpuA10080GB-0.25GRAM.log", "391660db66f5a6e44ea8ed82decf48a88e55e992", "a100-sxm4-80gb", 1, 0.25,
         "Using FlashInfer for top-p & top-k sampling.", "14.2488", 5.01, 93872, 5.73, 5867),
        ("vllm-7B-1gpuA10080GB-0.5GRAM.log", "608c86e90fc1ab6071c6bb8a673046ab9cd65062", "a100-sxm4-80gb", 1, 0.5,
         "Using FlashInfer for top-p & top-k sampling.", "14.2488", 24.83, 464848, 28.37, 29053),
        ("vllm-7B-2gpuA10080GB-0.5GRAM-same-node.log", "e514a58512f7c1ced8a2bffb191be171e7ad99b2", "a100-sxm4-80gb",
         2, 0.5, "Using FlashInfer for top-p & top-k sampling.", "7.1217", 31.83, 1192160, 72.76, 74510),
        ("vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes.log", "89771826649777b1127b11adaf18514eb24ff099", "a100-sxm4-40gb",
         2, 0.5, "FlashInfer is not available. Falling back to the PyTorch-native implementation of top-p & top-k "
         "sampling.", "7.1217", 11.03, 412944, 25.20, 25809),
    ]
    for name, commit, gpu, tp, util, sampler_line, loaded, kv_gib, tokens, conc, blocks in runs:
        yield case(
            f"dennislee22-{gpu}-qwen2-7b-tp{tp}-u{util}-kv", DENNIS.format(commit=commit, name=name) + " (2025-09)",
            "Qwen2-7B-Instruct", q7, p7, gpu, tp,
            {"engine_version": "0.10.1.1", "tp": tp, "gpu_memory_utilization": util, "max_model_len": 16384,
             "max_num_batched_tokens": 2048, "prefix_caching": True,
             "sampler": "flashinfer" if sampler_line.startswith("Using FlashInfer") else "pytorch",
             **({"custom_all_reduce": False} if tp > 1 else {})},
            {"kv_cache_tokens": tokens, "kv_cache_gib": kv_gib, "max_concurrency": conc},
            f"Log {name}: 'vLLM API server version 0.10.1.1', non-default args 'max_model_len': 16384, "
            f"{'' if tp == 1 else repr('tensor_parallel_size') + ': ' + str(tp) + ', '}'gpu_memory_utilization': {util}; "
            "'Chunked prefill is enabled with max_num_batched_tokens=2048.'; "
            f"'{sampler_line}'; 'Model loading took {loaded} GiB'; 'Available KV cache memory: {kv_gib:.2f} GiB'; "
            f"'GPU KV cache size: {tokens:,} tokens'; 'Maximum concurrency for 16,384 tokens per request: "
            f"{conc:.2f}x'; 'num_gpu_blocks is: {blocks}'. GPU from the log's file name ('{name}') and the README "
            "('tested on a system equipped with NVIDIA A100 80GB GPU'); the form factor is not stated (SXM4 assumed; "
            "the 80GB and 40GB parts have the same memory in either form)."
            + (" The two TP ranks run in two pods on two nodes (Ray): 'Custom allreduce is disabled because this process "
               "group spans across nodes.'; the README's heading says A100 80GB but this log's file name says A100 "
               "40GB, and only 40GB is consistent with the logged numbers." if "diff" in name else "")
            + (" 'Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.'"
               if "same-node" in name else ""),
            reliability="medium")
    l8, pl8 = preset("llama-3.1-8b")
    l70, pl70 = preset("llama-3.1-70b")
    q06, pq06 = preset("qwen3-0.6b")
    rows = [  # id, model, hf, params, weights format, tp, max len, weights GiB, activation GiB, non-torch GiB, KV GiB
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", l8, pl8, "bf16", 1, 16000, 14.99, 4.76, 0.13, 51.38),
        ("qwen3-0.6b-len16000", "Qwen/Qwen3-0.6B", q06, pq06, "bf16", 1, 16000, 1.12, 5.56, 0.13, 64.45),
        ("qwen3-0.6b-len32000", "Qwen/Qwen3-0.6B", q06, pq06, "bf16", 1, 32000, 1.12, 5.56, 0.13, 64.45),
        ("qwen3-32b-tp1", "Qwen/Qwen3-32B", QWEN3_32B, None, "bf16", 1, 16000, 61.03, 5.64, 0.14, 4.45),
        ("qwen3-32b-tp2", "Qwen/Qwen3-32B", QWEN3_32B, None, "bf16", 2, 16000, 30.59, 5.64, 0.54, 34.49),
        ("llama-3.3-70b-fp8-tp2", "RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", l70, pl70, "fp8", 2, 16000, 33.88,
         4.84, 0.55, 32.0),
    ]
    for id_, model, hf, params, fmt, tp, max_len, w, act, nt, kv in rows:
        yield case(
            f"llmd-h100-{id_}-kv", LLMD + " (2025-11)", model, hf, params, "h100-sxm", tp,
            {"tp": tp, "gpu_memory_utilization": 0.9, "max_model_len": max_len, "block_size": 128,
             "prefix_caching": True},
            {"kv_cache_gib": kv, "weights_gib": w},
            f"Summary table row and detailed section for {model}: 'max-model-len: {max_len}', 'tensor-parallel-size: "
            f"{tp}', 'gpu-memory-utilization: 0.9', 'Model loading took: {w:.2f} GiB', 'Peak activation memory: "
            f"{act:.2f} GiB', 'Non-torch memory: {nt:.2f} GiB', 'Available KV cache memory: {kv} GiB'; 'H100 GPUs "
            "(79.18 GiB total memory)' (form factor not stated, SXM assumed: the same memory either way); replication "
            "template: 'vllm/vllm-openai:latest', '--block-size=128', '--enable-prefix-caching'. Only the KV cache's "
            "GiB is logged (no token count) for this model."
            + (" Weights: compressed-tensors FP8 (dynamic per-token activations), read as fp8." if fmt == "fp8" else "")
            + (" Architecture transcribed from Qwen/Qwen3-32B config.json." if hf is QWEN3_32B else ""),
            weight_dtype=fmt, inferred=LLMD_VERSION)
    q32, p32 = preset("qwen2.5-32b")
    yield case(
        "sglang-didier-durand-4xl4-qwq-32b-tp4-kv",
        "https://github.com/didier-durand/llms-in-clouds/blob/3e1df42ab328cb05c90df01ef331a1214ed6e336/docs/sglang.md "
        "(2025-03-08)", "Qwen/QwQ-32B", q32, p32, "l4", 4,
        {"engine": "sglang", "engine_version": "0.4.3.post4", "tp": 4, "gpu_memory_utilization": 0.85,
         "max_num_batched_tokens": 2048},
        {"kv_cache_tokens": 46611},
        "Section 'SGLang start sequence with Qwen QwQ-32B' on 'an EC2 instance of type g6.12xlarge ... featuring 4 x "
        "NVIDIA L4 Tensor Core GPUs'; Dockerfile in the same document: 'ARG SGL_VERSION=\"0.4.3.post4\"'. Log: "
        "server_args '... mem_fraction_static=0.85, ... chunked_prefill_size=2048, ... tp_size=4'; 'Load weight "
        "begin. avail mem=21.63 GB'; 'Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=6.09 "
        "GB, mem usage=15.54 GB.'; 'KV Cache is allocated. #tokens: 46611, K size: 1.42 GB, V size: 1.42 GB'; "
        "'max_total_num_tokens=46611'. QwQ-32B has Qwen2.5-32B's architecture (Qwen2ForCausalLM, 64 layers, 8 KV "
        "heads); trainfit's qwen2.5-32b preset is used. mem_fraction_static is carried in gpu_memory_utilization.",
        inferred=None)
    l13, pl13 = preset("llama-2-13b")
    codellama = dict(l13, vocab_size=32016, max_position_embeddings=16384, rope_theta=1000000.0)
    yield case(
        "vllm-2136-2x4090-codellama-13b-tp2-kv", "https://github.com/vllm-project/vllm/issues/2136 (2023-12-15)",
        "CodeLlama-13B-Instruct-fp16", codellama, None, "rtx4090", 2,
        {"engine_version": "0.2.4", "tp": 2, "gpu_memory_utilization": 0.95, "max_model_len": 16384,
         "max_num_seqs": 16},
        {"kv_cache_tokens": 1464 * 16},
        "'GPUs: 2x 4090 (2x24GB)'; 'vLLM 0.2.3: `# GPU blocks: 1464, # CPU blocks: 1310`' and 'vLLM 0.2.4: `# GPU "
        "blocks: 1464, # CPU blocks: 1310`' (0.2.5 and main: 112 blocks, the regression the issue reports; not used). "
        "Command: '--model=TheBloke/CodeLlama-13B-Instruct-fp16 ... --max-model-len=16384 --max-num-seqs=16 "
        "--tensor-parallel-size=2 --swap-space=8 --gpu-memory-utilization=0.95'. kv_cache_tokens = 1464 blocks x 16 "
        "(vLLM's default block size). Architecture: Llama-2-13B's (trainfit preset) with CodeLlama's vocab_size 32016, "
        "max_position_embeddings 16384 and rope_theta 1e6 (codellama/CodeLlama-13b-Instruct-hf config.json).",
        weight_dtype="fp16")


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
    for c in (*kv_cases(), *tt_rows(), *kv_log_cases()):
        print(json.dumps(c, ensure_ascii=False))


if __name__ == "__main__":
    main()
