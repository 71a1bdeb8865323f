# Two set-up commands, both from a fresh clone with python3, pip and make:
#   make run   - creates .venv, installs trainfit, runs the main job on shipped data
#   make test  - creates .venv, installs the test dependencies, runs the whole suite
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# torch 2.13.0 has a local CPU build on these machines; any other spec pulls a multi-GB CUDA build.
TORCH_PIN := torch==2.13.0

.PHONY: run test browser calibrate cv peers bench clean trace-cases

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.run-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(TORCH_PIN)
	DS_BUILD_OPS=0 $(BIN)/pip install -q -e '.[test]'
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
# virtual environment of its own.
$(VENV)/sky/.installed: | $(BIN)/python
	$(PY) -m venv $(VENV)/sky
	$(VENV)/sky/bin/pip install -q skypilot==0.14.1
	touch $@

# LitGPT's own code, traced by tests/test_litgpt_code.py against the memory model's LitGPT path: the version behind the
# config_hub measurements' era, without its dependencies (it imports with the suite's torch), in a folder of its own
# that only that test's subprocess puts on its path.
$(VENV)/litgpt/.installed: | $(BIN)/python
	$(BIN)/pip install -q --no-deps --target $(VENV)/litgpt litgpt==0.4.13 lightning==2.4.0 \
		lightning-utilities==0.15.3 torchmetrics==1.9.0
	touch $@

test: $(VENV)/.test-installed $(VENV)/sky/.installed $(VENV)/litgpt/.installed browser
	session=$$($(BIN)/python -c 'import uuid; print(uuid.uuid4().hex)'); \
	TRAINFIT_TEST_SESSION=$$session $(BIN)/python -m pytest; status=$$?; \
	$(BIN)/python tests/leftovers.py $$session || status=1; exit $$status

# The shipped calibration, fitted on committed data (published runs + our own measurements); reproducible.
CALIBRATION_INPUTS := data/validation/published_dev.jsonl $(sort $(wildcard data/measurements/*.jsonl))
calibrate: $(VENV)/.run-installed
	$(BIN)/trainfit calibrate $(CALIBRATION_INPUTS) --out src/trainfit/catalog/data/calibration.yaml

# Traced steps as validation cases of the source `trace` (README, Accuracy; about 8 minutes on 2 cores). Not a
# calibration input: allocated memory fits none of the calibrated values.
trace-cases: $(VENV)/.test-installed
	PYTHONPATH=src $(BIN)/python benchmarks/conformance.py --n 48 --seed 0 --cases-out data/validation/trace_cases.jsonl

# Leave-one-source-out error and the residuals the error bands are made from (README, Accuracy; minutes).
cv: $(VENV)/.run-installed
	$(BIN)/trainfit calibrate data/validation/published_dev.jsonl --cv source --jobs 3 \
		--out src/trainfit/catalog/data/cv_source.json

# Peers side by side (README, Accuracy). llm-analysis pins transformers<5: installed beside the venv, no deps.
peers: $(VENV)/.test-installed
	$(BIN)/pip install -q --no-deps --upgrade --target $(VENV)/peers llm-analysis==0.2.2 fire==0.7.1 termcolor==3.3.0
	$(BIN)/python benchmarks/peers.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .hypothesis
