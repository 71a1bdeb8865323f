"""trainfit.estimate.parallel3d (issue 34): every formula against a hand-computed case (arithmetic in the comments),
memory against Megatron-LM's own theoretical_memory_usage.py (transcribed below as an independent reference), each
validity rule hit and missed, and Chinese text for every reason."""

from __future__ import annotations

import math
import re
from types import SimpleNamespace

import pytest

from trainfit.estimate import parallel3d as p3
from trainfit.estimate.parallel3d import Arch, Layout, Links, Overlap, Reason

# GPT-style block as in Korthikanti et al.: a·d = h, MHA, f = 4h, GeLU, LayerNorm, dropout
GPT = Arch(hidden=1024, layers=24, heads=16, kv_heads=16, intermediate=4096, vocab=51200)
LLAMA8B = Arch(hidden=4096, layers=32, heads=32, kv_heads=8, intermediate=14336, vocab=128256, gated_mlp=True,
               layernorm=False, dropout=False)
MOE = Arch(hidden=1024, layers=8, heads=16, kv_heads=16, intermediate=4096, vocab=32000, num_experts=8,
           experts_per_tok=2)
SBH = 2048 * 1 * 1024  # s·b·h for s = 2048, b = 1, h = 1024: 2,097,152


def close(a: float, b: float, rel: float = 1e-12) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-18)


# ---- activations (Korthikanti et al. 2022, Table 2) ----------------------------------------------------------------

def test_korthikanti_table2_rows():
    def act(tp, sp, recompute="none", cp=1):
        return p3.layer_activation_bytes(GPT, Layout(tp=tp, cp=cp, sequence_parallel=sp), 2048, 1,
                                         recompute=recompute)
    # 5·a·s/h = 5·16·2048/1024 = 160
    # no parallelism: sbh(34 + 160) = 2,097,152 · 194 = 406,847,488
    assert act(1, False) == 406_847_488
    # TP 4: sbh(10 + 24/4 + 160/4) = sbh · 56 = 117,440,512
    assert act(4, False) == 117_440_512
    # TP 4 + SP: sbh/4 · (34 + 160) = sbh · 48.5 = 101,711,872
    assert act(4, True) == 101_711_872
    # TP 4, selective: sbh(10 + 6) = 33,554,432
    assert act(4, False, "selective") == 33_554_432
    # TP 4 + SP, selective: 34·sbh/4 = 17,825,792
    assert act(4, True, "selective") == 17_825_792
    # full recompute: 2·sbh = 4,194,304 without SP, /4 with SP = 1,048,576
    assert act(4, False, "full") == 4_194_304
    assert act(4, True, "full") == 1_048_576
    # CP 2 halves every sequence tensor: 17,825,792 / 2 = 8,912,896
    assert act(4, True, "selective", cp=2) == 8_912_896


def test_flash_attention_drops_the_s2_term_and_generalised_coefficients():
    # GPT: (10, 24, 5·a·s/h = 160)
    assert p3.layer_activation_coefficients(GPT, 2048) == (10.0, 24.0, 160.0)
    assert p3.layer_activation_coefficients(GPT, 2048, flash_attention=True)[2] == 0.0
    # Llama-3-8B, no dropout: whole = LN inputs 4 + QKV input 2 + fc1 input 2 = 8
    # sharded = Q 2·1 + K,V 4·(8·128/4096 = 0.25) = 1 + proj input 2 + SwiGLU 6·14336/4096 = 21  -> 26
    # s² (eager, no dropout): 4·a·s/h = 4·32·8192/4096 = 256
    assert p3.layer_activation_coefficients(LLAMA8B, 8192) == (8.0, 26.0, 256.0)


