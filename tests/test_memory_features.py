"""Training-stack features that change what lives on the GPU: PEFT modules_to_save, optimizer-in-backward,
paged optimizer states, and FSDP of a quantized base. Each test states the mechanism it checks."""

import pytest

from trainfit.api import estimate, training_spec
from trainfit.catalog.models import all_models
from trainfit.errors import SpecError
from trainfit.units import GiB

LLAMA3_8B = "llama-3-8b"


def _phase(est, name):
    return next(p for p in est.memory.phases if p.name == name).items


def test_optimizer_in_backward_drops_the_gradients():
    """Each parameter steps as its gradient arrives and frees it: no full set of gradients ever exists, only the
    largest tensor's (the embedding / output head for a decoder) at the end of backward, when the embedding steps;
    after backward nothing is left to step (the traced step, trainfit.trace's InBackward, has no optimizer moment)."""
    base = dict(method="full", seq_len=2048, micro_batch=2, grad_ckpt="full", optimizer="adamw",
                param_dtype="bf16")
    plain = estimate(LLAMA3_8B, "a100-sxm4-80gb", **base)
    in_bwd = estimate(LLAMA3_8B, "a100-sxm4-80gb", optimizer_in_backward=True, **base)
    grads = lambda est, at: sum(v for k, v in _phase(est, at).items() if k.startswith("gradients/"))  # noqa
    m = all_models()[LLAMA3_8B].spec()
    assert grads(plain, "optimizer") == pytest.approx(2.0 * plain.split.trainable)
    assert grads(in_bwd, "backward_embedding") == pytest.approx(2.0 * m.vocab * m.hidden)
    assert grads(in_bwd, "optimizer") == 0
    assert in_bwd.memory.allocated < plain.memory.allocated - 5 * GiB


def test_optimizer_in_backward_needs_one_micro_batch_per_step():
    with pytest.raises(SpecError, match="grad-accum 1"):
        training_spec("full", grad_accum=4, optimizer_in_backward=True)


def test_paged_states_are_outside_the_allocator_and_never_block_a_fit():
    """bitsandbytes' paged states are CUDA managed memory: PyTorch's counters (allocated, reserved) exclude them,
    the device holds them while it has room, and they page out to host memory instead of failing the job.
    torchtune's Llama-3-8B full fine-tune on one 24 GB RTX 4090 (README table) runs exactly this way."""
    base = dict(method="full", seq_len=2048, micro_batch=1, grad_ckpt="full", optimizer="adamw-8bit",
                param_dtype="bf16", optimizer_in_backward=True)
    resident = estimate(LLAMA3_8B, "rtx4090", **base)
    paged = estimate(LLAMA3_8B, "rtx4090", paged_optimizer=True, **base)
    states = resident.memory.detail["optimizer/states"]
    assert paged.memory.paged == pytest.approx(states)
    assert paged.memory.allocated == pytest.approx(resident.memory.allocated - states)
    assert not resident.fits and paged.fits
    assert paged.memory.device <= paged.memory.usable + 1  # what is resident fills the GPU, no more
    on_a100 = estimate(LLAMA3_8B, "a100-sxm4-80gb", paged_optimizer=True, **base)
    assert on_a100.memory.detail["optimizer/paged_states_resident"] == pytest.approx(states)  # all on the GPU


def test_paged_optimizer_is_for_adam_like_optimizers():
    with pytest.raises(SpecError, match="paged"):
        training_spec("full", optimizer="adafactor", paged_optimizer=True)


def test_modules_to_save_train_a_16bit_copy():
    """PEFT trains a copy of each saved module in the base dtype (bf16: 2 B weight, 2 B gradient, 4 B AdamW
    states per parameter) and keeps the original frozen; the adapters stay fp32."""
    base = dict(method="lora", seq_len=1024, micro_batch=1, grad_ckpt="full")
    plain = estimate("qwen2-7b", "a100-sxm4-80gb", **base)
    saved = estimate("qwen2-7b", "a100-sxm4-80gb", modules_to_save="embed_tokens,lm_head", **base)
    m = all_models()["qwen2-7b"].spec()
    n = 2 * m.vocab * m.hidden
    assert saved.split.saved == n and saved.split.trainable == plain.split.trainable + n
    before, after = _phase(plain, "optimizer"), _phase(saved, "optimizer")
    assert after["weights/modules_to_save"] == pytest.approx(2.0 * n)
    assert after["gradients/modules_to_save"] == pytest.approx(2.0 * n)
    assert after["optimizer/states"] - before["optimizer/states"] == pytest.approx(4.0 * n)
    assert after["weights/frozen"] == pytest.approx(before["weights/frozen"])  # the originals stay


