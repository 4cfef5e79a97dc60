"""Downloads on disk within bounds: written once into Gradio's cache (no second copy), at a path nothing
of the visitor names (a random token of their session's), one file per visitor (asking for another
deletes it), each and all of them under a size, old ones deleted, a session's gone when it ends, and a
download too big refused before a byte is written."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest
from gradio_client import Client

from explorer.app.downloads import Downloads
from explorer.app.policy import Policy
from explorer.app.visitors import Visitor
from explorer.app.workspace import Workspace
from explorer.errors import LimitError
from tests.conftest import PROMPT, served

UNLIMITED_LOADS = dict(loads_per_minute=10_000, server_loads_per_minute=10_000)


def files_under(folder) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, _, fs in os.walk(folder) for f in fs)


def test_a_visitors_next_download_deletes_the_one_before_whichever_session_asks(tmp_path):
    downloads = Downloads(tmp_path, per_visitor=100, total=1000)
    first = downloads.path(Visitor("10.0.0.1", "a"), "layer0.npz", 10, "Layer 0's tensors")
    other = downloads.path(Visitor("10.0.0.2", "b"), "layer0.npz", 10, "Layer 0's tensors")
    second = downloads.path(Visitor("10.0.0.1", "a"), "layer1.npz", 10, "Layer 1's tensors")
    assert not first.exists() and second.exists() and other.exists()
    assert len(files_under(tmp_path)) == 2
    third = downloads.path(Visitor("10.0.0.1", "a new session"), "layer2.npz", 10, "Layer 2's tensors")
    assert not second.exists() and third.exists() and len(files_under(tmp_path)) == 2  # no new allowance


def test_a_downloads_path_is_a_random_token_nothing_of_the_visitor_names(tmp_path):
    """The path was sha256(address)[:24]/<fixed name>: anybody who knew a visitor's address could fetch
    their map. Now each session's folder is a random token, told to that session alone."""
    import hashlib

    downloads = Downloads(tmp_path / "a server", per_visitor=100, total=1000)
    visitors = [Visitor("10.0.0.1", "session-1"), Visitor("10.0.0.2", "session-2"), Visitor("10.0.0.1", "")]
    folders = [downloads.path(v, "x.csv", 10, "A map").parent.name for v in visitors]
    assert len(set(folders)) == 3 and all(len(folder) >= 32 for folder in folders)  # ≥ 192 random bits
    for visitor, folder in zip(visitors, folders, strict=True):
        for known in filter(None, (visitor.address, visitor.session)):
            assert known not in folder and hashlib.sha256(known.encode()).hexdigest()[:24] != folder
    again = Downloads(tmp_path / "another server", per_visitor=100, total=1000)  # the same visitor there
    assert again.path(visitors[0], "x.csv", 10, "A map").parent.name != folders[0]  # not derived from it


def test_a_sessions_downloads_go_when_it_ends_and_others_stay(tmp_path):
    downloads = Downloads(tmp_path, per_visitor=100, total=1000)
    mine = downloads.path(Visitor("10.0.0.1", "mine"), "x.csv", 10, "A map")
    theirs = downloads.path(Visitor("10.0.0.2", "theirs"), "x.csv", 10, "A map")
    downloads.end_session("mine")
    assert not mine.exists() and not mine.parent.exists() and theirs.exists()
    later = downloads.path(Visitor("10.0.0.1", "mine"), "x.csv", 10, "A map")  # a page reopened
    assert later.parent != mine.parent and theirs.exists()


def test_a_download_past_the_visitors_size_is_refused_before_it_is_written(tmp_path):
    downloads = Downloads(tmp_path, per_visitor=256 << 20, total=1 << 40)
    with pytest.raises(LimitError) as error:
        downloads.path(
            Visitor("10.0.0.1", "a"), "layer0.npz", 364 << 20, "Layer 0's tensors for 1,300 tokens"
        )
    assert str(error.value).startswith(
        "Layer 0's tensors for 1,300 tokens would be 364 MiB; this app writes downloads of up to 256 MiB "
        "(EXPLORER_DOWNLOAD_MB)"
    )
    assert files_under(tmp_path) == []


def test_downloads_past_their_age_go_and_all_together_stay_within_the_total(tmp_path):
    clock = [time.time()]
    downloads = Downloads(tmp_path, per_visitor=100, total=250, max_age=600, clock=lambda: clock[0])
    for address in ("10.0.0.1", "10.0.0.2"):
        downloads.path(Visitor(address, address), "x.csv", 100, "A map").write_bytes(b"x" * 100)
    with pytest.raises(LimitError, match=r"fill this app.s disk allowance .* try again in 60[01] s"):
        downloads.path(Visitor("10.0.0.3", "c"), "x.csv", 100, "A map")
    # another session of an address is no new allowance: its download replaces the address's one
    downloads.path(Visitor("10.0.0.1", "another session"), "x.csv", 100, "A map").write_bytes(b"x" * 100)
    assert downloads.held_bytes() == 200
    clock[0] += 601  # the first two are past their age: deleted when the next is asked for
    downloads.path(Visitor("10.0.0.3", "c"), "x.csv", 100, "A map").write_bytes(b"x" * 100)
    assert files_under(tmp_path) == [os.path.relpath(p, tmp_path) for p in tmp_path.glob("*/x.csv")]
    assert downloads.held_bytes() == 100


