"""Peers side by side: trainfit's prediction error next to other tools' errors on the same validation cases.

    python benchmarks/peers.py                          # data/validation/published_dev.jsonl, a table
    python benchmarks/peers.py more.jsonl --json        # other case files; one JSON document
    python benchmarks/peers.py --limit 40               # the first 40 cases only (smoke test)

Every case (format: data/validation/SCHEMA.md) is turned into specs by trainfit's own reader
(`trainfit.validate.predict_case`), so each tool sees the same model, parameter count, GPU count and layout.
trainfit's numbers are exactly what `trainfit validate` reports for the case (memory by the counter the source
measured, `memory_of_kind`). Peers are compared with the measured `peak_memory_gib` (they do not distinguish
allocated / reserved memory) and with tokens/s per GPU (else step time). Errors are |pred - meas| / meas.

Peers, each used within its own scope, and never faked:
  deepspeed     DeepSpeed's ZeRO model-state estimators (weights + gradients + optimizer states, no activations):
                `estimate_zero2_model_states_mem_needs` in deepspeed/runtime/zero/stage_1_and_2.py and
                `estimate_zero3_model_states_mem_needs` in deepspeed/runtime/zero/stage3.py. The formulas they
                evaluate are restated below (importing them imports torch, which this script keeps out);
                tests/test_peers.py checks the numbers against the installed functions.
  accelerate    `accelerate estimate-memory`'s "Training using Adam" column (`estimate_training_usage` and
                `gather_data` in accelerate/commands/estimate.py): bytes per parameter, restated below and
                checked against the installed code the same way.
  llm-analysis  cli99/llm-analysis's `LLMAnalysis.training` (llm_analysis/analysis.py), called through its Python
                API when the package can be imported; otherwise its rows say why not.

No tool's numbers are tuned here: peers run with their own defaults, which the output lists.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shlex
import sys
from collections import Counter
from importlib import metadata

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CASES = os.path.join(ROOT, "data", "validation", "published_dev.jsonl")

try:  # the venv installs trainfit (editable); a bare checkout still works
    import trainfit  # noqa: F401
except ImportError:  # pragma: no cover
    sys.path.insert(0, os.path.join(ROOT, "src"))

from trainfit.catalog.efficiency import Efficiencies  # noqa: E402
from trainfit.estimate.params import count_params, largest_module_params  # noqa: E402
from trainfit.estimate.trainable import head_for  # noqa: E402
from trainfit.spec.training import (Attention, Fsdp, GradCkpt, Offload, Optimizer,  # noqa: E402
                                    Precision, Task)
from trainfit.validate import (Skip, comparable, load_cases, metric_key, predict_case,  # noqa: E402
                               validate)

GiB = 2**30
METRICS = ("memory", "throughput")
METRIC_TITLES = {"memory": "Peak memory per GPU (GiB) vs measured peak_memory_gib",
                 "throughput": "Throughput: tokens/s per GPU where measured, else step time"}
FULL_ONLY = {"lora": "LoRA/QLoRA: estimator models full training only",
             "qlora": "LoRA/QLoRA: estimator models full training only",
             "freeze": "freeze (partial fine-tuning): estimator models full training only"}
NOT_ESTIMATED = "{metric}: not estimated by this tool"


class PeerSkip(Exception):
    """This peer cannot predict this case (the message is the counted reason)."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


# ---- which cases each metric compares ----------------------------------------------------------------------------

def considered(case: dict, metric: str) -> bool:
    """The cases a metric is compared on: trainfit.validate's own rule."""
    return comparable(case, metric)


def throughput_ape(pred: dict, meas: dict) -> tuple[float, float]:
    """(predicted value, APE) on tokens/s per GPU where measured, else on step time (validate's metric_key)."""
    key = metric_key(meas, "throughput")
    return pred[key], abs(pred[key] - meas[key]) / meas[key]


# ---- peer 1: DeepSpeed's ZeRO model-state estimators -------------------------------------------------------------
# What DeepSpeed 0.19.x's estimate_zero2_model_states_mem_needs (deepspeed/runtime/zero/stage_1_and_2.py) and
# estimate_zero3_model_states_mem_needs (stage3.py) return as GPU bytes, for Ψ parameters on N GPUs:
#   ZeRO-2: 2Ψ (16-bit weights) + 18Ψ/N (16-bit and fp32 gradients, fp32 weights, two Adam moments), the second
#           term gone with the optimizer offloaded;
#   ZeRO-3: 4 bytes x the largest layer's parameters, + 18Ψ/N, or + 2Ψ/N with the optimizer offloaded, or nothing
#           more with the parameters offloaded too.
# The fractional terms are truncated to whole bytes as DeepSpeed does. tests/test_peers.py checks these numbers
# against the installed functions.

