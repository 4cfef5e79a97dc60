"""The committed build of the plot component is of the sources beside it: a change to the frontend, its
lockfile or a page module it bundles, without a rebuild, fails here and says "rebuild the component"."""

from __future__ import annotations

import shutil
import subprocess
import sys

from explorer.app.ui import component_build


def test_the_committed_build_was_made_from_the_sources_beside_it():
    found = component_build.differences()
    assert not found, "\n".join([*found, component_build.REBUILD])


def test_a_source_changed_after_the_build_fails_naming_it_and_saying_rebuild(tmp_path, monkeypatch):
    # a copy of the sources and the record, one source then touched as a person would edit it
    frontend, modules = tmp_path / "components" / "plot_view" / "frontend", tmp_path / "assets"
    shutil.copytree(component_build.FRONTEND, frontend, ignore=shutil.ignore_patterns("node_modules"))
    shutil.copytree(component_build.PAGE_MODULES, modules)
    record = tmp_path / "SOURCES"
    monkeypatch.setattr(component_build, "ROOT", tmp_path)
    monkeypatch.setattr(component_build, "FRONTEND", frontend)
    monkeypatch.setattr(component_build, "PAGE_MODULES", modules)
    monkeypatch.setattr(component_build, "RECORD", record)
    assert component_build.main(["--write"]) == 0
    assert component_build.differences() == []
    with open(frontend / "pack.mjs", "a") as pack:
        pack.write("\n// a change\n")
    (modules / "codec.mjs").write_bytes((modules / "codec.mjs").read_bytes().replace(b"\n", b"\r\n"))
    found = component_build.differences()
    assert found == ["components/plot_view/frontend/pack.mjs changed since the build"]  # CRLF is no change
    (modules / "new.mjs").write_text("export const x = 1;\n")
    assert "assets/new.mjs is new since the build" in component_build.differences()


def test_the_check_runs_from_the_command_line_as_ci_would():
    done = subprocess.run(
        [sys.executable, "-m", "explorer.app.ui.component_build"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the build is of the sources beside it" in done.stdout