def test_in_flight_layers_per_schedule():
    # L = 24 on pp = 4: 6 layers a stage
    assert p3.in_flight_layers(GPT, Layout(pp=4), 8) == 24.0  # 1F1B: min(4, 8) = 4 micro-batches x 6 = 24
    assert p3.in_flight_layers(GPT, Layout(pp=4), 2) == 12.0  # min(4, 2) = 2 x 6 = 12
    assert p3.in_flight_layers(GPT, Layout(pp=4), 8, stage="last") == 6.0
    # interleaved v = 2: Megatron's 24 · (1 + 3/(4·2)) = 24 · 1.375 = 33
    assert p3.in_flight_layers(GPT, Layout(pp=4, vpp=2, schedule="interleaved"), 8) == 33.0
    assert p3.in_flight_layers(GPT, Layout(pp=4, schedule="zb"), 8) == 24.0  # ZB-H1: 1F1B's peak
    assert p3.in_flight_layers(GPT, Layout(), 8) == 24.0  # no pipeline: all layers, one micro-batch


def test_full_recompute_adds_one_layer_working_set():
    t = Layout(tp=2, sequence_parallel=True)
    acts = p3.activation_bytes(GPT, t, seq_len=2048, micro_batch=1, micro_batches=1, recompute="full",
                               flash_attention=True)
    # stored: 24 layers x 2·sbh/2 = 24 · 2,097,152 = 50,331,648
    assert acts["activations/layers"] == 50_331_648
    # working set: sbh · 34/2 (flash: no s² part) = 2,097,152 · 17 = 35,651,584
    assert acts["activations/recompute_working_set"] == 35_651_584


def test_moe_dispatch_buffer_and_expert_activations():
    t = Layout(ep=4, dp=4)
    acts = p3.activation_bytes(MOE, t, seq_len=2048, micro_batch=1, micro_batches=1, recompute="selective")
    # dispatch: sent + received, 2 bytes, k = 2: 2·2·2·2048·1024 = 16,777,216
    assert acts["activations/moe_dispatch"] == 16_777_216
    # MoE MLP coefficient: k·(4f/h + 2) + 4E/h = 2·(16 + 2) + 32/1024 = 36.03125; sharded = 8 + 36.03125
    whole, sharded, _ = p3.layer_activation_coefficients(MOE, 2048)
    assert (whole, sharded) == (10.0, 44.03125)


# ---- parameters and model states -----------------------------------------------------------------------------------

def test_stage_params_by_hand():
    # block: attention 4h² = 4,194,304; MLP 2hf = 8,388,608; norms 2·2h = 4,096
    assert p3.layer_params(GPT) == {"attention": 4_194_304, "dense_mlp": 8_388_608, "experts": 0.0,
                                    "replicated": 4096}
    one = p3.stage_params(GPT, Layout())
    # 24 blocks 302,088,192 + embedding 51200·1024 = 52,428,800 + untied head 52,428,800 + final norm 2048
    assert one.total == 406_947_840
    tied = p3.stage_params(replace_arch(GPT, tie_embeddings=True), Layout())
    assert tied.total == 406_947_840 - 52_428_800
    # tp 2, pp 2, first stage: 12 blocks; sharded (12·12,582,912 + 52,428,800)/2 = 101,711,872; norms 12·4096
    first = p3.stage_params(GPT, Layout(tp=2, pp=2, dp=2))
    assert (first.tp_sharded, first.replicated, first.layers) == (101_711_872, 49_152, 12)
    last = p3.stage_params(GPT, Layout(tp=2, pp=2, dp=2), stage="last")
    assert last.replicated == 49_152 + 2048  # + final norm
    # Megatron pads the vocabulary to 128·tp: 50257 -> 50432 for tp 2 (197 · 256)
    assert p3.padded_vocab(50257, 2) == 50432


def test_expert_params_split_by_ep_and_etp():
    # MoE block experts: 8 · 2·1024·4096 = 67,108,864; 8 blocks; ep 4, etp 1 -> / 4
    st = p3.stage_params(MOE, Layout(ep=4, dp=4))
    assert st.expert == 8 * 67_108_864 / 4
    st2 = p3.stage_params(MOE, Layout(tp=2, ep=2, etp=2, dp=2, sequence_parallel=True))
    assert st2.expert == 8 * 67_108_864 / 4


