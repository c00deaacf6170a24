"""Browser tests' shared parts: Debian's Chromium (driven by Playwright, whose own browser download is not used) and
keys made from a thread of their own."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.tenancy_support import create_key


def chromium(what: str) -> str:
    """Debian's chromium, or a skip (a failure in CI) naming how to install it; ``what`` names the test."""
    path = shutil.which("chromium")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        path = None
    if path:
        return path
    reason = f"{what} needs Debian's chromium (apt-get install chromium) and playwright"
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason}: CI must install them (.ci/run)")
    pytest.skip(reason)


def new_key(database_url: str, tenant: str) -> str:
    """``create_key`` in a thread of its own: Playwright's sync API keeps an event loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(create_key, database_url, tenant).result()
