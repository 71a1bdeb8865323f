"""Structure records (torch-free): the traced depths follow the block pattern; a shipped structure round-trips."""

import pytest

from trainfit.spec.structure import Structure, structure_from_dict, structure_to_dict


@pytest.mark.parametrize("pattern,depths", [
    ((0,) * 32, (2, 3)),                              # uniform stack: the usual 2 and 3 blocks
    ((0,) + (1,) * 26, (2, 3)),                       # one dense-first layer, then MoE blocks
    ((0, 0, 0) + (1,) * 58, (4, 5)),                  # DeepSeek-V3: 3 dense-first layers
    ((0, 0, 0, 1) * 12, (4, 8)),                      # 3 linear-attention layers to 1 full (Qwen3-Next)
    ((0, 0, 0, 0, 0, 1) * 4 + (0, 0), (6, 12)),       # Gemma 3: 5 sliding to 1 global, a partial last repeat
    ((0, 1, 2), (3, 3)),                              # no repeat to extrapolate: the full depth
])
def test_trace_depths_hold_the_pattern_head_and_one_repeat(pattern, depths):
    assert Structure((), (), "", "", (), pattern).trace_depths() == depths


def test_structure_round_trips_through_json_dicts():
    from trainfit.catalog import all_models

    preset = next(p for p in all_models().values() if p.structure is not None)
    s = preset.spec().structure
    assert structure_from_dict(structure_to_dict(s)) == s
