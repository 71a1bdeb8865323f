"""Time-model mechanisms found from the leave-one-source-out throughput error (issue 13): FlashAttention in Triton
(llm-foundry's attn_impl='triton'), a GPTQ int4 base's unpacking in torch ops (the Qwen README's Q-LoRA), and the
kernel launches of optimizers that loop over the parameters in Python (Adafactor, for-loop AdamW), hidden behind the
last backward except under fp16 loss scaling."""

import copy
from dataclasses import replace
from pathlib import Path

import pytest

from trainfit.catalog import get_gpu, resolve_model
from trainfit.catalog.efficiency import Efficiencies
from trainfit.estimate.activations import Regime
from trainfit.estimate.core import run_estimate
from trainfit.estimate.params import layer_linears
from trainfit.estimate.perf import (ADAFACTOR_KERNELS, FORLOOP_ADAMW_KERNELS, GPTQ_UNPACK_BYTES_PER_PARAM,
                                    _backward_multiplier, _block_times, optimizer_launches)
from trainfit.estimate.trainable import split_params
from trainfit.spec.cluster import cluster_for
from trainfit.spec.training import (Attention, GradCkpt, Method, Optimizer, OptimizerImpl, Precision, Strategy,
                                    TrainingSpec)
from trainfit.validate import Skip, load_cases, predict_case, validate

DEV = str(Path(__file__).resolve().parents[1] / "data" / "validation" / "published_dev.jsonl")
EFF = Efficiencies.default()
GPU = get_gpu("a100-sxm4-80gb")


@pytest.fixture(scope="module")
def dev_cases():
    return load_cases([DEV])


def _est(model, t, gpu=GPU):
    return run_estimate(resolve_model(model), t, Strategy(), cluster_for(gpu, 1, 1, None, None), EFF)


def _ops(model, t):
    m = resolve_model(model)
    return _block_times(m, t, split_params(m, t), GPU, EFF, Regime(2, 2, False))


# ---- FlashAttention in Triton ------------------------------------------------------------------------------------

def test_triton_attention_is_slower_by_the_published_factors():
    """Forward by triton_attention_forward_slowdown, backward by _backward_slowdown (FlashAttention-2 paper 4.1);
    nothing else in the block moves."""
    t = TrainingSpec(seq_len=4096, attention=Attention.FLASH)
    tri = replace(t, triton_attention=True)
    view = EFF.shared_view(GPU)
    a, b = _ops("llama-2-7b", t), _ops("llama-2-7b", tri)
    fwd = view("triton_attention_forward_slowdown")
    bwd = view("triton_attention_backward_slowdown")
    assert fwd > 1 and bwd > 1
    assert b["attention/core"][0] == pytest.approx(a["attention/core"][0] * fwd)
    back = (b["attention/core"][0] * _backward_multiplier("attention/core", True, tri, view)
            / (a["attention/core"][0] * _backward_multiplier("attention/core", True, t, view)))
    assert back == pytest.approx(bwd)
    assert {k: v for k, v in a.items() if k != "attention/core"} == {k: v for k, v in b.items()
                                                                    if k != "attention/core"}
    assert _est("llama-2-7b", tri).step_time_s > _est("llama-2-7b", t).step_time_s


def test_triton_attention_is_read_from_the_llm_foundry_notes(dev_cases):
    """Every llm-foundry case states 'triton flash-attention kernel' (submit_benchmarks.py's default attn_impl);
    no other case is read as Triton."""
    seen = 0
    for case in dev_cases:
        try:
            t = predict_case(case, EFF).training
        except Skip:
            continue
        seen += 1
        assert t.triton_attention == ("triton flash-attention kernel" in (case.get("notes") or ""))
        assert t.triton_attention == case["id"].startswith("llmfoundry")
    assert seen > 200


# ---- GPTQ int4 base ----------------------------------------------------------------------------------------------

def test_gptq_unpacking_costs_its_counted_bytes_and_no_backward_pass():
    t = TrainingSpec(method=Method.QLORA, seq_len=512, grad_ckpt=GradCkpt.FULL)
    g = replace(t, gptq_base=True)
    m = resolve_model("qwen2-7b")
    weights = sum(lin.in_features * lin.out_features * lin.count * lin.share for lin in layer_linears(m))
    view = EFF.shared_view(GPU)
    seconds = weights * GPTQ_UNPACK_BYTES_PER_PARAM / (GPU.memory_bandwidth * view("memory_bandwidth_efficiency"))
    assert _ops("qwen2-7b", g)["qlora/dequantize"][0] == pytest.approx(seconds)
    assert _backward_multiplier("qlora/dequantize", False, g, view) == 0.0
    assert _backward_multiplier("qlora/dequantize", False, t, view) == 1.0
    assert _est("qwen2-7b", g).step_time_s > _est("qwen2-7b", t).step_time_s


