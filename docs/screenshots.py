"""Screenshots for the README: one plan report (--html) opened in Debian's Chromium through Playwright.

    PYTHONPATH=src python docs/screenshots.py          # writes docs/report-plan.png
    TRAINFIT_SCREENSHOTS=docs python -m pytest tests/test_ui_browser.py    # docs/ui-estimate.png, docs/ui-plan.png
"""

import os
import shutil
import sys
import tempfile

from playwright.sync_api import sync_playwright

from trainfit.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("TRAINFIT_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

with tempfile.TemporaryDirectory() as tmp:
    html = os.path.join(tmp, "plan.html")
    rc = main(["plan", "--model", "qwen2-7b", "--method", "lora", "--dataset-tokens", "200M", "--epochs", "3",
               "--deadline", "48h", "--budget", "3000", "--lang", "en", "--html", html])
    if rc:
        sys.exit(rc)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1000, "height": 1200})
        page.goto("file://" + html)
        page.screenshot(path=os.path.join(HERE, "report-plan.png"))
        browser.close()
print("wrote docs/report-plan.png")
