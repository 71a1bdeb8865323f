"""Makes tests/data/megatron_lm_args.json: every option Megatron-LM's own parser declares
(megatron/training/arguments.py `add_megatron_arguments`, the parser `pretrain_gpt.py` parses), read from the parser
object itself at a pinned commit.

Megatron-LM's training code (megatron/training/, pretrain_gpt.py) is not on PyPI: the megatron-core wheels hold only
megatron/core. So the tests rebuild an argparse parser from this file (tests/test_generate_3d.py) - a fallback to
running the real `parse_args`. To remake it (needs the Megatron-LM checkout at the tag below and megatron-core of the
same version, without its dependencies; torch is the suite's CPU build):

    git clone --branch core_v0.16.1 https://github.com/NVIDIA/Megatron-LM /tmp/Megatron-LM
    pip install --no-deps --target /tmp/mcore megatron-core==0.16.1
    PYTHONPATH=/tmp/mcore:/tmp/Megatron-LM python tests/data/megatron_lm_args_extract.py \
        > tests/data/megatron_lm_args.json

`megatron/training/__init__.py` imports the training loop (and triton through it); only arguments.py is needed here,
so the package's __init__ is bypassed. With `--validate ARGV...` it runs Megatron-LM's own parse_args and
validate_args on ARGV instead (WORLD_SIZE from the environment; the GPU architecture queries answer 9.0, Hopper).
"""

import argparse
import importlib.util
import json
import os
import sys
import types
import warnings

REF, COMMIT = "core_v0.16.1", "55ac7082517c3878ae653c07c09c534b8aed49f6"


def _arguments_module():
    warnings.filterwarnings("ignore")
    import megatron

    training_dir = None
    for base in megatron.__path__:
        if os.path.isfile(os.path.join(base, "training", "arguments.py")):
            training_dir = os.path.join(base, "training")
    pkg = types.ModuleType("megatron.training")  # not its __init__ (the training loop, triton)
    pkg.__path__ = [training_dir]
    sys.modules["megatron.training"] = pkg
    from megatron.training import global_vars

    for name in ("get_args", "get_signal_handler", "get_tokenizer", "get_tensorboard_writer", "get_wandb_writer",
                 "get_one_logger", "get_adlr_autoresume", "get_timers"):
        setattr(pkg, name, getattr(global_vars, name))
    spec = importlib.util.spec_from_file_location("megatron.training.arguments",
                                                  os.path.join(training_dir, "arguments.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _jsonable(value):
    try:
        json.dumps(value)
        return value
    except TypeError:
        return repr(value)


def dump(parser: argparse.ArgumentParser) -> list[dict]:
    out = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        typ = action.type
        out.append({"options": list(action.option_strings), "dest": action.dest, "action": type(action).__name__,
                    "nargs": action.nargs, "const": _jsonable(action.const),
                    "type": None if typ is None else getattr(typ, "__name__", repr(typ)),
                    "choices": None if action.choices is None else [_jsonable(c) for c in action.choices]})
    return out


def main() -> None:
    args = _arguments_module()
    if sys.argv[1:2] == ["--validate"]:
        import torch

        args.get_device_arch_version = lambda: 9  # Hopper: the GPU queries validate_args makes, answered
        torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
        sys.argv = ["pretrain_gpt.py", *sys.argv[2:]]
        parsed = args.parse_args()
        args.validate_args(parsed, {})
        print(json.dumps({"ok": True, "tp": parsed.tensor_model_parallel_size,
                          "pp": parsed.pipeline_model_parallel_size,
                          "dp": parsed.data_parallel_size, "cp": parsed.context_parallel_size,
                          "ep": parsed.expert_model_parallel_size,
                          "vpp": parsed.virtual_pipeline_model_parallel_size}))
        return
    parser = args.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    import megatron.core

    version = getattr(megatron.core, "__version__", None)
    doc = {"source": "https://github.com/NVIDIA/Megatron-LM", "ref": REF, "commit": COMMIT,
           "file": "megatron/training/arguments.py", "function": "add_megatron_arguments",
           "megatron_core": _jsonable(version), "allow_abbrev": False, "arguments": dump(parser)}
    rows = doc.pop("arguments")  # one argument a line: small, and a diff shows what a new Megatron-LM changed
    head = json.dumps(doc)[:-1]
    sys.stdout.write(head + ', "arguments": [\n' + ",\n".join(json.dumps(r) for r in rows) + "\n]}\n")


if __name__ == "__main__":
    main()
