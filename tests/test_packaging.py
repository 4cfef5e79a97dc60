"""The project installs as a package (`pip install -e .`, then `import explorer` from anywhere), and
every package its code imports is declared."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
# Imported only where they exist: a ZeroGPU Space's `spaces`, the optional TransformerLens contender.
OPTIONAL = {"spaces", "transformer_lens"}


def declared(*files: str) -> set[str]:
    """Distribution names a requirements file lists (normalised), following `-r`."""
    names = set()
    for name in files:
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line.startswith("-r"):
                names |= declared(line[2:].strip())
            elif line:
                names.add(normalised(re.split(r"[<>=!~\[; ]", line)[0]))
    return names


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imported(top_level_only: bool, skip: tuple[str, ...] = ()) -> set[str]:
    """Third-party modules the package imports (at module level, or anywhere), by top-level name."""
    stdlib = set(sys.stdlib_module_names)
    found = set()
    for path in (ROOT / "explorer").rglob("*.py"):
        if any(part in skip for part in path.relative_to(ROOT).parts):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        nodes = tree.body if top_level_only else ast.walk(tree)
        for node in nodes:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found |= {name.split(".")[0] for name in names}
    return {name for name in found if name and name not in stdlib and name not in ("explorer", "__future__")}


def distributions(modules: set[str]) -> dict[str, set[str]]:
    owners = importlib.metadata.packages_distributions()
    return {module: {normalised(d) for d in owners.get(module, [module])} for module in modules}


def test_every_module_the_app_imports_at_load_is_a_runtime_requirement():
    runtime = declared("requirements.txt")
    for module, dists in distributions(imported(top_level_only=True, skip=("tools",))).items():
        assert dists & runtime, f"{module} is imported but requirements.txt does not list it"


def test_every_module_any_code_imports_is_declared():
    every = declared("requirements-dev.txt")
    for module, dists in distributions(imported(top_level_only=False) - OPTIONAL).items():
        assert dists & every, f"{module} is imported but neither requirements file lists it"


def test_the_package_declares_its_dependencies_and_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert project["project"]["dynamic"] == ["dependencies"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"]["file"] == ["requirements.txt"]
    assert project["tool"]["setuptools"]["packages"]["find"]["include"] == ["explorer*"]


@pytest.mark.slow
def test_an_editable_install_imports_from_anywhere(tmp_path):
    """`pip install -e .` in a fresh environment (this one's packages visible, none installed), then
    `import explorer` and the bundled model from another directory."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(ROOT)]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    probe = "import explorer; ex = explorer.load(device='cpu'); print(explorer.__file__, ex.config.n_layers)"
    done = subprocess.run([str(python), "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    path, layers = done.stdout.split()
    assert Path(path) == ROOT / "explorer" / "__init__.py" and int(layers) == 4
