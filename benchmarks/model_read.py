"""How long `trainfit estimate --model ... --gpu a10 --method lora --json` takes, by how the model is read.

    python benchmarks/model_read.py              # 3 runs per case, the median and the fastest, in seconds
    python benchmarks/model_read.py --runs 5

Each run is a fresh `python -m trainfit` process (what a user waits for), with an empty structure cache
(TRAINFIT_CACHE_DIR in a temporary folder) unless the case says "warm", after one untimed run that writes the
bytecode (as an installed package has it). Cases:
  fast-path preset          a hand-written family (qwen2-7b): no torch
  generic preset            a preset outside the fast path (qwen3-30b-a3b): its read structure ships in its JSON
  fine-tune config.json     a preset's config.json with other token ids, positions and name (a fine-tune's):
                            matched to the shipped structure by architecture, no torch
  new architecture, templated
                            transformers' default glm4_moe config cut to 4 blocks (no preset has this
                            architecture): the glm4_moe structure template answers, no torch
  new architecture, inert key
                            the same config with one key no template has a role for and nothing reads (the config
                            class does not consume it, no build reads it): still the template, no torch
  new architecture, cold    the same config with a structural switch the template does not model (attention_bias
                            true; the template declines): torch + transformers build it on the meta device
  new architecture, warm    that config again: the disk cache answers, no torch
and, for scale, the imports alone: `import torch` and `import torch` + the model code the cold read needs.
No limits are checked here (wall-clock times depend on the machine); README quotes a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        # bytecode cached as an installed package has it (a checkout run with PYTHONDONTWRITEBYTECODE=1 recompiles
        # every module on every start: +0.2 s); kept out of the source tree
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=os.path.join(ROOT, "src"), PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
        sys.path.insert(0, os.path.join(ROOT, "src"))
        from trainfit.catalog import all_models

        ft = dict(all_models()["qwen3-30b-a3b"].hf_config)
        ft.update(eos_token_id=151643, max_position_embeddings=131072, _name_or_path="my-org/qwen3-30b-a3b-sft")
        ft_file = os.path.join(tmp, "finetune.json")
        with open(ft_file, "w") as fh:
            json.dump(ft, fh)
        new_file = os.path.join(tmp, "glm4_moe.json")
        code = ("import json, transformers; c = transformers.AutoConfig.for_model('glm4_moe').to_dict(); "
                "c['num_hidden_layers'] = 4; json.dump(c, open(%r, 'w'))" % new_file)
        subprocess.run([py, "-c", code], check=True, env=env)
        with open(new_file) as fh:
            cut = json.load(fh)
        inert_file = os.path.join(tmp, "glm4_moe_inert_key.json")
        with open(inert_file, "w") as fh:
            json.dump({**cut, "benchmark_key_no_template_knows": 1}, fh)
        cold_file = os.path.join(tmp, "glm4_moe_untemplated.json")
        with open(cold_file, "w") as fh:
            json.dump({**cut, "attention_bias": True}, fh)

        def estimate(model: str) -> list[str]:
            return [py, "-m", "trainfit", "estimate", "--model", model, "--gpu", "a10", "--method", "lora", "--json"]

        rows = []
        for label, argv, warm in [
            ("fast-path preset (qwen2-7b)", estimate("qwen2-7b"), False),
            ("generic preset (qwen3-30b-a3b)", estimate("qwen3-30b-a3b"), False),
            ("fine-tune config.json (qwen3_moe architecture)", estimate(ft_file), False),
            ("new architecture config.json, templated (glm4_moe)", estimate(new_file), False),
            ("new architecture config.json, a key nothing reads (glm4_moe, inert key)", estimate(inert_file), False),
            ("new architecture config.json, cold cache (glm4_moe, attention_bias true)", estimate(cold_file), False),
            ("new architecture config.json, warm cache (glm4_moe, attention_bias true)", estimate(cold_file), True),
            ("python -c 'import torch'", [py, "-c", "import torch"], False),
            ("import torch + glm4_moe model code", [py, "-c", "import torch, "
                                                    "transformers.models.glm4_moe.modeling_glm4_moe"], False),
        ]:
            _run(argv, {**env, "TRAINFIT_CACHE_DIR": os.path.join(tmp, f"warmup-{len(rows)}")})  # bytecode
            times = []
            for i in range(args.runs):
                cache = os.path.join(tmp, "cache-warm" if warm else f"cache-{len(rows)}-{i}")
                if warm and i == 0:
                    _run(argv, {**env, "TRAINFIT_CACHE_DIR": cache})  # fills the cache
                times.append(_run(argv, {**env, "TRAINFIT_CACHE_DIR": cache}))
            rows.append((label, statistics.median(times), min(times)))
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  median s  fastest s   ({args.runs} runs, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f})")
    for label, med, best in rows:
        print(f"{label:<{width}}  {med:8.2f}  {best:9.2f}")


if __name__ == "__main__":
    main()
