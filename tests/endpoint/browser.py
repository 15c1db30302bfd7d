"""Headless Chromium for the dashboard tests: Debian's ``chromium`` and ``chromium-driver``,
driven with selenium through /usr/bin/chromedriver (no tool downloads a browser or a driver).

``ensure_chromium()`` installs the two packages with apt-get when they are missing (the suite runs
as root) and skips the test, saying why, only when they cannot be installed here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

PACKAGES = ("chromium", "chromium-driver")
ARTIFACTS = Path(__file__).parents[1] / "artifacts"   # ignored by git; kept after the run
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1280,1500")


def _found() -> tuple[str, str] | None:
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def _apt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def ensure_chromium() -> tuple[str, str]:
    """(chromium, chromedriver) paths; installs them first if needed."""
    found = _found()
    if found:
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        pytest.skip(f"headless Chromium is not installed and cannot be installed here (needs apt-get and root): "
                    f"install {' and '.join(PACKAGES)}")
    done = _apt("install", "-y", "--no-install-recommends", *PACKAGES)
    if done.returncode != 0:   # an old or empty package list: refresh it once
        _apt("update")
        done = _apt("install", "-y", "--no-install-recommends", *PACKAGES)
    found = _found()
    if not found:
        pytest.skip(f"apt-get could not install {' and '.join(PACKAGES)} (exit {done.returncode}): "
                    f"{(done.stderr or done.stdout).strip()[-500:]}")
    return found


def start_browser(profile: Path):
    """A selenium WebDriver on headless Chromium with a fresh profile in ``profile``."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = ensure_chromium()
    # Selenium Manager would look for (and could try to download) a driver: both paths are given
    os.environ["SE_OFFLINE"] = "true"
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for flag in CHROMIUM_FLAGS + (f"--user-data-dir={profile}",):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def screenshot(driver, name: str) -> Path:
    """Save the page as tests/artifacts/NAME.png and print where."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    print(f"screenshot: {path}")
    return path


def text_of(driver, css: str) -> str:
    """The first match's text, "" when none (the page redraws every second: an element found may
    be replaced before it is read, and is then read again)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(5):
        try:
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found[0].text if found else ""
        except StaleElementReferenceException:
            continue
    return ""


def wait_until(driver, what: str, pred, timeout: float = 20.0):
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: pred(d))
    except TimeoutException:
        screenshot(driver, "dashboard-failed-wait")
        raise AssertionError(f"the page never showed {what}; the page's text:\n{driver.find_element('tag name', 'body').text}")