def test_model_states_distributed_optimizer_and_fsdp():
    t = Layout(dp=4, distributed_optimizer=True)
    s = p3.model_state_bytes(GPT, t)
    # 406,947,840 params: weights 2 B, main grads 4 B, 12 B of states / 4
    assert s == {"weights/params": 2 * 406_947_840, "gradients/main_grads": 4 * 406_947_840,
                 "optimizer/states": 3 * 406_947_840}
    # the distributed optimizer shards over dp·cp (Megatron's dp_cp group), not dp alone
    s_cp = p3.model_state_bytes(GPT, Layout(dp=2, cp=2, distributed_optimizer=True))
    assert s_cp["optimizer/states"] == 3 * 406_947_840
    f = p3.model_state_bytes(GPT, Layout(dp=4, fsdp=True))
    # FSDP: (4 + 12)/4 = 4 bytes per parameter sharded; gathered: 2 blocks (2·12,587,008) + embeddings/head/norm
    # (104,859,648) = 130,033,664 params x 2 B
    assert f["gradients/sharded"] + f["optimizer/sharded"] == 4 * 406_947_840
    assert f["weights/gathered"] == 2 * (2 * 12_587_008 + 104_859_648)
    # FSDP under PP: the whole stage gathered (16 bit), and its gradients kept unsharded across micro-batches in
    # FSDP2's reduce dtype, fp32 (FSDPParam.to_accumulated_grad_if_needed; torchtitan's mixed_precision_reduce)
    # first stage of pp 2: 12 blocks 151,044,096 + embedding 52,428,800 = 203,472,896 params
    fp = p3.model_state_bytes(GPT, Layout(pp=2, dp=4, fsdp=True))
    assert fp["weights/gathered"] == 2 * 203_472_896 and fp["gradients/unsharded"] == 4 * 203_472_896


# ---- Megatron-LM's theoretical_memory_usage.py, transcribed (commit d98e8a64) -------------------------------------

def megatron_weight_and_optimizer(args) -> float:
    """compute_weight_and_optimizer_memory for a dense GPT without MTP / MLA (the branches that apply)."""
    query_projection_to_hidden_size_ratio = args.kv_channels * args.num_attention_heads / args.hidden_size
    gated = 3 / 2 if args.swiglu else 1
    norm_size = 1 if args.normalization == "RMSNorm" else 2
    self_attn = 2 * args.hidden_size * args.hidden_size * (
        (1 + args.num_query_groups / args.num_attention_heads) * query_projection_to_hidden_size_ratio)
    embedding_size = args.hidden_size * args.padded_vocab_size
    final_layernorm = norm_size * args.hidden_size
    dense_mlp = 2 * args.hidden_size * args.ffn_hidden_size * gated
    layernorm = 2 * args.hidden_size * norm_size
    tp_sharded_in_block = (self_attn + dense_mlp) * args.num_layers
    replicated_in_block = layernorm * args.num_layers + final_layernorm
    tp_on_shard = (tp_sharded_in_block / args.pipeline_model_parallel_size + embedding_size) \
        / args.tensor_model_parallel_size
    replicated_on_shard = replicated_in_block / args.pipeline_model_parallel_size
    if args.untie_embeddings_and_output_weights and args.pipeline_model_parallel_size == 1:
        tp_on_shard += embedding_size / args.tensor_model_parallel_size
    per_param = 18 if not args.use_distributed_optimizer else 6 + 12 / args.data_parallel_size
    return (tp_on_shard + replicated_on_shard) * per_param


def megatron_activation_sp_selective(args, num_microbatches) -> float:
    """compute_activation_memory (the SP + selective branch)."""
    act = args.seq_length * args.micro_batch_size * args.hidden_size * (
        18 + 4 * args.ffn_hidden_size / args.hidden_size)
    act *= args.num_layers
    act += 8 * args.seq_length * args.micro_batch_size * args.pipeline_model_parallel_size
    act += args.seq_length * args.micro_batch_size * args.hidden_size * args.pipeline_model_parallel_size
    if args.virtual_pipeline_model_parallel_size is not None:
        act *= 1 + (args.pipeline_model_parallel_size - 1) / (
            args.pipeline_model_parallel_size * args.virtual_pipeline_model_parallel_size)
    if args.virtual_pipeline_model_parallel_size is None and args.pipeline_model_parallel_size > 1:
        if num_microbatches is not None:
            act *= min(1, num_microbatches / args.pipeline_model_parallel_size)
    if args.pipeline_model_parallel_size == 1:
        act += args.seq_length * args.micro_batch_size * args.hidden_size * 4 * (
            1 + args.padded_vocab_size / args.hidden_size)
    return act / args.tensor_model_parallel_size


