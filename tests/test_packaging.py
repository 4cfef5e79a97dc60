"""The project installs as a package (`pip install -e .`, then `import explorer` from anywhere), and
every package its code imports is declared."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
import torch
from setuptools import find_packages

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


def test_the_package_declares_its_dependencies_and_every_package_with_the_bundled_model():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools_config = project["tool"]["setuptools"]
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert project["project"]["dynamic"] == ["dependencies"]
    assert setuptools_config["dynamic"]["dependencies"]["file"] == ["requirements.txt"]
    assert sorted(setuptools_config["packages"]) == sorted(
        [*find_packages(include=["explorer*"]), "explorer.bundled"]
    )
    assert setuptools_config["package-dir"] == {"explorer.bundled": "assets/shakespeare-gqa"}
    assert setuptools_config["package-data"] == {
        "explorer.app.ui": ["assets/*", "templates/*/*", "plot_view.pyi"],
        "explorer.bundled": ["*"],
    }


def fresh_environment(path: Path) -> Path:
    """A new virtual environment with nothing of this project in it, that sees the running interpreter's
    packages (torch, gradio, ...): their directories listed in a .pth file of its own site-packages. Its
    own site-packages come first, so what is installed into it wins. (`--system-site-packages` gives
    the base interpreter's packages, and where the suite runs in a venv, they hold no torch.) Its
    python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    own = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    running = [entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    (Path(own) / "running-interpreter.pth").write_text("\n".join(running) + "\n")
    return python


def run_from(directory: Path, python: Path, code: str) -> list[str]:
    """What `code` prints, run by `python` in `directory`, word by word."""
    done = subprocess.run(
        [str(python), "-c", code], cwd=directory, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@pytest.mark.slow
def test_a_fresh_environment_sees_this_ones_packages_and_not_this_project(tmp_path):
    python = fresh_environment(tmp_path / "venv")
    probe = (
        "import sys, torch, importlib.util as u; print(sys.prefix, torch.__file__, u.find_spec('explorer'))"
    )
    prefix, torch_file, found = run_from(tmp_path, python, probe)
    assert Path(prefix) == tmp_path / "venv" and Path(torch_file) == Path(torch.__file__)
    assert found == "None"


@pytest.mark.slow
def test_an_editable_install_imports_from_anywhere(tmp_path):
    """`pip install -e .` in a fresh environment, then `import explorer` and the bundled model from
    another directory."""
    python = fresh_environment(tmp_path / "venv")
    install = [
        str(python),
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-e",
        str(ROOT),
    ]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    probe = "import explorer; ex = explorer.load(device='cpu'); print(explorer.__file__, ex.config.n_layers)"
    path, layers = run_from(tmp_path, python, probe)
    assert Path(path) == ROOT / "explorer" / "__init__.py" and int(layers) == 4


# What an installed copy needs at run time: the bundled model, and the page's style and script.
WHEEL_PROBE = """
import explorer
from explorer.app.ui import page
from explorer.loading.checkpoints import BUNDLED_MODEL
ex = explorer.load(device="cpu")
run = ex.run("To be, or not to be")
assert page.assets() is not None
print(explorer.__file__, BUNDLED_MODEL, ex.config.n_layers, run.n_tokens)
"""


@pytest.mark.slow
def test_a_built_wheel_carries_the_bundled_model_and_the_page_and_runs_from_anywhere(tmp_path):
    """`pip wheel .` from a copy of the checkout's files, installed into a fresh environment, then run
    from a directory far from both: the model and the page's assets come from the installed package."""
    source = tmp_path / "source"
    tracked = (
        subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True)
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, tracked):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    build = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        "dist",
        ".",
    ]
    subprocess.run(build, cwd=source, check=True, capture_output=True, timeout=600)
    (wheel,) = (source / "dist").glob("attention_explorer-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    model_files = {p.name for p in (ROOT / "assets" / "shakespeare-gqa").iterdir()}
    assert {f"explorer/bundled/{name}" for name in model_files} <= names
    assert {"explorer/app/ui/assets/page.js", "explorer/app/ui/assets/page.css"} <= names

    python = fresh_environment(tmp_path / "venv")
    install = [str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    shutil.rmtree(source)  # nothing of the checkout is left to lean on
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    package, model, layers, tokens = run_from(elsewhere, python, WHEEL_PROBE)
    installed = tmp_path / "venv"
    assert Path(package).is_relative_to(installed) and Path(model).is_relative_to(installed)
    assert Path(model).name == "bundled" and int(layers) == 4 and int(tokens) > 0
