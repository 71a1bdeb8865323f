"""`trainfit ui` against hostile requests: other sites' pages, DNS rebinding, huge bodies, cache filling, and the
command's own start (a port in use, a host reachable from the network)."""

import asyncio
import json
import os
import socket
import sys

import pytest

pytest.importorskip("fastapi", reason="the 'ui' extra (fastapi, uvicorn) is not installed")
from fastapi.testclient import TestClient  # noqa: E402

from trainfit import _proc, estimate  # noqa: E402
from trainfit.ui import app as app_module  # noqa: E402
from trainfit.ui import guard  # noqa: E402
from trainfit.ui.app import create_app  # noqa: E402

LORA = {"model": "qwen2-7b", "gpu": "a10", "method": "lora", "grad_ckpt": "full", "seq_len": "2048"}
PORT = 8765
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def client():
    """The in-process app, as test_ui.py uses it."""
    return TestClient(create_app())


@pytest.fixture(scope="module")
def bound():
    """The app as `trainfit ui` serves it on 127.0.0.1:8765 (only that address is answered)."""
    return TestClient(create_app("127.0.0.1", PORT), base_url=f"http://127.0.0.1:{PORT}")


def _expected():
    est = estimate("qwen2-7b", "a10", method="lora", grad_ckpt="full", seq_len=2048)
    return round(est.tokens_per_s, 1), round(est.memory.device / 2**30, 3)


def _one_line_error(r, status, words):
    assert r.status_code == status, (r.status_code, r.text)
    err = r.json()["error"]
    assert words in err and "\n" not in err, err


# ---- same origin still works ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("origin", [None, f"http://127.0.0.1:{PORT}"])
def test_same_origin_json_post_answers_as_before(bound, origin):
    headers = {"Origin": origin} if origin else {}
    r = bound.post("/api/estimate", json=LORA, headers=headers)
    assert r.status_code == 200, r.text
    got = r.json()["result"]
    assert (got["tokens_per_s"], got["memory_gib"]["total"]) == _expected()
    assert bound.get("/").status_code == 200 and bound.get("/api/options").status_code == 200


@pytest.mark.parametrize("host", [f"localhost:{PORT}", f"[::1]:{PORT}", f"127.0.0.1:{PORT}"])
def test_loopback_names_on_the_bound_port(bound, host):
    assert bound.get("/api/options", headers={"Host": host}).status_code == 200


# ---- other sites and DNS rebinding ----------------------------------------------------------------------------------
@pytest.mark.parametrize("origin", ["http://evil.example", f"http://evil.example:{PORT}", "null",
                                    f"https://127.0.0.1:{PORT}", f"http://localhost:{PORT}", "http://127.0.0.1:9999"])
def test_cross_origin_post_is_refused(bound, origin):
    r = bound.post("/api/estimate", json=LORA, headers={"Origin": origin})
    _one_line_error(r, 403, "cross-origin")


def test_cross_origin_post_is_refused_in_process(client):
    r = client.post("/api/estimate", json=LORA, headers={"Origin": "http://evil.example"})
    _one_line_error(r, 403, "cross-origin")
    assert client.post("/api/estimate", json=LORA, headers={"Origin": "http://testserver"}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", f"evil.example:{PORT}", f"127.0.0.1:{PORT + 1}", "127.0.0.1",
                                  f"127.0.0.1.evil.example:{PORT}", "", f"user@127.0.0.1:{PORT}"])
def test_foreign_host_is_refused(bound, host):
    """DNS rebinding: evil.example resolving to 127.0.0.1 still sends Host: evil.example."""
    for r in (bound.post("/api/estimate", json=LORA, headers={"Host": host}),
              bound.get("/", headers={"Host": host}), bound.get("/api/options", headers={"Host": host})):
        _one_line_error(r, 403, "not this calculator's address")


def test_foreign_host_is_refused_in_process(client):
    r = client.post("/api/estimate", json=LORA, headers={"Host": "evil.example"})
    _one_line_error(r, 403, "not this calculator's address")