MEGATRON_GPT = Arch(hidden=2048, layers=24, heads=16, kv_heads=16, intermediate=8192, vocab=50257)


def megatron_args(tp, pp, dp, vpp=None, dist_opt=True, untie=True, s=2048, b=2):
    return SimpleNamespace(kv_channels=128, num_attention_heads=16, num_query_groups=16, hidden_size=2048,
                           ffn_hidden_size=8192, num_layers=24, swiglu=False, normalization="LayerNorm",
                           padded_vocab_size=p3.padded_vocab(50257, tp), untie_embeddings_and_output_weights=untie,
                           tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp, data_parallel_size=dp,
                           use_distributed_optimizer=dist_opt, seq_length=s, micro_batch_size=b,
                           virtual_pipeline_model_parallel_size=vpp)


@pytest.mark.parametrize("tp,pp,dp,vpp,dist_opt", [(2, 1, 4, None, False), (2, 2, 4, None, True),
                                                    (4, 2, 2, 3, True)])
def test_memory_matches_megatron_theoretical_memory_usage(tp, pp, dp, vpp, dist_opt):
    args = megatron_args(tp, pp, dp, vpp, dist_opt)
    layout = Layout(tp=tp, pp=pp, dp=dp, vpp=vpp or 1, schedule="interleaved" if vpp else "1f1b",
                    sequence_parallel=True, distributed_optimizer=dist_opt)
    m = 8
    mine = p3.memory_per_gpu(MEGATRON_GPT, layout, seq_len=2048, micro_batch=2, micro_batches=m,
                             recompute="selective")
    states = mine.part("weights") + mine.part("gradients") + mine.part("optimizer")
    ref_states = megatron_weight_and_optimizer(args)
    # the one documented difference: Megatron counts the final LayerNorm as 1/pp on every stage; here it sits on
    # the last stage only (2·2048 params x bytes per parameter, / pp), so they agree exactly for pp = 1
    per_param = 18 if not dist_opt else 6 + 12 / dp
    assert close(states + (pp > 1) * (2 * 2048 / pp) * per_param, ref_states)
    ref_acts = megatron_activation_sp_selective(args, m)
    assert close(mine.part("activations") + mine.part("logits"), ref_acts)


# ---- validity ------------------------------------------------------------------------------------------------------

def problems(arch=GPT, gpus_per_node=8, **kw):
    layout_kw = {k: v for k, v in kw.items() if k not in ("gpus", "seq_len", "micro_batches")}
    extra = {k: v for k, v in kw.items() if k in ("gpus", "seq_len", "micro_batches")}
    return p3.layout_problems(arch, Layout(**layout_kw), gpus_per_node, **extra)


def replace_arch(arch: Arch, **kw) -> Arch:
    from dataclasses import replace
    return replace(arch, **kw)


