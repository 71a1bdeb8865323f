# Two set-up commands, both from a fresh clone with python3, pip and make:
#   make run   - creates .venv, installs trainfit, runs the main job on shipped data
#   make test  - creates .venv, installs the test dependencies from the lock, runs the whole suite on both cores
# Every package make test installs is pinned in requirements/*.lock (`make lock` refreshes them; `make test-latest`
# runs the suite against the newest releases instead, to find upstream drift on purpose).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The lock of the test environment: the project's test extra, pip, setuptools and wheel (build backends included:
# --build-constraint). torch is the local CPU build (2.13.0+cpu); any other torch spec pulls a multi-GB CUDA build.
LOCK := requirements/test.lock
PIP_LOCKED := $(BIN)/pip install -q -c $(LOCK) --build-constraint $(LOCK)
# pytest-xdist workers (both cores of the CI machine); the 20 slowest tests are printed at the end of every run
TEST_JOBS ?= 2
PYTEST_ARGS ?= -n $(TEST_JOBS) --dist loadgroup --durations=20

.PHONY: run test test-latest lock browser calibrate cv peers bench clean trace-cases docs

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -c $(LOCK) pip setuptools

$(VENV)/.run-installed: pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP_LOCKED) -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml $(LOCK) | $(BIN)/python
	DS_BUILD_OPS=0 $(PIP_LOCKED) -e '.[test]'
	touch $@ $(VENV)/.run-installed

run: $(VENV)/.run-installed
	$(BIN)/trainfit plan --model qwen2-7b --task sft --method lora --dataset-tokens 200M --epochs 3 \
		--seq-len 2048 --deadline 48h --budget 3000 --out out/plan
	$(BIN)/trainfit estimate --model qwen2-7b --gpu a10 --method lora --seq-len 2048 --grad-ckpt full
	$(BIN)/trainfit estimate --model qwen2-7b --gpu a10 --method full --seq-len 2048 --grad-ckpt full
	$(BIN)/trainfit compare --model llama-2-7b --method lora --seq-len 2048

# The browser tests drive Debian's Chromium through Playwright (`playwright install` needs a download; the distribution
# package does not). Installed with apt when missing and we are root (CI); otherwise the tests say why they skip.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium) || \
	      echo "make: could not install chromium with apt: the browser tests will skip"; \
	  else echo "make: no chromium and no root/apt to install it: the browser tests will skip"; fi

# SkyPilot's parser checks the generated skypilot.yaml; it pins click (and so an old transformers), so it gets a
# virtual environment of its own, from its own lock.
$(VENV)/sky/.installed: requirements/sky.lock | $(BIN)/python
	$(PY) -m venv $(VENV)/sky
	$(VENV)/sky/bin/pip install -q -c requirements/sky.lock pip setuptools
	$(VENV)/sky/bin/pip install -q -c requirements/sky.lock --build-constraint requirements/sky.lock skypilot
	touch $@

# LitGPT's own code, traced by tests/test_litgpt_code.py against the memory model's LitGPT path: the version behind the
# config_hub measurements' era, without its dependencies (it imports with the suite's torch), in a folder of its own
# that only that test's subprocess puts on its path.
$(VENV)/litgpt/.installed: requirements/litgpt.lock | $(BIN)/python
	$(BIN)/pip install -q --no-deps --target $(VENV)/litgpt -r requirements/litgpt.lock
	touch $@

$(VENV)/torchtitan/.installed: requirements/torchtitan.lock | $(BIN)/python
	$(BIN)/pip install -q --no-deps --target $(VENV)/torchtitan -r requirements/torchtitan.lock
	touch $@

test: $(VENV)/.test-installed $(VENV)/sky/.installed $(VENV)/litgpt/.installed $(VENV)/torchtitan/.installed browser
	session=$$($(BIN)/python -c 'import uuid; print(uuid.uuid4().hex)'); \
	TRAINFIT_TEST_SESSION=$$session $(BIN)/python -m pytest $(PYTEST_ARGS); status=$$?; \
	$(BIN)/python tests/leftovers.py $$session || status=1; exit $$status

