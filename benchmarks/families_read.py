"""How long `trainfit estimate --model <config.json> --gpu a10 --method lora --json` takes for each family of
tests/test_trace_families.py (issue 12's acceptance: under 2 s with transformers installed).

    python benchmarks/families_read.py              # 3 runs per family, the median and the fastest, in seconds

Each family's config.json is transformers' default config for its type (`AutoConfig.for_model(type).to_dict()`, every
key a config.json carries) cut to the blocks FAMILIES keeps (per-layer lists cut with it). Each run is a fresh
`python -m trainfit` process with an empty structure cache, after one untimed run that writes the bytecode (as
benchmarks/model_read.py). "template" says whether the type's structure template answers the file (no torch);
"torch" whether the estimate process imported torch (checked in one extra run). No limits are checked here.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def families() -> dict[str, tuple[int, str]]:
    """FAMILIES of tests/test_trace_families.py, read as the literal it is (importing the test imports torch)."""
    with open(os.path.join(ROOT, "tests", "test_trace_families.py")) as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FAMILIES" for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit("FAMILIES not found")


def _run(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return dt, proc.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from trainfit.catalog.generic import from_template, text_config

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(PYTHONPATH=os.path.join(ROOT, "src"), PYTHONPYCACHEPREFIX=os.path.join(tmp, "pycache"))
        for model_type, (layers, _) in sorted(families().items()):
            file = os.path.join(tmp, f"{model_type}.json")
            code = ("import json, transformers; c = transformers.AutoConfig.for_model(%r).to_dict(); "
                    "n = c['num_hidden_layers']; c = {k: (v[:%d] if isinstance(v, list) and len(v) == n else v) "
                    "for k, v in c.items()}; c['num_hidden_layers'] = %d; json.dump(c, open(%r, 'w'))"
                    % (model_type, layers, layers, file))
            subprocess.run([py, "-c", code], check=True, env=env)
            with open(file) as fh:
                cfg = json.load(fh)
            templated = from_template(*text_config(cfg)[:1], model_type, "", None, "", cfg) is not None
            argv = [py, "-m", "trainfit", "estimate", "--model", file, "--gpu", "a10", "--method", "lora", "--json"]
            _run(argv, {**env, "TRAINFIT_CACHE_DIR": os.path.join(tmp, f"warmup-{model_type}")})  # bytecode
            times = [_run(argv, {**env, "TRAINFIT_CACHE_DIR": os.path.join(tmp, f"c-{model_type}-{i}")})[0]
                     for i in range(args.runs)]
            probe = ("import runpy, sys; sys.argv = %r; sys.stdout = open(%r, 'w')\n"
                     "try:\n    runpy.run_module('trainfit', run_name='__main__')\nexcept SystemExit:\n    pass\n"
                     "sys.stdout = sys.__stdout__; print('torch' in sys.modules)"
                     % (["trainfit", *argv[3:]], os.devnull))
            torch = _run([py, "-c", probe], {**env, "TRAINFIT_CACHE_DIR": os.path.join(tmp, f"p-{model_type}")})[1]
            rows.append((f"{model_type} (cut to {layers})", statistics.median(times), min(times), templated,
                         torch.strip().splitlines()[-1] == "True"))
    width = max(len(r[0]) for r in rows)
    print(f"{'family config.json':<{width}}  median s  fastest s  template  torch   ({args.runs} runs, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    for label, med, best, templated, torch in rows:
        print(f"{label:<{width}}  {med:8.2f}  {best:9.2f}  {'yes' if templated else 'no':8s}  {'yes' if torch else 'no'}")


if __name__ == "__main__":
    main()