def deepspeed_gpu_bytes(stage: int, total_params: int, num_gpus_per_node: int = 1, num_nodes: int = 1,
                        cpu_offload: bool = False, cpu_offload_params: bool = False,
                        largest_layer_params: int = 0) -> int:
    gpus = num_gpus_per_node * num_nodes
    if stage == 3:
        sharded = 0 if (cpu_offload and cpu_offload_params) else (2 if cpu_offload else 18)
        return 4 * largest_layer_params + int(sharded * total_params / gpus)
    return 2 * total_params + (0 if cpu_offload else int(18 * total_params / gpus))


def deepspeed_inputs(est) -> dict:
    """The estimator call a DeepSpeed user would make for this case (ZeRO-3 formula for ZeRO-3 / FSDP full_shard,
    ZeRO-2 formula otherwise; no sharding at all (DDP, single GPU) = the ZeRO-2 formula on 1 GPU)."""
    s, m = est.strategy, est.model
    off = s.offload != Offload.NONE
    if s.zero_stage == 3 or s.fsdp == Fsdp.FULL_SHARD:
        return dict(stage=3, total_params=est.split.total,
                    largest_layer_params=largest_module_params(m, head_for(m, est.training.task)),
                    num_gpus_per_node=s.gpus_per_node, num_nodes=s.nodes, cpu_offload=off,
                    cpu_offload_params=s.offload == Offload.ALL)
    if s.zero_stage in (1, 2) or s.fsdp == Fsdp.SHARD_GRAD_OP:
        return dict(stage=2, total_params=est.split.total, num_gpus_per_node=s.gpus_per_node, num_nodes=s.nodes,
                    cpu_offload=off)
    return dict(stage=2, total_params=est.split.total, num_gpus_per_node=1, num_nodes=1, cpu_offload=off)


def deepspeed_memory(case: dict, est) -> float:
    return deepspeed_gpu_bytes(**deepspeed_inputs(est)) / GiB


# ---- peer 2: accelerate estimate-memory ---------------------------------------------------------------------------

# accelerate 1.x `estimate-memory` (accelerate/commands/estimate.py, estimate_training_usage): "Training using
# Adam" is the largest of its model / gradients / optimizer / step sizes, which for a model of S fp32 bytes is
# 4S (fp32: the step) or 2S (float16 / bfloat16, and fp8 without MS-AMP: the optimizer) — 16 or 8 bytes per
# parameter; int8 / int4 rows have no training figure. tests/test_peers.py checks this against the installed code.
ACC_TRAINING_FACTOR = {"float32": 4, "float16": 2, "bfloat16": 2, "fp8": 2}


def accelerate_training_bytes(fp32_model_bytes: int, dtype: str) -> int | None:
    factor = ACC_TRAINING_FACTOR.get(dtype)
    return None if factor is None else factor * fp32_model_bytes


# `accelerate estimate-memory --dtypes` offers float32 / float16 / int8 / int4; mixed bf16 / fp16 (and fp8, which
# estimate_training_usage treats alike without MS-AMP) is the float16 row.
ACC_DTYPE = {Precision.FP32: "float32", Precision.BF16: "float16", Precision.FP16: "float16",
             Precision.FP8: "float16"}


def accelerate_inputs(est) -> dict:
    """gather_data: the model is `AutoModel.from_config(config, torch_dtype=torch.float32)` on the meta device — the
    bare model, without the LM / task head — and total_size = numel x 4 bytes. count_params(m, "none") is that
    bare model in trainfit's inventory."""
    params = count_params(est.model, "none")
    return dict(params=params, total_size=4 * params, dtype=ACC_DTYPE[est.training.precision])


def accelerate_memory(case: dict, est) -> float:
    args = accelerate_inputs(est)
    usage = accelerate_training_bytes(args["total_size"], args["dtype"])
    if usage is None:
        raise PeerSkip("dtype without a training estimate")
    return usage / GiB


# ---- peer 3: llm-analysis ----------------------------------------------------------------------------------------

