"""The docs: README.md stays short and opens with the two set-up commands; every output the README and docs/ show is what
its command prints now (tools/docs.py --check), and the check does fail on a stale one; the mkdocs site builds with
--strict (no broken link or anchor). `make docs` rewrites the outputs and the command reference."""

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from trainfit import _proc

ROOT = Path(__file__).resolve().parent.parent
# The tests that rerun the docs' commands or build the site start many processes: under `make test` (-n 2 --dist
# loadgroup) they share one worker, as tests/xdist_groups.py groups a module's tests that share its slow set-up, so the
# other worker keeps running the rest of the suite.
DOCS_GROUP = pytest.mark.xdist_group("test_docs")
DOCS_PY = ROOT / "tools" / "docs.py"
README = ROOT / "README.md"


def _docs_py(*args: str, timeout: float = 300) -> "_proc.subprocess.CompletedProcess":
    return _proc.run([sys.executable, str(DOCS_PY), *args], timeout=timeout, cwd=str(ROOT))


def test_readme_is_short_and_starts_with_the_two_commands():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines (at most 300): move detail into docs/"
    assert lines[0] == "# trainfit"
    fence = lines.index("```sh")
    assert fence <= 3, "the set-up commands come first"
    commands = lines[fence + 1:lines.index("```", fence)]
    assert [c.split()[:2] for c in commands] == [["make", "run"], ["make", "test"]], commands


def test_readme_links_resolve():
    """The README's relative links point at files that exist (mkdocs checks the links inside docs/, not these)."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+://", t) and not t.startswith("#")]
    assert local, "the README links into docs/"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
    assert "docs/getting-started.md" in local and "docs/zh/quickstart.md" in local


@pytest.mark.slow
@DOCS_GROUP
def test_shown_outputs_are_current():
    """Every marked block in README.md and docs/ shows what its command prints with the code as it is now, and
    docs/reference.md is the parser's (`make docs` rewrites both). The slow block (serving's cross-validation, about
    35 s) is rerun too: every shown output is checked."""
    done = _docs_py("--check", "--slow")
    assert done.returncode == 0, (
        "stale docs: run `make docs` and read what changed\n" + done.stdout[-6000:] + done.stderr[-3000:])
    rerun = re.search(r"\b(\d+) marked blocks rerun", done.stderr)
    assert rerun and int(rerun.group(1)) >= 20, done.stderr


def _one_block_page(tmp_path: Path) -> tuple[Path, str]:
    """A copy of a docs page holding exactly one marked block whose command is a plain trainfit command."""
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^<!-- output:", text, re.M)
    assert len(blocks) == 1, "docs/getting-started.md is the page with one marked block this test copies"
    page = tmp_path / "page.md"
    page.write_text(text, encoding="utf-8")
    return page, text


@pytest.mark.slow
@DOCS_GROUP
def test_check_passes_on_a_current_copy_and_fails_on_an_altered_output(tmp_path):
    """The staleness check can fail: the same page passes as it is, and with one number of its shown output changed
    --check exits 1 naming the block; `tools/docs.py FILE` then rewrites it back to what the command prints."""
    page, text = _one_block_page(tmp_path)
    done = _docs_py("--check", str(page))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 marked blocks rerun in 1 files, 0 stale" in done.stderr, done.stderr

    shown = re.search(r"^fits: (\d+\.\d+)", text, re.M)
    assert shown, "the page's block shows the estimate's fits line"
    altered = text.replace(shown.group(0), f"fits: {float(shown.group(1)) + 1:.1f}", 1)
    page.write_text(altered, encoding="utf-8")
    done = _docs_py("--check", str(page))
    assert done.returncode == 1, done.stdout + done.stderr
    line = text[:text.index("<!-- output:")].count("\n") + 1
    assert f"page.md:{line}: stale output of `trainfit estimate --model qwen2-7b" in done.stdout, done.stdout
    assert f"+{shown.group(0)}" in done.stdout, done.stdout  # the diff shows what the command prints now
    assert page.read_text(encoding="utf-8") == altered, "--check changes nothing"

    done = _docs_py(str(page))
    assert done.returncode == 0, done.stdout + done.stderr
    assert page.read_text(encoding="utf-8") == text


def test_a_marker_without_its_fenced_block_is_an_error(tmp_path):
    page = tmp_path / "bad.md"
    page.write_text("# x\n\n<!-- output: trainfit gpus -->\nno fence here\n", encoding="utf-8")
    done = _docs_py("--check", str(page))
    assert done.returncode == 2 and "must be followed by a fenced block" in done.stderr, done.stderr


@pytest.mark.slow
@DOCS_GROUP
def test_the_site_builds_strict(tmp_path):
    """mkdocs build --strict: every page in the nav, every link and anchor resolves, CONTRIBUTING.md and the README's
    command table are included (pymdownx.snippets, check_paths)."""
    mkdocs = Path(sys.executable).parent / "mkdocs"
    if not mkdocs.exists():
        mkdocs = shutil.which("mkdocs")
    assert mkdocs, "mkdocs is in the test extra (pyproject.toml, requirements/test.lock)"
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = _proc.run([str(mkdocs), "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                     timeout=300, env=env, cwd=str(ROOT))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    pages = {p.relative_to(site).parent.as_posix() for p in site.rglob("index.html")}
    wanted = {".", "getting-started", "zh/quickstart", "estimate", "accuracy", "planning", "generate", "serving",
              "prices", "catalogs", "model-parallel", "measuring", "reports", "reference", "tests", "status",
              "development", "models"}
    assert wanted <= pages, sorted(wanted - pages)
    development = (site / "development" / "index.html").read_text(encoding="utf-8")
    assert "Where a change goes" in development  # CONTRIBUTING.md, included
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "trainfit serving" in home and "<table>" in home  # the README's command table, included
    reference = (site / "reference" / "index.html").read_text(encoding="utf-8")
    assert "--seq-len" in reference and "--target-tokens-per-s" in reference


def test_the_reference_lists_every_job_field_of_the_one_schema():
    """docs/reference.md's "Job fields" table is the schema's (spec/job.py): every field with its flag, in both
    languages (`make docs` regenerates it; the --check test above fails when it is stale)."""
    from trainfit.api import job_fields

    text = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
    section = text[text.index("## Job fields"):]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert [r.split("`")[1] for r in rows] == [f["name"] for f in job_fields()]
    assert all(f"`{f['flag']}`" in row for f, row in zip(job_fields(), rows))
    assert "训练方法" in section
