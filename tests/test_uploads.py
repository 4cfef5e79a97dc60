"""The one file a visitor uploads is a CSV of pairs (at most `circuit_pairs.MAX_BYTES`): anything larger
is refused as it arrives, before it fills the server's disk."""

from __future__ import annotations

from pathlib import Path

import httpx

from explorer.app.circuit_pairs import MAX_BYTES
from explorer.app.policy import Policy
from explorer.app.workspace import Workspace
from tests.conftest import served


def uploaded_files(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_size for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}


def test_an_upload_past_the_csv_bound_is_refused_and_leaves_nothing_on_disk(
    gqa_checkpoint, tmp_path, monkeypatch
):
    """A 2 GB upload was written to disk in 42 s, outside the download budget, and kept 600 s."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    with served(Workspace(gqa_checkpoint, device="cpu", policy=Policy())) as url:
        upload = f"{url.rstrip('/')}/gradio_api/upload"
        pairs = b"clean,corrupted,answer,distractor\n" + b"To be,Not to be, be, go\n" * 100
        fits = httpx.post(upload, files={"files": ("pairs.csv", pairs, "text/csv")}, timeout=30)
        assert fits.status_code == 200, fits.text
        before = uploaded_files(tmp_path)
        assert list(before.values()) == [len(pairs)]  # uploads land where the test looks
        large = httpx.post(
            upload, files={"files": ("pairs.csv", b"x" * (64 * MAX_BYTES), "text/csv")}, timeout=30
        )
        assert large.status_code == 413 and f"{MAX_BYTES} bytes" in large.text
        assert uploaded_files(tmp_path) == before