def test_qwen_q_lora_cases_run_on_a_gptq_base(dev_cases):
    qlora = [c for c in dev_cases if c["id"].startswith("qwen1-readme") and c["training"]["method"] == "qlora"]
    assert qlora and all(predict_case(c, EFF).training.gptq_base for c in qlora)


# ---- optimizer launches ------------------------------------------------------------------------------------------

def _bert_tensors(m):
    """BERT-large for classification, counted by hand: per layer q, k, v, o, intermediate, output (weight + bias
    each) and two LayerNorms (weight + bias each); word, position and token-type embeddings and their LayerNorm
    (weight + bias); pooler and classifier (weight + bias each)."""
    matrices = 6 * m.layers + 3 + 2
    vectors = (6 + 4) * m.layers + 2 + 2
    return matrices, vectors


def test_optimizer_launches_count_the_tensors():
    from trainfit.spec.training import Task

    m = resolve_model("bert-large-uncased")
    matrices, vectors = _bert_tensors(m)
    full = TrainingSpec(task=Task.CLASSIFICATION, seq_len=512)
    split = split_params(m, full)
    ada = replace(full, optimizer=Optimizer.ADAFACTOR)
    assert optimizer_launches(m, ada, split) == matrices * ADAFACTOR_KERNELS[0] + vectors * ADAFACTOR_KERNELS[1]
    loop = replace(full, optimizer_impl=OptimizerImpl.FORLOOP)
    assert optimizer_launches(m, loop, split) == (matrices + vectors) * FORLOOP_ADAMW_KERNELS
    assert optimizer_launches(m, full, split) == 0  # fused
    assert optimizer_launches(m, replace(full, optimizer_impl=OptimizerImpl.FOREACH), split) == 0


def test_launches_hide_behind_the_backward_except_under_fp16_loss_scaling():
    """A compute-bound step hides the for-loop optimizer's launches behind its last backward; fp16's GradScaler
    reads found_inf first, so there they add in full."""
    from trainfit.spec.training import Task

    base = TrainingSpec(task=Task.CLASSIFICATION, seq_len=512, micro_batch=8, optimizer=Optimizer.ADAFACTOR,
                        precision=Precision.BF16)
    bf16 = _est("bert-large-uncased", base).time.parts["optimizer/step"]
    fp16 = _est("bert-large-uncased", replace(base, precision=Precision.FP16)).time.parts["optimizer/step"]
    m = resolve_model("bert-large-uncased")
    launches = optimizer_launches(m, base, split_params(m, base)) * EFF.shared_view(GPU)("op_overhead_s")
    assert fp16 == pytest.approx(launches)
    assert bf16 < fp16


def test_adamw_hf_notes_run_the_for_loop_adamw(dev_cases):
    hf = [c for c in dev_cases if "adamw_hf" in (c.get("notes") or "")]
    assert hf
    for case in hf:
        assert predict_case(case, EFF).training.optimizer_impl == OptimizerImpl.FORLOOP
        assert "forloop_optimizer" in validate([case], EFF).rows[0].from_notes
    other = next(c for c in dev_cases if c["id"] == "qwen1-readme-7b-lora-s512")
    assert predict_case(other, EFF).training.optimizer_impl == OptimizerImpl.FUSED


def test_adamw_torch_notes_run_torchs_foreach_adamw():
    """HF Trainer's optim="adamw_torch" builds torch.optim.AdamW without `fused`: torch's default on CUDA, foreach,
    whose step holds one more state's worth (`_foreach_sqrt` over the group). ms-swift's January 2024 benchmark
    (stacks_dev.jsonl, torch 2.1.1, transformers 4.36) states it; its bf16 full fine-tunes of Qwen-7B-Chat measured
    73.4-78.8 GiB reserved, flat in the sequence length, and were 7-14 % under the fused step's prediction."""
    cases = [c for c in load_cases([DEV.replace("published_dev", "stacks_dev")])
             if c["id"].startswith("swift-bench-a100-qwen7b-chat-full")]
    assert len(cases) == 4
    for case in cases:
        est = predict_case(case, EFF)
        assert est.training.optimizer_impl == OptimizerImpl.FOREACH
        assert "foreach_optimizer" in validate([case], EFF).rows[0].from_notes
        gib = est.memory.reserved / 2 ** 30
        assert abs(gib - case["measured"]["peak_memory_gib"]) / case["measured"]["peak_memory_gib"] < 0.07
    fused = dict(cases[0], notes=cases[0]["notes"].replace("adamw_torch", "adamw_torch_fused"))
    assert predict_case(fused, EFF).training.optimizer_impl == OptimizerImpl.FUSED


