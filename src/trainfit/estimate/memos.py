"""The data-parallel memory estimate, memoised for the search: one configuration's memory per GPU, its phases shared
between GPUs whose efficiency values agree (issue 36). Below estimator.py (an Estimate's memory) and layout.py (a
model-parallel stage's own memory is this estimate of the stage on one GPU)."""

from __future__ import annotations

from ..catalog.efficiency import Efficiencies, EfficiencyView, recorded_cache
from ..spec.hardware import GpuSpec
from ..spec.model import ModelSpec
from ..spec.training import Strategy, TrainingSpec
from .memory import MemoryResult, Phased, finish_memory, memory_phases
from .trainable import ParamSplit


def data_parallel_memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, split: ParamSplit,
                         efficiencies: Efficiencies) -> MemoryResult:
    """Memory of a data-parallel configuration (no tp / pp / cp / ep), as estimator.memory_of gives it."""
    return _memory(m, t.for_memory, s, gpu, split, efficiencies)


@recorded_cache(maxsize=65536)
def _memory(m: ModelSpec, t: TrainingSpec, s: Strategy, gpu: GpuSpec, split: ParamSplit,
            efficiencies: Efficiencies) -> MemoryResult:
    """Memory depends on the GPU model and the GPU count, not on the instance: memoised for the search. The phases
    depend on the GPU only through the efficiency values they read, so a GPU whose values agree with those an earlier
    GPU's phases were built from takes them as they are (issue 36: a plan asks the same job on ten GPUs); only the
    allocator, context and usable memory are the GPU's own."""
    view = efficiencies.shared_view(gpu)
    key = (m, t, s, split, efficiencies)
    for asked, phased in _PHASES.get(key, ()):
        if view_agrees(view, asked):  # (view_agrees asks the view each value: they are recorded as asked)
            return finish_memory(phased, gpu, view, s)
    recorder = _Recorder(view)
    phased = memory_phases(m, t, s, split, recorder)
    if len(_PHASES) >= 65536:
        _PHASES.clear()
        _ASKED.clear()
    asked = tuple(recorder.asked.items())
    _PHASES.setdefault(key, []).append((asked, phased))
    _ASKED[id(phased.phases)] = asked
    return finish_memory(phased, gpu, view, s)


_PHASES: dict[tuple, list[tuple[tuple, Phased]]] = {}
_ASKED: dict[int, tuple] = {}  # id(Phased.phases) -> the values they were built from (the Phased lives in _PHASES)


def clear_memos() -> None:
    """Forget every memoised memory estimate and the phases shared between GPUs (a test that changes a term of the
    memory model must estimate afresh, not reuse phases built before the change)."""
    from .activations import _block_saved

    _memory.cache_clear()
    _PHASES.clear()
    _ASKED.clear()
    _block_saved.cache_clear()


def phases_asked(result: MemoryResult) -> tuple | None:
    """((name, link), value) of every efficiency value a memory result's phases were built from, or None when not
    known (a model-parallel estimate, or the record was cleared): `view_agrees` then says nothing."""
    return _ASKED.get(id(result.phases))


def view_agrees(view: EfficiencyView, asked: tuple) -> bool:
    """Whether this GPU's view gives every one of these values (so phases built from them are this GPU's too)."""
    return all(view(name, link=link) == value for (name, link), value in asked)


class _Recorder:
    """An efficiency view that remembers each value it gave (name, link) -> value. It has no `gpu`: the phases may
    not read the GPU but through the values (what makes sharing them exact)."""

    def __init__(self, view: EfficiencyView) -> None:
        self.view, self.asked, self.eff = view, {}, view.eff

    def __call__(self, name: str, link: str | None = None) -> float:
        value = self.view(name, link=link)
        self.asked[(name, link)] = value
        return value
