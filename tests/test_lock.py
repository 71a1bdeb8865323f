"""The test environment comes from the committed lock (requirements/test.lock, made by `make lock`): every package the
project and its test extra name is pinned there to a version its requirement allows, nothing is pinned twice, and the
environment this suite runs in has exactly the locked versions (under `make test-latest`, which runs against the
newest releases on purpose, the last check is skipped). The structure templates were made with the locked
transformers (tests/test_structure_templates.py checks each against that version's meta-device read)."""

import os
import re
import sys
import tomllib
from importlib.metadata import distributions, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
LATEST = os.environ.get("TRAINFIT_TEST_LATEST") == "1"


def read_lock(path: Path) -> dict[str, str]:
    """name -> pinned version of a pip-compile lock; every requirement line must be an exact pin."""
    pins: dict[str, str] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"{path.name}: not an exact pin: {raw!r}"
        name = canonicalize_name(req.name)
        assert name not in pins, f"{path.name}: {name} pinned twice"
        pins[name] = spec[0].version
    return pins


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)["project"]


def test_lock_pins_every_requirement_of_the_test_environment():
    pins = read_lock(ROOT / "requirements" / "test.lock")
    wanted = [Requirement(r) for r in _project()["dependencies"] + _project()["optional-dependencies"]["test"]]
    wanted += [Requirement(r) for r in ("pip", "setuptools")]  # requirements/test.in
    for req in wanted:
        name = canonicalize_name(req.name)
        assert name in pins, f"{name} is not in requirements/test.lock: run make lock"
        assert req.specifier.contains(Version(pins[name]), prereleases=True), \
            f"{name}=={pins[name]} in the lock does not satisfy {req} (pyproject.toml): run make lock"
    # torch is the local CPU build; a spec without it would pull the CUDA one with its multi-GB dependencies
    assert pins["torch"].endswith("+cpu")
    assert not any(name.startswith("nvidia-") and name != "nvidia-ml-py" for name in pins)


def test_side_locks_are_exact_pins():
    sky = read_lock(ROOT / "requirements" / "sky.lock")
    assert sky["skypilot"] == "0.14.1"
    lit = read_lock(ROOT / "requirements" / "litgpt.lock")
    assert lit["litgpt"] == "0.4.13"
    titan = read_lock(ROOT / "requirements" / "torchtitan.lock")
    assert titan["torchtitan"] == "0.2.2"  # the last release with a TOML job config (tests/test_generate_3d.py)


@pytest.mark.skipif(LATEST, reason="make test-latest runs against the newest releases, not the lock")
def test_this_environment_is_the_locked_one():
    pins = read_lock(ROOT / "requirements" / "test.lock")
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in distributions() if d.metadata["Name"]}
    differ = {name: (want, installed.get(name)) for name, want in pins.items() if installed.get(name) != want}
    assert not differ, f"installed versions differ from requirements/test.lock (locked, installed): {differ}"


def test_templates_were_made_with_the_locked_transformers():
    from trainfit.catalog import templates

    pins = read_lock(ROOT / "requirements" / "test.lock")
    assert templates.made_with() == pins["transformers"], (
        "the structure templates were made with another transformers than the lock's: regenerate them "
        "(PYTHONPATH=src python tools/make_templates.py --jobs 2)")
    if not LATEST:
        assert version("transformers") == templates.made_with()


def test_read_lock_refuses_a_loose_pin(tmp_path):
    bad = tmp_path / "x.lock"
    bad.write_text("numpy>=2\n")
    with pytest.raises(AssertionError, match="not an exact pin"):
        read_lock(bad)
    bad.write_text("numpy==2.0\nNumPy==2.1\n")
    with pytest.raises(AssertionError, match="pinned twice"):
        read_lock(bad)


def test_lock_header_names_the_refresh_command():
    text = (ROOT / "requirements" / "test.lock").read_text(encoding="utf-8")
    assert re.search(r"^#\s+make lock$", text, re.M), "requirements/test.lock was not written by make lock"


def test_xdist_groups_the_tests_that_share_a_module_fixture(tmp_path):
    """make test runs `-n 2 --dist loadgroup`; tests/conftest.py marks the tests that share a module-scoped fixture
    with one xdist_group so the fixture is built once. With pytest 9.2 and pytest-xdist 3.8 the mark is silently
    ignored (pytest-dev/pytest-xdist#1386): this runs such a module with what is installed and checks that one worker
    ran all of it."""
    pytest.importorskip("xdist")
    from trainfit import _proc

    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text("from xdist_groups import pytest_collection_modifyitems  # noqa\n")
    (tmp_path / "test_shared.py").write_text(
        "import os, pytest\n\n@pytest.fixture(scope='module')\ndef shared():\n    return os.environ['PYTEST_XDIST_WORKER']\n\n"
        "@pytest.mark.parametrize('i', range(8))\ndef test_a(shared, i):\n"
        "    assert shared == os.environ['PYTEST_XDIST_WORKER']\n\n"
        "@pytest.mark.parametrize('i', range(8))\ndef test_free(i):\n    pass\n")
    out = _proc.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p",
                     "no:cacheprovider", str(tmp_path)], timeout=120, cwd=str(tmp_path),
                   env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    shared = [line for line in out.stdout.splitlines() if "test_a[" in line and "PASSED" in line]
    assert len(shared) == 8 and all(line.rstrip().endswith("@test_shared") for line in shared), out.stdout[-3000:]
    workers = {line.split("]", 1)[0] for line in shared}
    assert len(workers) == 1, f"the tests sharing a module fixture ran on {sorted(workers)}"