LLMA_NOT_INSTALLED = ("llm-analysis is not installed: its latest PyPI release (0.2.2) pins transformers<5 and "
                      "huggingface-hub<0.15, so it cannot share this project's venv; `make peers` installs it "
                      "without its dependencies into .venv/peers")
# `make peers` puts llm-analysis here (pip install --no-deps --target): used when present.
PEERS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "peers")


def load_llm_analysis():
    """(module, config module, None) or (None, None, reason). llm_analysis.config imports transformers' AutoConfig
    only for Hub look-ups, inside try/except ImportError: it is hidden during the import so transformers (and
    through it torch) stay out of this process."""
    logging.getLogger("__name__").setLevel(logging.ERROR)  # llm_analysis/logger.py's logger (sic: "__name__")
    if os.path.isdir(PEERS_DIR) and PEERS_DIR not in sys.path:
        sys.path.append(PEERS_DIR)
    hide = "transformers" not in sys.modules
    if hide:
        sys.modules["transformers"] = None  # type: ignore[assignment]
    try:
        import llm_analysis.analysis as la
        import llm_analysis.config as lac
    except ImportError as exc:
        missing = getattr(exc, "name", "") or ""
        if missing == "llm_analysis" or missing.startswith("llm_analysis."):
            return None, None, LLMA_NOT_INSTALLED
        return None, None, f"llm-analysis does not import: {exc}"[:160]
    except Exception as exc:  # noqa: BLE001 — a broken install is a reason, not a crash
        return None, None, f"llm-analysis does not import: {type(exc).__name__}: {exc}"[:160]
    finally:
        if hide:
            sys.modules.pop("transformers", None)
    return la, lac, None