def test_three_layer_downloads_leave_one_file_on_disk(gqa_checkpoint, tmp_path, monkeypatch):
    """Each .npz was written twice (a temporary folder, then Gradio's cache) and never deleted: a visitor
    could fill the disk. Now one file, in Gradio's cache, the last one asked for."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "temporary"))
    (tmp_path / "temporary").mkdir()
    policy = Policy(**UNLIMITED_LOADS)
    with served(Workspace(gqa_checkpoint, device="cpu", policy=policy)) as url:
        client = Client(url, verbose=False, download_files=str(tmp_path / "client"))
        client.predict(PROMPT, 0, 0, api_name="/run")
        for layer in range(3):
            _, path = client.predict(layer, api_name="/npz")
            assert np.load(path)["probs"].shape[0] == 8
        kept = [f for f in files_under(tmp_path / "gradio") if f.endswith(".npz")]
        assert len(kept) == 1 and kept[0].endswith("layer2.npz")
        assert files_under(tmp_path / "temporary") == []


def test_a_patching_sweeps_downloads_are_the_visitors_one_file_as_a_layers_are(tmp_path):
    """The sweep's .npz and .csv went into a temporary folder each, never deleted. They are the visitor's
    one download, whichever tab wrote it: a sweep's replaces a layer's, and the other way round."""
    import types
    from pathlib import Path

    import explorer
    from explorer.app import examples, session_results
    from explorer.app.ui import patching
    from explorer.views import sweep_export

    example = examples.PATCHING_EXAMPLES["induction (bundled model)"]
    ex = explorer.load(device="cpu")
    result = ex.patch_heads(example.clean, example.corrupted, example.answer, example.distractor)
    direct = ex.run(example.clean).logit_attribution(example.answer, example.distractor)
    workspace = Workspace(device="cpu", policy=Policy(**UNLIMITED_LOADS))
    downloads = Downloads(tmp_path / "explorer-downloads", per_visitor=1 << 30, total=1 << 30)
    shared = types.SimpleNamespace(workspace=workspace, downloads=downloads)  # the page's one, as layout's
    section = types.SimpleNamespace(download="the hidden download button")
    events = patching.PatchingEvents(section, shared, page=None)
    request = types.SimpleNamespace(
        headers={}, client=types.SimpleNamespace(host="10.0.0.1"), session_hash="a page"
    )
    sweep = session_results.keep(workspace, "a page", "sweep", patching.Sweep(result, direct, ""))
    on_screen = ("", example.clean)  # what the page shows: the sweep's model and clean prompt
    npz = events.exporter(sweep_export.write_sweep_npz)(request, sweep, on_screen)[section.download]
    csv = events.exporter(sweep_export.write_sweep_csv)(request, sweep, on_screen)[section.download]
    assert not Path(npz).exists() and files_under(tmp_path) == [str(Path(csv).relative_to(tmp_path))]
    layer = downloads.path(Visitor("10.0.0.1", "another page"), "layer0.npz", 10, "Layer 0's tensors")
    assert not Path(csv).exists() and files_under(tmp_path) == [str(layer.relative_to(tmp_path))]


def test_served_visitors_downloads_lie_apart_and_a_closed_pages_go_at_once(
    gqa_checkpoint, tmp_path, monkeypatch
):
    """Two visitors (addresses a trusted proxy reports) each download a layer: their files lie in
    folders of their own, named by nothing of theirs; one closes the page (its heartbeat ends) and its
    file goes at once, not after the ten minutes every file waits for at most."""
    import glob

    from explorer.app.visitors import PRIVATE_NETWORKS, Proxies

    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")  # a closed client's heartbeat ends soon after
    policy = Policy(**UNLIMITED_LOADS, proxies=Proxies(trusted=PRIVATE_NETWORKS))
    with served(Workspace(gqa_checkpoint, device="cpu", policy=policy)) as url:
        clients = [
            Client(
                url,
                verbose=False,
                download_files=str(tmp_path / address),
                headers={"X-Forwarded-For": address},
            )
            for address in ("203.0.113.7", "198.51.100.9")
        ]
        written = []  # each client's file on the server, in turn
        for client in clients:
            client.predict(PROMPT, 0, 0, api_name="/run")
            client.predict(0, api_name="/npz")
            found = glob.glob(str(tmp_path / "gradio" / "**" / "layer0.npz"), recursive=True)
            written += [path for path in found if path not in written]
        folders = {os.path.basename(os.path.dirname(path)) for path in written}
        assert len(written) == 2 and len(folders) == 2
        assert not any(address in folder for address in ("203.0.113.7", "198.51.100.9") for folder in folders)
        clients[0].close()
        deadline = time.monotonic() + 30  # how long the test waits, not how fast the server must be
        while os.path.exists(written[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(written[0]) and os.path.exists(written[1])
        clients[1].close()
