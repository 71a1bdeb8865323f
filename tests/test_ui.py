"""`trainfit ui`: the HTTP API (in-process client) and the `trainfit ui` command (a real server on a free port)."""

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile

import pytest

pytest.importorskip("fastapi", reason="the 'ui' extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from trainfit import estimate  # noqa: E402
from trainfit.ui.app import create_app  # noqa: E402

LORA = {"model": "qwen2-7b", "gpu": "a10", "method": "lora", "grad_ckpt": "full", "seq_len": "2048"}
PLAN = {"model": "qwen2-7b", "method": "lora", "dataset_tokens": "200M", "epochs": "3", "deadline": "48h",
        "budget": "3000"}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_estimate_equals_the_api(client):
    r = client.post("/api/estimate", json=LORA)
    assert r.status_code == 200
    est = estimate("qwen2-7b", "a10", method="lora", grad_ckpt="full", seq_len=2048)
    got = r.json()["result"]
    assert got["tokens_per_s"] == round(est.tokens_per_s, 1)
    assert got["memory_gib"]["total"] == round(est.memory.device / 2**30, 3)
    assert 'class="chart chart-stacked"' in r.json()["html"]


def test_what_would_fit_when_it_does_not(client):
    r = client.post("/api/estimate", json={**LORA, "method": "full", "grad_ckpt": "none"}).json()
    assert r["result"]["fits"] is False and r["result"]["does_not_fit"]["alternatives"]


@pytest.mark.parametrize("form, words", [
    ({**LORA, "seq_len": "abc"}, "seq-len"),
    ({**LORA, "gpu": "a1O"}, "did you mean"),
    ({**LORA, "model": "no-such-model"}, "unknown model"),
    ({**LORA, "model": "", "config": "{not json"}, "config.json: not valid JSON"),
    ({**LORA, "method": "magic"}, "method"),
    ({**LORA, "lang": "fr"}, "lang"),
])
def test_bad_input_is_one_line(client, form, words):
    r = client.post("/api/estimate", json=form)
    assert r.status_code == 400
    err = r.json()["error"]
    assert words in err and "\n" not in err and "Traceback" not in err and "trainfit-ui-" not in err


ZH = {**LORA, "lang": "zh"}


@pytest.mark.parametrize("path, form, words", [
    ("/api/estimate", {**ZH, "model": "no-such-model"}, "未知的模型 'no-such-model'"),  # bad model
    ("/api/estimate", {**ZH, "model": ""}, "模型：请选择预设"),
    ("/api/estimate", {**ZH, "model": "", "config": "{not json"}, "config.json：不是有效的 JSON"),
    ("/api/estimate", {**ZH, "seq_len": "abc"}, "seq-len：'abc' 不是整数"),  # bad number
    ("/api/estimate", {**ZH, "micro_batch": "0"}, "micro-batch 必须是 [1, 65536] 内的整数"),
    ("/api/estimate", {**ZH, "gpu": "a1O"}, "未知的GPU 'a1O'（是否想输入："),  # unknown GPU
    ("/api/estimate", {**ZH, "gpu": "", "instance": "ecs.nope"}, "未知的实例类型 'ecs.nope'"),
    ("/api/estimate", {**ZH, "method": "magic"}, "无效的 method 'magic'"),
    ("/api/estimate", {**ZH, "zero": "5"}, "ZeRO 阶段必须是 0、1、2 或 3"),
    ("/api/plan", {**PLAN, "lang": "zh", "dataset_tokens": "lots"}, "--dataset-tokens：'lots' 不是数量"),
    ("/api/plan", {**PLAN, "lang": "zh", "deadline": "soon"}, "--deadline：'soon' 不是时长"),
    ("/api/plan", {**PLAN, "lang": "zh", "budget": "-1"}, "--budget 必须为正数"),
])
def test_errors_in_chinese(client, path, form, words):
    r = client.post(path, json=form)
    assert r.status_code == 400
    err = r.json()["error"]
    assert words in err and "\n" not in err, err


def test_every_error_shown_in_zh_starts_in_chinese():
    """An error shape the table does not know keeps its detail behind a Chinese lead-in."""
    from trainfit.i18n.errors import FALLBACK_ZH, localize_error

    assert localize_error("something nobody wrote", "zh") == FALLBACK_ZH + "something nobody wrote"
    assert localize_error("something nobody wrote", "en") == "something nobody wrote"


def test_server_errors_in_chinese(monkeypatch):
    """A request that is not JSON (the language from the URL) and an internal error, both in zh."""
    import trainfit.ui.app as app_module

    def broken(form):
        raise RuntimeError("boom")

    monkeypatch.setattr(app_module, "do_estimate", broken)
    c = TestClient(app_module.create_app())
    r = c.post("/api/estimate?lang=zh", content=b"[1, 2]", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and r.json()["error"] == "表单：应为 JSON 对象"
    r = c.post("/api/estimate", json=ZH)
    assert r.status_code == 500 and r.json()["error"] == "内部错误，请报告：RuntimeError: boom"
    r = c.post("/api/estimate", json=LORA)
    assert r.json()["error"] == "internal error, please report it: RuntimeError: boom"


def test_not_json_body(client):
    r = client.post("/api/estimate", content=b"\xff\xfe", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()


def test_pasted_config_is_read_like_a_file(client):
    from trainfit.catalog.models import all_models

    cfg = json.dumps(all_models()["qwen2-7b"].hf_config)
    a = client.post("/api/estimate", json={**LORA, "model": "", "config": cfg}).json()["result"]
    b = client.post("/api/estimate", json=LORA).json()["result"]
    assert a["model"]["params"] == b["model"]["params"] and a["memory_gib"] == b["memory_gib"]


def test_compare_and_plan(client):
    c = client.post("/api/compare", json={**LORA}).json()
    assert c["result"]["rows"] and 'class="chart chart-hbars"' in c["html"]
    p = client.post("/api/plan", json=PLAN).json()
    assert p["plan_file"]["model"]["name"] == "qwen2-7b" and 'class="front"' in p["html"]


def test_setup_zip(client):
    r = client.post("/api/setup.zip", json=PLAN)
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(r.content)).namelist()
    for f in ("plan.json", "train_config.json", "launch.sh", "train.py", "requirements.txt"):
        assert f"trainfit-setup/{f}" in names


def test_concurrent_requests_do_not_mix(client):
    from concurrent.futures import ThreadPoolExecutor

    forms = [{**LORA, "seq_len": str(n)} for n in (512, 1024, 2048, 4096)] * 2
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda f: client.post("/api/estimate", json=f).json()["result"], forms))
    for f, r in zip(forms, results):
        assert r["config"]["seq_len"] == int(f["seq_len"])
    assert results[0] == results[4]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ui_server():
    """`trainfit ui` in its own process group on a free port; always stopped."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen([sys.executable, "-m", "trainfit", "ui", "--port", str(port)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):  # bounded: 20 s
            try:
                urllib.request.urlopen(url + "/api/options", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail("trainfit ui exited: " + proc.stdout.read().decode(errors="replace"))
                time.sleep(0.2)
        else:
            pytest.fail("trainfit ui did not answer within 20 s")
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        proc.stdout.close()


def test_trainfit_ui_serves_the_page(ui_server):
    page = urllib.request.urlopen(ui_server + "/", timeout=5).read().decode()
    assert 'id="btn-estimate"' in page
    req = urllib.request.Request(ui_server + "/api/estimate", data=json.dumps(LORA).encode(),
                                 headers={"Content-Type": "application/json"})
    assert json.loads(urllib.request.urlopen(req, timeout=30).read())["result"]["fits"] is True


def test_ui_bad_port():
    from trainfit.cli.main import main

    assert main(["ui", "--port", "70000"]) == 2
