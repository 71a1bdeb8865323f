"""Serving after training: will a model serve on these GPUs with vLLM / SGLang, how fast, at what cost.

Layers: spec (ServingSpec) -> engines (defaults read from the engines' code) -> memory / speed (pure formulas)
-> estimate (one setup) -> alternatives / search (many setups). No torch.
"""

from .estimate import ServingEstimate, serve
from .spec import ServingSpec

__all__ = ["ServingEstimate", "ServingSpec", "serve"]