class LlmAnalysisPeer:
    def __init__(self):
        self.la, self.lac, self.reason = load_llm_analysis()
        self.version = _version("llm-analysis")
        self.flops_efficiency = self.hbm_efficiency = None
        if self.la is not None:
            # train()'s defaults: flops_efficiency None -> FLOPS_EFFICIENCY, hbm_memory_efficiency
            # HBM_MEMORY_EFFICIENCY (llm_analysis/constant.py)
            self.flops_efficiency = getattr(self.la, "FLOPS_EFFICIENCY", None)
            self.hbm_efficiency = getattr(self.la, "HBM_MEMORY_EFFICIENCY", None)
        self.oom_flagged = 0

    @property
    def available(self) -> bool:
        return self.la is not None

    def _configs(self, est, mem_gb: float | None = None):
        la, lac = self.la, self.lac
        m, t, s, gpu = est.model, est.training, est.strategy, est.gpu
        if t.precision == Precision.FP32:
            raise PeerSkip("fp32 training: only 4/8/16-bit GEMM dtypes")
        if t.precision == Precision.FP8:
            raise PeerSkip("fp8 training: no fp8 dtype (w8a8 = int8 weights)")
        if s.offload != Offload.NONE:
            raise PeerSkip("CPU offload: not modelled")
        if t.task == Task.DPO:
            raise PeerSkip("DPO: not modelled")
        if t.optimizer in (Optimizer.ADAMW, Optimizer.LAMB):
            other_op_bytes = None if t.param_dtype == "fp32" else 4  # Adam: fp32 m, v; pure bf16: bf16 m, v
        elif t.optimizer == Optimizer.ADAMW_8BIT:
            other_op_bytes = 2  # two 8-bit states, as its docstring says to type for other optimizers
        else:
            raise PeerSkip(f"optimizer {t.optimizer.value}: no byte count to type in")
        peak = gpu.peak(t.precision.value)
        if not peak:
            raise PeerSkip(f"{gpu.id}: no {t.precision.value} peak in the catalog")
        # Gated MLPs (SwiGLU): llm-analysis counts 2 x h x ffn MLP weights; ffn = 1.5 x intermediate gives the true
        # 3 x h x intermediate (its shipped Llama-2-7B config rounds this to 4h = 16384).
        ffn = m.intermediate * (1.5 if m.gated_mlp else 1)
        model = lac.ModelConfig(name=m.name, num_layers=m.layers, n_head=m.heads, hidden_dim=m.hidden,
                                vocab_size=m.vocab, max_seq_len=max(t.seq_len, m.max_positions or 0),
                                num_key_value_heads=m.kv_heads, ffn_embed_dim=ffn, expansion_ratio=ffn / m.hidden,
                                model_type=m.model_type, moe_num_experts=max(1, m.num_experts),
                                moe_top_k=max(1, m.experts_per_tok))
        intra = gpu.nvlink_gbs / 2 if gpu.nvlink_gbs else gpu.pcie_bytes_per_s / 1e9  # per direction
        # intra_node_min_message_latency: the 8 µs every GPU file in llm-analysis's own gpu_configs/ carries
        gpu_cfg = lac.GPUConfig(name=gpu.id, mem_per_GPU_in_GB=mem_gb or gpu.memory_gb,
                                hbm_bandwidth_in_GB_per_sec=gpu.memory_bandwidth / 1e9,
                                intra_node_bandwidth_in_GB_per_sec=intra, intra_node_min_message_latency=8e-06,
                                peak_fp16_TFLOPS=peak / 1e12)
        dtype = lac.DtypeConfig()  # w16a16e16: bf16 / fp16 weights, activations, embeddings
        if s.is_3d:
            # the model-parallel runs trainfit reads since 2026-12-06: how a stack's per-GPU batch and tokens map
            # onto llm-analysis's batch_size_per_gpu and throughput under TP / PP is not settled here (passing the
            # GPUs as dp, as before, compared a 1T-parameter TP 8 x PP 64 run as data parallel)
            raise PeerSkip("tensor / pipeline / context / expert parallelism: not mapped to this tool")
        par = lac.ParallelismConfig(dp_size=s.gpus)
        zero = 3 if s.fsdp == Fsdp.FULL_SHARD else 2 if s.fsdp == Fsdp.SHARD_GRAD_OP else s.zero_stage
        recompute = {GradCkpt.NONE: 0, GradCkpt.SELECTIVE: 1, GradCkpt.FULL: 2}[t.grad_ckpt]
        kwargs = dict(batch_size_per_gpu=t.micro_batch, gradient_accumulation_steps=t.grad_accum, seq_len=t.seq_len,
                      activation_recomputation=la.ActivationRecomputation(recompute), ds_zero=la.DSZeRO(zero),
                      master_weights_dtype_bytes=4 if t.param_dtype == "fp32" else 2, other_op_bytes=other_op_bytes,
                      flash_attn=t.attention != Attention.EAGER, mlp_gated_linear_units=m.gated_mlp)
        return model, gpu_cfg, dtype, par, kwargs

    def predict(self, case: dict, est) -> dict:
        model, gpu_cfg, dtype, par, kwargs = self._configs(est)
        fits = True
        try:
            out = self.la.LLMAnalysis(model, gpu_cfg, dtype, par).training(**kwargs)
        except AssertionError as exc:
            if "max_batch_size_per_gpu" not in str(exc):
                raise PeerSkip(f"rejected the configuration: {str(exc)[:60]}") from None
            # Its fit check refuses a micro-batch it thinks runs out of memory; its memory estimate does not depend
            # on the GPU's size, so read it with the check out of the way and record the OOM verdict.
            fits = False
            self.oom_flagged += 1
            model, gpu_cfg, dtype, par, kwargs = self._configs(est, mem_gb=1e9)
            out = self.la.LLMAnalysis(model, gpu_cfg, dtype, par).training(**kwargs)
        t = est.training
        step = out["latency_per_iter"]
        return {"memory": out["(weight+op_state+grad+act)_memory_per_gpu"] / GiB,
                "throughput": {"step_time_s": step,
                               "tokens_per_s_per_gpu": t.micro_batch * t.grad_accum * t.seq_len / step},
                "fits": fits}


# ---- the comparison -----------------------------------------------------------------------------------------------

