"""What every generator reads and shares, below them all: the Setup (setup.py builds and checks one from a plan.json
or from estimate flags) and one_line, for user text inside a generated script's comment."""

from __future__ import annotations

from dataclasses import dataclass

from ..textsafe import plain


@dataclass(frozen=True)
class Setup:
    """The chosen configuration, as generate needs it."""

    model: dict  # name, hf_id, source, hf_config
    workload: dict  # task, seq_len, global_batch, processed_tokens, epochs
    choice: dict  # provider/instance/gpu/gpus_per_node/nodes/strategy/plan numbers

    @property
    def strategy(self) -> dict:
        return self.choice["strategy"]

    @property
    def world_size(self) -> int:
        return int(self.choice["gpus_per_node"]) * int(self.choice["nodes"])


def one_line(text: object) -> str:
    """Text safe inside a shell comment: control characters (a newline would end the comment) and bidi overrides (a
    comment that reads otherwise than it runs) become spaces."""
    return plain(text)
