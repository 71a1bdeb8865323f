import os
import sys

import pytest

os.environ.setdefault("TRAINFIT_LANG", "en")
# A developer's own calibration (config directory) must not change what the tests see.
os.environ.pop("TRAINFIT_CALIBRATION", None)
os.environ["XDG_CONFIG_HOME"] = os.path.join(os.path.dirname(__file__), "snapshots", "no-config")
# The generic reader's structure cache: a fresh one per test session (never the developer's ~/.cache)
if "TRAINFIT_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["TRAINFIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainfit-cache-")


def pytest_configure(config):
    # Tests build models on the meta device or run tiny ones on the CPU; keep torch's threads modest.
    os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from trainfit.cli.main import main

    def _run(*argv: str):
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


def python_exe() -> str:
    return sys.executable


TEXTS = ["the quick brown fox jumps over the lazy dog", "hello world this is a tiny dataset",
         "trainfit trains tiny models on cpu"]


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory):
    """A word-level tokenizer and small JSONL datasets for every task (no model hub needed)."""
    import json

    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("tiny_data")
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS * 5, trainers.WordLevelTrainer(special_tokens=["<pad>", "<unk>", "<eos>"]))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    fast.save_pretrained(root / "tok")
    rows = {
        "text": [{"text": TEXTS[i % 3]} for i in range(40)],
        "chat": [{"messages": [{"role": "user", "content": TEXTS[i % 3]},
                               {"role": "assistant", "content": TEXTS[(i + 1) % 3]}]} for i in range(40)],
        "dpo": [{"prompt": TEXTS[i % 3], "chosen": TEXTS[(i + 1) % 3], "rejected": TEXTS[(i + 2) % 3]}
                for i in range(40)],
        "cls": [{"text": TEXTS[i % 3], "label": i % 2} for i in range(40)],
    }
    for name, items in rows.items():
        with open(root / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for row in items:
                fh.write(json.dumps(row) + "\n")
    return root