PEER_INFO = {
    "deepspeed": {
        "label": "DeepSpeed ZeRO estimator",
        "scope": "memory only: model states (16-bit weights, gradients, fp32 master weights + Adam states) per GPU; "
                 "no activations, buffers or allocator cache; full training only",
        "how": "estimate_zero3_model_states_mem_needs for ZeRO-3 / FSDP full_shard (largest_layer_params: the "
               "largest single module, as its model_to_params counts), estimate_zero2_model_states_mem_needs "
               "otherwise (ZeRO-1 too: there is no stage-1 estimator); DDP / one GPU: the ZeRO-2 formula on 1 GPU "
               "(nothing sharded); cpu_offload / cpu_offload_params from the case; zero_init and "
               "additional_buffer_factor at their defaults (True, 1.5; they only change the CPU number)",
    },
    "accelerate": {
        "label": "accelerate estimate-memory",
        "scope": "memory only: 'Training using Adam' = the largest of model / gradients / optimizer / step sizes "
                 "(bf16/fp16: 8 bytes per parameter, fp32: 16) for the whole unsharded model, batch size 1, no "
                 "activations; full training only",
        "how": "parameters of the bare AutoModel (no LM / task head), fp32 size 4 bytes each; the --dtypes row "
               "float16 for bf16/fp16/fp8 cases, float32 for fp32 cases",
    },
    "llm-analysis": {
        "label": "llm-analysis",
        "scope": "memory (weights + gradients + optimizer states + activations per GPU) and throughput (compute "
                 "only: FLOPs / (peak x flops_efficiency); no communication or overhead); full training, bf16/fp16",
        "how": "LLMAnalysis(ModelConfig, GPUConfig, DtypeConfig w16a16e16, ParallelismConfig dp=GPUs; model-parallel "
               "runs skipped).training(...) "
               "with the case's micro-batch, grad accumulation, sequence length, recomputation, ZeRO stage (FSDP "
               "full_shard = 3, shard_grad_op = 2) and flash attention; GPUConfig from trainfit's GPU catalog "
               "(memory, HBM bandwidth, dense peak of the training dtype); efficiencies at llm-analysis's defaults",
    },
}


def _stats(items: list[tuple[str, float]]) -> dict:
    if not items:
        return {"n": 0, "mape": None, "max_ape": None, "worst_case": None}
    worst = max(items, key=lambda x: x[1])
    return {"n": len(items), "mape": round(sum(e for _, e in items) / len(items), 4), "max_ape": round(worst[1], 4),
            "worst_case": worst[0]}



def _excluded_why(metric: str, reason: str) -> str:
    """The kind of a validate exclusion (validate.compare), in a few words."""
    if metric == "memory":
        return "measured peak below the stated setup's resident states"
    if "power limit" in reason:
        return "GPUs held under a power limit below the catalog GPU's TDP"
    return "measured speed above the GPU's dense peak"

def trainfit_outcomes(case: dict, eff: Efficiencies) -> dict:
    """trainfit's numbers for one case, exactly as `validate` reports them (it keeps no state across cases)."""
    report = validate([case], eff)
    out = {}
    for metric in METRICS:
        if not considered(case, metric):
            continue
        if not report.rows:
            out[metric] = {"skip": next(iter(report.skipped), "not predicted")}
            continue
        row = report.rows[0]
        if metric in row.excluded:
            out[metric] = {"skip": _excluded_why(metric, row.excluded[metric][1]) + " (validate excludes it)"}
        elif metric not in row.error:
            out[metric] = {"skip": "not compared by trainfit validate"}
        elif metric == "memory":
            out[metric] = {"pred": row.predicted["peak_memory_gib"], "ape": row.error["memory"],
                           "kind": row.predicted["memory_kind"]}
        else:
            value, _ = throughput_ape(row.predicted, row.measured)
            out[metric] = {"pred": value, "ape": row.error["throughput"]}
    return out