CASES = [
    # reason, arch, layout/inputs that hit, that miss
    (Reason.HEADS_TP, GPT, dict(tp=3), dict(tp=4)),  # 16 % 3 != 0
    # kv 8, tp 16 on 16-GPU nodes: 8 divides 16 -> replicated, fine; kv 6, tp 4: neither multiple nor divisor
    (Reason.KV_HEADS_TP, "kv6", dict(tp=4), dict(tp=2)),
    (Reason.LAYERS_STAGES, GPT, dict(pp=8, vpp=4, schedule="interleaved"), dict(pp=5)),  # 32 stages > 24 layers; 5 uneven is run
    (Reason.EXPERTS_EP, MOE, dict(ep=3, dp=3), dict(ep=4, dp=4)),  # 8 experts
    (Reason.EP_WITHOUT_EXPERTS, GPT, dict(ep=2, dp=2), dict(dp=2)),
    (Reason.TP_ACROSS_NODES, GPT, dict(tp=16), dict(tp=8)),  # 8 GPUs a node
    (Reason.GPU_COUNT, GPT, dict(tp=2, dp=4, gpus=16), dict(tp=2, dp=8, gpus=16)),
    (Reason.EP_FOLDING, MOE, dict(ep=8, dp=4), dict(ep=4, dp=4)),  # ep·etp = 8 does not divide tp·cp·dp = 4
    (Reason.SEQ_CP, GPT, dict(cp=4, dp=2, seq_len=2052), dict(cp=4, dp=2, seq_len=2048)),  # 2052 % 8 = 4
    (Reason.FEW_MICRO_BATCHES, GPT, dict(pp=4, micro_batches=3), dict(pp=4, micro_batches=4)),
    (Reason.INTERLEAVED_MICRO_BATCHES, GPT, dict(pp=4, vpp=2, schedule="interleaved", micro_batches=6),
     dict(pp=4, vpp=2, schedule="interleaved", micro_batches=8)),
    (Reason.VPP_SCHEDULE, GPT, dict(pp=4, vpp=2), dict(pp=4, vpp=2, schedule="interleaved")),
    (Reason.MOE_TP_NEEDS_SP, MOE, dict(tp=2, ep=2, dp=2), dict(tp=2, ep=2, dp=2, sequence_parallel=True)),
]


@pytest.mark.parametrize("reason,arch,hit,miss", CASES, ids=[c[0].value for c in CASES])
def test_each_rule_hit_and_missed(reason, arch, hit, miss):
    if arch == "kv6":
        arch = replace_arch(GPT, heads=24, kv_heads=6, head_dim=64)  # 24 heads: tp 4 and 2 divide them
    assert reason in problems(arch, **hit)
    assert reason not in problems(arch, **miss)


def test_kv_heads_fewer_than_tp_are_replicated_not_refused():
    # Megatron-Core accepts num_query_groups that divide tp (one group replicated per rank): kv 2, tp 8
    arch = replace_arch(GPT, heads=32, kv_heads=2, head_dim=32)
    assert Reason.KV_HEADS_TP not in problems(arch, tp=8)


def test_a_good_layout_has_no_problem():
    assert problems(LLAMA8B, tp=8, pp=4, vpp=2, cp=2, dp=2, schedule="interleaved", sequence_parallel=True,
                    gpus=128, seq_len=8192, micro_batches=8) == []


def test_layout_rejects_nonsense():
    with pytest.raises(ValueError):
        Layout(tp=0)
    with pytest.raises(ValueError):
        Layout(schedule="gpipe")
    with pytest.raises(ValueError):
        Layout(dp=True)


CJK = re.compile(r"[\u4e00-\u9fff]")
ENGLISH_RUN = re.compile(r"\b[a-z]+(?:[ \t]+[a-z]+){2,}\b", re.I)


@pytest.mark.parametrize("reason", list(Reason), ids=[r.value for r in Reason])
def test_every_reason_has_english_and_chinese(reason):
    en, zh = reason.text("en"), reason.text("zh")
    assert en and zh and en != zh
    assert not CJK.search(en)
    assert len(CJK.findall(zh)) >= 8
    assert not ENGLISH_RUN.search(zh), zh  # no run of three English words left untranslated


# ---- collectives and time ------------------------------------------------------------------------------------------

def test_ring_collectives():
    # all-reduce 1 GB on 8 ranks at 100 GB/s: 2·7/8 · 1e9 / 1e11 = 0.0175 s; all-gather half of that
    assert close(p3.all_reduce_s(1e9, 8, 1e11), 0.0175)
    assert close(p3.all_gather_s(1e9, 8, 1e11), 0.00875)
    assert close(p3.reduce_scatter_s(1e9, 8, 1e11), 0.00875)
    assert close(p3.all_to_all_s(1e9, 4, 1e11), 0.0075)  # 3/4 · 1e9 / 1e11
    assert p3.all_reduce_s(1e9, 1, 1e11) == 0.0


