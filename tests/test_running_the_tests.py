"""What a newcomer meets running the suite: without Debian's Chromium the browser tests are skipped,
each with one line saying how to get it, and nothing errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Loaded by pytest before any conftest or test module: the Chromium the tests look for is not there.
CHROMIUM_GONE = 'import browser_support\nbrowser_support.CHROMIUM = "/nonexistent/chromium"\n'


@pytest.mark.slow
def test_without_chromium_the_browser_tests_are_skipped_with_the_command_that_installs_it(tmp_path):
    (tmp_path / "chromium_gone.py").write_text(CHROMIUM_GONE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS)])}
    files = [str(TESTS / "test_browser.py"), str(TESTS / "test_hostile_inputs.py")]
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "chromium_gone",
        "-p",
        "no:cacheprovider",
        "-m",
        "browser",
    ]
    done = subprocess.run(
        [*command, "-rs", *files], cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=300
    )
    lines = done.stdout.splitlines()
    skipped = [line for line in lines if line.startswith("SKIPPED")]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "error" not in lines[-1] and "passed" not in lines[-1], lines[-1]
    assert skipped and all(
        line.endswith("no /nonexistent/chromium: `apt-get install -y chromium` runs them") for line in skipped
    ), skipped
