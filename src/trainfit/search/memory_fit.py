"""The search's memory as a function of micro-batch and GPU count, past what one affine fit covers: the fit checked
at CHECK_MICRO_BATCH, affine pieces between powers of two, an affine fit from a micro-batch up, and direct estimates
(memoised) where no fit holds. search/run.py builds them (_Estimator._memory_model)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from ..estimate.memory import AffineMemory


CHECK_MICRO_BATCH = 64  # the affine memory fit is checked here (exact up to it: the peak is convex in the micro-batch)


POWERS = tuple(2 ** i for i in range(CHECK_MICRO_BATCH.bit_length()) if 2 ** i <= CHECK_MICRO_BATCH)


def _pieces(at, n: int, n2: int | None, vf: float, below: "DirectMemory") -> "PiecewiseMemory | DirectMemory":
    """Affine pieces between powers of two where a phase's largest moment changes more than once (a variable-length
    BERT fine-tune's backward top block): each fit through two powers of two (and n2 GPUs) holds up to the largest
    power of two where it agrees with a direct estimate — each phase is convex in the micro-batch, so equal to its
    fit at three points it is its fit in between, and past a point where it leaves the fit it stays off it (hence a
    bisection). Micro-batches outside every piece are estimated directly."""
    def direct(b: int):
        return _direct_or_refused(lambda: at(b, n))

    pieces, i = [], 0
    while i < len(POWERS) - 1:
        lo, hi = POWERS[i], POWERS[i + 1]
        a, b = direct(lo), direct(hi)
        g = _direct_or_refused(lambda: at(lo, n2)) if n2 else None
        if a is None or b is None or (n2 and g is None):
            break
        fit = AffineMemory.fit(a, b, g, lo, n, hi, n2 or n, vf)
        good, left, right = i + 1, i + 2, len(POWERS) - 1  # the largest power of two where the fit agrees
        while left <= right:
            mid = (left + right) // 2
            check = direct(POWERS[mid])
            if check is not None and _agrees(fit, check, n, POWERS[mid]):
                good, left = mid, mid + 1
            else:
                right = mid - 1
        if good > i + 1:
            pieces.append((lo, POWERS[good], fit))
        i = good
    return PiecewiseMemory(tuple(pieces), below) if pieces else below


@dataclass(frozen=True)
class PiecewiseMemory:
    """Device bytes by affine pieces over micro-batches [lo, hi] (`_pieces`), directly elsewhere."""

    pieces: tuple[tuple[int, int, AffineMemory], ...]
    below: "DirectMemory"

    def device(self, micro_batch: int, gpus: int) -> float:
        for lo, hi, fit in self.pieces:
            if lo <= micro_batch <= hi:
                return fit.device(micro_batch, gpus)
        return self.below.device(micro_batch, gpus)


def _agrees(fit: AffineMemory, check, n: int, at: int = CHECK_MICRO_BATCH) -> bool:
    """Whether an affine fit gives the direct estimate at micro-batch `at` (a refused check says nothing). With
    variable-length batches every phase's total and varying bytes must agree too: the device memory then follows
    whichever phase peaks (not convex), and each phase, the largest of its affine moments, is convex — equal to its
    fit at three points, it is its fit in between."""
    if check is None:
        return True
    if abs(fit.device(at, n) - check.device) > 1e-9 * max(abs(check.device), 1.0):
        return False
    if not fit.varying_fraction:
        return True
    totals = fit.phase_totals(at, n)
    for phase, total, (a, c, s) in zip(check.phases, totals, fit.varying):
        varying = a + c * at + s / n
        if abs(total - phase.total) > 1e-9 * max(abs(phase.total), 1.0) or \
                abs(varying - phase.varying) > 1e-9 * max(abs(phase.varying), 1.0):
            return False
    return True


def _direct_or_refused(direct):
    """A direct estimate, or None where the layout refuses it (which says nothing about smaller micro-batches)."""
    try:
        return direct()
    except SpecError:
        return None


@dataclass(frozen=True)
class FromMicroBatch:
    """Device bytes estimated directly below micro-batch `start` and by an affine fit from it up (checked at
    CHECK_MICRO_BATCH: a convex peak equal to the fit at start, start + 1 and the check is the fit in between)."""

    start: int
    affine: AffineMemory
    below: "DirectMemory"

    def device(self, micro_batch: int, gpus: int) -> float:
        return self.below.device(micro_batch, gpus) if micro_batch < self.start else \
            self.affine.device(micro_batch, gpus)


class DirectMemory:
    """Device bytes by a direct estimate at each micro-batch and GPU count, memoised: for a training stack whose memory
    is not affine in the micro-batch, so that three estimates cannot stand for all of them (LitGPT: its loss copies
    the shifted logits only when a micro-batch holds more than one sequence, memory.litgpt_logits_items). A layout the
    estimate refuses needs infinite memory."""

    def __init__(self, at, seen: dict[tuple[int, int], float]) -> None:  # noqa: ANN001 - at(mb, gpus) -> MemoryResult
        self._at = at
        self._seen = dict(seen)

    def device(self, micro_batch: int, gpus: int) -> float:
        key = (micro_batch, gpus)
        hit = self._seen.get(key)
        if hit is None:
            try:
                hit = self._at(micro_batch, gpus).device
            except SpecError:
                hit = math.inf
            self._seen[key] = hit
        return hit