def test_group_bandwidth_placement():
    intra, inter = 100e9, 25e9
    assert p3.group_bandwidth(8, 1, 8, intra, inter) == intra  # TP 8 in a node
    assert p3.group_bandwidth(4, 2, 8, intra, inter) == intra  # 2·4 = 8 <= 8
    assert p3.group_bandwidth(4, 8, 8, intra, inter) == inter  # one member per node: one NIC
    assert p3.group_bandwidth(4, 4, 8, intra, inter) == 50e9  # 2 members a node: 2 NICs
    assert p3.group_bandwidth(32, 1, 8, intra, inter) == intra  # 8 NICs = 200 GB/s > NVLink: NVLink bounds


LINKS = Links(intra=100e9, inter=25e9, gpus_per_node=8)


def test_tp_comm_per_layer():
    # buffer s·b·h·2 = 4,194,304 B; tp 4 in a node at 100 GB/s: all-reduce 2·3/4·4,194,304/1e11 = 6.291456e-5 s
    one = 6.291456e-5
    t = Layout(tp=4)
    assert close(p3.tp_comm_per_layer_s(GPT, t, LINKS, 2048, 1), 4 * one)  # 2 forward + 2 backward
    assert close(p3.tp_comm_per_layer_s(GPT, t, LINKS, 2048, 1, recompute="full"), 6 * one)
    sp = Layout(tp=4, sequence_parallel=True)  # all-gather + reduce-scatter: the same bytes
    assert close(p3.tp_comm_per_layer_s(GPT, sp, LINKS, 2048, 1), 4 * one)
    assert p3.tp_comm_per_layer_s(GPT, Layout(), LINKS, 2048, 1) == 0.0


def test_cp_ring_per_layer():
    # tp 4, cp 2: kv heads per rank 16/4 = 4, d = 64; chunk = 2·1·1024·4·64·2 = 1,048,576 B
    # cp group stride 4, size 2: 8 <= 8 -> NVLink 1e11: 1.048576e-5 s a step; 1 step x (1 fwd + 2 bwd)
    t = Layout(tp=4, cp=2)
    assert close(p3.cp_comm_per_layer_s(GPT, t, LINKS, 2048, 1), 3 * 1.048576e-5)
    assert close(p3.cp_comm_per_layer_s(GPT, t, LINKS, 2048, 1, recompute="full"), 4 * 1.048576e-5)


def test_ep_all_to_all_per_layer():
    # tokens 2048, k 2, h 1024, 2 B: 8,388,608 B; ep 4 stride 1: 3/4 · 8,388,608 / 1e11 = 6.291456e-5 s
    t = Layout(ep=4, dp=4)
    assert close(p3.ep_comm_per_layer_s(MOE, t, LINKS, 2048, 1), 4 * 6.291456e-5)  # dispatch+combine, fwd+bwd
    assert p3.ep_comm_per_layer_s(GPT, Layout(dp=4), LINKS, 2048, 1) == 0.0


def test_pipeline_p2p():
    # tp 2, cp 1, dp 2, pp 4: stride 4, size 4 -> 2 members a node -> min(1e11, 2·25e9) = 5e10 B/s
    # message s·b·h·2 / tp = 4,194,304/2 = 2,097,152 B; 2 sends (v = 1): 2 · 2,097,152 / 5e10 = 8.388608e-5 s
    t = Layout(tp=2, dp=2, pp=4)
    assert close(p3.p2p_per_micro_batch_s(GPT, t, LINKS, 2048, 1), 8.388608e-5)


def test_dp_gradient_sync():
    # 406,947,840 params x 4 B = 1,627,791,360 B; dp 4 in a node: all-reduce 2·3/4 · 1.62779136e9 / 1e11
    assert close(p3.dp_comm_s(GPT, Layout(dp=4), LINKS, micro_batches=1), 0.0244168704)
    # distributed optimizer: reduce-scatter of 4 B grads + all-gather of 2 B weights = 3/4·6 B·N / 1e11
    dist = p3.dp_comm_s(GPT, Layout(dp=4, distributed_optimizer=True), LINKS, micro_batches=1)
    assert close(dist, 0.75 * 6 * 406_947_840 / 1e11)
    # dp·cp: cp ranks join the gradient reduction (stride tp = 1, size 4)
    assert close(p3.dp_comm_s(GPT, Layout(dp=2, cp=2), LINKS, micro_batches=1), 0.0244168704)


