"""What the committed build of the plot component was made from, and whether the sources still are.

The build (`components/plot_view/build.sh`) is committed under `explorer/app/ui/templates`, so the app runs
with no node; nothing else ties it to the sources beside it. `build.sh` ends by writing `SOURCES` there
(`python -m explorer.app.ui.component_build --write`): the SHA-256 of every file the build reads that
the project owns (the frontend's sources and lockfile, the page's modules it bundles) and the Gradio it
was built against. A fast test (`tests/test_component_build.py`) recomputes them: a source changed
without a rebuild fails it, naming the files and saying "rebuild the component".
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]  # the repository
FRONTEND = ROOT / "components" / "plot_view" / "frontend"
PAGE_MODULES = ROOT / "explorer" / "app" / "ui" / "assets"  # the .mjs the frontend imports are bundled
RECORD = ROOT / "explorer" / "app" / "ui" / "templates" / "SOURCES"
REBUILD = "rebuild the component: bash components/plot_view/build.sh, and commit what it writes"


def sources() -> list[Path]:
    """Every file the build reads that the project owns, in a fixed order: the frontend's own files
    (node_modules is npm's, pinned by the lockfile among them) and the page's modules."""
    frontend = [p for p in FRONTEND.iterdir() if p.is_file()]
    return sorted([*frontend, *PAGE_MODULES.glob("*.mjs")])


def digest(path: Path) -> str:
    """A file's SHA-256, its line ends read as "\\n" (a checkout that writes CRLF builds the same)."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def gradio_version() -> str:
    import gradio

    return gradio.__version__


def recorded_lines() -> list[str]:
    """The record of the sources as they are now: `<sha256>  <path>` each, then the Gradio version."""
    lines = [f"{digest(path)}  {path.relative_to(ROOT).as_posix()}" for path in sources()]
    return [*lines, f"gradio {gradio_version()}"]


def differences() -> list[str]:
    """What differs between the sources and the record the committed build carries, each in words;
    empty where the build was made from them."""
    if not RECORD.exists():
        return [f"{RECORD.relative_to(ROOT).as_posix()} is missing"]
    recorded, now = RECORD.read_text().splitlines(), recorded_lines()
    was, is_ = _by_path(recorded), _by_path(now)
    found = [
        f"{path} changed since the build"
        for path in sorted(was.keys() & is_.keys())
        if was[path] != is_[path]
    ]
    found += [f"{path} is new since the build" for path in sorted(is_.keys() - was.keys())]
    found += [f"{path} was removed since the build" for path in sorted(was.keys() - is_.keys())]
    built_with = [line for line in recorded if line.startswith("gradio ")]
    if built_with != now[-1:]:
        found.append(f"built against {', '.join(built_with) or 'no gradio'}; installed is {now[-1]}")
    return found


def _by_path(lines: list[str]) -> dict[str, str]:
    return {line.split("  ", 1)[1]: line for line in lines if "  " in line}


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        RECORD.write_text("\n".join(recorded_lines()) + "\n")
        return 0
    found = differences()
    print("\n".join(found) + f"\n{REBUILD}" if found else "the build is of the sources beside it")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
