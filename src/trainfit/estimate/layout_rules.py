"""Why a tensor x pipeline x context x expert parallel layout cannot run this model (parallel3d.py's `Layout` of
an `Arch`): typed reasons, each worded by the message table (i18n/errors_commands.py ec_layout_*), with Megatron-Core's
own rule cited where it has one. parallel3d keeps these names. Pure: no torch; a layout and an architecture are read
by their attributes (this module imports neither parallel3d nor the spec package)."""

from __future__ import annotations

from enum import Enum

from ..spec import pp_layout as pp_stages


class Reason(str, Enum):
    """Why a layout cannot run; `text(lang)` words it. Megatron-Core's rule is cited where it has one."""

    HEADS_TP = "heads_tp"
    KV_HEADS_TP = "kv_heads_tp"
    LAYERS_STAGES = "layers_stages"
    EXPERTS_EP = "experts_ep"
    EP_WITHOUT_EXPERTS = "ep_without_experts"
    TP_ACROSS_NODES = "tp_across_nodes"
    GPU_COUNT = "gpu_count"
    EP_FOLDING = "ep_folding"
    SEQ_CP = "seq_cp"
    FEW_MICRO_BATCHES = "few_micro_batches"
    INTERLEAVED_MICRO_BATCHES = "interleaved_micro_batches"
    VPP_SCHEDULE = "vpp_schedule"
    MOE_TP_NEEDS_SP = "moe_tp_needs_sp"
    EP_OVERLAP_NEEDS_EP = "ep_overlap_needs_ep"
    EP_OVERLAP_NEEDS_VPP = "ep_overlap_needs_vpp"
    EP_OVERLAP_FULL_RECOMPUTE = "ep_overlap_full_recompute"
    EP_OVERLAP_MEGATRON = "ep_overlap_megatron"
    SPLIT_ACCOUNTED = "split_accounted"
    PP_LAYOUT = "pp_layout"  # a custom pipeline layout Megatron-Core refuses for this model (pp_stages.problem)
    PP_LAYOUT_SPLIT = "pp_layout_split"

    def text(self, lang: str = "en") -> str:
        return self.msg().render(lang)

    def msg(self):
        """The reason as a sentence of the message table (i18n/errors_commands.py), any language from it."""
        from ..i18n import say

        return say(f"ec_layout_{self.value}")


def layout_problems(arch: "Arch", layout: "Layout", gpus_per_node: int, *, gpus: int | None = None,
                    seq_len: int | None = None, micro_batches: int | None = None,
                    recompute: str | None = None) -> list[Reason]:
    """Every reason the layout cannot run (empty: it can). `gpus`, `seq_len`, `micro_batches` (per optimizer step,
    per data-parallel rank) are checked when given.

    KV heads: Megatron-Core's TransformerConfig accepts num_query_groups that are a multiple *or a divisor* of tp
    (attention.py replicates one group per rank when there are fewer groups than ranks); older Megatron wanted a
    multiple. EP: Megatron-Core's parallel_state requires world_size % (etp·ep·pp) == 0, i.e. etp·ep divides
    tp·cp·dp; with etp = tp that is the older rule "ep divides dp·cp". CP: arguments.py asserts
    seq_length % (2·cp) == 0. The expert all-to-all overlap: TransformerConfig.__post_init__ asserts ep > 1, virtual
    stages when pp > 1 and no full recomputation (`recompute`, when given)."""
    out: list[Reason] = []
    t = layout
    if arch.heads % t.tp:
        out.append(Reason.HEADS_TP)
    if arch.kv_heads % t.tp and t.tp % arch.kv_heads:
        out.append(Reason.KV_HEADS_TP)
    if t.pp_layout:  # a custom layout may leave a stage empty: its own rules (pp_stages.problem)
        if pp_stages.problem(t.pp_layout, t.pp, arch.layers) is not None:
            out.append(Reason.PP_LAYOUT)
        if t.split_embedding or t.split_loss or t.fsdp:  # Megatron-Core: the layout replaces the split's knobs
            out.append(Reason.PP_LAYOUT_SPLIT)
    elif arch.layers < t.pp * t.vpp:  # uneven splits run (torchtitan splits unevenly, Megatron-Core with
        out.append(Reason.LAYERS_STAGES)  # account_for_embedding/loss_in_pipeline_split): the busiest stage is timed
    if t.ep > 1 and not arch.is_moe:
        out.append(Reason.EP_WITHOUT_EXPERTS)
    elif arch.is_moe and arch.num_experts % t.ep:
        out.append(Reason.EXPERTS_EP)
    if t.tp > gpus_per_node or gpus_per_node % t.tp:
        out.append(Reason.TP_ACROSS_NODES)
    if gpus is not None and gpus != t.gpus:
        out.append(Reason.GPU_COUNT)
    if (t.tp * t.cp * t.dp) % (t.expert_tp * t.ep):
        out.append(Reason.EP_FOLDING)
    if t.cp > 1 and seq_len is not None and seq_len % (2 * t.cp):
        out.append(Reason.SEQ_CP)
    if t.pp > 1 and micro_batches is not None and micro_batches < t.pp:
        out.append(Reason.FEW_MICRO_BATCHES)
    if t.vpp > 1 and micro_batches is not None and micro_batches % t.pp:
        out.append(Reason.INTERLEAVED_MICRO_BATCHES)
    if (t.vpp > 1) != (t.schedule == "interleaved") or (t.vpp > 1 and t.pp == 1):
        out.append(Reason.VPP_SCHEDULE)
    if t.ep > 1 and t.tp > 1 and not t.sequence_parallel:
        out.append(Reason.MOE_TP_NEEDS_SP)
    if (t.split_embedding or t.split_loss) and not t.pp_layout:
        total = arch.layers + t.split_embedding + t.split_loss
        if t.fsdp or t.pp == 1 or total % t.pp or (total // t.pp) % t.vpp:
            out.append(Reason.SPLIT_ACCOUNTED)
    if t.ep_overlap:
        if t.ep == 1:
            out.append(Reason.EP_OVERLAP_NEEDS_EP)
        if t.pp > 1 and t.vpp == 1:
            out.append(Reason.EP_OVERLAP_NEEDS_VPP)
        if recompute == "full":
            out.append(Reason.EP_OVERLAP_FULL_RECOMPUTE)
        if t.fsdp:
            out.append(Reason.EP_OVERLAP_MEGATRON)
    return out
