"""The web calculator in a real browser: Playwright for Python driving Debian's Chromium (`make test` installs it).

Skipped, with the reason printed, only when Playwright or a Chromium binary is missing. TRAINFIT_SCREENSHOTS=DIR
also saves the screenshots shown in the README.
"""

import io
import json
import os
import shutil
import zipfile

import pytest

from test_ui import ui_server  # noqa: F401 - the `trainfit ui` fixture

CHROMIUM = os.environ.get("TRAINFIT_CHROMIUM") or next(
    (p for p in (shutil.which("chromium"), shutil.which("chromium-browser"), "/usr/bin/chromium") if p and
     os.path.exists(p)), None)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if CHROMIUM is None:
        print("SKIP browser tests: no Chromium binary (apt-get install chromium, or set TRAINFIT_CHROMIUM)")
        pytest.skip("no Chromium binary (apt-get install chromium, or set TRAINFIT_CHROMIUM)")
    with sync_api.sync_playwright() as pw:
        home = tmp_path_factory.mktemp("chromium-home")  # its profile, crash reports and dconf stay out of the tree
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config"),
               "XDG_CACHE_HOME": str(home / "cache")}
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], timeout=60_000,
                               env=env)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, ui_server):  # noqa: F811
    ctx = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 1000})
    pg = ctx.new_page()
    pg.set_default_timeout(60_000)
    pg.goto(ui_server + "/")
    pg.wait_for_selector("body[data-ready='1']")
    try:
        yield pg
    finally:
        ctx.close()


def _shot(pg, name):
    folder = os.environ.get("TRAINFIT_SCREENSHOTS")
    if folder:
        os.makedirs(folder, exist_ok=True)
        pg.screenshot(path=os.path.join(folder, name), full_page=True)


def _fill_lora(pg):
    pg.select_option("#model", "qwen2-7b")
    pg.select_option("#gpu", "a10")
    pg.select_option("#method", "lora")
    pg.select_option("#grad_ckpt", "full")
    pg.fill("#seq_len", "2048")


def test_estimate_in_the_browser(page):
    from trainfit import estimate

    _fill_lora(page)
    page.click("#btn-estimate")
    page.wait_for_selector("#v-tps")
    est = estimate("qwen2-7b", "a10", method="lora", grad_ckpt="full", seq_len=2048)
    assert page.inner_text("#v-tps") == f"{round(est.tokens_per_s):,} tokens/s"
    assert page.inner_text("#v-memory") == f"{est.memory.device / 2**30:.2f} GiB"
    assert page.inner_text("#v-step") == f"{est.step_time_s:.3f} s"
    # the plots render: an SVG with one bar segment per part and phase, and the usable-memory line
    assert page.locator("#results svg.chart-stacked rect.bar").count() >= len(est.memory.phases)
    assert page.locator("#results svg.chart-stacked line.limit").count() == 1
    box = page.locator("#results svg.chart-stacked").bounding_box()
    assert box and box["width"] > 200 and box["height"] > 100
    # time from click to answer, measured in the page (printed, not asserted)
    times = []
    for _ in range(5):
        page.click("#btn-estimate")
        page.wait_for_function("document.getElementById('timing').dataset.ms !== undefined && "
                               "!document.getElementById('timing').textContent.includes('…')")
        times.append(int(page.get_attribute("#timing", "data-ms")))
    print(f"\nbrowser estimate round trips (ms): {times}; median {sorted(times)[2]} ms")
    _shot(page, "ui-estimate.png")


def test_zh_switch_and_bad_input(page):
    _fill_lora(page)
    page.select_option("#lang", "zh")
    page.wait_for_function("document.getElementById('btn-estimate').textContent === '估算'")
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    page.click("#btn-estimate")
    page.wait_for_selector("#results svg.chart-stacked")
    assert "每张 GPU 显存" in page.inner_text("#results")
    page.fill("#seq_len", "abc")
    page.click("#btn-estimate")
    page.wait_for_function("document.getElementById('error').textContent.length > 0")
    err = page.inner_text("#error")
    assert "seq-len" in err and "abc" in err and "Traceback" not in page.content()
    assert err == "seq-len：'abc' 不是整数"  # the error in Chinese, as the zh switch asks
    page.fill("#seq_len", "2048")
    page.fill("#dataset_tokens", "lots")
    page.click("#btn-plan")
    page.wait_for_function("document.getElementById('error').textContent.includes('dataset-tokens')")
    assert "不是数量" in page.inner_text("#error")


def test_plan_and_downloads(page, tmp_path):
    _fill_lora(page)
    page.click("#btn-plan")
    page.wait_for_selector("#results svg.chart-scatter polyline.front")
    assert page.locator("#results svg.chart-scatter circle.g2").count() == 1
    _shot(page, "ui-plan.png")
    with page.expect_download() as dl:
        page.click("#btn-plan-json")
    path = tmp_path / "plan.json"
    dl.value.save_as(path)
    plan = json.loads(path.read_text())
    assert plan["model"]["name"] == "qwen2-7b" and plan["choice"]["rank"] == 1
    with page.expect_download() as dl:
        page.click("#btn-zip")
    zpath = tmp_path / "setup.zip"
    dl.value.save_as(zpath)
    zf = zipfile.ZipFile(io.BytesIO(zpath.read_bytes()))
    names = {n.split("/", 1)[1] for n in zf.namelist()}
    assert {"plan.json", "train_config.json", "launch.sh", "train.py", "requirements.txt", "README.md"} <= names
    assert json.loads(zf.read("trainfit-setup/plan.json"))["choice"] == plan["choice"]


def test_compare_in_the_browser(page):
    _fill_lora(page)
    page.click("#btn-compare")
    page.wait_for_selector("#results svg.chart-hbars")
    assert page.locator("#results svg.chart-hbars rect.bar").count() >= 2


def test_uploaded_config_gives_the_preset_numbers(page, tmp_path):
    from trainfit.catalog.models import all_models

    _fill_lora(page)
    page.click("#btn-estimate")
    page.wait_for_selector("#v-memory")
    preset = page.inner_text("#v-memory")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(all_models()["qwen2-7b"].hf_config), encoding="utf-8")
    page.set_input_files("#config-file", str(cfg))
    page.wait_for_function("document.getElementById('config').value.includes('hidden_size')")
    page.evaluate("document.getElementById('summary').innerHTML = ''")
    page.click("#btn-estimate")
    page.wait_for_selector("#v-memory")
    assert page.inner_text("#v-memory") == preset and page.inner_text("#error") == ""
