"""The models already on this machine (`explorer.local_models`): found in a temporary HOME laid out as the
Hugging Face cache, Ollama and LM Studio lay out theirs, read from headers and configs alone; bounded;
listed and loaded by the app under EXPLORER_MODELS=any, and neither listed nor looked for on a Space."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import time
from pathlib import Path

import pytest

import explorer
from explorer.app.policy import REFUSED, Policy
from explorer.app.ui import build_demo
from explorer.app.workspace import Workspace
from explorer.errors import CheckpointError
from explorer.loading import catalog, local
from explorer.tools.stress_client import App, status_of
from tests.conftest import make_hf_checkpoint, served
from tests.gguf_files import write_gguf

REVISION = "0123456789abcdef0123456789abcdef01234567"
ENVIRONMENT = ("HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "OLLAMA_MODELS")
FOUND = ["org/tiny-llama (HF cache)", "tiny:latest (Ollama)", "pub/tiny-repo/tiny-F16.gguf (LM Studio)"]


def blob_of(data: bytes, blobs: Path, name: str) -> Path:
    blobs.mkdir(parents=True, exist_ok=True)
    blob = blobs / name
    blob.write_bytes(data)
    return blob


def hf_snapshot(hub: Path, repo: str, files: Path, revision: str = REVISION, main: bool = True) -> Path:
    """`files` (a saved checkpoint) as the hub's cache keeps it: models--org--name/blobs/<sha256>, and
    snapshots/<revision>/<file> a relative link to its blob; refs/main names the revision."""
    folder = hub / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / revision
    snapshot.mkdir(parents=True)
    for file in sorted(files.iterdir()):
        data = file.read_bytes()
        blob_of(data, folder / "blobs", hashlib.sha256(data).hexdigest())
        (snapshot / file.name).symlink_to(Path("../../blobs") / hashlib.sha256(data).hexdigest())
    if main:
        (folder / "refs").mkdir(exist_ok=True)
        (folder / "refs" / "main").write_text(revision)
    return snapshot


def ollama_model(store: Path, name: str, gguf: bytes) -> Path:
    """library/<name>:latest: a manifest naming a model layer (and a license layer), and the blob it names."""
    digest = hashlib.sha256(gguf).hexdigest()
    blob = blob_of(gguf, store / "blobs", f"sha256-{digest}")
    layers = [
        {"mediaType": "application/vnd.ollama.image.model", "digest": f"sha256:{digest}", "size": len(gguf)},
        {"mediaType": "application/vnd.ollama.image.license", "digest": "sha256:" + "0" * 64, "size": 3},
    ]
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / name / "latest"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"schemaVersion": 2, "layers": layers}))
    return blob


def bert_gguf(path: Path) -> Path:
    """A GGUF file of an architecture no loader here reads."""
    import numpy as np
    from gguf import GGUFWriter

    writer = GGUFWriter(str(path), "bert")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.ones((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def machine(tmp_path_factory, tiny_tokenizer):
    """A HOME holding one supported model in each place, an unsupported one beside each, and a link in
    each place to a model outside it: {"home": …, "outside": …, label: source for the three found}."""
    root = tmp_path_factory.mktemp("machine")
    home, outside, saved = root / "home", root / "outside", root / "saved"
    hf_model = make_hf_checkpoint(saved / "llama", tiny_tokenizer, "llama", num_hidden_layers=2)
    gguf = write_gguf(root / "tiny.gguf", hf_model, tiny_tokenizer, "llama").read_bytes()
    bert = bert_gguf(root / "bert.gguf").read_bytes()
    (saved / "gpt2").mkdir()
    for name in ("model.safetensors", "tokenizer.json"):
        shutil.copy(saved / "llama" / name, saved / "gpt2" / name)
    (saved / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))

    hub = home / ".cache" / "huggingface" / "hub"
    snapshot = hf_snapshot(hub, "org/tiny-llama", saved / "llama")
    hf_snapshot(hub, "openai-community/gpt2", saved / "gpt2")
    hf_snapshot(outside / "hub", "org/elsewhere", saved / "llama")
    (hub / "models--org--elsewhere").symlink_to(outside / "hub" / "models--org--elsewhere")

    store = home / ".ollama" / "models"
    blob = ollama_model(store, "tiny", gguf)
    ollama_model(store, "bert-tiny", bert)
    outside_blob = blob_of(gguf, outside, "elsewhere.gguf")
    (store / "blobs" / ("sha256-" + "e" * 64)).symlink_to(outside_blob)
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "tiny" / "latest"
    linked = manifest.read_text().replace(hashlib.sha256(gguf).hexdigest(), "e" * 64)
    (manifest.parent.parent / "elsewhere").mkdir()
    (manifest.parent.parent / "elsewhere" / "latest").write_text(linked)

    studio = home / ".lmstudio" / "models"
    file = studio / "pub" / "tiny-repo" / "tiny-F16.gguf"
    blob_of(gguf, file.parent, file.name)
    blob_of(bert, file.parent, "mmproj-bert.gguf")
    blob_of(gguf, file.parent, "tiny-F16-00001-of-00002.gguf")
    (outside / "repo").mkdir()
    blob_of(gguf, outside / "repo", "elsewhere.gguf")
    (studio / "pub" / "linked-repo").symlink_to(outside / "repo")
    found = dict(zip(FOUND, (str(snapshot), str(blob), str(file)), strict=True))
    return {"home": home, "outside": outside, **found}


@pytest.fixture
def at_home(machine, monkeypatch):
    """This process in the machine's HOME, with none of the places' variables set, and no scan cached."""
    monkeypatch.setenv("HOME", str(machine["home"]))
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(local, "OLLAMA_SERVICE_STORE", machine["home"] / "no-ollama-service")
    catalog.local_scan.cache_clear()
    yield machine
    catalog.local_scan.cache_clear()


def test_local_models_finds_the_hf_snapshot_the_ollama_blob_and_the_lm_studio_file_in_order(at_home):
    found = explorer.local_models()
    assert found == [(label, at_home[label]) for label in FOUND]
    sources = " ".join(source for _, source in found)
    assert "gpt2" not in sources and "bert" not in sources and "elsewhere" not in sources
    assert str(at_home["outside"]) not in sources and local.scan().note == ""


def test_each_model_found_loads_from_its_source_an_ollama_blob_by_its_magic_bytes(at_home):
    for label in FOUND:
        loaded = explorer.load(at_home[label], device="cpu")
        assert loaded.config.n_layers == 2 and loaded.run("To be, or not").n_tokens > 1, label
    text = at_home["home"] / "notes"
    text.write_text("not a model")
    with pytest.raises(CheckpointError, match="is a file; give a .gguf file"):
        explorer.load(text)


def test_the_places_follow_their_environment_variables(machine, tmp_path, monkeypatch):
    home = machine["home"]
    monkeypatch.setenv("HOME", str(tmp_path))  # an empty HOME: only what the variables name is found
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(local, "OLLAMA_SERVICE_STORE", tmp_path / "no-ollama-service")
    assert local.local_models() == []
    monkeypatch.setenv("HF_HOME", str(home / ".cache" / "huggingface"))
    monkeypatch.setenv("OLLAMA_MODELS", str(home / ".ollama" / "models"))
    assert [label for label, _ in local.local_models()] == FOUND[:2]
    monkeypatch.delenv("HF_HOME")
    monkeypatch.setenv("HF_HUB_CACHE", str(home / ".cache" / "huggingface" / "hub"))
    assert [label for label, _ in local.local_models()] == FOUND[:2]


def test_a_snapshot_is_the_revision_refs_main_names_else_the_newest(machine, tmp_path):
    files = Path(machine[FOUND[0]])
    hub = tmp_path / "hub"
    old = hf_snapshot(hub, "org/m", files, "a" * 40)
    new = hf_snapshot(hub, "org/m", files, "b" * 40, main=False)
    os.utime(old, (time.time() - 100, time.time() - 100))
    environ = {"HOME": str(tmp_path), "HF_HUB_CACHE": str(hub)}
    assert local.scan(environ).choices == (("org/m (HF cache)", str(old)),)
    (hub / "models--org--m" / "refs" / "main").unlink()
    assert local.scan(environ).choices == (("org/m (HF cache)", str(new)),)
    (new / "model.safetensors").unlink()  # weights not (or not yet) downloaded: not listed
    assert local.scan(environ).choices == ()


def test_ollama_models_are_named_as_ollama_lists_them():
    assert local.ollama_name("registry.ollama.ai", "library", "qwen3", "0.6b") == "qwen3:0.6b"
    assert local.ollama_name("registry.ollama.ai", "user", "model", "q4") == "user/model:q4"
    assert local.ollama_name("hf.co", "org", "Repo-GGUF", "Q8_0") == "hf.co/org/Repo-GGUF:Q8_0"


def test_a_scan_stops_after_1000_entries_and_says_where(machine, tmp_path):
    studio = tmp_path / ".lmstudio" / "models"
    for i in range(5000):
        (studio / f"publisher-{i:04}").mkdir(parents=True)
    environ = {"HOME": str(tmp_path), "HF_HUB_CACHE": str(machine["home"] / ".cache" / "huggingface" / "hub")}
    found = local.scan(environ, clock=lambda: 0.0)  # a clock that never moves: only the entries stop it
    assert found.choices == ((FOUND[0], machine[FOUND[0]]),)  # what it found before the bound is kept
    assert "stopped after 1,000 entries, in " + str(studio) in found.note and "listed (1)" in found.note


def test_a_scan_stops_after_its_time(machine):
    seconds = itertools.count()  # a clock that moves a second each time it is read
    found = local.scan({"HOME": str(machine["home"])}, clock=lambda: next(seconds))
    assert "stopped after 2 s" in found.note and len(found.choices) < 3


# --- in the app ---


def picker(demo) -> dict:
    config = demo.get_config_file()
    return next(c for c in config["components"] if c["props"].get("elem_id") == "model-source")["props"]


def picker_choices(demo) -> list[str]:
    return [choice[0] for choice in picker(demo)["choices"]]


def test_the_app_lists_them_after_the_bundled_model_and_loads_and_runs_the_ollama_one(at_home):
    many = dict(loads_per_minute=100, server_loads_per_minute=100)
    workspace = Workspace(device="cpu", policy=Policy(**many))
    with served(workspace) as url:
        ready = [label for label, _ in catalog.choices()]
        assert picker_choices(build_demo(workspace)) == ready[:-3] + FOUND + ready[-3:]
        app = App(url, timeout=60)
        ok, outputs = app.call("load_model", [FOUND[1]], session="ollama")
        assert ok and "Loaded tiny:latest (Ollama)" in status_of(outputs), outputs
        assert "tiny:latest (Ollama)" in outputs[2] and workspace.is_loaded(at_home[FOUND[1]])  # the card
        ok, outputs = app.call("run", ["To be, or not to be", 1, 3], session="ollama")
        assert ok and "one fast forward" in status_of(outputs), outputs
        assert workspace.explorer(FOUND[1], load=False).forward_count == 1  # the run was the Ollama model's


@pytest.mark.parametrize("environ", [{"SPACE_ID": "org/space"}, {"EXPLORER_MODELS": "bundled"}])
def test_on_a_space_no_local_model_is_listed_or_looked_for(at_home, monkeypatch, environ):
    def scan(*args, **kwargs):
        raise AssertionError("the machine was searched for models")

    monkeypatch.setattr(local, "scan", scan)
    policy = Policy.from_environment(environ)
    demo = build_demo(Workspace(device="cpu", policy=policy))
    assert not set(picker_choices(demo)) & set(FOUND)
    assert policy.source_of(FOUND[1]) == FOUND[1] and policy.label_of(at_home[FOUND[1]]) == at_home[FOUND[1]]
    with pytest.raises(CheckpointError) as refused:
        policy.check(at_home[FOUND[1]])
    assert str(refused.value) == REFUSED[policy.models]


def test_the_picker_says_why_the_search_stopped_short(at_home, monkeypatch):
    note = "The search for models on this machine stopped after 1,000 entries, in /somewhere: …"
    monkeypatch.setattr(local, "scan", lambda: local.LocalScan((), note))
    assert picker(build_demo(Workspace(device="cpu", policy=Policy())))["info"].endswith(note)


def test_the_newer_families_are_found_too_a_gemma3_in_ollama_and_a_qwen3_in_the_hf_cache(
    tmp_path, tiny_tokenizer
):
    """What people pull today: `ollama pull gemma3:270m` (a gemma3 GGUF blob) and Qwen3 from the hub;
    both listed by their names, and the Ollama one loads and runs from its blob."""
    from tests.conftest import HF_CONFIGS

    gemma = make_hf_checkpoint(
        tmp_path / "gemma",
        tiny_tokenizer,
        *HF_CONFIGS["gemma3-sliding"][:1],
        **HF_CONFIGS["gemma3-sliding"][1],
    )
    gguf = write_gguf(tmp_path / "gemma.gguf", gemma, tiny_tokenizer, "gemma3").read_bytes()
    home = tmp_path / "home"
    blob = ollama_model(home / ".ollama" / "models", "gemma3", gguf)
    model_type, overrides = HF_CONFIGS["qwen3-qk-norm"]
    make_hf_checkpoint(tmp_path / "qwen3", tiny_tokenizer, model_type, **overrides)
    snapshot = hf_snapshot(home / ".cache" / "huggingface" / "hub", "Qwen/tiny-qwen3", tmp_path / "qwen3")
    found = local.scan({"HOME": str(home)})
    assert found.choices == (
        ("Qwen/tiny-qwen3 (HF cache)", str(snapshot)),
        ("gemma3:latest (Ollama)", str(blob)),
    )
    run = explorer.load(blob, device="cpu").run("To be, or not to be")
    assert run.config.model_type == "gemma3_text" and run.config.window(0) == 5 and run.n_tokens > 5
    assert explorer.load(snapshot, device="cpu").config.qk_norm


def test_the_linux_services_ollama_store_is_looked_in_unless_ollama_models_says_where(
    machine, tmp_path, monkeypatch
):
    """Ollama's install script runs it as the user `ollama`: `ollama pull` fills /usr/share/ollama's
    store, not the person's ~/.ollama. Both are looked in; OLLAMA_MODELS, when set, is the one store."""
    service = machine["home"] / ".ollama" / "models"  # a store laid out as Ollama lays one out
    monkeypatch.setattr(local, "OLLAMA_SERVICE_STORE", service)
    found = local.scan({"HOME": str(tmp_path)})  # nothing in the person's own HOME
    assert found.choices == ((FOUND[1], machine[FOUND[1]]),)
    assert local.scan({"HOME": str(tmp_path), "OLLAMA_MODELS": str(tmp_path / "elsewhere")}).choices == ()


