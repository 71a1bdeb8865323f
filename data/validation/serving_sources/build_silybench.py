"""Serving cases from silybench-data (github.com/tgarg01/silybench-data, commit 93e4887): vLLM 0.30.0 on one H100
80GB (GCP a3-highgpu-1g), Qwen/Qwen3-8B in bf16 and with `--quantization fp8`, `--max-model-len 16384
--gpu-memory-utilization 0.9`, `vllm bench` with fixed input/output lengths at fixed concurrencies.

- KV capacity: `kv_cache_tokens` of runs/<run>/result.json (377024 for the bf16 run, 430272 for fp8).
- Throughput: `output_throughput` (mean output tokens/s) of derived/csv/perf_points.csv; the rows used are copied
  verbatim into silybench_perf_points_excerpt.csv beside this script. The source gives TTFT and TPOT only as
  p95 / p99, kept in ttft_ms_p99 / tpot_ms_p99 (the validator compares means, so they are not compared).

Run: python build_silybench.py >> ../serving_dev.jsonl
"""

from __future__ import annotations

import csv
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = "https://github.com/tgarg01/silybench-data/blob/93e4887353137e64bd5605fa3d1f4529da0a1dc5"
QWEN3_8B = {  # https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json (transcribed)
    "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "hidden_act": "silu"}
RUNS = {  # run id -> (weight dtype, kv_cache_tokens in its result.json, serving_args quoted)
    "20260924T125045Z_h100-80gbx1_qwen3-8b_bf16": ("bf16", 377024, "--max-model-len 16384 "
                                                   "--gpu-memory-utilization 0.9 ... --dtype bfloat16 "
                                                   "--tensor-parallel-size 1"),
    "20260924T225750Z_h100-80gbx1_qwen3-8b_fp8": ("fp8", 430272, "--max-model-len 16384 "
                                                  "--gpu-memory-utilization 0.9 ... --quantization fp8 "
                                                  "--tensor-parallel-size 1"),
}


def base(run: str, serving: dict, measured: dict, notes: str, source: str) -> dict:
    dtype = RUNS[run][0]
    sv = {"engine": "vllm", "engine_version": "0.30.0", "tp": 1, "pp": 1, "kv_cache_dtype": "auto",
          "gpu_memory_utilization": 0.9, "max_model_len": 16384, "max_num_seqs": None,
          "max_num_batched_tokens": None, "cuda_graphs": True, "prefix_caching": None, "workload": "fixed",
          "input_len": None, "output_len": None, "concurrency": None, "request_rate": None, "num_prompts": None}
    sv.update(serving)
    return {"id": "", "source": source, "reliability": "high", "kind": "serving",
            "model": {"name": "Qwen3-8B", "hf_config": QWEN3_8B, "params": None, "weight_dtype": dtype},
            "hardware": {"gpu": "h100-sxm", "num_gpus": 1, "gpus_per_node": 1}, "serving": sv,
            "measured": measured, "notes": notes}


def main() -> None:
    for run, (dtype, tokens, args) in RUNS.items():
        c = base(run, {}, {"kv_cache_tokens": tokens},
                 f"result.json: '\"kv_cache_tokens\": {tokens}', serving_args {args!r}, engine_image "
                 "'vllm/vllm-openai:v0.30.0', hardware 'H100-80GB' on 'a3-highgpu-1g' (H100 SXM). Architecture "
                 "transcribed from Qwen/Qwen3-8B config.json.", f"{REPO}/runs/{run}/result.json (2026-09-24)")
        c["id"] = f"silybench-h100-qwen3-8b-{dtype}-kv"
        print(json.dumps(c, ensure_ascii=False))
    with open(os.path.join(HERE, "silybench_perf_points_excerpt.csv"), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    header = lines[0].split(",")
    for line in lines[1:]:
        row = dict(zip(header, next(csv.reader([line]))))
        run = row["run_id"]
        dtype = RUNS[run][0]
        isl, osl, conc = int(row["input_len"]), int(row["output_len"]), int(row["concurrency"])
        c = base(run, {"input_len": isl, "output_len": osl, "concurrency": conc,
                       "num_prompts": int(row["num_prompts"])},
                 {"output_tokens_per_s": float(row["output_throughput"]),
                  "ttft_ms_p99": float(row["ttft_p99_ms"]), "tpot_ms_p99": float(row["tpot_p99_ms"])},
                 f"perf_points.csv row {line[:160]!r}... (output_throughput is column 21). Workload "
                 f"{row['workload']}: {isl} input / {osl} output tokens, {conc} requests in flight, "
                 f"{row['num_prompts']} prompts x {row['repeats']} repeats. TTFT/TPOT only as p95/p99 in the "
                 "source.", f"{REPO}/derived/csv/perf_points.csv (2026-09-24)")
        c["id"] = f"silybench-h100-qwen3-8b-{dtype}-{row['workload']}-c{conc}"
        print(json.dumps(c, ensure_ascii=False))


if __name__ == "__main__":
    main()