def run(paths: list[str], limit: int | None) -> dict:
    cases = load_cases(paths)
    if limit is not None:
        cases = cases[:limit]
    eff = Efficiencies.default()
    llma = LlmAnalysisPeer()
    peers = {
        "deepspeed": {"available": True, "version": _version("deepspeed"), "metrics": ("memory",),
                      "memory": deepspeed_memory},
        "accelerate": {"available": True, "version": _version("accelerate"), "metrics": ("memory",),
                       "memory": accelerate_memory},
        "llm-analysis": {"available": llma.available, "version": llma.version, "metrics": METRICS,
                         "reason": llma.reason},
    }
    tools = ["trainfit", *peers]
    per_tool: dict[str, dict[str, list]] = {k: {m: [] for m in METRICS} for k in tools}
    skipped: dict[str, dict[str, Counter]] = {k: {m: Counter() for m in METRICS} for k in tools}
    counts = {m: 0 for m in METRICS}
    rows = []
    for case in cases:
        metrics = [m for m in METRICS if considered(case, m)]
        if not metrics:
            continue
        cid = str(case.get("id"))
        meas = case.get("measured") or {}
        row = {"id": cid, "measured": {k: meas.get(k) for k in ("peak_memory_gib", "memory_kind",
                                                                "tokens_per_s_per_gpu", "step_time_s")}}
        for m in metrics:
            counts[m] += 1
        row["trainfit"] = trainfit_outcomes(case, eff)

        # the case as specs, by trainfit's reader (peers need the model, layout and GPU it resolves)
        est, spec_reason = None, None
        if ((case.get("hardware") or {}).get("gpu") or "") == "cpu":
            spec_reason = "CPU measurement"
        else:
            try:
                est = predict_case(case, eff)
            except Skip as exc:
                spec_reason = f"case not turned into specs: {exc}"
            except Exception as exc:  # noqa: BLE001 — never crash on a case
                spec_reason = f"case not turned into specs: {type(exc).__name__}"
        method = str(((case.get("training") or {}).get("method")) or "full").lower()
        llma_pred = None
        for name, peer in peers.items():
            row[name] = {}
            for m in metrics:
                if not peer["available"]:
                    outcome = {"skip": f"not available: {peer['reason']}"}
                elif m not in peer["metrics"]:
                    outcome = {"skip": NOT_ESTIMATED.format(metric=m)}
                elif method in FULL_ONLY:
                    outcome = {"skip": FULL_ONLY[method]}
                elif spec_reason:
                    outcome = {"skip": spec_reason}
                else:
                    try:
                        if name == "llm-analysis":
                            if llma_pred is None:
                                llma_pred = llma.predict(case, est)
                            value = llma_pred[m]
                        else:
                            value = peer[m](case, est)
                        if m == "memory":
                            outcome = {"pred": value, "ape": abs(value - meas["peak_memory_gib"])
                                       / meas["peak_memory_gib"]}
                        else:
                            v, ape = throughput_ape(value, meas)
                            outcome = {"pred": v, "ape": ape}
                        if name == "llm-analysis" and not llma_pred["fits"]:
                            outcome["fits"] = False
                    except PeerSkip as exc:
                        outcome = {"skip": str(exc)}
                    except Exception as exc:  # noqa: BLE001 — never crash on a case
                        outcome = {"skip": f"error: {type(exc).__name__}"}
                row[name][m] = outcome
        for name in tools:
            for m in metrics:
                o = row[name][m]
                if "skip" in o:
                    skipped[name][m][o["skip"]] += 1
                else:
                    per_tool[name][m].append((cid, o["ape"]))
                    o["pred"] = round(o["pred"], 4)
                    o["ape"] = round(o["ape"], 4)
        rows.append(row)

    result_tools = {}
    for name in tools:
        entry = {"available": True if name == "trainfit" else peers[name]["available"],
                 "metrics": list(METRICS if name == "trainfit" else peers[name]["metrics"]),
                 "version": _version("trainfit") if name == "trainfit" else peers[name]["version"]}
        if name == "trainfit":
            entry.update(label="trainfit", scope="memory (by the measured counter: allocated / reserved / "
                         "nvidia-smi, reserved when unknown) and throughput, every method",
                         how="trainfit.validate.validate with Efficiencies.default(), one case at a time")
        else:
            entry.update(PEER_INFO[name])
            if not peers[name]["available"]:
                entry["reason"] = peers[name]["reason"]
        for m in METRICS:
            entry[m] = {**_stats(per_tool[name][m]), "skipped": dict(skipped[name][m].most_common())}
        result_tools[name] = entry
    if llma.available:
        result_tools["llm-analysis"]["defaults_used"] = {
            "flops_efficiency": llma.flops_efficiency, "hbm_memory_efficiency": llma.hbm_efficiency,
            "intra_node_memory_efficiency": getattr(llma.la, "INTRA_NODE_MEMORY_EFFICIENCY", None),
            "inter_node_memory_efficiency": getattr(llma.la, "INTER_NODE_MEMORY_EFFICIENCY", None)}
        result_tools["llm-analysis"]["predicted_oom"] = llma.oom_flagged

    head_to_head = {}
    for name in peers:
        head_to_head[name] = {}
        for m in METRICS:
            both = [r for r in rows if "ape" in r["trainfit"].get(m, {}) and "ape" in r[name].get(m, {})]
            n = len(both)
            head_to_head[name][m] = {
                "n": n,
                "trainfit_mape": round(sum(r["trainfit"][m]["ape"] for r in both) / n, 4) if n else None,
                "peer_mape": round(sum(r[name][m]["ape"] for r in both) / n, 4) if n else None}
    return {"command": command_line(), "inputs": [os.path.relpath(p, ROOT) if os.path.isabs(p) else p
                                                  for p in paths],
            "cases": len(cases), "considered": counts, "tools": result_tools, "head_to_head": head_to_head,
            "notes": ["errors are absolute percentage errors |pred - meas| / meas, as fractions (0.1 = 10%)",
                      "peers are compared with the measured peak_memory_gib whatever its kind; trainfit's memory "
                      "error is validate's (its prediction of the measured kind, reserved when unknown)",
                      "every case is turned into specs (model, parameter counts, GPUs, layout, GPU facts) by "
                      "trainfit's reader; a case it cannot read is skipped by every tool with that reason",
                      "throughput: tokens/s per GPU where measured, else step time; variable-length runs are not "
                      "compared on throughput"],
            "rows": rows}