def test_refusals_in_chinese(bound):
    r = bound.post("/api/estimate?lang=zh", json=LORA, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and r.json()["error"].startswith("拒绝：来自 'http://evil.example'")
    r = bound.post("/api/estimate?lang=zh", content=json.dumps(LORA), headers={"Content-Type": "text/plain"})
    assert r.status_code == 415 and r.json()["error"].startswith("计算器的 API 只接受")


@pytest.mark.parametrize("kind", ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                                  "multipart/form-data; boundary=x", None])
def test_simple_cross_site_post_is_refused(client, kind):
    """What an HTML form or a no-cors fetch can send (no preflight) never reaches a handler."""
    headers = {"Content-Type": kind} if kind else {}
    r = client.post("/api/estimate", content=json.dumps(LORA).encode(), headers=headers)
    _one_line_error(r, 415, "application/json")


def test_json_with_charset_is_json(client):
    r = client.post("/api/estimate", content=json.dumps(LORA).encode(),
                    headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status_code == 200, r.text


# ---- body caps ------------------------------------------------------------------------------------------------------
def test_oversize_content_length_is_413(client):
    r = client.post("/api/estimate", content=b" " * (guard.MAX_BODY + 1), headers=JSON)
    _one_line_error(r, 413, "request too large (1,000,001 bytes")
    r = client.post("/api/estimate?lang=zh", content=b" " * (guard.MAX_BODY + 1), headers=JSON)
    assert r.status_code == 413 and r.json()["error"].startswith("请求过大")


def _asgi(app, headers, chunks, chunk=b" " * 65536):
    """Call the ASGI app directly: (status, error, how many body messages it pulled out of `chunks` offered)."""
    pulled, sent = [0], []

    async def receive():
        if pulled[0] >= chunks:
            await asyncio.sleep(0)
            return {"type": "http.disconnect"}
        pulled[0] += 1
        return {"type": "http.request", "body": chunk, "more_body": pulled[0] < chunks}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/api/estimate", "raw_path": b"/api/estimate", "query_string": b"", "root_path": "",
             "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
             "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", PORT)}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(body).get("error"), pulled[0]


def test_content_length_lie_is_refused_before_reading():
    """A 300 MB Content-Length: 413 before a byte of the body is read."""
    status, err, pulled = _asgi(create_app(), {"host": f"127.0.0.1:{PORT}", "content-type": "application/json",
                                               "content-length": str(300 * 2**20)}, chunks=200)
    assert (status, pulled) == (413, 0) and "request too large" in err


def test_streamed_body_over_the_cap_stops_at_the_cap():
    """A chunked body (no Content-Length) of 200 x 64 KB: read only up to the cap, then 413."""
    status, err, pulled = _asgi(create_app(), {"host": f"127.0.0.1:{PORT}", "content-type": "application/json",
                                               "transfer-encoding": "chunked"}, chunks=200)
    assert status == 413 and "request too large (over 1,000,000 bytes" in err
    assert pulled <= guard.MAX_BODY // 65536 + 1, pulled


def test_streamed_body_under_the_cap_is_answered():
    body = json.dumps(LORA).encode()
    status, err, pulled = _asgi(create_app(), {"host": f"127.0.0.1:{PORT}", "content-type": "application/json"},
                                chunks=1, chunk=body)
    assert status == 200 and err is None and pulled == 1


