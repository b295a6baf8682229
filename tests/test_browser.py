"""The interactive reference in a real browser: Debian's chromium, headless."""

import json
import shutil

import pytest

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as visible  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from .test_openapi import CONTRACT_OPERATIONS  # noqa: E402

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]


@pytest.fixture
def browser(tmp_path):
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = Options()
    options.binary_location = chromium
    for flag in [*FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def click(wait, selector):
    wait.until(visible.element_to_be_clickable((By.CSS_SELECTOR, selector))).click()


def test_reference_lists_every_operation_and_tries_one_with_a_key(browser, live_server, key):
    wait = WebDriverWait(browser, 30)
    browser.get(f"{live_server}/docs")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".opblock")) == len(CONTRACT_OPERATIONS))

    click(wait, ".auth-wrapper .authorize")
    field = wait.until(visible.visibility_of_element_located((By.CSS_SELECTOR, ".modal-ux input")))
    field.send_keys(key)
    click(wait, ".modal-ux .auth-btn-wrapper .authorize")
    click(wait, ".modal-ux .btn-done")

    click(wait, "#operations-maps-maps_list_maps .opblock-summary")
    click(wait, "#operations-maps-maps_list_maps .try-out__btn")
    click(wait, "#operations-maps-maps_list_maps .execute")
    status = wait.until(
        visible.visibility_of_element_located(
            (By.CSS_SELECTOR, "#operations-maps-maps_list_maps .live-responses-table tbody .response-col_status")
        )
    )
    assert status.text.strip() == "200"
    body = browser.find_element(
        By.CSS_SELECTOR, "#operations-maps-maps_list_maps .live-responses-table .microlight"
    ).text
    assert json.loads(body)["data"]["pagination"]["total"] == 0

    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
