"""When a configuration does not fit: which terms are too big, and which changes would make it fit."""

from __future__ import annotations

from typing import Callable

from dataclasses import dataclass

from .catalog.efficiency import Efficiencies
from .errors import TrainfitError
from .i18n import say
from .estimate.core import Estimate, run_estimate
from .spec.cluster import cluster_for
from .spec.training import (Fsdp, GradCkpt, Method, Offload, Optimizer, Strategy, TrainingSpec, combination_problem,
                            stack_refuses)
from .units import GiB


@dataclass(frozen=True)
class Alternative:
    change: str  # the flags that differ, as a user would type them
    estimate: Estimate

    def to_dict(self) -> dict:
        e = self.estimate
        return {"change": self.change, "fits": e.fits, "memory_gib_total": round(e.memory.device / GiB, 2),
                "tokens_per_s": round(e.tokens_per_s, 1), "gpus": e.strategy.gpus}


def overflow_terms(est: Estimate) -> list[str]:
    """Plain-language reasons why the peak exceeds the GPU."""
    parts = est.memory.parts
    usable = est.memory.usable
    states = parts["weights"] + parts["gradients"] + parts["optimizer"]
    out = []
    if states > usable:
        out.append(say("es_over_states", w=parts["weights"] / GiB, g=parts["gradients"] / GiB,
                       o=parts["optimizer"] / GiB, usable=usable / GiB))
    if parts["activations"] + parts["logits"] > max(0.0, usable - states):
        out.append(say("es_over_acts", a=parts["activations"] / GiB, l=parts["logits"] / GiB,
                       rest=max(0.0, usable - states) / GiB))
    over = est.memory.device - usable
    out.append(say("es_over_by", over=over / GiB, need=est.memory.device / GiB, usable=usable / GiB))
    return out


def _candidates(t: TrainingSpec, s: Strategy) -> list[tuple[str, TrainingSpec, Strategy]]:
    """Each candidate with the flags that differ from the request, every one of them (a user who types them gets
    exactly the configuration that was estimated), then what it had to give up."""
    return [(_dropped(change_flags(t, s, cand, strat), t, cand), cand, strat)
            for _, cand, strat in _raw_candidates(t, s)]


_FLAGS = (("method", "--method"), ("precision", "--precision"), ("optimizer", "--optimizer"),
          ("grad_ckpt", "--grad-ckpt"), ("micro_batch", "--micro-batch"), ("grad_accum", "--grad-accum"))
_STRATEGY_FLAGS = (("gpus_per_node", "--gpus"), ("nodes", "--nodes"), ("zero_stage", "--zero"), ("fsdp", "--fsdp"),
                   ("offload", "--offload"), ("tp", "--tp"), ("pp", "--pp"), ("vpp", "--vpp"),
                   ("pp_schedule", "--pp-schedule"), ("cp", "--cp"), ("ep", "--ep"))


def change_flags(t: TrainingSpec, s: Strategy, cand: TrainingSpec, strat: Strategy) -> str:
    """The command-line flags that turn (t, s) into (cand, strat)."""
    out = []
    for spec_a, spec_b, table in ((t, cand, _FLAGS), (s, strat, _STRATEGY_FLAGS)):
        for name, flag in table:
            a, b = getattr(spec_a, name), getattr(spec_b, name)
            if a != b:
                out.append(f"{flag} {getattr(b, 'value', b)}")
    return " ".join(out)


def _dropped(flags: str, t: TrainingSpec, cand: TrainingSpec) -> str:
    """A candidate's `flags`, with what it had to give up of the original settings said after them."""
    pairs = (("--optimizer-in-backward", t.optimizer_in_backward, cand.optimizer_in_backward),
             ("--paged-optimizer", t.paged_optimizer, cand.paged_optimizer))
    gone = [flag for flag, was, now in pairs if was and not now]
    return say("es_without", flags=flags, gone=" ".join(gone)) if gone else flags


def _compatible(t: TrainingSpec, strat: Strategy | None = None, **changes) -> TrainingSpec:
    """`t` with `changes`, giving up optimizer-in-backward where gradients accumulate, and then whichever optional
    setting the engine cannot run (combination_problem)."""
    if t.optimizer_in_backward and changes.get("grad_accum", t.grad_accum) > 1:
        changes["optimizer_in_backward"] = False
    cand = t.with_(**changes)
    for flag in ("optimizer_in_backward", "paged_optimizer"):
        if strat is not None and getattr(cand, flag) and combination_problem(cand, strat):
            cand = cand.with_(**{flag: False})
    return cand