# ---- the cache of pasted configs ------------------------------------------------------------------------------------
def test_prune_cache_keeps_the_newest_within_both_caps(tmp_path):
    for i in range(10):
        f = tmp_path / f"{i:02d}.json"
        f.write_bytes(b"x" * 1000)
        os.utime(f, (1_000_000 + i, 1_000_000 + i))
    assert guard.prune_cache(max_files=4, max_bytes=10**9, folder=str(tmp_path)) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["06.json", "07.json", "08.json", "09.json"]
    guard.prune_cache(max_files=100, max_bytes=2500, folder=str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["08.json", "09.json"]
    assert guard.prune_cache(folder=str(tmp_path / "missing")) == 0


def test_cache_stays_bounded_after_many_distinct_configs(monkeypatch, tmp_path):
    """Each pasted config writes a cache file (as the generic reader does); the folder never grows past the caps."""
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(guard, "CACHE_MAX_FILES", 5)
    monkeypatch.setattr(guard, "CACHE_MAX_BYTES", 10**9)
    folder = guard.cache_dir()
    assert folder.startswith(str(tmp_path))

    def writes_a_cache_file(form):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{json.loads(form['config'])['n']:04d}.json"), "w") as fh:
            fh.write("{}" * 100)
        return {"result": {}, "html": ""}

    monkeypatch.setattr(app_module, "do_estimate", writes_a_cache_file)
    client = TestClient(app_module.create_app())
    for n in range(40):
        assert client.post("/api/estimate", json={"config": json.dumps({"n": n})}).status_code == 200
        assert len(os.listdir(folder)) <= 5
    assert "0039.json" in os.listdir(folder)
    monkeypatch.setattr(guard, "CACHE_MAX_BYTES", 450)  # 200-byte files: two fit
    assert client.post("/api/estimate", json={"config": json.dumps({"n": 40})}).status_code == 200
    assert sorted(os.listdir(folder)) == ["0039.json", "0040.json"]


def test_real_pasted_configs_keep_the_cache_bounded(client, monkeypatch, tmp_path):
    """Distinct OPT configs go through the meta-device reader, which writes one cache file each."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    monkeypatch.setenv("TRAINFIT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(guard, "CACHE_MAX_FILES", 2)
    for width in (64, 96, 128, 160):
        cfg = {"model_type": "opt", "hidden_size": width, "word_embed_proj_dim": width, "ffn_dim": 2 * width,
               "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000,
               "max_position_embeddings": 4096}
        r = client.post("/api/estimate", json={**LORA, "model": "", "config": json.dumps(cfg), "seq_len": "512"})
        assert r.status_code == 200, r.text
    folder = guard.cache_dir()
    assert os.path.isdir(folder) and 1 <= len(os.listdir(folder)) <= 2


# ---- the command ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("host, warned", [("127.0.0.1", False), ("localhost", False), ("::1", False),
                                          ("127.0.0.2", False), ("0.0.0.0", True), ("::", True),
                                          ("192.168.1.5", True)])
def test_exposure_warning(host, warned):
    en = guard.exposure_warning(host, PORT, "en")
    zh = guard.exposure_warning(host, PORT, "zh")
    assert (en is not None, zh is not None) == (warned, warned)
    if warned:
        assert "\n" not in en and "anyone on the network" in en and host in en and str(PORT) in en
        assert "\n" not in zh and "警告" in zh and "网络上" in zh and host in zh


def test_wildcard_host_accepts_addresses_not_other_names():
    address = guard.Address("0.0.0.0", PORT)
    assert address.allows(f"192.168.1.5:{PORT}") and address.allows(f"localhost:{PORT}")
    assert not address.allows(f"evil.example:{PORT}") and not address.allows("192.168.1.5:1")
    assert guard.Address("192.168.1.5", PORT).allows(f"192.168.1.5:{PORT}")
    assert not guard.Address("192.168.1.5", PORT).allows(f"localhost:{PORT}")


def test_cli_warns_for_a_network_host_before_serving(run_cli, monkeypatch):
    served = []
    monkeypatch.setattr(app_module, "serve", lambda host, port, sock=None: served.append((host, port)))
    port = _free_port()
    code, out, err = run_cli("ui", "--host", "0.0.0.0", "--port", str(port))
    assert code == 0 and served == [("0.0.0.0", port)]
    lines = err.strip().splitlines()
    assert "warning" in lines[0] and "anyone on the network" in lines[0] and "trainfit ui: http://" in lines[1]
    code, out, err = run_cli("ui", "--port", str(_free_port()))
    assert code == 0 and "warning" not in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        yield s.getsockname()[1]


def test_port_in_use_is_one_line_exit_2(run_cli, monkeypatch, busy_port):
    served = []
    monkeypatch.setattr(app_module, "serve", lambda *a, **k: served.append(a))  # a bug must not serve forever
    code, out, err = run_cli("ui", "--port", str(busy_port))
    assert code == 2 and not served
    assert err.strip() == (f"trainfit: error: --port {busy_port}: address already in use on 127.0.0.1 "
                           "(another program listens there; choose another --port)")


def test_port_in_use_in_a_real_process(busy_port):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), "TRAINFIT_LANG": "zh"}
    done = _proc.run([sys.executable, "-m", "trainfit", "ui", "--port", str(busy_port)], timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [f"trainfit: error: --port {busy_port}：127.0.0.1 上的该端口已被占用"
                                                "（已有其他程序在监听；请换一个 --port）"]
