"""One training configuration in, one Estimate out: memory per GPU, FLOPs, step time, throughput, bottleneck.
run_estimate takes either estimator by the strategy: the data-parallel one (estimator.py) or a model-parallel
layout's (model_parallel.py, which composes the data-parallel estimate of one pipeline stage).

Pure: no I/O, no printing, no torch. Everything it assumes is returned with the result.
"""

from __future__ import annotations

from ..catalog.efficiency import Efficiencies, EfficiencyView, recording, used_by
from ..spec.cluster import Cluster
from ..spec.model import ModelSpec
from ..spec.training import Strategy, TrainingSpec
from .activations import attention_that_runs
from .flops import step_flops
# The data-parallel estimator and the memory memos live below this module (model_parallel.py runs them for a stage
# without importing this one); their names are kept here.
from .estimator import (Estimate, _compatibility, _expert_warning, _length_assumption, _mfu_dtype,  # noqa: F401
                        _standing_assumptions, _used, adapt_to_gpu, check_compatibility, data_parallel_estimate,
                        gib, memory_of)
from .memory import MemoryResult, Phased, estimate_memory, finish_memory, host_offload_bytes, memory_phases  # noqa: F401
from .memos import _ASKED, _PHASES, _memory, _Recorder, clear_memos, phases_asked, view_agrees  # noqa: F401
from .trainable import split_params


def run_estimate(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster,
                 efficiencies: Efficiencies | None = None, view: EfficiencyView | None = None) -> Estimate:
    """The analytic estimate of one configuration. `view`: reuse one efficiency view per GPU (the search does; its
    estimates then carry the view's `used`, every value asked on that GPU so far). Without it the estimate carries
    exactly the values it asked (memoised work included: catalog/efficiency.recorded_cache), whatever ran before
    in the process (a long-lived server answers the same request the same way)."""
    if view is not None:
        return _run_estimate(m, t, s, cluster, view, None)
    eff = (efficiencies or Efficiencies.default()).shared_view(cluster.gpu)
    with recording() as keys:
        est = _run_estimate(m, t, s, cluster, eff, keys)
        est.memory  # noqa: B018 - computed on first use: here, while its values are recorded as the estimate's
        used = used_by(eff, keys)
    est.efficiencies.clear()
    est.efficiencies.update(used)
    return est


def _run_estimate(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                  keys: set | None) -> Estimate:
    warnings = check_compatibility(m, t, s, cluster)
    if s.is_3d:
        return _model_parallel_estimate(m, t, s, cluster, eff, warnings, keys)
    return data_parallel_estimate(m, t, s, cluster, eff, warnings, keys)


def _model_parallel_estimate(m: ModelSpec, t: TrainingSpec, s: Strategy, cluster: Cluster, eff: EfficiencyView,
                             warnings, keys: set | None = None) -> Estimate:
    """tp x pp x cp x ep x dp (estimate/model_parallel.py): the stage's compute from this estimator, the layout's
    communication, bubble and memory from parallel3d."""
    from .model_parallel import check_layout, step_time

    layout = check_layout(m, t, s)
    st, stage = step_time(m, t, s, cluster, eff, layout)
    split = split_params(m, t, int(eff("freeze_trainable_layers")))
    flops = step_flops(m, attention_that_runs(m, t).for_time, split)
    warnings = (*warnings, *stage.warnings, *(m.structure.notes if m.structure is not None else ()))
    return Estimate(m, t, s, cluster, split, flops, st, _used(eff, keys), tuple(dict.fromkeys(warnings)), eff.eff)
