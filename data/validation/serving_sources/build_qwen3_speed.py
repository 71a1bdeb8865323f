"""Serving cases from the SGLang tables of Qwen's "Speed Benchmark" for Qwen3 (Qwen3-1.7B and Qwen3-8B).

Source: github.com/QwenLM/Qwen2.5 (the Qwen docs repository), docs/source/getting_started/speed_benchmark.md at
commit c7f51a1 (2025-05-20); a copy is kept beside this script (qwen3_speed_benchmark.md). Environment stated
there: NVIDIA H20 96GB, SGLang 0.4.6.post1, batch size 1, 2048 generated tokens, mem_fraction_static=0.85,
context_length=140000, enable_mixed_chunk=True, AWQ through awq_marlin. Its speed is
(prompt tokens + generated tokens) / time, i.e. total tokens per second at concurrency 1.

Only the two models whose architecture trainfit's cases carry (transcribed config.json) are used.
Run: python build_qwen3_speed.py >> ../serving_dev.jsonl
"""

from __future__ import annotations

import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = "https://github.com/QwenLM/Qwen2.5/blob/c7f51a1a1ce3d4bb750bc545cd2673fff4c5a8f9/docs/source/getting_started/speed_benchmark.md"
CONFIGS = {  # https://huggingface.co/Qwen/<model>/blob/main/config.json (transcribed)
    "Qwen3-1.7B": {"model_type": "qwen3", "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                   "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                   "max_position_embeddings": 40960, "tie_word_embeddings": True, "hidden_act": "silu"},
    "Qwen3-8B": {"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
                 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
                 "max_position_embeddings": 40960, "tie_word_embeddings": False, "hidden_act": "silu"},
}
FORMATS = {"BF16": "bf16", "FP8": "fp8", "GPTQ-Int8": "gptq-int8", "AWQ-INT4": "awq-int4"}
CELL = re.compile(r"<td[^>]*>([^<]*)</td>")


def rows(section: str):
    length = None
    for tr in re.findall(r"<tr>(.*?)</tr>", section, flags=re.S):
        cells = CELL.findall(tr)
        if not cells:
            continue
        if "rowspan" in tr and re.search(r'<td rowspan="\d+">\d+</td>', tr):
            lengths = re.findall(r'<td rowspan="\d+">(\d+)</td>', tr)
            length = int(lengths[-1])
            cells = cells[-4:]
        quant, gpus, speed, note = cells[-4:]
        yield length, quant.strip(), int(gpus), float(speed), note.strip(), " ".join(tr.split())


def main() -> None:
    text = open(os.path.join(HERE, "qwen3_speed_benchmark.md"), encoding="utf-8").read().replace("\xa0", " ")
    for model, hf in CONFIGS.items():
        section = text.split(f"### {model} (SGLang)", 1)[1].split("</table>", 1)[0]
        for length, quant, gpus, speed, note, raw in rows(section):
            if quant not in FORMATS or note:
                continue
            case = {
                "id": f"qwen3-speed-h20-sglang-{model.lower()}-{FORMATS[quant]}-in{length}",
                "source": f"{SRC} (Qwen3 Speed Benchmark, SGLang tables, 2025-05)",
                "reliability": "high", "kind": "serving",
                "model": {"name": model, "hf_config": hf, "params": None, "weight_dtype": FORMATS[quant]},
                "hardware": {"gpu": "h20", "num_gpus": gpus, "gpus_per_node": gpus},
                "serving": {"engine": "sglang", "engine_version": "0.4.6", "tp": gpus, "pp": 1,
                            "kv_cache_dtype": "auto", "gpu_memory_utilization": 0.85, "max_model_len": 140000,
                            "max_num_seqs": None, "max_num_batched_tokens": None, "cuda_graphs": True,
                            "prefix_caching": None, "workload": "fixed", "input_len": length, "output_len": 2048,
                            "concurrency": 1, "request_rate": None, "num_prompts": 1},
                "measured": {"total_tokens_per_s": speed},
                "notes": (f"Table row (model {model}, input length {length}): {raw!r}. Environment: 'NVIDIA H20 "
                          "96GB', 'SGLang 0.4.6.post1'; 'We use a batch size of 1'; 'generating 2048 tokens'; "
                          "'Speed = (tokens_prompt + tokens_generation) / time' (so total tokens/s); "
                          "'mem_fraction_static=0.85', 'context_length=140000' (beyond the config's 40960 "
                          "positions: YaRN). Architecture transcribed from the model's config.json."),
            }
            print(json.dumps(case, ensure_ascii=False))


if __name__ == "__main__":
    main()
