"""A real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
selenium) for the tests that open our HTML pages the way a person does.

Outside CI a machine without Chromium skips these tests with the reason; under ``CI=true``
they fail instead, as the real-Slurm tests do: a CI run that silently skipped the browser
would pass without anyone having looked at a page.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any, NoReturn

import pytest

from tests.conftest import unavailable

CHROMIUM = ("chromium", "chromium-browser", "google-chrome")
WINDOW = (1400, 900)


def _unavailable(reason: str) -> NoReturn:
    unavailable("the headless browser", reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for the session (as root it needs --no-sandbox)."""
    try:
        from selenium import webdriver
    except ImportError:
        _unavailable("selenium is not installed (pip install -e '.[test]')")
    binary = next((path for name in CHROMIUM if (path := shutil.which(name))), None)
    driver_path = shutil.which("chromedriver")
    if binary is None or driver_path is None:
        _unavailable(
            "chromium or chromedriver not found (apt-get install chromium chromium-driver)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(binary)
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        "--force-device-scale-factor=1",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=str(driver_path))
    try:
        driver = webdriver.Chrome(options=options, service=service)
    except Exception as err:  # a broken install: say why, skip or fail as above
        _unavailable(f"chromium did not start: {err}")
    try:
        yield driver
    finally:
        driver.quit()