# The same suite against the newest releases of everything the lock pins (torch stays the local CPU build), in a
# virtual environment of its own (.venv-latest): upstream drift is found here, on purpose, not by a failed landing.
LATEST := .venv-latest
test-latest: browser
	rm -rf $(LATEST)
	$(PY) -m venv $(LATEST)
	$(LATEST)/bin/pip install -q --upgrade pip
	DS_BUILD_OPS=0 $(LATEST)/bin/pip install -q --upgrade --upgrade-strategy eager -e '.[test]'
	$(PY) -m venv $(LATEST)/sky
	$(LATEST)/sky/bin/pip install -q --upgrade pip skypilot
	$(LATEST)/bin/pip install -q --no-deps --target $(LATEST)/litgpt -r requirements/litgpt.lock
	$(LATEST)/bin/pip install -q --no-deps --target $(LATEST)/torchtitan -r requirements/torchtitan.lock
	$(LATEST)/bin/pip freeze --exclude-editable > $(LATEST)/versions.txt
	session=$$($(LATEST)/bin/python -c 'import uuid; print(uuid.uuid4().hex)'); \
	TRAINFIT_TEST_SESSION=$$session TRAINFIT_TEST_LATEST=1 TRAINFIT_TEST_VENV=$(LATEST) \
	  $(LATEST)/bin/python -m pytest $(PYTEST_ARGS); status=$$?; \
	$(LATEST)/bin/python tests/leftovers.py $$session || status=1; \
	echo "make test-latest: versions in $(LATEST)/versions.txt"; exit $$status

# Refresh the locks to the newest releases (pip-compile, in a virtual environment of its own); then make test, and
# regenerate the structure templates if transformers moved (tools/make_templates.py; see docs/tests.md).
LOCKER := $(VENV)/lock
PIP_COMPILE := CUSTOM_COMPILE_COMMAND="make lock" $(LOCKER)/bin/pip-compile -q --upgrade --strip-extras --allow-unsafe --no-emit-index-url \
	--no-emit-find-links --no-emit-trusted-host
lock:
	test -x $(LOCKER)/bin/pip-compile || ($(PY) -m venv $(LOCKER) && \
	  $(LOCKER)/bin/pip install -q pip==26.3 pip-tools==7.7.0)
	$(PIP_COMPILE) --extra test -o $(LOCK) pyproject.toml requirements/test.in
	$(PIP_COMPILE) -o requirements/sky.lock requirements/sky.in

# The docs site (mkdocs.yml, docs/): every marked output in README.md and docs/**/*.md rerun and rewritten, the command
# reference regenerated from the argparse parser (tools/docs.py; `python tools/docs.py --check` only reports what is
# stale, as tests/test_docs.py does), then the site built into build/site with --strict (`$(BIN)/mkdocs serve` browses
# it). Needs trainfit and mkdocs from the lock, not the whole test environment.
$(VENV)/.docs-installed: pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP_LOCKED) -e . mkdocs mkdocs-material
	touch $@

docs: $(VENV)/.docs-installed
	$(BIN)/python tools/docs.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q -d build/site

# The shipped calibration, fitted on committed data (published runs + our own measurements); reproducible.
CALIBRATION_INPUTS := data/validation/published_dev.jsonl $(sort $(wildcard data/measurements/*.jsonl))
calibrate: $(VENV)/.run-installed
	$(BIN)/trainfit calibrate $(CALIBRATION_INPUTS) --out src/trainfit/catalog/data/calibration.yaml

# Traced steps as validation cases of the source `trace` (docs/accuracy.md; about 8 minutes on 2 cores). Not a
# calibration input: allocated memory fits none of the calibrated values.
trace-cases: $(VENV)/.test-installed
	PYTHONPATH=src $(BIN)/python benchmarks/conformance.py --n 48 --seed 0 --cases-out data/validation/trace_cases.jsonl

# Leave-one-source-out error and the residuals the error bands are made from (docs/accuracy.md; minutes), and
# leave-one-stack-out, whose residuals band a stack the calibration has not seen (about 11 minutes on 2 cores).
cv: $(VENV)/.run-installed
	$(BIN)/trainfit calibrate data/validation/published_dev.jsonl --cv source --jobs 3 \
		--out src/trainfit/catalog/data/cv_source.json
	$(BIN)/trainfit calibrate data/validation/published_dev.jsonl --cv framework --jobs 2 \
		--out src/trainfit/catalog/data/cv_framework.json

# Peers side by side (docs/accuracy.md). llm-analysis pins transformers<5: installed beside the venv, no deps.
peers: $(VENV)/.test-installed
	$(BIN)/pip install -q --no-deps --upgrade --target $(VENV)/peers llm-analysis==0.2.2 fire==0.7.1 termcolor==3.3.0
	$(BIN)/python benchmarks/peers.py

clean:
	rm -rf $(VENV) $(LATEST) build *.egg-info src/*.egg-info .pytest_cache .hypothesis
