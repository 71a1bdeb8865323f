import os
import signal
import sys
import uuid

import pytest
from xdist_groups import pytest_collection_modifyitems  # noqa: F401  (a hook: pytest finds it here)

from trainfit import _proc

os.environ.setdefault("TRAINFIT_LANG", "en")
# Every process the suite starts inherits this marker, whatever session it moves to: on an interrupt the suite stops
# them all, and at the end of the session (and in `make test`, tests/leftovers.py) none may still be alive.
SESSION_VAR = "TRAINFIT_TEST_SESSION"
SESSION = os.environ.setdefault(SESSION_VAR, uuid.uuid4().hex)


# Under pytest-xdist (make test runs two workers) each worker adds a mark of its own, so that it checks and stops
# only what its own tests started, never the controller or the other worker; the controller checks the session.
WORKER_VAR = "TRAINFIT_TEST_WORKER"
_mark = [SESSION_VAR, SESSION]  # what this process stops on SIGTERM/SIGHUP and checks at its end
_controller = [False]  # an xdist controller: its workers are its direct children, and are not leftovers


def _stop_children(signum, frame):
    _proc.stop_tagged(*_mark, grace_s=3.0)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _stop_children)
# A developer's own calibration (config directory) must not change what the tests see.
os.environ.pop("TRAINFIT_CALIBRATION", None)
os.environ["XDG_CONFIG_HOME"] = os.path.join(os.path.dirname(__file__), "snapshots", "no-config")
# ... nor a developer's refreshed prices (~/.cache/trainfit/prices); tests that need a cache make their own.
os.environ["XDG_CACHE_HOME"] = os.path.join(os.path.dirname(__file__), "snapshots", "no-cache")
# Price ages are counted from a fixed day, so "stale" in a test does not change with the calendar.
os.environ["TRAINFIT_TODAY"] = "2026-11-30"


def _workers() -> set[int]:
    """This process's direct children (an xdist controller's workers)."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else ()):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
                if int(fh.read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found.add(int(pid))
        except (OSError, IndexError, ValueError):
            continue
    return found


def pytest_sessionfinish(session, exitstatus):
    """No process started by the suite may outlive it: any that did is listed, stopped, and fails the session."""
    exclude = _workers() if _controller[0] else set()
    left = _proc.tagged(*_mark, exclude=exclude)
    if not left:
        return
    lines = []
    for pid in left:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
            lines.append(f"  {pid}: {cmdline[:200]}")
        except OSError:
            lines.append(f"  {pid}")
    _proc.stop_tagged(*_mark, grace_s=3.0, exclude=exclude)
    sys.stderr.write("processes started by the test suite were still alive at its end (now stopped):\n"
                     + "\n".join(lines) + "\n")
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
# The generic reader's structure cache: a fresh one per test session (never the developer's ~/.cache)
if "TRAINFIT_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["TRAINFIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainfit-cache-")


def pytest_configure(config):
    # Tests build models on the meta device or run tiny ones on the CPU; keep torch's threads modest (one per xdist
    # worker: make test runs a worker per core).
    workers = getattr(config.option, "numprocesses", None)
    os.environ.setdefault("OMP_NUM_THREADS", "1" if workers or hasattr(config, "workerinput") else "2")
    if hasattr(config, "workerinput"):  # an xdist worker: its own mark, and it dies with its controller
        os.environ[WORKER_VAR] = f"{config.workerinput['workerid']}-{uuid.uuid4().hex}"
        _mark[:] = [WORKER_VAR, os.environ[WORKER_VAR]]
        _proc.die_with_parent(signal.SIGTERM)
    elif workers:
        _controller[0] = True



@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    from trainfit.cli.main import main

    def _run(*argv: str):
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


@pytest.fixture
def plan_json(run_cli):
    """`trainfit plan ARGV --json` in-process: its document, after checking the exit code says what it holds
    (0 with recommendations; 1 when it answered that nothing meets the request)."""
    import json

    def _plan(*argv: str) -> dict:
        code, out, err = run_cli("plan", *argv, "--json")
        doc = json.loads(out)
        assert code == (0 if doc["recommendations"] else 1), err
        return doc

    return _plan


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


def read_config_in_fresh_process(tmp_path, cfg: dict, field: str) -> list:
    """Resolve a config.json in a fresh interpreter with an empty structure cache: [model_type, the spec's `field`,
    whether torch and transformers got imported, whether anything was cached]."""
    import json
    import subprocess

    file = tmp_path / "config.json"
    file.write_text(json.dumps(cfg))
    code = ("import sys, json; from trainfit.catalog.models import resolve_model; "
            f"s = resolve_model({str(file)!r}); "
            f"print(json.dumps([s.model_type, s.{field}, 'torch' in sys.modules, 'transformers' in sys.modules]))")
    env = {**os.environ, "TRAINFIT_CACHE_DIR": str(tmp_path / "empty-cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout) + [(tmp_path / "empty-cache").exists()]
