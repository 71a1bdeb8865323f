"""Runs that cannot hang: the generated train.py stops on a stale JIT-extension lock instead of waiting on it forever,
a start-up watchdog names the phase a run was stuck in, a rank whose launcher is gone stops, `bench` reports the
runner's error, and killing the test suite itself leaves no train.py / torchrun process behind."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from trainfit import _proc

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = pytest.mark.slow

TORCHRUN = os.path.join(os.path.dirname(sys.executable), "torchrun")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _generate(run_cli, out, *flags):
    code, _, err = run_cli("generate", "--model", "tiny-llama", "--gpu", "a100-sxm4-80gb", "--seq-len", "32",
                           "--micro-batch", "2", "--grad-accum", "1", *flags, "--out", str(out))
    assert code == 0, err


def _env(**extra):
    return dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", **extra)


def _train_argv(run_dir, *extra, procs=1):
    cmd = ["train.py", "--synthetic", "--random-init", "--device", "cpu", "--output-dir", str(run_dir / "out"), *extra]
    return [sys.executable, *cmd] if procs == 1 else [TORCHRUN, "--standalone", "--nproc_per_node", str(procs), *cmd]


def _plant_lock(root):
    lock = root / "py311_cpu" / "deepspeed_shm_comm" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    return lock


def test_stale_extension_lock_stops_train_py_at_once(run_cli, tmp_path):
    """A lock left by a killed DeepSpeed build (no live process holds it) is named with what to do, exit 2, in
    seconds; --clear-stale-locks removes it, says so, and the run trains."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--zero", "2")
    lock = _plant_lock(tmp_path / "ext")
    env = _env(TORCH_EXTENSIONS_DIR=str(tmp_path / "ext"))
    t0 = time.monotonic()
    proc = _proc.run(_train_argv(run, "--max-steps", "1"), cwd=str(run), env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("train.py: error: stale JIT-extension lock") and str(lock) in last
    assert "--clear-stale-locks" in last
    assert time.monotonic() - t0 < 90 and lock.exists() and proc.leftovers == []

    proc = _proc.run(_train_argv(run, "--max-steps", "1", "--clear-stale-locks"), cwd=str(run), env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"removed stale lock {lock}" in proc.stderr and not lock.exists()


def test_a_lock_a_live_build_holds_is_not_stale(tmp_path):
    """The lock of a build in progress (its file held open, as torch's FileBaton does) is waited for, not removed."""
    sys.path.insert(0, os.path.join(ROOT, "src", "trainfit", "train"))
    try:
        import runner
    finally:
        sys.path.pop(0)
    lock = _plant_lock(tmp_path / "ext")
    with open(lock) as held:  # noqa: F841 - holding it open is the point
        assert runner.lock_holders(str(lock)) == [os.getpid()]
        runner.check_extension_locks(str(tmp_path / "ext"), clear=True)
        assert lock.exists()
    assert runner.lock_holders(str(lock)) == []
    with pytest.raises(runner.SetupError, match="stale JIT-extension lock"):
        runner.check_extension_locks(str(tmp_path / "ext"), clear=False)


def test_bench_reports_the_stale_lock(run_cli, tmp_path, monkeypatch):
    lock = _plant_lock(tmp_path / "ext")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    t0 = time.monotonic()
    code, _, err = run_cli("bench", "--model", "tiny-llama", "--device", "cpu", "--zero", "2", "--seq-len", "32",
                           "--micro-batch", "1", "--steps", "1", "--warmup", "0", "--timeout", "120")
    assert code == 2 and time.monotonic() - t0 < 90
    assert err.strip().startswith("trainfit: error: benchmark run failed (exit 2): train.py: error: stale")
    assert str(lock) in err


SITE_STALL = """import os, time
if os.environ.get("RANK") == "1" and os.environ.get("TRAINFIT_TEST_STALL") == "1":
    time.sleep(3600)  # this rank never reaches the rendezvous
"""


def test_watchdog_names_the_stalled_rendezvous_and_no_rank_survives(run_cli, tmp_path):
    """Rank 1 never starts (it sleeps before train.py runs): rank 0's watchdog stops it in 'rendezvous', torchrun
    tears rank 1 down, and nothing of the job is left."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--gpus", "2")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE_STALL)
    env = _env(TRAINFIT_TEST_STALL="1", PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    proc = _proc.run(_train_argv(run, "--max-steps", "1", "--startup-timeout", "15", procs=2), cwd=str(run),
                     env=env, timeout=120)
    assert proc.returncode != 0
    assert "no first training step within 15 s (--startup-timeout); stuck in phase 'rendezvous'" in proc.stderr
    assert time.monotonic() - t0 < 100
    assert proc.leftovers == []  # torchrun stopped the other rank itself
    assert not (run / "out" / "metrics.jsonl").exists()


def test_watchdog_in_a_single_process_and_its_exit_code(run_cli, tmp_path):
    """One rank of two started by hand (no launcher): the watchdog ends it with exit code 4, phase named."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--gpus", "2")
    env = _env(WORLD_SIZE="2", RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    env.pop("LOCAL_RANK", None)
    proc = _proc.run(_train_argv(run, "--max-steps", "1", "--startup-timeout", "10"), cwd=str(run), env=env,
                     timeout=120)
    assert proc.returncode == 4, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        "train.py: error: rank 0: no first training step within 10 s (--startup-timeout); stuck in phase "
        "'rendezvous': waiting for every rank to join the process group: check MASTER_ADDR / MASTER_PORT, the "
        "network between nodes and that every node was started")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, limit_s: float, what: str):
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what() if callable(what) else what}")