def test_unknown_module_to_save_is_a_clear_error():
    with pytest.raises(SpecError, match="embed_tokens, lm_head"):
        training_spec("lora", modules_to_save="embed_tokens,lm_hed")


def test_fsdp_gathers_a_quantized_block_in_its_quantized_form():
    """FSDP over a QLoRA base all-gathers NF4 blocks (torchtune's NF4Tensor, bnb's packed storage) and reduces only
    the adapters' gradients: both are far smaller than for a 16-bit base."""
    base = dict(seq_len=2048, micro_batch=1, grad_ckpt="full", gpus=8, fsdp="full_shard", param_dtype="bf16")
    q = estimate("llama-3-70b", "a100-sxm4-80gb", method="qlora", **base)
    lo = estimate("llama-3-70b", "a100-sxm4-80gb", method="lora", **base)
    qd, ld = _phase(q, "optimizer"), _phase(lo, "optimizer")
    assert qd["weights/gathered_units"] < 0.75 * ld["weights/gathered_units"]
    m = all_models()["llama-3-70b"].spec()
    assert qd["gradients/unsharded_block"] == pytest.approx(2.0 * q.split.adapters / m.layers)


def test_cli_flags_reach_the_estimate(run_cli):
    import json

    code, out, err = run_cli("estimate", "--model", LLAMA3_8B, "--gpu", "rtx4090", "--seq-len", "2048",
                             "--micro-batch", "1", "--grad-accum", "1", "--grad-ckpt", "full", "--optimizer", "adamw-8bit",
                             "--param-dtype", "bf16", "--optimizer-in-backward", "--paged-optimizer", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["config"]["optimizer_in_backward"] and doc["config"]["paged_optimizer"]
    code, _, err = run_cli("estimate", "--model", "qwen2-7b", "--gpu", "a10", "--method", "lora",
                           "--modules-to-save", "wte,head")
    assert code == 2 and "unknown module to save 'head'" in err


def test_runner_optimizer_in_backward_equals_a_plain_step():
    """train.py's optimizer-in-backward frees every gradient during backward and lands on the same weights as one
    ordinary AdamW step (no clipping), per parameter."""
    torch = pytest.importorskip("torch")
    from trainfit.train.runner import InBackward, make_optimizer, make_scheduler

    def model():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))

    x = torch.randn(5, 6)
    cfg = {"optimizer": {"name": "adamw", "lr": 1e-2, "betas": [0.9, 0.95], "weight_decay": 0.1,
                         "warmup_ratio": 0.0}}
    plain, in_bwd = model(), model()
    opt = make_optimizer(plain, cfg)
    plain(x).square().sum().backward()
    opt.step()
    opt2 = make_optimizer(in_bwd, {"optimizer": dict(cfg["optimizer"], in_backward=True)})
    assert isinstance(opt2, InBackward)
    in_bwd(x).square().sum().backward()
    assert all(p.grad is None for p in in_bwd.parameters())
    for a, b in zip(plain.parameters(), in_bwd.parameters()):
        assert torch.allclose(a, b, atol=1e-7)
    sched = make_scheduler(opt2, {"optimizer": dict(cfg["optimizer"], in_backward=True)}, 10)
    sched.step()
    assert len(sched.state_dict()) == len(opt2.optimizers) == 4


def test_what_would_fit_keeps_only_valid_settings():
    """The advisor's alternatives never break a setting's own rules: where a change needs gradient accumulation or
    DeepSpeed, it drops optimizer-in-backward / paged states and says so."""
    from trainfit.advise import alternatives

    est = estimate(LLAMA3_8B, "rtx4090", method="full", seq_len=2048, micro_batch=2, grad_ckpt="full",
                   optimizer="adamw-8bit", param_dtype="bf16", optimizer_in_backward=True, paged_optimizer=True)
    alts = alternatives(est, limit=8)
    assert alts
    for alt in alts:
        t, s = alt.estimate.training, alt.estimate.strategy
        assert not (t.optimizer_in_backward and (t.grad_accum > 1 or s.engine in ("deepspeed", "ddp")))
        assert not (t.paged_optimizer and s.engine == "deepspeed")
        if est.training.optimizer_in_backward and not t.optimizer_in_backward:
            assert "without --optimizer-in-backward" in alt.change


@pytest.mark.parametrize("kwargs,needle", [
    (dict(optimizer_in_backward=True, gpus=2, zero=2), "not with DeepSpeed"),
    (dict(optimizer_in_backward=True, gpus=2), "before DDP could all-reduce"),
    (dict(paged_optimizer=True, gpus=2, zero=3), "DeepSpeed ZeRO runs its own"),
])
def test_engine_combinations_the_setting_cannot_run_are_refused(kwargs, needle):
    with pytest.raises(SpecError, match=needle):
        estimate(LLAMA3_8B, "a100-sxm4-80gb", method="full", **kwargs).memory  # noqa: B018
    ok = estimate(LLAMA3_8B, "a100-sxm4-80gb", method="full", gpus=2, fsdp="full_shard",
                  optimizer_in_backward=True, paged_optimizer=True)
    assert ok.memory.paged > 0 and "gradients/in_backward" in _phase(ok, "backward_end")