def test_bubble_per_schedule():
    assert p3.bubble_micro_batches(Layout(pp=4), 8) == 3.0  # (p-1)
    assert p3.bubble_micro_batches(Layout(pp=4, vpp=2, schedule="interleaved"), 8) == 1.5  # (p-1)/v
    # ZB-H1, F = B = W = 1/3: W = 0.5 · (1 - 1/3) = 1/3 -> 3 · (1 - 2/3) = 1, a third of 1F1B's
    assert close(p3.bubble_micro_batches(Layout(pp=4, schedule="zb"), 8), 1.0)
    assert p3.bubble_micro_batches(Layout(dp=4), 8) == 0.0


def test_step_time_composition():
    # pp 4, m 8, forward 1 s, backward 2 s a micro-batch; sends hidden (p2p overlap 1), no dp
    t = Layout(pp=4)
    parts = p3.step_time(GPT, t, LINKS, seq_len=2048, micro_batch=1, micro_batches=8, compute_fwd_s=1.0,
                         compute_bwd_s=2.0, overlap=Overlap(p2p=1.0), optimizer_s=0.5, overhead_s=0.01)
    # compute 8 · 3 = 24; bubble 3 · 3 = 9 (= 24 · (p-1)/m = 24 · 3/8); + 0.5 + 0.01
    assert parts.parts == {"compute": 24.0, "pipeline/bubble": 9.0, "optimizer": 0.5, "overhead": 0.01}
    assert close(parts.total, 33.51)
    # TP 4 exposed: 6 layers x 4 · 6.291456e-5 per micro-batch, in every one of the m + p - 1 = 11 slots
    tp = Layout(tp=4, pp=4, dp=1)
    parts = p3.step_time(GPT, tp, LINKS, seq_len=2048, micro_batch=1, micro_batches=8, compute_fwd_s=1.0,
                         compute_bwd_s=2.0, overlap=Overlap(p2p=1.0))
    per_mb = 6 * 4 * 6.291456e-5
    assert close(parts.parts["communication/tp"], 8 * per_mb)
    assert close(parts.parts["pipeline/bubble"], 3 * (3.0 + per_mb))
    half = p3.step_time(GPT, tp, LINKS, seq_len=2048, micro_batch=1, micro_batches=8, compute_fwd_s=1.0,
                        compute_bwd_s=2.0, overlap=Overlap(tp=0.5, p2p=1.0))
    assert close(half.parts["communication/tp"], 4 * per_mb)


def test_cp_ring_hides_behind_attention():
    t = Layout(tp=4, cp=2)
    ring = p3.cp_comm_per_layer_s(GPT, t, LINKS, 2048, 1)  # 3.145728e-5 s a layer
    # attention share 0.5 of 24 layers' 0.024 s: 0.0005 s a layer, more than the ring: hidden
    hidden = p3.step_time(GPT, t, LINKS, seq_len=2048, micro_batch=1, micro_batches=1, compute_fwd_s=0.008,
                          compute_bwd_s=0.016, attention_share=0.5)
    assert "communication/cp" not in hidden.parts
    exposed = p3.step_time(GPT, t, LINKS, seq_len=2048, micro_batch=1, micro_batches=1, compute_fwd_s=0.008,
                           compute_bwd_s=0.016, attention_share=0.0)
    assert close(exposed.parts["communication/cp"], 24 * ring)


def test_tokens_per_s_per_gpu():
    # m 4 x b 2 x s 1024 x dp 2 = 16,384 tokens a step over 2·2·2 = 8 GPUs in 2 s: 1,024 tokens/s per GPU
    t = Layout(tp=2, pp=2, dp=2)
    assert p3.tokens_per_s_per_gpu(t, seq_len=1024, micro_batch=2, micro_batches=4, step_s=2.0) == 1024.0


def test_arch_of_a_trainfit_model():
    from trainfit.catalog import resolve_model

    m = resolve_model("llama-3-8b")
    a = p3.arch_of(m)
    assert (a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate, a.gated_mlp) == (4096, 32, 32, 8, 14336, True)


def test_no_torch_import():
    import subprocess
    import sys

    code = ("import sys; import trainfit.estimate.parallel3d; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