# --- entries that cost themselves alone ---


def test_a_link_loop_in_a_snapshot_folder_skips_the_loop_not_the_cache(machine, tmp_path):
    """`snapshots/loopy -> loopy` hid every model of the HF cache: the scan of the folder ended at it."""
    hub = tmp_path / "hub"
    shutil.copytree(machine["home"] / ".cache" / "huggingface" / "hub", hub, symlinks=True)
    (hub / "models--org--tiny-llama" / "refs" / "main").unlink()  # the newest snapshot: each is looked at
    loop = hub / "models--org--tiny-llama" / "snapshots" / "loopy"
    loop.symlink_to("loopy")
    (hub / "models--org--looped").mkdir()
    (hub / "models--org--looped" / "snapshots").mkdir()
    (hub / "models--org--looped" / "snapshots" / "again").symlink_to("again")
    found = local.scan({"HOME": str(tmp_path), "HF_HUB_CACHE": str(hub)})
    assert [label for label, _ in found.choices] == [FOUND[0]]
    assert "Skipped 2 entries it could not read: " in found.note
    assert f"{loop} (a link loop)" in found.note


@pytest.mark.parametrize("where", ["hf", "ollama"])
def test_json_nested_past_the_recursion_limit_skips_its_entry_alone(machine, tmp_path, where):
    """400,000 '[' as a config.json or an Ollama manifest ended the server at start-up (RecursionError)."""
    home = tmp_path / "home"
    shutil.copytree(machine["home"], home, symlinks=True)
    deep = "[" * 400_000 + "]" * 400_000
    if where == "hf":
        files = tmp_path / "deep"
        files.mkdir()
        for name in ("model.safetensors", "tokenizer.json", "config.json"):
            (files / name).write_bytes(b"{}")
        snapshot = hf_snapshot(home / ".cache" / "huggingface" / "hub", "org/deep", files)
        bad = snapshot / "config.json"
        bad.unlink()
    else:
        bad = home / ".ollama" / "models" / "manifests" / "registry.ollama.ai" / "library" / "deep" / "latest"
        bad.parent.mkdir(parents=True)
    bad.write_text(deep)
    found = local.scan({"HOME": str(home)})
    assert [label for label, _ in found.choices] == FOUND
    assert f"Skipped 1 entry it could not read: {bad.parents[2] if where == 'hf' else bad}" in found.note
    assert "(JSON nested too deep)" in found.note


def test_the_note_names_three_skipped_entries_and_counts_the_rest():
    skipped = [(f"/m/{i}", "a link loop") for i in range(5)]
    assert local.skipped_note(skipped) == (
        "Skipped 5 entries it could not read: /m/0 (a link loop); /m/1 (a link loop); "
        "/m/2 (a link loop); and 2 more."
    )
