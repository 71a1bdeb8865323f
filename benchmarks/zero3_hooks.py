"""The CPU cost of DeepSpeed ZeRO-3's per-module hooks, measured: the prior of efficiency.yaml's
`zero3_module_overhead_s`.

    python benchmarks/zero3_hooks.py                  # a table, and data/measurements/zero3_hooks_cpu.json
    python benchmarks/zero3_hooks.py --json           # one JSON document
    python benchmarks/zero3_hooks.py --steps 5        # fewer timed steps (smoke test)

Under ZeRO-3 every module that holds parameters is fetched (all-gathered) by a forward pre-hook and released by a
post-hook, and again around its backward; that bookkeeping runs on the CPU, once per module and micro-batch. Here a
Llama with hidden size 64 (so the arithmetic costs next to nothing) trains one process at a time on DeepSpeed's CPU
accelerator over gloo, at 4 and 16 layers, with ZeRO-3 and with ZeRO-0, with full checkpointing and without, and
with PEFT LoRA on every Linear. What ZeRO-3 adds per step, between 4 and 16 layers, divided by the parameter-holding
modules those 12 layers add, is the cost per module and micro-batch. It is a CPU and a DeepSpeed version of this
machine: a GPU host's differs, so the value is fitted wherever ZeRO-3 runs are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "data" / "measurements" / "zero3_hooks_cpu.json"

ONE_RUN = r'''
import json, os, sys, time, torch
import deepspeed
from transformers import LlamaConfig, LlamaForCausalLM
stage, layers, ckpt, lora, steps = (int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1", sys.argv[4] == "1",
                                    int(sys.argv[5]))
cfg = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
                  num_key_value_heads=4, vocab_size=256)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg)
if lora:
    from peft import LoraConfig, get_peft_model
    model = get_peft_model(model, LoraConfig(r=8, target_modules="all-linear", lora_dropout=0.05))
if ckpt:
    if lora:
        model.enable_input_require_grads()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}}, "zero_optimization": {"stage": stage}}
deepspeed.init_distributed(dist_backend="gloo")
engine, *_ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters() if p.requires_grad],
                                  config=ds)
x = torch.randint(0, 256, (1, 8))
def step():
    out = engine(input_ids=x, labels=x)
    engine.backward(out.loss)
    engine.step()
for _ in range(5):
    step()
t0 = time.perf_counter()
for _ in range(steps):
    step()
held = sum(1 for m in model.modules() if any(True for _ in m.parameters(recurse=False)))
print("RESULT " + json.dumps({"step_s": (time.perf_counter() - t0) / steps, "param_modules": held,
                              "modules": sum(1 for _ in model.modules())}))
'''


def run(stage: int, layers: int, ckpt: bool, lora: bool, steps: int, port: int) -> dict:
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1",
               LOCAL_RANK="0", DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", ONE_RUN, str(stage), str(layers), str(int(ckpt)), str(int(lora)),
                           str(steps)], env=env, capture_output=True, text=True, timeout=600)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"run failed (stage {stage}, {layers} layers):\n{proc.stderr[-2000:]}")
    return json.loads(line[len("RESULT "):])


def measure(steps: int, progress=print) -> dict:
    rows, port = [], 29600
    for lora in (False, True):
        for ckpt in (False, True):
            if lora and not ckpt:
                continue  # LoRA runs as the Hugging Face recipes run it: checkpointed
            got = {}
            for layers in (4, 16):
                for stage in (0, 3):
                    port += 1
                    got[(layers, stage)] = run(stage, layers, ckpt, lora, steps, port)
                    progress(f"  lora={lora} ckpt={ckpt} layers={layers} stage={stage}: "
                             f"{got[(layers, stage)]['step_s'] * 1e3:.1f} ms/step")
            added = ((got[(16, 3)]["step_s"] - got[(16, 0)]["step_s"])
                     - (got[(4, 3)]["step_s"] - got[(4, 0)]["step_s"]))
            held = got[(16, 3)]["param_modules"] - got[(4, 3)]["param_modules"]
            plain = got[(16, 3)]["modules"] - got[(4, 3)]["modules"] - held
            rows.append({"lora": lora, "grad_ckpt": ckpt, "zero3_added_s_per_12_layers": round(added, 5),
                         "param_modules_added": held, "other_modules_added": plain,
                         "s_per_param_module": round(added / held, 6),
                         "step_s": {f"{layers}_layers_zero{stage}": round(v["step_s"], 5)
                                    for (layers, stage), v in got.items()}})
    return rows


def versions() -> dict:
    import deepspeed
    import peft
    import torch
    import transformers

    return {"deepspeed": deepspeed.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "peft": peft.__version__, "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=30, help="timed steps per run (after 5 warm-up steps)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-write", action="store_true", help=f"do not write {OUT.relative_to(ROOT)}")
    args = p.parse_args(argv)
    rows = measure(args.steps, progress=(lambda s: None) if args.json else print)
    cpu = next((x.split(":", 1)[1].strip() for x in Path("/proc/cpuinfo").read_text().splitlines()
                if x.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    doc = {"measured": date.today().isoformat(), "what": "DeepSpeed ZeRO-3 per-module hook CPU time",
           "device": f"CPU: {cpu} ({os.cpu_count()} cores), no GPU", "versions": versions(), "steps": args.steps,
           "rows": rows}
    if not args.no_write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(json.dumps(doc, indent=1) + "\n")
    if args.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"{'LoRA':>5} {'ckpt':>5} {'ZeRO-3 adds (12 layers)':>24} {'modules with params':>20} {'per module':>11}")
    for r in rows:
        print(f"{str(r['lora']):>5} {str(r['grad_ckpt']):>5} {r['zero3_added_s_per_12_layers'] * 1e3:>21.1f} ms "
              f"{r['param_modules_added']:>20} {r['s_per_param_module'] * 1e3:>8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