def _raw_candidates(t: TrainingSpec, s: Strategy) -> list[tuple[str, TrainingSpec, Strategy]]:
    ck = t.with_(grad_ckpt=GradCkpt.FULL)
    out: list[tuple[str, TrainingSpec, Strategy]] = []
    if t.grad_ckpt != GradCkpt.FULL:
        out.append(("--grad-ckpt full", ck, s))
    if t.micro_batch > 1:
        out.append((f"--grad-ckpt full --micro-batch 1 --grad-accum {t.micro_batch * t.grad_accum}",
                    _compatible(ck, micro_batch=1, grad_accum=t.micro_batch * t.grad_accum), s))
    base = _compatible(ck, micro_batch=1, grad_accum=t.micro_batch * t.grad_accum)
    if s.is_3d:  # a model-parallel layout: the same layout lighter (plan searches other layouts)
        return out
    if t.method == Method.FULL:
        out += [("--method lora --grad-ckpt full", base.with_(method=Method.LORA), s),
                ("--method qlora --grad-ckpt full", base.with_(method=Method.QLORA), s)]
        if t.optimizer == Optimizer.ADAMW:
            out.append(("--optimizer adamw-8bit --grad-ckpt full", base.with_(optimizer=Optimizer.ADAMW_8BIT), s))
    elif t.method == Method.LORA:
        out.append(("--method qlora --grad-ckpt full", base.with_(method=Method.QLORA), s))
    if s.gpus == 1 and t.method != Method.QLORA:
        ds = s.with_(zero_stage=2, fsdp=Fsdp.NONE, offload=Offload.OPTIMIZER)
        out.append(("--zero 2 --offload optimizer --grad-ckpt full", _compatible(base, ds), ds))
    for gpus in (2, 4, 8):
        if gpus > s.gpus_per_node:
            ds = s.with_(gpus_per_node=gpus, zero_stage=3, fsdp=Fsdp.NONE)
            out.append((f"--gpus {gpus} --zero 3 --grad-ckpt full", _same_batch(base, t, s, ds), ds))
    gpus = max(8, s.gpus_per_node)
    if t.method != Method.QLORA:
        for offload, flag in ((Offload.OPTIMIZER, "optimizer"), (Offload.ALL, "all")):
            ds = s.with_(gpus_per_node=gpus, zero_stage=3, fsdp=Fsdp.NONE, offload=offload)
            out.append((f"--gpus {gpus} --zero 3 --offload {flag} --grad-ckpt full", _same_batch(base, t, s, ds),
                        ds))
    return out


def _same_batch(base: TrainingSpec, t: TrainingSpec, s: Strategy, ds: Strategy) -> TrainingSpec:
    """`base` (micro-batch 1) on the strategy `ds`, with the gradient accumulation that keeps the requested global
    batch (sequences per optimizer step) where the GPU count divides it, else the nearest above."""
    sequences = t.micro_batch * t.grad_accum * s.gpus
    return _compatible(base, ds, grad_accum=max(1, -(-sequences // ds.gpus)))


def alternatives(est: Estimate, efficiencies: Efficiencies | None = None, limit: int = 4,
                 accept: Callable[[Estimate], bool] | None = None) -> list[Alternative]:
    """Changes (least invasive first) that make the configuration fit on the same GPU type (and that `accept` takes,
    when given: the first `limit` of those, however far down the list they are); with a stated training
    stack (--framework), only layouts its own scripts run (spec/training.py stack_refuses, as `plan --framework`):
    ZeRO-3 becomes FSDP full shard where the stack runs that instead (LitGPT), and the rest is left out."""
    found: list[Alternative] = []
    framework = est.table.framework  # the stack the estimate was made for; its alternatives are that stack's too
    efficiencies = (efficiencies or est.table).for_framework(framework) if framework else efficiencies
    for change, t, s in _candidates(est.training, est.strategy):
        if framework and stack_refuses(t.model_code, t.method, t.grad_ckpt, s, framework):
            # what the stack runs instead: FSDP full shard for ZeRO-3, the requested checkpointing on one device
            runs = [(t, s.with_(zero_stage=0, fsdp=Fsdp.FULL_SHARD))] if s.zero_stage == 3 else []
            if s.gpus == 1 and t.grad_ckpt != est.training.grad_ckpt:
                runs.append((t.with_(grad_ckpt=est.training.grad_ckpt), s))
            runs = [(t2, s2) for t2, s2 in runs
                    if not stack_refuses(t2.model_code, t2.method, t2.grad_ckpt, s2, framework)]
            if not runs:
                continue
            t, s = runs[0]
            change = _dropped(change_flags(est.training, est.strategy, t, s), est.training, t)
            if any(a.change == change for a in found):
                continue
        inst = est.cluster.instance
        if inst is not None and (inst.gpu_count or 0) < s.gpus_per_node:
            inst = None  # a bigger machine of the same GPU
        try:
            cluster = est.cluster if s.gpus_per_node == est.strategy.gpus_per_node else \
                cluster_for(est.gpu, s.gpus_per_node, s.nodes, inst)
            alt = run_estimate(est.model, t, s, cluster, efficiencies)
        except TrainfitError:
            continue
        if alt.fits and (accept is None or accept(alt)):
            found.append(Alternative(change, alt))
        if len(found) >= limit:
            break
    return found


def alternatives_within(est: Estimate, efficiencies: Efficiencies | None = None, max_risk: float | None = None,
                        limit: int = 4) -> list[Alternative]:
    """`alternatives` that fit under the one out-of-memory policy (uncertainty.within_policy): what estimate, the web
    page and compare offer is only what plan would accept."""
    from .uncertainty import DEFAULT_MAX_OOM_RISK, within_policy

    risk = DEFAULT_MAX_OOM_RISK if max_risk is None else max_risk
    return alternatives(est, efficiencies, limit=limit, accept=lambda alt: within_policy(alt, risk))
