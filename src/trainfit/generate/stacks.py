"""What each engine's node runs under torchrun: trainfit's train.py (single / ddp / fsdp / deepspeed), or, for a
model-parallel plan, Megatron-LM's pretrain_gpt.py (engine "megatron") or torchtitan's trainer ("torchtitan"). The
launch targets (launch.sh, targets.py) wrap the same per-node command; the checks here refuse, with one line, the
layouts the model-parallel stacks do not run."""

from __future__ import annotations

from ..errors import GenerateError
from ..i18n import say
from . import megatron, torchtitan
from .common import Setup

TRAIN_ARGS = 'train.py --config train_config.json --data "$DATA" --output-dir "$OUTPUT_DIR"'
THREE_D = {"megatron": megatron, "torchtitan": torchtitan}
STACK_NAMES = {"megatron": "Megatron-LM", "torchtitan": "torchtitan"}


def is_3d(setup: Setup) -> bool:
    return setup.strategy["engine"] in THREE_D


def program(setup: Setup) -> str:
    """The program and its arguments, after torchrun's --nproc_per_node (ends with "$@" for launch.sh's extras)."""
    engine = setup.strategy["engine"]
    if engine in THREE_D:
        return f'{THREE_D[engine].program(setup)} "$@"'
    return f'{TRAIN_ARGS} "$@"'


def node_prelude(setup: Setup) -> list[str]:
    """Shell lines each node runs before its torchrun (none for train.py)."""
    engine = setup.strategy["engine"]
    return THREE_D[engine].prelude(setup) if engine in THREE_D else []


def data_hint(setup: Setup) -> str:
    """What DATA must name, said where it is missing."""
    engine = setup.strategy["engine"]
    if engine == "megatron":
        return "set DATA=/path/to/prefix of the Megatron indexed dataset (tools/preprocess_data.py: prefix.bin/.idx)"
    if engine == "torchtitan":
        return "set DATA=/path/to/your dataset (read by torchtitan's --training.dataset loader: README)"
    return "set DATA=/path/to/your/data (JSONL or Parquet)"


def check_3d(setup: Setup) -> None:
    """Refuse, with one line (gen_e_3d_*), what Megatron-LM / torchtitan do not run: adapters, offload, ZeRO-2/3,
    a task other than next-token training, the zero-bubble schedule, an uneven layer split; then each stack's own
    limits (megatron.check, torchtitan.check)."""
    engine = setup.strategy["engine"]
    if engine not in THREE_D:
        return
    st, name = setup.strategy, STACK_NAMES[engine]
    if st["method"] != "full":
        raise GenerateError("gen_e_3d_method", engine=name, method=st["method"])
    if st.get("offload") not in (None, "none"):
        raise GenerateError("gen_e_3d_offload", engine=name, offload=st["offload"])
    if int(st.get("zero_stage") or 0) > 1:
        raise GenerateError("gen_e_3d_zero", engine=name, stage=st["zero_stage"])
    if st["task"] not in ("sft", "pretrain"):
        raise GenerateError("gen_e_3d_task", engine=name, task=st["task"])
    if st.get("optimizer") not in (None, "adamw"):
        raise GenerateError("gen_e_3d_optimizer", engine=name, optimizer=st["optimizer"])
    pp, vpp = int(st.get("pp") or 1), int(st.get("vpp") or 1)
    if pp > 1 and st.get("pp_schedule") == "zb":
        raise GenerateError("gen_e_3d_zb", engine=name)
    layers = int(setup.model["hf_config"].get("num_hidden_layers") or 0)
    if st.get("pp_layout"):  # its own rules (Megatron-Core's validate_layer_layout), not the even split's
        from ..spec.pp_layout import parse, problem

        broken = problem(parse(str(st["pp_layout"])), pp, layers)
        if broken:
            raise GenerateError("gen_e_pp_layout", reason=say(broken[0], **broken[1]))
        THREE_D[engine].check(setup)
        return
    layers += bool(st.get("pp_split_embedding")) + bool(st.get("pp_split_loss"))  # counted in Megatron's split
    if layers % (pp * vpp):
        raise GenerateError("gen_e_3d_split", what=f"{layers} layers", by=f"pp {pp} x vpp {vpp}")
    THREE_D[engine].check(setup)


def check_framework(setup: Setup) -> bool:
    """True when the plan's numbers are this engine's stack's (or trainfit's own model of it): --framework megatron
    for engine megatron, torchtitan for torchtitan, or none."""
    framework = setup.choice.get("framework")
    return framework in (None, "None", setup.strategy["engine"])