def _cmdlines(pids):
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                out.append(f"{pid}: {fh.read().replace(bytes(1), b' ')[:150].decode(errors='replace')}")
        except OSError:
            out.append(str(pid))
    return out


def _proc_stack(pid):
    """What a stuck process is doing: its state line, wait channel and kernel stack, as far as /proc shows them."""
    out = []
    for name in ("status", "wchan", "stack"):
        try:
            with open(f"/proc/{pid}/{name}", encoding="utf-8", errors="replace") as fh:
                text = fh.read()
        except OSError as exc:
            text = f"<{exc.strerror}>"
        out.append(f"{name}: " + (" ".join(l for l in text.splitlines() if l.startswith(("State", "SigBlk", "SigIgn", "SigCgt", "Threads"))) if name == "status" else text.strip()[:500]))
    return "; ".join(out)


def _ranks(var, value):
    pids = []
    for pid in _proc.tagged(var, value):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = [os.path.basename(a) for a in fh.read().split(b"\0")]
            if b"train.py" in argv and b"torchrun" not in argv and _proc._alive(pid):  # a rank, not its launcher
                pids.append(pid)
        except OSError:
            continue
    return pids


def test_ranks_stop_when_torchrun_is_killed(run_cli, tmp_path):
    """SIGKILL to torchrun alone (as a CI timeout or the OOM killer does): its ranks, in sessions of their own, see
    their launcher gone and stop within seconds instead of living on as orphans."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--gpus", "2")
    tag = "orphans-" + os.urandom(4).hex()
    env = _env(TRAINFIT_ORPHAN_TEST=tag)
    launcher = subprocess.Popen(_train_argv(run, "--max-steps", "100000", procs=2), cwd=str(run), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(lambda: (run / "out" / "metrics.jsonl").exists(), 120, "the first step")
        assert len(_ranks("TRAINFIT_ORPHAN_TEST", tag)) == 2
        launcher.kill()
        launcher.wait()
        _wait_for(lambda: not _ranks("TRAINFIT_ORPHAN_TEST", tag), 20, "the orphaned ranks to stop")
    finally:
        launcher.kill()
        _proc.stop_tagged("TRAINFIT_ORPHAN_TEST", tag, grace_s=2)


INNER_TEST = "tests/test_hang_guard.py::test_inner_long_run"


@pytest.mark.skipif(os.environ.get("TRAINFIT_INNER_RUN") != "1", reason="started by test_killing_the_suite_...")
def test_inner_long_run(run_cli, tmp_path):
    """Not a test of its own: the long two-rank run that test_killing_the_suite_leaves_nothing kills midway."""
    run = tmp_path / "run"
    _generate(run_cli, run, "--gpus", "2")
    _proc.run(_train_argv(run, "--max-steps", "100000", procs=2), cwd=str(run), env=_env(), timeout=600)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["int", "term", "kill"])
def test_killing_the_suite_leaves_nothing(tmp_path, sig):
    """A test run (pytest, as `make test` runs it) interrupted while torchrun trains two ranks: Ctrl-C, a plain
    kill, or SIGKILL. Within seconds no process of that run is left."""
    session = "inner-" + os.urandom(6).hex()
    env = dict(os.environ, TRAINFIT_INNER_RUN="1", TRAINFIT_TEST_SESSION=session)
    log = tmp_path / "inner.log"
    with open(log, "wb") as sink:
        # pytest as `python -m pytest` runs it, plus a SIGUSR1 stack dump so a stuck run can say where it is. Ctrl-C
        # as at a terminal: a suite started in the background by a non-interactive shell (`make test &`) inherits
        # SIGINT ignored, and Python then installs no handler for it (the inner run would not hear the Ctrl-C)
        boot = ("import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR1, all_threads=True); "
                "signal.signal(signal.SIGINT, signal.default_int_handler); "
                "import pytest; sys.exit(pytest.main(sys.argv[1:]))")
        inner = subprocess.Popen([sys.executable, "-c", boot, "-q", "-p", "no:cacheprovider", INNER_TEST,
                                  "--basetemp", str(tmp_path / "inner")], cwd=ROOT, env=env,
                                 stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(lambda: len(_ranks("TRAINFIT_TEST_SESSION", session)) == 2, 120, "two training ranks")
        inner.send_signal(sig)
        try:
            inner.wait(timeout=60)
        except subprocess.TimeoutExpired:
            stack = _proc_stack(inner.pid)
            inner.send_signal(signal.SIGUSR1)
            time.sleep(2)
            raise AssertionError(f"the interrupted pytest did not exit within 60 s; its output:\n"
                                 f"{log.read_text(errors='replace')[-3000:]}\nits state: {stack}\nits session: "
                                 f"{_cmdlines(_proc.tagged('TRAINFIT_TEST_SESSION', session))}") from None
        _wait_for(lambda: not _proc.tagged("TRAINFIT_TEST_SESSION", session), 30,
                  lambda: f"every process of the run to end: left {_cmdlines(_proc.tagged('TRAINFIT_TEST_SESSION', session))}")
    finally:
        inner.kill()
        _proc.stop_tagged("TRAINFIT_TEST_SESSION", session, grace_s=2)


def test_leftovers_check_finds_a_stray_process(tmp_path):
    """`make test` ends with tests/leftovers.py: a process of a test session still alive fails it (and is stopped)."""
    session = "stray-" + os.urandom(4).hex()
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                             env=dict(os.environ, TRAINFIT_TEST_SESSION=session), start_new_session=True)
    try:
        clean_env = {k: v for k, v in os.environ.items() if k != "TRAINFIT_TEST_SESSION"}
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "leftovers.py"), session], env=clean_env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and str(stray.pid) in out.stderr
        stray.wait(timeout=10)  # it was stopped
    finally:
        stray.kill()


def test_metrics_file_is_json_lines(run_cli, tmp_path):
    """The guard adds nothing to what a run writes: a finished run's metrics are JSON lines, the last a summary."""
    run = tmp_path / "run"
    _generate(run_cli, run)
    proc = _proc.run(_train_argv(run, "--max-steps", "1", "--startup-timeout", "60"), cwd=str(run), env=_env(),
                     timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(x) for x in (run / "out" / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["summary"] is True and proc.leftovers == []


NO_TORCH = "import sys\nsys.modules['torch'] = None  # `import torch` raises ImportError, as where it is not installed\n"


def test_train_py_and_bench_without_torch_say_what_to_install(run_cli, tmp_path, monkeypatch):
    run = tmp_path / "run"
    _generate(run_cli, run)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(NO_TORCH)
    env = _env(PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    proc = _proc.run(_train_argv(run, "--max-steps", "1"), cwd=str(run), env=env, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("train.py: error: torch is not installed: pip install -r "
                                                           "requirements.txt")
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    code, _, err = run_cli("bench", "--model", "tiny-llama", "--device", "cpu", "--seq-len", "32", "--steps", "1",
                           "--warmup", "0", "--timeout", "120")
    assert code == 2 and "Traceback" not in err and "torch is not installed" in err and err.count("\n") == 1


def test_a_rank_whose_launcher_died_before_it_started_stops(run_cli, tmp_path):
    """The launcher is gone before the rank's watchdog even starts (the rank is already reparented to init): it
    stops at once instead of running, or hanging, on its own."""
    run = tmp_path / "run"
    _generate(run_cli, run)
    tag = "early-orphan-" + os.urandom(4).hex()
    log = tmp_path / "rank.log"
    argv = " ".join(_train_argv(run, "--max-steps", "100000"))
    env = _env(LOCAL_RANK="0", RANK="0", WORLD_SIZE="1", TORCHELASTIC_RUN_ID="test", TRAINFIT_ORPHAN_TEST=tag)
    subprocess.run(["bash", "-c", f"cd {run} && {argv} > {log} 2>&1 & exit 0"], env=env, timeout=30, check=True)
    try:
        said = "the launcher that started this rank is gone"
        _wait_for(lambda: log.exists() and said in log.read_text(), 90, "the orphaned rank's message")
        _wait_for(lambda: not _ranks("TRAINFIT_ORPHAN_TEST", tag), 10, "the orphaned rank to stop")
        assert "step" not in log.read_text()  # it stopped before training
    finally:
        _proc.stop_tagged("TRAINFIT_ORPHAN_TEST", tag, grace_s=2)
