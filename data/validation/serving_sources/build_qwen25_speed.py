"""Turn the vLLM tables of Qwen's "Qwen2.5 Speed Benchmark" into serving cases (SERVING_SCHEMA.md).

Source: github.com/QwenLM/Qwen2.5, docs/source/benchmark/speed_benchmark.rst at commit a912d23 (2024-11-06),
published as https://qwen.readthedocs.io/en/v2.5/benchmark/speed_benchmark.html; a copy of the file is kept beside
this script (qwen2.5_speed_benchmark.rst). Its benchmark script (examples/speed-benchmark/speed_benchmark_vllm.py,
same repository) times one `llm.generate([query])` call of `max_tokens=2048` and reports output_len / time: so
"Speed(tokens/s)" is output tokens per second at concurrency 1, prefill included.

Usage: python build_qwen25_speed.py > cases.jsonl  (numbers are copied, never edited)
"""

from __future__ import annotations

import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = "https://github.com/QwenLM/Qwen2.5/blob/a912d23/docs/source/benchmark/speed_benchmark.rst"
FORMATS = {"BF16": "bf16", "GPTQ-Int8": "gptq-int8", "GPTQ-Int4": "gptq-int4", "AWQ": "awq-int4"}
SETTING = re.compile(r"\*\s*\[([^\]]+)\]=\(gpu_memory_utilization=([\d.]+) max_model_len=(\d+) "
                     r"enforce_eager=(True|False)\)")


def presets() -> dict:
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "src"))
    from trainfit.catalog import get_model

    return {size: get_model(f"qwen2.5-{size.lower()}") for size in ("0.5B", "1.5B", "3B", "7B", "14B", "32B", "72B")}


def sections(text: str):
    """(size, table lines, legend {note: (util, max_len, eager)}) of each '(vLLM)' section."""
    parts = re.split(r"^-\s+([\d.]+B) \((vLLM|Transformer)\)\s*$", text, flags=re.M)
    for i in range(1, len(parts), 3):
        size, kind, body = parts[i], parts[i + 1], parts[i + 2]
        if kind != "vLLM":
            continue
        legend = {m.group(1).strip().lower(): (float(m.group(2)), int(m.group(3)), m.group(4) == "True")
                  for m in SETTING.finditer(body)}
        legend.setdefault("default setting", (0.9, 32768, False))
        yield size, [ln for ln in body.splitlines() if ln.startswith("|")], legend


def rows(lines):
    model = length = None
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if len(cells) < 5 or not re.match(r"^[\d.]+$", cells[4]):
            continue
        model = cells[0] or model
        length = cells[1] or length
        yield model, int(length), cells[2], int(cells[3]), float(cells[4]), (cells[5] if len(cells) > 5 else ""), ln


def setting_for(note: str, legend: dict):
    n = note.strip().lower()
    if n in ("", "default", "new sample config"):
        return legend["default setting"]
    return legend.get(n)


def main() -> None:
    text = open(os.path.join(HERE, "qwen2.5_speed_benchmark.rst"), encoding="utf-8").read()
    ps = presets()
    for size, lines, legend in sections(text):
        preset = ps[size]
        for model, length, quant, gpus, speed, note, raw in rows(lines):
            st = setting_for(note, legend)
            if st is None:
                print(f"skip (unknown note {note!r}): {raw}", file=sys.stderr)
                continue
            util, max_len, eager = st
            case = {
                "id": f"qwen25-speed-a100-{model.lower()}-{FORMATS[quant]}-in{length}-tp{gpus}"
                      + (f"-{note.lower().replace(' ', '')}" if note and note.lower() != "default" else ""),
                "source": f"{SRC} (Qwen2.5 Speed Benchmark, vLLM tables, 2024-11)",
                "reliability": "high", "kind": "serving",
                "model": {"name": model, "hf_config": preset.hf_config, "params": preset.params,
                          "weight_dtype": FORMATS[quant]},
                "hardware": {"gpu": "a100-sxm4-80gb", "num_gpus": gpus, "gpus_per_node": gpus},
                "serving": {"engine": "vllm", "engine_version": "0.6.3", "tp": gpus, "pp": 1,
                            "kv_cache_dtype": "auto", "gpu_memory_utilization": util, "max_model_len": max_len,
                            "max_num_seqs": None, "max_num_batched_tokens": None, "cuda_graphs": not eager,
                            "prefix_caching": False, "workload": "fixed", "input_len": length, "output_len": 2048,
                            "concurrency": 1, "request_rate": None, "num_prompts": 1},
                "measured": {"output_tokens_per_s": speed},
                "notes": (f"Table row: {raw.strip()!r}. Environment: NVIDIA A100 80GB, CUDA 12.1, vLLM 0.6.3; "
                          "'We use the batch size of 1'; 'generating 2048 tokens'. Speed = output_len / time of one "
                          "generate() call (speed_benchmark_vllm.py collect_statistics), so prefill is included. "
                          f"Setting {note or 'Default'}: gpu_memory_utilization={util} max_model_len={max_len} "
                          f"enforce_eager={eager}. Architecture from trainfit's {preset.name} preset "
                          f"({preset.source}); the Instruct model has the same shapes. The A100 80GB variant is not "
                          "stated; taken as SXM4."),
            }
            print(json.dumps(case, ensure_ascii=False))


if __name__ == "__main__":
    main()
