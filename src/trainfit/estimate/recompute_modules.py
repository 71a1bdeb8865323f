"""Megatron-Core's selective recompute modules in the per-layer activation coefficients of parallel3d (issue 34).
Pure Python, no imports: `arch` is a parallel3d.Arch (duck-typed, as parallel3d.arch_of takes a ModelSpec)."""

from __future__ import annotations


def recomputed_coefficients(arch, whole: float, sharded: float, modules: frozenset) -> tuple[float, float]:
    """Korthikanti's per-layer coefficients (multiples of s·b·h) less what Megatron-Core's recompute modules do not
    keep (TransformerConfig.recompute_modules, Megatron-LM d98e8a64 transformer_config.py L560-580; the layer spec
    gpt_layer_specs.py with Transformer Engine; transformer_layer.py L470-530):
      layernorm       the norms' outputs (2 each) are discarded and recomputed (output-discarding checkpoints), for
                      the norms that are modules of their own: the pre-MLP norm of an MoE layer (a dense MLP's is
                      fused into fc1, TELayerNormColumnParallelLinear), and the input norm under multi-latent
                      attention (standard attention fuses it into linear_qkv);
      moe_act         each expert copy's activation output, fc2's input (2·f/h per copy);
      moe             the whole MoE layer is checkpointed: its input kept (counted as fc1's), every expert copy's
                      tensors and the router's logits not;
      mlp             a dense MLP checkpointed (its input kept): nothing of an MoE layer (DeepSeek-V3's three dense
                      layers are not modelled apart);
      mla_up_proj     MLA's up projections' outputs (Q, K and V before the core) discarded: their inputs, the
                      latents, kept instead (replicated by TP: counted with the whole part);
      shared_experts  not modelled (the coefficients hold no shared expert): no change."""
    h = arch.hidden
    mlp = (6.0 if arch.gated_mlp else 4.0) * arch.intermediate / h
    k = max(1, arch.experts_per_tok)
    if "layernorm" in modules:
        whole -= 2.0 * (arch.is_moe + bool(arch.mla_latent))
    if arch.is_moe and "moe" in modules:
        sharded -= k * (mlp + 2.0) + 4.0 * arch.num_experts / h
    elif arch.is_moe and "moe_act" in modules:
        sharded -= k * 2.0 * arch.intermediate / h
    if not arch.is_moe and "mlp" in modules:
        sharded -= mlp
    if arch.mla_latent and "mla_up_proj" in modules:
        sharded -= 2.0 * arch.heads * arch.d / h + 4.0 * arch.kv_heads * arch.d / h
        whole += 2.0 * arch.mla_latent / h
    return whole, sharded