def test_gptq_unpacking_launches_in_forward_only():
    """Overhead-bound (a few tokens): the unpacking's kernels lengthen the forward, not the backward, which runs
    fewer launches than bitsandbytes' (it dequantizes again for the input gradient)."""
    from trainfit.estimate.perf import _micro_batch_time

    m = resolve_model("qwen2-7b")
    t = TrainingSpec(method=Method.QLORA, seq_len=16)
    g = replace(t, gptq_base=True)
    r = Regime(2, 2, False)
    bnb = _micro_batch_time(m, t, split_params(m, t), GPU, EFF, r)
    gptq = _micro_batch_time(m, g, split_params(m, g), GPU, EFF, r)
    assert dict(gptq.bound)["overhead"] > 0
    assert gptq.forward > bnb.forward
    assert gptq.backward < bnb.backward


# ---- LoRA adapters' traffic and kernels, counted from PEFT's own code -------------------------------------------

def _peft_lora_counts(in_f, out_f, tokens, lora, dropout, fp32_adapters, autocast):
    """Bytes read + written and kernels of one PEFT LoRA Linear's forward and second backward (a later micro-batch:
    AccumulateGrad adds into existing gradients), traced op by op on the CPU; dropout runs as the fused
    native_dropout kernel it is on CUDA (aten Dropout.cpp is_fused_kernel_acceptable), not the CPU's decomposition."""
    import torch
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    peft = pytest.importorskip("peft")

    free = {"view", "_unsafe_view", "t", "transpose", "detach", "expand", "permute", "alias", "as_strided",
            "unsqueeze", "squeeze", "reshape", "slice", "select", "_reshape_alias", "lift_fresh", "empty",
            "empty_like", "new_empty", "empty_strided"}

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.bytes, self.kernels = 0, 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func.overloadpacket.__name__ not in free:
                tensors = [a for a in tree_flatten((args, kwargs, out))[0] if isinstance(a, torch.Tensor)]
                self.bytes += sum(a.numel() * a.element_size() for a in tensors)
                self.kernels += 1
            return out

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(in_f, out_f, bias=False)).to(torch.bfloat16).requires_grad_(False)
    if lora:
        model = peft.get_peft_model(model, peft.LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout,
                                                           target_modules=["0"]),
                                    autocast_adapter_dtype=fp32_adapters)
        if not fp32_adapters:  # a pure 16-bit stack's adapters
            for name, p in model.named_parameters():
                if "lora" in name:
                    p.data = p.data.to(torch.bfloat16)
    model.train()
    x = torch.randn(tokens, in_f, dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(tokens, out_f, dtype=torch.bfloat16)
    fused = lambda t, p=0.5, training=True, inplace=False: torch.native_dropout(t, p, training)[0] \
        if training and 0 < p < 1 else t  # noqa: E731
    orig, F.dropout = F.dropout, fused
    try:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            model(x).backward(grad)  # the first micro-batch: gradients created
        fwd, bwd = Count(), Count()
        with fwd, torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = model(x)
        with bwd:
            y.backward(grad)
    finally:
        F.dropout = orig
    return fwd.bytes, bwd.bytes, fwd.kernels, bwd.kernels


@pytest.mark.parametrize("dropout,fp32_adapters,autocast", [(0.05, True, True), (0.0, True, True),
                                                            (0.05, False, False), (0.0, False, False)])
def test_lora_traffic_is_what_peft_runs(dropout, fp32_adapters, autocast):
    """`lora_traffic`'s bytes per token and kernels equal PEFT's LoRA Linear traced op by op, beside the frozen Linear
    (per token: the difference of two token counts; the rank-8 tensors are all that is left out): Hugging Face's fp32
    adapters under autocast, and a pure 16-bit stack's, with and without dropout."""
    from trainfit.estimate.perf import lora_traffic

    r = Regime(2, 2, autocast, adapter=4 if fp32_adapters else 2)
    model = lora_traffic(r, dropout > 0)
    for in_f, out_f in ((512, 1536), (1536, 512)):
        per = {}
        for tokens in (128, 256):
            got = _peft_lora_counts(in_f, out_f, tokens, True, dropout, fp32_adapters, autocast)
            base = _peft_lora_counts(in_f, out_f, tokens, False, dropout, fp32_adapters, autocast)
            per[tokens] = [a - b for a, b in zip(got, base)]
        fwd = (per[256][0] - per[128][0]) / 128
        bwd = (per[256][1] - per[128][1]) / 128
        assert fwd == pytest.approx(model.fwd_in * in_f + model.fwd_out * out_f, rel=0.005)
        assert bwd == pytest.approx(model.bwd_in * in_f + model.bwd_out * out_f, rel=0.005)
        assert per[128][2:] == [model.fwd_kernels, model.bwd_kernels]


def test_peft_adapters_cost_what_they_move():
    """A long LoRA step's adapter time is their counted traffic: Hugging Face's fp32 adapters under autocast move
    several times the input and output widths (23 and 12 bytes per feature forward with dropout, 14 and 12 without),
    so dropout lengthens the step; a full fine-tune has no adapters."""
    t = TrainingSpec(method=Method.LORA, seq_len=4096, grad_ckpt=GradCkpt.FULL)
    drop = replace(t, lora_dropout=0.05)
    a, b = _ops("llama-2-7b", t), _ops("llama-2-7b", drop)
    assert b["lora/adapters"][0] > a["lora/adapters"][0] * 1.2
    assert _est("llama-2-7b", drop).step_time_s > _est("llama-2-7b", t).step_time_s
    assert "lora/adapters" not in _ops("llama-2-7b", TrainingSpec(seq_len=4096))


# ---- DeepSpeed ZeRO-3's per-module hooks --------------------------------------------------------------------------

def test_zero3_hooks_bound_short_steps():
    """ZeRO-3's fetch/release hooks cost CPU time per parameter-holding module and micro-batch: a short step on one
    GPU becomes overhead-bound and slower than the same job under ZeRO-2; a long one hides them behind the GPU;
    FSDP (hooks per wrapped block) does not pay them."""
    from trainfit.estimate.perf import zero3_hooked, zero3_modules_per_block
    from trainfit.spec.training import Fsdp

    m = resolve_model("qwen2.5-1.5b")
    short, long = TrainingSpec(seq_len=256, grad_ckpt=GradCkpt.FULL), TrainingSpec(seq_len=16384,
                                                                                     grad_ckpt=GradCkpt.FULL)
    cl = cluster_for(GPU, 1, 1, None, None)

    def step(t, s):
        return run_estimate(m, t, s, cl, EFF)

    z2, z3 = Strategy(zero_stage=2), Strategy(zero_stage=3)
    assert zero3_hooked(z3) and not zero3_hooked(z2) and not zero3_hooked(Strategy(fsdp=Fsdp.FULL_SHARD))
    hooks = m.layers * zero3_modules_per_block(m, split_params(m, short)) * EFF.shared_view(GPU)(
        "zero3_module_overhead_s")
    a, b = step(short, z2), step(short, z3)
    assert b.step_time_s - a.step_time_s > 0.5 * hooks * short.grad_accum
    assert b.time.bound.get("overhead", 0) > a.time.bound.get("overhead", 0)
    assert step(long, z3).step_time_s == pytest.approx(step(long, z2).step_time_s, rel=0.02)
    lora = TrainingSpec(method=Method.LORA, seq_len=256)
    assert zero3_modules_per_block(m, split_params(m, lora)) == zero3_modules_per_block(m, split_params(m, short)) \
        + 2 * len(layer_linears(m))  # all-linear: lora_A and lora_B per Linear


def test_zero3_prior_is_the_committed_measurement():
    """efficiency.yaml's zero3_module_overhead_s lies within what benchmarks/zero3_hooks.py measured
    (data/measurements/zero3_hooks_cpu.json), and the fit only sees ZeRO-3 cases for it."""
    import json

    from trainfit.calibrate import ONLY_WHEN

    doc = json.loads((Path(__file__).resolve().parents[1] / "data" / "measurements" /
                      "zero3_hooks_cpu.json").read_text())
    per_module = [row["s_per_param_module"] for row in doc["rows"]]
    prior = Efficiencies.default().shared_view(GPU)("zero3_module_overhead_s")
    assert min(per_module) <= prior <= max(per_module)
    assert doc["versions"]["deepspeed"] and doc["measured"]
    case = {"source": "x", "hardware": {"gpu": "a100-sxm4-80gb", "num_gpus": 2, "gpus_per_node": 2},
            "training": {"method": "full"}, "parallel": {"dp": 2, "tp": 1, "zero_stage": 3}}
    assert ONLY_WHEN["zero3_module_overhead_s"](case)
    case["parallel"]["zero_stage"] = 2
    assert not ONLY_WHEN["zero3_module_overhead_s"](case)


# ---- what selective checkpointing recomputes (TrainingSpec.selective_ac) --------------------------------------------

def test_selective_policies_recompute_what_their_code_names():
    """attention: the attention core; op (torchtitan's `_custom_policy`): every op but the kept matmuls and the
    attention kernel, and the 2nd, 4th, 6th Linear of the block (k, o, up for q, k, v, o, gate, up, down); N: no
    partial recompute (whole blocks instead)."""
    from trainfit.estimate.perf import selective_recompute

    t = TrainingSpec(seq_len=4096, grad_ckpt=GradCkpt.SELECTIVE)
    ops = _ops("llama-2-13b", t)
    assert selective_recompute(resolve_model("llama-2-13b"), t, ops) == {"attention/core": 1.0}
    op = selective_recompute(resolve_model("llama-2-13b"), replace(t, selective_ac="op"), ops)
    assert {k for k in op if k.startswith("linear/")} == {"linear/k_proj", "linear/o_proj", "linear/up_proj"}
    assert "elementwise" in op and "attention/core" not in op
    assert selective_recompute(resolve_model("llama-2-13b"), replace(t, selective_ac="2"), ops) == {}
    assert selective_recompute(resolve_model("llama-2-13b"), replace(t, grad_ckpt=GradCkpt.NONE), ops) == {}


def test_every_second_block_costs_half_of_full_checkpointing():
    """selective_ac '2' recomputes 20 of Llama-2-13B's 40 blocks in full: half the backward time full checkpointing
    adds."""
    t = TrainingSpec(seq_len=4096, micro_batch=2)

    def backward(**kw):
        return _est("llama-2-13b", replace(t, **kw)).time.parts["compute/backward"]

    none, full = backward(), backward(grad_ckpt=GradCkpt.FULL)
    half = backward(grad_ckpt=GradCkpt.SELECTIVE, selective_ac="2")
    assert full > none
    assert half - none == pytest.approx((full - none) / 2, rel=1e-9)


def test_torchtitan_selective_checkpointing_costs_what_its_docs_measured(dev_cases):
    """torchtitan docs/performance.md (613bfd0, 2024-04-16), Llama 13B on 64 A100s at local batch 2: 2162 tokens/s
    per GPU without checkpointing, 1914 with 'selective layer' (every second block, the config default '2') and 1904
    with 'selective op'. The cost of each policy relative to none, whatever the efficiencies: within 4 % of the
    measured ratio (checkpointing only the attention core, as before, predicted about 1.0 for both)."""
    by_id = {c["id"]: c for c in dev_cases}
    base = "torchtitan-2404-llama2-13b-a100-g64-bs2-"
    est = {k: predict_case(by_id[base + k], EFF) for k in ("none", "selectivelayer", "selectiveop")}
    assert est["selectivelayer"].training.selective_ac == "2" and est["selectiveop"].training.selective_ac == "op"
    for key, measured in (("selectivelayer", 1914 / 2162), ("selectiveop", 1904 / 2162)):
        ratio = est[key].tokens_per_s_per_gpu / est["none"].tokens_per_s_per_gpu
        assert ratio == pytest.approx(measured, rel=0.04), key


def test_selective_policies_keep_between_none_and_full():
    """Saved activations: full < op < attention-core selective < none; every second block is the mean of none and
    full."""
    from trainfit.estimate.activations import apply_checkpointing, block_saved

    m = resolve_model("llama-3-8b")
    r = Regime(2, 2, False)
    saved = block_saved(m, r, split_params(m, TrainingSpec()).block_trainable, 8192, Attention.SDPA)

    def kept(level, policy="attention"):
        return sum(apply_checkpointing(saved, m, r, level, None, policy).values())

    none, full = kept(GradCkpt.NONE), kept(GradCkpt.FULL)
    op, core = kept(GradCkpt.SELECTIVE, "op"), kept(GradCkpt.SELECTIVE)
    assert full < op < core < none
    assert kept(GradCkpt.SELECTIVE, "2") == pytest.approx((none + full) / 2)
    # op keeps the block input, q, v, gate and down outputs (every second matmul is recomputed), SDPA's output
    # and its fp32 log-sum-exp
    assert op == pytest.approx(2 * (m.hidden + m.q_dim + m.kv_dim + m.intermediate + m.hidden + m.q_dim) + 4 * m.heads)


def test_selective_ac_is_parsed_and_refused_where_it_does_not_run():
    from trainfit.errors import SpecError
    from trainfit.spec.training import require_runnable_checkpointing
    from trainfit.spec.choices import parse_selective_ac

    assert parse_selective_ac(" OP ") == "op" and parse_selective_ac(2) == "2"
    assert parse_selective_ac(None) == "attention"
    for bad in ("opp", "0", "-1", True, "layer"):
        with pytest.raises(SpecError):
            parse_selective_ac(bad)
    with pytest.raises(SpecError, match="did you mean 'op'"):
        parse_selective_ac("opp")
    with pytest.raises(SpecError):
        TrainingSpec(selective_ac="nonsense")
    require_runnable_checkpointing("selective", "attention", "train.py")
    require_runnable_checkpointing("full", "op", "train.py")  # only read under selective checkpointing
    with pytest.raises(SpecError, match="torchtitan"):
        require_runnable_checkpointing(GradCkpt.SELECTIVE, "op", "trace")


def test_torchtitan_cases_read_their_policy(dev_cases):
    """The docs' 'selective layer' rows run every second block; torchtitan's own default (its Llama configs) is the
    per-op policy; other stacks checkpoint the attention core."""
    by_id = {c["id"]: c for c in dev_cases}
    assert predict_case(by_id["torchtitan-2409-llama3-8b-a100-g64-selectivelayer"], EFF).training.selective_ac == "2"
    assert predict_case(by_id["torchtitan-2412-llama3.1-8b-g128-fsdp"], EFF).training.selective_ac == "op"
    other = copy.deepcopy(by_id["torchtitan-2412-llama3.1-8b-g128-fsdp"])
    other["training"]["framework"] = "hf-trainer"
    assert predict_case(other, EFF).training.selective_ac == "attention"


# ---- Megatron-LM's fused scale-mask-softmax --------------------------------------------------------------------

def test_fused_softmax_moves_what_megatrons_kernels_move(dev_cases):
    """fp16 scores with attention dropout: baddbmm writes them scaled (2), the fused kernel reads and writes them
    (4), dropout reads, writes and keeps a 1-byte mask (5), PV reads (2): 13 bytes per element against transformers'
    separate scale, mask add, softmax, dropout. The SC21 GPT 1.7B case takes it from frameworks.yaml and lands within
    10 % of its published 137 TFLOP/s per GPU (step time 3.528 s; Narayanan et al. SC21 Table 1), where the separate
    ops made it 49 % slow."""
    from trainfit.estimate.perf import _eager_s2_bytes

    m = resolve_model("gpt2")
    r = Regime(2, 2, False)
    assert m.attention_dropout > 0
    assert _eager_s2_bytes(m, r, fused_softmax=True) == 13
    assert _eager_s2_bytes(m, r) > 13
    case = next(c for c in dev_cases if c["id"] == "megatron-2021-a100-gpt1.7B-g32")
    est = predict_case(case, EFF)
    assert est.training.fused_softmax
    assert est.step_time_s == pytest.approx(3.528, rel=0.10)
    other = copy.deepcopy(case)
    other["training"]["framework"] = "hf-trainer"
    assert predict_case(other, EFF).step_time_s > 1.3 * est.step_time_s


def test_recomputed_flops_follow_the_policy():
    """The step's FLOPs count what each policy runs again: none < the attention core < every second Linear (op) <
    every second block (2) < every block (full); every second block is half of full checkpointing's recompute."""
    from trainfit.estimate.flops import step_flops

    m = resolve_model("llama-2-13b")

    def recompute(**kw):
        t = TrainingSpec(seq_len=4096, **kw)
        return step_flops(m, t, split_params(m, t)).recompute

    none, core = recompute(), recompute(grad_ckpt=GradCkpt.SELECTIVE)
    op, layer2 = recompute(grad_ckpt=GradCkpt.SELECTIVE, selective_ac="op"), \
        recompute(grad_ckpt=GradCkpt.SELECTIVE, selective_ac="2")
    full = recompute(grad_ckpt=GradCkpt.FULL)
    assert none == 0 < core < op < layer2 < full
    assert layer2 == pytest.approx(full / 2)  # 40 blocks: 20 recomputed


def test_a_stated_stack_brings_its_softmax_and_checkpointing_to_estimate(run_cli):
    """`--framework megatron` on `estimate` runs the fused softmax and `--framework torchtitan` the per-op policy, as
    `validate` does for their cases (one job, one answer in every command)."""
    import json

    def step(*argv):
        code, out, err = run_cli("estimate", "--model", "gpt2", "--gpu", "a100-sxm4-80gb", "--seq-len", "1024",
                                 "--micro-batch", "8", "--precision", "fp16", "--json", *argv)
        assert code == 0, err
        doc = json.loads(out)
        return doc["step_time_s"], doc["config"]

    hf, _ = step("--attention", "eager", "--framework", "hf-trainer")
    megatron, _ = step("--attention", "eager", "--framework", "megatron")
    assert megatron < 0.8 * hf
    _, titan = step("--grad-ckpt", "selective", "--framework", "torchtitan")
    assert titan["selective_ac"] == "op"
    _, mine = step("--grad-ckpt", "selective", "--framework", "torchtitan", "--selective-ac", "2")
    assert mine["selective_ac"] == "2"


# ---- torch.compile -----------------------------------------------------------------------------------------------

def test_compile_prior_is_torchtitans_own_eager_and_compiled_runs(dev_cases):
    """efficiency.yaml's compile_time_factor is torchtitan's Table 3 (Llama 3.1 8B, 128 H100s, FSDP): the same run
    eager and compiled, 5605 and 6514 tokens/s per GPU. The two cases differ in nothing but the compile note."""
    by_id = {c["id"]: c for c in dev_cases}
    eager = by_id["torchtitan-2412-llama3.1-8b-g128-fsdp"]
    compiled = by_id["torchtitan-2412-llama3.1-8b-g128-fsdp-compile"]
    for part in ("model", "hardware", "training", "parallel"):
        assert eager[part] == compiled[part], part
    assert "torch.compile on" in compiled["notes"] and "torch.compile" not in eager["notes"]
    ratio = eager["measured"]["tokens_per_s_per_gpu"] / compiled["measured"]["tokens_per_s_per_gpu"]
    assert Efficiencies.shipped().table["compile_time_factor"]["default"] == pytest.approx(ratio, abs=5e-5)  # the prior


def test_compiled_forward_and_backward_take_the_factor_and_nothing_else_moves():
    """torch.compile scales a micro-batch's forward and backward time by compile_time_factor; the optimizer step
    (not compiled by the stacks that compile the model) and the memory stay."""
    t = TrainingSpec(seq_len=2048, micro_batch=2, grad_ckpt=GradCkpt.FULL, attention=Attention.FLASH)
    eager, compiled = _est("llama-3-8b", t), _est("llama-3-8b", replace(t, torch_compile=True))
    factor = EFF.shared_view(GPU)("compile_time_factor")
    assert 0 < factor < 1
    assert compiled.memory.device == eager.memory.device
    assert compiled.step_time_s < eager.step_time_s
    for part in ("compute/forward", "compute/backward"):
        assert compiled.time.parts[part] == pytest.approx(eager.time.parts[part] * factor)
    for part in set(eager.time.parts) - {"compute/forward", "compute/backward"}:
        assert compiled.time.parts[part] == pytest.approx(eager.time.parts[part]), part


def test_compiled_cases_are_read_from_their_notes(dev_cases):
    """'torch.compile on' in a case's notes sets torch_compile (torchtune's README and torchtitan's compiled rows);
    no other case is read as compiled, and the prediction of a compiled case is faster than of the same case
    without the note."""
    compiled = 0
    for case in dev_cases:
        try:
            est = predict_case(case, EFF)
        except Skip:
            continue
        said = "torch.compile on" in (case.get("notes") or "")
        assert est.training.torch_compile == said, case["id"]
        if said:
            compiled += 1
            plain = predict_case({**case, "notes": case["notes"].replace("torch.compile on", "")}, EFF)
            assert est.tokens_per_s_per_gpu > plain.tokens_per_s_per_gpu
    assert compiled >= 10


def test_the_compile_factor_is_fitted_on_compiled_runs_only(dev_cases):
    """calibrate moves compile_time_factor only with the cases that ran compiled (ONLY_WHEN)."""
    from trainfit.calibrate import candidate_params

    params = candidate_params(dev_cases, Efficiencies.shipped())
    used = [cases for p, cases in params.items() if p.name == "compile_time_factor"]
    assert len(used) == 1 and len(used[0]) >= 3
    assert all("torch.compile on" in c["notes"] for c in used[0])


def test_qwen_v1_under_deepspeed_takes_its_loss_on_the_16bit_logits():
    """Qwen v1's remote code computes CrossEntropyLoss on the lm_head's own output (no `.float()`), and under DeepSpeed
    Hugging Face Trainer runs no autocast: log_softmax keeps 16-bit log-probabilities (memory_loss.logits_dtype_items:
    6 bytes per vocabulary entry and token at the forward's end and at the backward's start, where transformers'
    upcast loss keeps 10 and 12). The README's Q-LoRA rows ran the fp16 ZeRO-2 script
    (finetune_qlora_single_gpu.sh); its bf16 LoRA rows ran without DeepSpeed, under autocast, and keep the upcast."""
    from trainfit.estimate.activations import Regime
    from trainfit.estimate.memory_loss import logits_dtype_items

    cases = {c["id"]: c for c in load_cases([DEV])}
    qlora = predict_case(cases["qwen1-readme-14b-q-lora-s8192"], EFF)
    assert qlora.training.loss_impl == "logits_dtype" and qlora.training.precision == Precision.FP16
    assert qlora.strategy.zero_stage == 2
    assert predict_case(cases["qwen1-readme-14b-lora-s8192"], EFF).training.loss_impl == "hf"
    full = predict_case(cases["qwen1-readme-1.8b-full-parameter-s8192"], EFF)  # ZeRO-3 from source_setups.yaml
    assert full.training.loss_impl == "logits_dtype"
    m, t = qlora.model, qlora.training
    forward, start, head = logits_dtype_items(m, t, Regime(2, 2, False))
    per = m.vocab * t.tokens_per_micro_batch
    assert sum(forward.values()) == pytest.approx(6 * per, rel=1e-3)
    assert sum(start.values()) == pytest.approx(6 * per, rel=1e-3) and head == {"logits/grad": 2 * per}
    phase = {p.name: p for p in qlora.memory.phases}["forward_end"]
    assert phase.items["logits/shifted_copy"] > 0 and phase.items.get("logits/forward_buffers", 0.0) == 0.0


def test_deepspeed_reduce_buckets_follow_the_runs_stated_size():
    """DeepSpeed's ZeRO-1/2 backward allocates reduce_bucket_size 16-bit elements twice with overlap_comm
    (stage_1_and_2.py `backward`): hidden_size² each under trainfit's and Hugging Face's "auto" configs, 2e8 under
    the Qwen README's ds_config_zero2.json, which its Q-LoRA and multinode LoRA rows ran (source_setups.yaml)."""
    cases = {c["id"]: c for c in load_cases([DEV])}
    case = cases["qwen1-readme-1.8b-q-lora-s256"]
    est = predict_case(case, EFF)
    assert est.strategy.ds_reduce_bucket == 200_000_000
    assert "qwen_qlora_zero2_buckets" in validate([case], EFF).rows[0].from_source
    peak = {p.name: p for p in est.memory.phases}[est.memory.peak_phase]
    assert peak.items["other/comm_buckets"] == pytest.approx(2 * 2.0 * 2e8)
    eff = EFF.for_framework("hf-trainer")
    stated = run_estimate(est.model, est.training, est.strategy, est.cluster, eff)
    auto = run_estimate(est.model, est.training, est.strategy.with_(ds_reduce_bucket=0), est.cluster, eff)
    peak = {p.name: p for p in auto.memory.phases}[auto.memory.peak_phase]
    assert peak.items["other/comm_buckets"] == pytest.approx(2 * 2.0 * est.model.hidden ** 2)
    assert stated.memory.peak_phase == auto.memory.peak_phase
    assert stated.memory.allocated - auto.memory.allocated == pytest.approx(4.0 * (2e8 - est.model.hidden ** 2))
