"""Spot instances can be reclaimed: the expected cost of interruptions and the checkpoint interval that minimises it.

Young's first-order optimum (J. W. Young, "A first order approximation to the optimum checkpoint interval",
CACM 17(9), 1974; Daly 2006 refines it): with checkpoint write time C and mean time between interruptions M,
checkpoint every tau = sqrt(2 C M). Each interruption then loses, on average, half an interval of work (plus the
checkpoint in flight) and a restart R (a new instance, image, model and checkpoint load). A job on n instances is
interrupted when any of them is reclaimed: M_job = M / n.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MIN_INTERVAL_H = 1.0 / 60.0  # never checkpoint more often than once a minute (C ~ 0 would ask for it)


@dataclass(frozen=True)
class SpotOverhead:
    mtbi_h: float  # mean time between interruptions of the whole job
    checkpoint_write_h: float  # C: one checkpoint
    interval_h: float  # tau: between checkpoints
    checkpoints: int
    interruptions: float  # expected number
    lost_h: float  # expected recomputed work
    restarts_h: float  # expected restart time
    checkpoints_h: float  # time spent writing checkpoints

    @property
    def overhead_h(self) -> float:
        return self.checkpoints_h + self.lost_h + self.restarts_h

    def to_dict(self) -> dict:
        return {"mtbi_hours": round(self.mtbi_h, 3), "checkpoint_write_hours": round(self.checkpoint_write_h, 4),
                "checkpoint_interval_hours": round(self.interval_h, 3), "checkpoints": self.checkpoints,
                "expected_interruptions": round(self.interruptions, 2), "lost_work_hours": round(self.lost_h, 3),
                "restart_hours": round(self.restarts_h, 3), "checkpoint_hours": round(self.checkpoints_h, 3),
                "interruption_overhead_hours": round(self.overhead_h, 3)}


def young_interval(checkpoint_h: float, mtbi_h: float) -> float:
    """tau = sqrt(2 C M) (Young 1974), at least MIN_INTERVAL_H."""
    return max(MIN_INTERVAL_H, math.sqrt(2.0 * checkpoint_h * mtbi_h))


def spot_overhead(train_h: float, checkpoint_h: float, instance_mtbi_h: float, nodes: int,
                  restart_h: float) -> SpotOverhead:
    """Expected extra wall-clock hours of a `train_h`-hour job on `nodes` spot instances (first order)."""
    m = instance_mtbi_h / nodes
    tau = young_interval(checkpoint_h, m)
    n_ckpt = max(1, math.ceil(train_h / tau))
    ckpt_h = n_ckpt * checkpoint_h
    interruptions = (train_h + ckpt_h) / m
    lost = interruptions * (tau + checkpoint_h) / 2.0
    return SpotOverhead(m, checkpoint_h, tau, n_ckpt, interruptions, lost, interruptions * restart_h, ckpt_h)
