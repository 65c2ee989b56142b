#!/usr/bin/env python3
"""Screenshot of the chat page mid-conversation (docs/images/webui.png), in headless Chromium.

    scripts/webui_screenshot.py http://127.0.0.1:8000 docs/images/webui.png "first message" "second message"

Against a running `tessera serve` (the README's image: Qwen2.5-Coder-0.5B-Instruct Q4_K_M,
`--max-model-len 4096`). Needs chromium, chromium-driver and selenium (scripts/setup.sh).
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def main(base, out, messages):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900",
                "--hide-scrollbars"):
        opts.add_argument(arg)
    b = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    try:
        def wait(cond):
            WebDriverWait(b, 300, 0.1).until(lambda d: cond(d))

        def field(id_, value):
            el = b.find_element(By.ID, id_)
            el.clear()
            el.send_keys(value)

        def answers():
            return b.find_elements(By.CSS_SELECTOR, ".msg.assistant")

        b.get(base + "/")
        wait(lambda d: d.find_element(By.ID, "model").get_attribute("data-ready") == "1")
        field("system", "You are a helpful coding assistant. Keep answers short.")
        field("temperature", "0.2")
        field("seed", "7")
        field("max_tokens", "400")
        for message in messages:
            n = len(answers())
            field("input", message)
            b.find_element(By.ID, "send").click()
            wait(lambda d: len(answers()) == n + 1 and answers()[-1].get_attribute("data-state") != "streaming")
        b.execute_script("document.activeElement.blur();")
        time.sleep(0.5)
        b.save_screenshot(out)
    finally:
        b.quit()


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
