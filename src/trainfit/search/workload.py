"""What the plan trains, resolved against the model: task, sequence length, global batch and total tokens."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property, lru_cache

from ..errors import SpecError
from ..i18n import say
from ..spec.job import PACKED
from ..spec.model import ModelSpec
from ..spec.request import PlanRequest
from ..spec.training import GradCkpt, Method, Task, TrainingSpec, data_layout_for, default_seq_len

DEFAULT_GLOBAL_BATCH = 64  # sequences per optimizer step for fine-tuning (sft, dpo, classification)
DEFAULT_PRETRAIN_BATCH_TOKENS = 2**20  # ~1M tokens per step for pre-training


@dataclass(frozen=True)
class Workload:
    request: PlanRequest
    task: Task
    seq_len: int
    global_batch: int  # sequences (DPO: pairs) per optimizer step
    processed_tokens: float  # tokens the GPUs process over all epochs (padding included)
    assumptions: tuple[str, ...]
    data_layout: str = PACKED  # spec/job.py data_layout, resolved for the task and the lengths given

    def training(self, method: Method, ckpt: GradCkpt, micro_batch: int = 1, grad_accum: int = 1) -> TrainingSpec:
        key = (method, ckpt, micro_batch, grad_accum)
        hit = self._trainings.get(key)
        if hit is None:  # memoised on the workload itself: hashing it for a module-level cache costs more than a spec
            hit = self._trainings[key] = _training(self, method, ckpt, micro_batch, grad_accum)
        return hit

    @cached_property
    def _trainings(self) -> dict:
        return {}


@lru_cache(maxsize=65536)
def _training(w: Workload, method: Method, ckpt: GradCkpt, micro_batch: int, grad_accum: int) -> TrainingSpec:
    """The request's job fields (spec/job.py) resolved as every door resolves them (the stated stack's defaults),
    with what the search decides and what the workload resolved."""
    from ..spec.job import BY_NAME
    from ..spec.training import resolve_job_defaults

    given = {k: v for k, v in w.request.job if BY_NAME[k].part == "training"}
    inputs = {k: v for k, v in w.request.job if BY_NAME[k].part == "input"}
    given.update(method=method, task=w.task, seq_len=w.seq_len, micro_batch=micro_batch, grad_accum=grad_accum,
                 grad_ckpt=ckpt, data_layout=w.data_layout)
    if w.data_layout != PACKED and w.request.avg_len:  # padded: time at the padded length, the mean counts
        given["avg_len"] = max(1, min(w.seq_len, round(w.request.avg_len)))
    return TrainingSpec(**resolve_job_defaults(given, None, inputs)[0])


def _pow2_at_least(x: float) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1.0, x))))


def resolve_workload(req: PlanRequest, m: ModelSpec) -> Workload:
    notes: list[str] = []
    task = Task.parse(req.task or ("classification" if m.is_encoder else "sft"), "task")
    max_pos = m.max_sequence or 0
    if req.seq_len:
        seq = req.seq_len
    elif task in (Task.CLASSIFICATION, Task.DPO) and req.avg_len:  # samples padded, not packed: to their length
        seq = max(8, _pow2_at_least(req.avg_len))
        notes.append(say("es_pad_pow2", seq=seq, avg=req.avg_len))
    else:
        seq, capped = default_seq_len(max_pos)
        if capped:
            notes.append(capped)
    if max_pos and seq > max_pos:
        if req.seq_len:
            raise SpecError(say("ei_seq_len_too_long", seq=seq, model=m.name, positions=max_pos,
                                rest=say("ei_seq_len_learned" if m.position == "learned" else "ei_seq_len_rope")))
        seq = max_pos if not req.seq_len else seq
        if not req.seq_len:
            notes.append(say("pl_seq_capped", positions=max_pos))
    if req.avg_len and req.avg_len > seq and task == Task.CLASSIFICATION:
        notes.append(say("es_truncated", seq=seq))

    if req.global_batch:
        gb = req.global_batch
    elif req.global_batch_tokens:
        gb = max(1, round(req.global_batch_tokens / seq))
    elif task == Task.PRETRAIN:
        gb = max(1, round(DEFAULT_PRETRAIN_BATCH_TOKENS / seq))
        notes.append(say("pl_global_batch_pretrain", gb=gb))
    else:
        gb = DEFAULT_GLOBAL_BATCH
        notes.append(say("pl_global_batch_finetune", gb=gb))

    layout = data_layout_for(task, req.job_value("data_layout"), bool(req.avg_len))
    tokens = req.dataset_tokens if req.dataset_tokens is not None else req.samples * req.avg_len
    if layout == PACKED:
        processed = tokens * req.epochs
        notes.append(say("pl_tokens_packed", tokens=tokens, seq=seq, epochs=req.epochs))
    elif req.samples is not None and req.avg_len:  # the tokens that count: padding is in the time, not here
        mean = min(seq, req.avg_len)
        per_sample = mean * (2 if task == Task.DPO else 1)
        processed = req.samples * per_sample * req.epochs
        notes.append(say("es_samples_padded", samples=req.samples, per_sample=per_sample, layout=layout,
                         epochs=req.epochs))
    else:
        processed = tokens * req.epochs
        notes.append(say("es_tokens_unknown_len", tokens=tokens, seq=seq, layout=layout, epochs=req.epochs))
    return Workload(req, task, seq, gb, processed, tuple(notes), layout)
