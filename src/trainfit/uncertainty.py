"""Error bands and the probability that a job fits, from cross-validated residuals.

The residuals are log(measured / predicted) of every case predicted by a fit that never saw the case's source
(`trainfit calibrate --cv source`, shipped as catalog/data/cv_source.json). A prediction's band at level 0.8 is
prediction x exp(10th and 90th percentile of the residuals of its cell); its fit probability is the share of
residuals for which the peak would stay under the usable memory (the residuals' empirical distribution,
interpolated between plotting positions, so the probability rises continuously with the memory).

The residuals of one source share that source's bias (its stack, its counter, its way of measuring), and a band is
used for a source the fit has not seen: a source weighs by its effective number of residuals, n / (1 + (n - 1) rho)
(Kish's design effect for clustered samples), rho being the share of the metric's residual variance that lies between
sources (estimated from the residuals themselves: 1 - pooled within-source variance / total variance). Sources whose
runs only repeat their bias (rho 1) weigh the same whatever their size (each residual 1 / n: until 2026-12-02 always
so), independent runs (rho 0) each weigh one; so one source with many runs does not make the band as narrow as its
own scatter, and a source of one run does not weigh as much as a source of eleven. Plotting positions are the
midpoints of the weights' cumulative shares ((i + 0.5) / n with equal weights).

Cells: metric x method x memory kind x whether the framework is known (has been seen by the fit). A cell with fewer
than MIN_RESIDUALS residuals, or with residuals of fewer than MIN_SOURCES sources (one source's residuals are its bias
alone, not the spread between sources), falls back to a coarser one: without the method, then without the memory
kind, then the metric alone (used whenever it has MIN_RESIDUALS). A stack the fit has not seen may behave like any
stack: its band is made from every stack's residuals when that whole stack was left out (`trainfit calibrate --cv
framework`, shipped as catalog/data/cv_framework.json), without that file from every source's left-out residuals of
its cell, the seen stacks' included. A new stack is a new draw (issue 35, 2026-12-08): its residual is a bias drawn
from the stacks' biases plus a scatter drawn from within them (`new_group_draw`: a random-effects model, the bias a
Student's t over k stacks, so a new stack may fall beyond the most extreme one seen, as it does with probability
2 / (k + 1)), from the finest cell with residuals of MIN_STACKS stacks. The empirical quantiles of four or five stacks
cannot reach past the extreme ones: on synthetic stacks with their own biases they held 62-78% of a new stack's
values in an 80% band, the draw 80-83% (tests/test_uncertainty.py). (Until 2026-12-08 an unseen stack's band was
those empirical quantiles, each stack a cluster as a source is above; until 2026-12-01 the union of the unseen-only
and the seen-only bands, which held 90% of left-out throughput values instead of 80%.)
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

LEVEL = 0.8
MIN_RESIDUALS = 10
MIN_SOURCES = 2  # a cell narrower than the metric needs residuals of at least this many sources
SHIPPED = "cv_source.json"
SHIPPED_UNSEEN = "cv_framework.json"  # leave-one-stack-out residuals: the bands of a stack not seen (issue 35)


@dataclass(frozen=True)
class Residuals:
    """Sorted log(measured / predicted) values of one cell, with weights (default: equal). A residual's weight is
    1 / (its source's residuals in the cell): the residuals of one source share its bias, so the band spreads over
    sources, not over whichever source published the most runs."""
    values: tuple[float, ...]
    cell: str
    weights: tuple[float, ...] | None = None

    @cached_property
    def _pos(self) -> tuple[float, ...]:
        return tuple(self._positions())

    def _positions(self) -> list[float]:
        n = len(self.values)
        w = self.weights or (1.0,) * n
        total, acc, pos = sum(w), 0.0, []
        for wi in w:
            pos.append((acc + wi / 2) / total)  # the midpoint of its share: (i + 0.5) / n with equal weights
            acc += wi
        return pos

    def quantile(self, p: float) -> float:
        """The residual below which a share p of the residuals lie (linear between plotting positions)."""
        v, pos = self.values, self._pos
        if p <= pos[0]:
            return v[0]
        if p >= pos[-1]:
            return v[-1]
        i = bisect.bisect_right(pos, p) - 1
        return v[i] + (v[i + 1] - v[i]) * (p - pos[i]) / (pos[i + 1] - pos[i])

    def cdf(self, x: float) -> float:
        """Share of residuals at or below x, interpolated; kept inside the first and last plotting positions (n cases
        cannot establish certainty)."""
        v, pos = self.values, self._pos
        if x <= v[0]:
            return pos[0]
        if x >= v[-1]:
            return pos[-1]
        i = bisect.bisect_right(v, x) - 1
        if v[i + 1] == v[i]:
            return pos[i + 1]
        return pos[i] + (pos[i + 1] - pos[i]) * (x - v[i]) / (v[i + 1] - v[i])


class Bands:
    """The residuals of cross-validation, by cell. `unseen`: leave-one-stack-out residuals (`calibrate --cv
    framework`, every stack predicted by a fit that never saw it); when given, a stack the calibration has not seen is
    banded from them (a new stack is a new draw, issue 35), their groups (stacks) weighing as the sources do."""

    def __init__(self, residuals: list[dict[str, Any]], unseen: list[dict[str, Any]] | None = None):
        self.cells: dict[tuple, list[float]] = {}
        self.groups: dict[tuple, list[str]] = {}
        self._residuals: dict[tuple, Residuals | None] = {}  # per (metric, method, kind, known): a search asks often
        self._drawn: dict[tuple, Residuals | None] = {}  # a stack not seen: per cell, drawn once
        self.rho = {m: between_source_share([r for r in residuals if r["metric"] == m])
                    for m in {r["metric"] for r in residuals}}
        self.rho_unseen = {m: between_source_share([r for r in unseen if r["metric"] == m])
                           for m in {r["metric"] for r in unseen}} if unseen else self.rho
        for r in residuals:
            m, meth, kind, known = r["metric"], r["method"], r.get("memory_kind"), bool(r["framework_known"])
            # a seen stack's residual in the seen cells and the pooled ones, an unseen stack's in the pooled ones
            seen = _keys(m, meth, kind, True) if known else ()
            pooled = _keys(m, meth, kind, None) if not unseen else ()
            for key in dict.fromkeys(seen + pooled):  # each cell once
                self.cells.setdefault(key, []).append(float(r["log_residual"]))
                self.groups.setdefault(key, []).append(str(r.get("group", "")))
        # a stack not seen is drawn from the groups of the leave-one-stack-out residuals when given, else of all
        self.draw_cells: dict[tuple, tuple[list[float], list[str]]] = {}
        for r in unseen if unseen else residuals:
            for key in dict.fromkeys(_keys(r["metric"], r["method"], r.get("memory_kind"), None)):  # each cell once
                vals, groups = self.draw_cells.setdefault(key, ([], []))
                vals.append(float(r["log_residual"]))
                groups.append(str(r.get("group", "")))
                if unseen:  # and they are the pooled cells' only residuals
                    self.cells.setdefault(key, []).append(float(r["log_residual"]))
                    self.groups.setdefault(key, []).append(str(r.get("group", "")))

    def residuals(self, metric: str, method: str, memory_kind: str | None, known: bool) -> Residuals | None:
        """The residuals a prediction's band is made from: a seen stack's from the seen stacks' cells, an unseen
        stack's from every source's (see the module doc)."""
        kind = memory_kind if metric == "memory" else None
        asked = (metric, method, kind, bool(known))
        if asked not in self._residuals:
            self._residuals[asked] = self._find(metric, method, kind, known)
        return self._residuals[asked]

    def _find(self, metric: str, method: str, kind: str | None, known: bool) -> Residuals | None:
        keys = _keys(metric, method, kind, True if known else None)
        if not known:  # a stack not seen is a new draw of a stack's bias (issue 35): from the finest cell that can
            for key in keys:  # say how stacks differ
                vals, groups = self.draw_cells.get(key, ([], []))
                if len(vals) < MIN_RESIDUALS:
                    continue
                if key not in self._drawn:  # asked cells falling back to one coarser cell share its draw
                    self._drawn[key] = new_group_draw(vals, groups, _cell_name(key))
                if self._drawn[key] is not None:
                    return self._drawn[key]
        for key in keys:
            vals, groups = self.cells.get(key, []), self.groups.get(key, [])
            per = {g: groups.count(g) for g in set(groups)}
            if len(vals) < MIN_RESIDUALS or (len(per) < MIN_SOURCES and key != keys[-1]):
                continue
            rho = (self.rho if key[3] else self.rho_unseen).get(metric, 1.0)
            pairs = sorted((v, 1.0 / (1.0 + (per[g] - 1) * rho)) for v, g in zip(vals, groups))
            return Residuals(tuple(v for v, _ in pairs), _cell_name(key), tuple(w for _, w in pairs))
        return None

    def interval(self, metric: str, method: str, memory_kind: str | None, known: bool,
                 level: float = LEVEL) -> tuple[float, float] | None:
        """(low, high) factors on a prediction: the central `level` share of the truth's ratio to it."""
        lo_p, hi_p = (1 - level) / 2, (1 + level) / 2
        own = self.residuals(metric, method, memory_kind, known)
        if own is None:
            return None
        return math.exp(own.quantile(lo_p)), math.exp(own.quantile(hi_p))

    def fit_probability(self, need: float, usable: float, method: str, memory_kind: str | None,
                        known: bool) -> float | None:
        """Probability that the measured peak stays at or under `usable` when `need` is predicted."""
        res = self.residuals("memory", method, memory_kind, known)
        if res is None or need <= 0 or usable <= 0:
            return None
        return res.cdf(math.log(usable / need))


def between_source_share(residuals: list[dict[str, Any]]) -> float:
    """rho: the share of the residuals' variance between sources, 1 - (pooled within-source variance) / (total
    variance), in [0, 1]; 1 when the residuals do not vary or no source has two."""
    values = [float(r["log_residual"]) for r in residuals]
    by: dict[str, list[float]] = {}
    for r in residuals:
        by.setdefault(str(r.get("group", "")), []).append(float(r["log_residual"]))
    if len(values) < 2 or not any(len(v) > 1 for v in by.values()):
        return 1.0
    mean = sum(values) / len(values)
    total = sum((v - mean) ** 2 for v in values) / len(values)
    if total <= 0:
        return 1.0
    within = sum(sum((x - sum(v) / len(v)) ** 2 for x in v) for v in by.values()) / len(values)
    return min(1.0, max(0.0, 1.0 - within / total))


def _cell_name(key: tuple) -> str:
    return "/".join("*" if k is None else str(k) for k in key)


# ---- a stack not seen: a new draw of a stack's bias (issue 35) ---------------------------------------------------
MIN_STACKS = 3  # the fewest groups whose biases say how a new one may differ (two give a t of one degree of freedom)
DRAW_POINTS = 400  # the drawn distribution is kept as this many equally weighted quantiles
_GRID_STEP = 0.002  # log units (0.2%): the finest grid the mixture's distribution is summed on; a wider bias takes
_GRID_PER_SCALE = 25  # a step of its scale / 25 (the quantiles move by less than half a step)


def student_t_cdf(t: float, nu: int) -> float:
    """P(T <= t) for Student's t with an integer nu >= 1 degrees of freedom, in closed form (Abramowitz and Stegun
    26.7.3 and 26.7.4: with theta = atan(t / sqrt(nu)), P(|T| <= t) is a finite series in sin and cos theta)."""
    theta = math.atan(t / math.sqrt(nu))
    s, c2 = math.sin(theta), math.cos(theta) ** 2
    if nu % 2:
        total, term = 0.0, math.cos(theta)
        for k in range(1, (nu - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        inside = 2 / math.pi * (theta + s * total)
    else:
        total, term = 1.0, 1.0
        for k in range(1, (nu - 2) // 2 + 1):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    return 0.5 + 0.5 * inside  # theta, sin theta and so the series are odd in t


def new_group_draw(values: list[float], groups: list[str], cell: str) -> Residuals | None:
    """The residual of a group (a stack) not seen, as a random-effects model predicts it: a bias drawn from the
    groups' biases plus a residual drawn from within the groups. With k groups of means m_g, the bias is
    mean(m_g) + scale x T(k - 1), scale^2 = tau^2 + S^2 / k (Student's t: the spread estimated from k groups; S^2
    / k: the uncertainty of the mean of k group means, S^2 their variance), tau^2 = S^2 less what the within-group
    scatter puts in the means (floored at 0); the within part is every group's residuals less its mean, widened by
    sqrt(n / (n - 1)) (a residual less its own group's mean of n is that much narrower), each group weighing the
    same. (Until a review on 2026-12-08 the scale was tau^2 (1 + 1/k), which loses the mean's uncertainty whenever
    tau^2 floors at 0, and the within part was not widened: 71-77% coverage on small noisy groups.) The empirical
    quantiles of k groups cannot reach beyond the extreme ones, where a new group falls with probability 2 / (k + 1).
    None with fewer than MIN_STACKS groups. Returned as DRAW_POINTS equally weighted quantiles."""
    by: dict[str, list[float]] = {}
    for v, g in zip(values, groups):
        by.setdefault(g, []).append(float(v))
    k = len(by)
    if k < MIN_STACKS:
        return None
    means = {g: sum(v) / len(v) for g, v in by.items()}
    centre = sum(means.values()) / k
    dof = sum(len(v) - 1 for v in by.values())
    within_var = sum((x - means[g]) ** 2 for g, v in by.items() for x in v) / dof if dof else 0.0
    spread = sum((m - centre) ** 2 for m in means.values()) / (k - 1)  # of the group means
    tau2 = max(0.0, spread - within_var * sum(1 / len(v) for v in by.values()) / k)
    scale = math.sqrt(tau2 + spread / k)  # a new bias about the mean of k, itself uncertain by spread / k
    step = max(_GRID_STEP, scale / _GRID_PER_SCALE)
    bins: dict[int, float] = {}  # the within-group residuals on the grid, each group weighing 1
    for g, v in by.items():
        if len(v) > 1:
            widen = math.sqrt(len(v) / (len(v) - 1))  # a residual less its own group's mean is narrower by this
            for x in v:
                i = round((x - means[g]) * widen / step)
                bins[i] = bins.get(i, 0.0) + 1 / len(v)
    bins = bins or {0: 1.0}
    total = sum(bins.values())
    if scale <= 0:
        pairs = sorted((centre + i * step, w / total) for i, w in bins.items())
        return Residuals(tuple(v for v, _ in pairs), cell + "/drawn", tuple(w for _, w in pairs))
    reach = scale * _t_quantile(1 - 0.5 / DRAW_POINTS / 4, k - 1)  # the grid's tails beyond the last quantile
    lo_i, hi_i = min(bins) - math.ceil(reach / step), max(bins) + math.ceil(reach / step)
    # T at every grid distance once; the distribution at grid point i is the weighted sum over the bins
    span = hi_i - lo_i
    t_at = [student_t_cdf(d * step / scale, k - 1) for d in range(-span, span + 1)]
    items = [(i, w / total) for i, w in bins.items()]
    grid = [sum(w * t_at[x - i + span] for i, w in items) for x in range(lo_i, hi_i + 1)]
    out, j = [], 0
    for n in range(DRAW_POINTS):
        p = (n + 0.5) / DRAW_POINTS
        while j < len(grid) - 2 and grid[j + 1] < p:
            j += 1
        f0, f1 = grid[j], grid[j + 1]
        frac = 0.0 if f1 <= f0 else min(1.0, max(0.0, (p - f0) / (f1 - f0)))
        out.append(centre + (lo_i + j + frac) * step)
    return Residuals(tuple(out), cell + "/drawn")


def _t_quantile(p: float, nu: int) -> float:
    if p < 0.5:  # the t is symmetric
        return -_t_quantile(1.0 - p, nu)
    lo, hi = 0.0, 1.0
    while student_t_cdf(hi, nu) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_t_cdf(mid, nu) < p else (lo, mid)
    return hi


def _keys(metric: str, method: str, kind: str | None, known: bool | None) -> tuple[tuple, ...]:
    """A cell and its coarser fall-backs, finest first; `known` None pools seen and unseen stacks."""
    return ((metric, method, kind, known), (metric, None, kind, known), (metric, None, None, known),
            (metric, None, None, None))


@lru_cache(maxsize=1)
def shipped_bands() -> Bands | None:
    """The packaged cross-validation residuals (None when the package carries none)."""
    import json

    from .catalog._io import read_text

    try:
        doc = json.loads(read_text(SHIPPED))
    except (FileNotFoundError, ValueError):
        return None
    try:
        unseen = json.loads(read_text(SHIPPED_UNSEEN)).get("residuals") or None
    except (FileNotFoundError, ValueError):
        unseen = None
    return Bands(doc.get("residuals") or [], unseen)


# Stacks whose eager Hugging Face code is the model's own reference: their framework factors stay 1 (calibrate).
REFERENCE_STACKS = {"hf-trainer", "trainfit", "None"}


def calibrated_frameworks() -> set[str]:
    """The training stacks the shipped calibration has fitted factors for."""
    from .catalog.efficiency import shipped_calibration

    values = (shipped_calibration() or {}).get("values") or {}
    return {fw for name, entry in values.items() if name.startswith("framework_")
            for fw in (entry.get("by_framework") or {})}


def framework_known(framework: str | None) -> bool:
    """Whether the calibration has seen this training stack: a reference stack (whose eager Hugging Face code is
    the model's own) or one with fitted factors in the shipped calibration."""
    return framework is not None and framework != "None" and (framework in REFERENCE_STACKS
                                                               or framework in calibrated_frameworks())


def band_name(framework: str | None, known: bool) -> str:
    """Which band an estimate carries: "known-stack" (a stack the calibration has seen), "unseen-stack" (a named
    stack it has not) or "unstated-stack" (no --framework: any stack, the widest)."""
    if known:
        return "known-stack"
    return "unstated-stack" if framework in (None, "None") else "unseen-stack"


def measured_band(bands: Bands, metric: str, key: str, predicted: float, method: str, memory_kind: str | None,
                  known: bool, level: float = LEVEL) -> tuple[float, float] | None:
    """The band around a predicted value of the measured field `key` (step time: the inverse of throughput's)."""
    f = bands.interval(metric, method, memory_kind, known, level)
    if f is None:
        return None
    if key == "step_time_s":
        return predicted / f[1], predicted / f[0]
    return predicted * f[0], predicted * f[1]


# What the estimate's fit verdict compares with usable memory: the device total (nvidia-smi's counter).
VERDICT_KIND = "nvidia-smi"


def estimate_uncertainty(est, framework: str | None = None, bands: Bands | None = None,
                         level: float = LEVEL) -> dict[str, Any] | None:
    """{level, memory_gib: {low, high}, tokens_per_s: {low, high}, fit_probability, cells} for an Estimate, or
    None when no residuals are available. `framework`: the training stack (default: the one the estimate's
    efficiencies were resolved for, `--framework`); one the calibration has not seen, or none stated, gets the wider
    band."""
    from .units import GiB

    bands = bands or shipped_bands()
    if bands is None:
        return None
    if framework is None:
        framework = getattr(est.table, "framework", None)  # the stack the estimate was made for (--framework)
    known = framework_known(framework)
    method, mem = est.training.method.value, est.memory
    mem_f = bands.interval("memory", method, VERDICT_KIND, known, level)
    tps_f = bands.interval("throughput", method, None, known, level)
    out: dict[str, Any] = {"level": level, "framework": framework, "framework_known": known,
                           "band": band_name(framework, known),
                           "basis": "leave-one-source-out residuals (trainfit calibrate --cv source)" if known else
                           "a new stack's draw from leave-one-stack-out residuals (trainfit calibrate --cv framework)"}
    out["memory_gib"] = ({"low": round(mem.device * mem_f[0] / GiB, 2), "high": round(mem.device * mem_f[1] / GiB, 2)}
                         if mem_f else None)
    # throughput residuals are log(measured / predicted) of tokens/s (or of 1 / step time): the same factors
    out["tokens_per_s"] = ({"low": round(est.tokens_per_s * tps_f[0], 1), "high": round(est.tokens_per_s * tps_f[1], 1)}
                           if tps_f else None)
    p = _fit_probability(est, bands, known)
    out["fit_probability"] = None if p is None else round(p, 3)
    return out


def _fit_probability(est, bands: Bands, known: bool) -> float | None:
    """The probability the estimate's measured peak stays within its usable memory (unrounded)."""
    mem = est.memory
    need = mem.device - dict(mem.overheads).get("optimizer/paged_states_resident", 0.0)
    return bands.fit_probability(need, mem.usable, est.training.method.value, VERDICT_KIND, known)


# ---- one out-of-memory policy for estimate, compare, plan, generate and the web page ----------------------------
DEFAULT_MAX_OOM_RISK = 0.05  # the accepted probability that a configuration runs out of memory (--max-oom-risk)


def oom_risk(est) -> float | None:
    """The probability this configuration runs out of memory (1 - fit probability from the cross-validated bands;
    None without bands). The same number plan's search uses for each option."""
    bands = shipped_bands()
    if bands is None:
        return None
    p = _fit_probability(est, bands, framework_known(getattr(est.table, "framework", None)))
    return None if p is None else 1.0 - p  # unrounded: a limit compares with the probability, not its display


def within_policy(est, max_risk: float = DEFAULT_MAX_OOM_RISK) -> bool:
    """Whether `est` fits the way every command means it: the estimate fits and its out-of-memory risk is at most
    `max_risk` (by the estimate alone where no bands exist)."""
    if not est.fits:
        return False
    risk = oom_risk(est)
    return risk is None or risk <= max_risk + 1e-12


def check_max_oom_risk(value: float) -> float:
    from .errors import SpecError

    if not 0 < value < 1:
        from .i18n import say

        raise SpecError(say("ec_max_oom_risk", value=value))
    return value