def test_offloaded_activations_keep_one_block_on_the_gpu():
    """Offloaded activations (torchtune's enable_activation_offloading, Unsloth's offloaded checkpointing): the
    tensors the blocks save for backward live in host memory, one block's brought back ahead of its backward; the
    head side stays. Under full checkpointing that removes all but one of the blocks' inputs."""
    base = dict(method="full", seq_len=4096, micro_batch=2, grad_ckpt="full", optimizer="adamw",
                param_dtype="bf16", optimizer_in_backward=True)
    plain = estimate(LLAMA3_8B, "a100-sxm4-80gb", **base)
    off = estimate(LLAMA3_8B, "a100-sxm4-80gb", offload_activations=True, **base)
    m = all_models()[LLAMA3_8B].spec()
    inputs = 2.0 * m.hidden * 2 * 4096  # one block's bf16 input
    block = lambda est: _phase(est, "backward_start")["activations/checkpoint/block_input"]  # noqa: E731
    assert block(plain) == pytest.approx(m.layers * inputs)
    assert block(off) == pytest.approx(inputs)
    head = "activations/final_norm_and_head_input"
    assert _phase(off, "backward_start")[head] == _phase(plain, "backward_start")[head]
    assert plain.memory.allocated - off.memory.allocated == pytest.approx((m.layers - 1) * inputs)


def test_a_stack_with_offloaded_checkpoints_offloads_them_at_every_door():
    """--framework unsloth: its checkpointing (use_gradient_checkpointing='unsloth') keeps the checkpoints in host
    memory, as validate reads its cases; without checkpointing there is nothing to offload."""
    kw = dict(method="qlora", seq_len=2048, micro_batch=2)
    assert estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="full", framework="unsloth", **kw).training.offload_activations
    assert not estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="none", framework="unsloth",
                        **kw).training.offload_activations
    assert not estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="full", **kw).training.offload_activations


def test_freeze_under_checkpointing_runs_the_backward_through_the_frozen_blocks():
    """transformers' gradient checkpointing makes the embeddings' output require grad, so a freeze fine-tune's
    backward recomputes and runs through every block, the frozen ones for input gradients only (traced:
    tests/test_conformance.py, freeze_ckpt_frozen_blocks_run_backward). Without checkpointing the frozen blocks below
    the trained ones run no backward at all."""
    base = dict(method="freeze", seq_len=2048, micro_batch=2, optimizer="adamw", param_dtype="bf16")
    m = all_models()[LLAMA3_8B].spec()
    ckpt = estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="full", **base)
    plain = estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="none", **base)
    full = estimate(LLAMA3_8B, "a100-sxm4-80gb", grad_ckpt="full", **{**base, "method": "full"})
    assert ckpt.split.lowest_trainable_block == 0 and plain.split.lowest_trainable_block == m.layers - 2
    # input gradients through every block under checkpointing, through the two trained ones without
    blocks = lambda est: est.flops.input_grad / est.flops.forward  # noqa: E731 - about blocks_bwd / layers
    assert blocks(ckpt) > 5 * blocks(plain)  # 32 blocks against 2, the head on both sides
    # the frozen blocks' backward is input gradients only: cheaper than a full fine-tune's, dearer than none
    assert plain.step_time_s < ckpt.step_time_s < full.step_time_s
    assert ckpt.flops.weight_grad == pytest.approx(plain.flops.weight_grad)


def test_lora_launch_overhead_counts_the_adapted_linears_only():
    """Each adapted Linear launches its own small kernels (cast, A, B, scale, add, dropout); a Linear without an
    adapter launches none of them. Before, every Linear of the block was counted whatever the targets."""
    from trainfit.catalog.efficiency import Efficiencies

    def launch_bound(targets):
        eff = Efficiencies.default().with_overrides({"op_overhead_s": 1e-3})  # launch-bound: time ~ op count
        e = estimate(LLAMA3_8B, "a100-sxm4-80gb", method="lora", lora_targets=targets, seq_len=128, micro_batch=1,
                     grad_ckpt="none", efficiencies=eff)
        return e.step_time_s

    base = launch_bound("q_proj,v_proj")
    assert launch_bound("all-linear") > 1.5 * base  # 7 adapted Linears against 2
    assert launch_bound("q_proj,k_proj,v_proj,o_proj") > launch_bound("q_proj,v_proj")
