"""Runs the hostile-input corpus (cases.json) and measures what each input costs.

The CLI is imported once; each case then runs in a forked child (the same start a fresh `trainfit` has, without
paying the import for every case), in a folder of its own with HOME and the XDG folders inside it, stdin closed and
output to files. The parent reads each child's peak resident memory and CPU time from wait4() and its wall time from
the clock. A child has an address-space limit (8 GB) and a 60 s limit, so an input that explodes fails its case instead
of the machine. Each case runs in English and then, in the same child, with `--lang zh`.

    python tests/hostile/run_corpus.py [--json OUT] [--only ID,...]   # a table: case, exit codes, MB, seconds

Peak memory is the child's maximum resident set (both runs; it starts from the parent's ~25 MB, as a fresh process
does after importing the CLI); seconds are the longer of the two runs, import of what the case needs included.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "files")
AS_LIMIT = 8 << 30
WALL_LIMIT_S = 60.0


def _make(spec: dict, tmp: str) -> None:
    if "sparse" in spec:  # a file of the given size whose bytes are never written (read as NULs)
        with open(os.path.join(tmp, spec["sparse"]), "wb") as fh:
            fh.truncate(spec["bytes"])
    elif "text" in spec:  # a real text file: `line` repeated up to `bytes` (or `rows` times after `head`)
        line = spec["line"].encode()
        with open(os.path.join(tmp, spec["text"]), "wb") as fh:
            fh.write(spec.get("head", "").encode())
            if "rows" in spec:
                fh.write(line * spec["rows"])
            else:
                block = line * max(1, (1 << 20) // len(line))
                for _ in range(spec["bytes"] // len(block)):
                    fh.write(block)
    elif "config_in" in spec:  # a model folder with an awkward name, holding a config.json
        folder = os.path.join(tmp, spec["config_in"])
        os.makedirs(folder)
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
            json.dump(spec["config"], fh)


def _child(argv: list[str], tmp: str, lang: bool) -> None:
    """In the forked child: limits, a clean home, output to files, then the CLI in English and in Chinese."""
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))
    os.chdir(tmp)
    for var in ("HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        os.environ[var] = os.path.join(tmp, "home")
    os.environ["COLUMNS"] = "120"
    from trainfit.cli.main import main

    codes, times = [], []
    for n, extra in enumerate([[], ["--lang", "zh"]] if lang else [[]]):
        out = os.open(os.path.join(tmp, f"stdout{n}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(os.path.join(tmp, f"stderr{n}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        sys.stdout.flush(), sys.stderr.flush()
        os.dup2(out, 1), os.dup2(err, 2)
        start = time.perf_counter()
        try:
            code = main(list(argv) + extra)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - reported as what it is: a crash of the CLI itself
            import traceback

            traceback.print_exc()
            code = 99
        sys.stdout.flush(), sys.stderr.flush()
        codes.append(code)
        times.append(time.perf_counter() - start)
    with open(os.path.join(tmp, "codes"), "w") as fh:
        json.dump({"codes": codes, "times": times}, fh)
    os._exit(0)


def _read(path: str, limit: int = 4000) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def run_case(case: dict, root: str) -> dict:
    tmp = tempfile.mkdtemp(prefix=case["id"] + "-", dir=root)
    os.makedirs(os.path.join(tmp, "home"))
    if case.get("make"):
        _make(case["make"], tmp)
    argv = [a.replace("{f}", FILES).replace("{tmp}", tmp) for a in case["argv"]]
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            _child(argv, tmp, case.get("zh", True))
        finally:
            os._exit(98)
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.perf_counter() - start > WALL_LIMIT_S:
            os.kill(pid, signal.SIGKILL)
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.005)
    wall = time.perf_counter() - start
    try:
        with open(os.path.join(tmp, "codes")) as fh:
            ran = json.load(fh)
        codes, times = ran["codes"], ran["times"]
    except (OSError, ValueError, KeyError):
        codes, times = [None], [wall]
    result = {"id": case["id"], "category": case["category"], "code": codes[0],
              "zh_code": codes[1] if len(codes) > 1 else None,
              "stdout": _read(os.path.join(tmp, "stdout0"), 1 << 20), "stderr": _read(os.path.join(tmp, "stderr0")),
              "zh_stderr": _read(os.path.join(tmp, "stderr1")), "peak_mb": usage.ru_maxrss / 1024,
              "cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall, "run_s": max(times),
              "zh_stdout": _read(os.path.join(tmp, "stdout1")), "signal": os.WTERMSIG(status)
              if os.WIFSIGNALED(status) else None}
    shutil.rmtree(tmp, ignore_errors=True)
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write every result here")
    ap.add_argument("--only", help="comma-separated case ids")
    args = ap.parse_args(argv)
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as fh:
        cases = json.load(fh)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c["id"] in wanted]
    t0 = time.perf_counter()
    import trainfit.cli.main  # noqa: F401 - the import every case shares, measured once

    import_s = time.perf_counter() - t0
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    root = tempfile.mkdtemp(prefix="trainfit-hostile-")
    results = []
    try:
        for case in cases:
            results.append(run_case(case, root))
            r = results[-1]
            if not args.json:
                print(f"{r['id']:28} {r['category']:12} exit {r['code']!s:4} zh {r['zh_code']!s:4} "
                      f"{r['peak_mb']:7.0f} MB {r['run_s']:6.2f} s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary = {"import_s": import_s, "base_mb": base_mb, "cases": results}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=1)
    else:
        worst_mb = max(results, key=lambda r: r["peak_mb"])
        worst_s = max(results, key=lambda r: r["run_s"])
        print(f"{len(results)} cases; CLI import {import_s:.2f} s, {base_mb:.0f} MB; most memory "
              f"{worst_mb['peak_mb']:.0f} MB ({worst_mb['id']}); longest run {worst_s['run_s']:.2f} s ({worst_s['id']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