def command_line() -> str:
    return "python benchmarks/peers.py" + ("" if len(sys.argv) < 2 else " " + shlex.join(sys.argv[1:]))


# ---- the table ----------------------------------------------------------------------------------------------------

def _pct(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def render(doc: dict) -> str:
    out = [f"$ {doc['command']}",
           f"{doc['cases']} cases from {', '.join(doc['inputs'])}: {doc['considered']['memory']} with a measured "
           f"peak memory, {doc['considered']['throughput']} with a comparable throughput"]
    tools = doc["tools"]
    for m in METRICS:
        out += ["", f"{METRIC_TITLES[m]}  ({doc['considered'][m]} cases)",
                f"  {'tool':<14}{'version':<10}{'predicted':>10}{'MAPE':>9}{'worst APE':>11}  worst case"]
        for name, t in tools.items():
            s = t[m]
            if not t["available"]:
                out.append(f"  {name:<14}{'-':<10}  not available: {t['reason']}")
                continue
            if s["n"] == 0 and len(s["skipped"]) == 1 and next(iter(s["skipped"])).startswith(f"{m}: not est"):
                out.append(f"  {name:<14}{t['version'] or '-':<10}{0:>10}  {m}: not estimated by this tool")
                continue
            out.append(f"  {name:<14}{t['version'] or '-':<10}{s['n']:>10}{_pct(s['mape']):>9}"
                       f"{_pct(s['max_ape']):>11}  {s['worst_case'] or ''}")
    out += ["", "Head to head, on the cases both trainfit and the peer predict",
            f"  {'peer':<14}{'metric':<12}{'n':>5}{'trainfit MAPE':>15}{'peer MAPE':>11}"]
    for name, per in doc["head_to_head"].items():
        for m, h in per.items():
            if m in tools[name]["metrics"]:
                out.append(f"  {name:<14}{m:<12}{h['n']:>5}{_pct(h['trainfit_mape']):>15}{_pct(h['peer_mape']):>11}")
    out += ["", "Not predicted, by reason (cases of each metric a tool did not predict)"]
    for name, t in tools.items():
        for m in METRICS:
            sk = t[m]["skipped"]
            if not sk:
                continue
            out.append(f"  {name} / {m}: {sum(sk.values())}")
            out += [f"    {n:>4}  {reason}" for reason, n in sk.items()]
    out += ["", "Scope and inputs of each tool"]
    for name, t in tools.items():
        out.append(f"  {name} ({t['label']}{', ' + t['version'] if t['version'] else ''}): {t['scope']}")
        out.append(f"      how: {t['how']}")
        if "defaults_used" in t:
            out.append("      defaults used: " + ", ".join(f"{k}={v}" for k, v in t["defaults_used"].items())
                       + " (llm-analysis expects the user to type in efficiencies)")
            out.append(f"      llm-analysis said 'does not fit' (micro-batch above its max) on {t['predicted_oom']} "
                       "case(s); its memory estimate is still compared")
    out += [""] + [f"note: {n}" for n in doc["notes"]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help=f"validation JSONL files (default: {os.path.relpath(DEFAULT_CASES)})")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--limit", type=int, default=None, help="use only the first N cases")
    args = ap.parse_args(argv)
    if args.limit is not None and args.limit < 0:
        ap.error("--limit must be >= 0")
    doc = run(args.paths or [DEFAULT_CASES], args.limit)
    if args.json:
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
