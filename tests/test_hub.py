"""Hub models are downloaded under one spelling per model. The hub finds a repository whatever the case
of its id, but its cache keeps a folder per spelling: case variants of one id (typed, or allowed by a
listing that compares ids in lower case) each downloaded the whole model, never cleaned. Tested with
the hub mocked (no network here) and its cache in a temporary folder."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from huggingface_hub import constants
from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError
from huggingface_hub.hf_api import RepoSibling

import explorer
from explorer.app.policy import Policy
from explorer.app.workspace import Workspace
from explorer.loading import catalog

SPELLING = "HuggingFaceTB/SmolLM2-135M"  # as the hub (and the picker's choices) spell it
VARIANTS = ("huggingfacetb/smollm2-135m", "HUGGINGFACETB/SMOLLM2-135M", SPELLING)


def fake_hub(monkeypatch, cache, checkpoint, online: bool = True) -> list[str]:
    """The hub, mocked: it answers for the model in any case with its own spelling (or cannot be reached,
    `online` false); a download fills the cache's folder of the spelling asked for, as the real one
    does (`models--org--name`), from the cache alone when offline. Returns the spellings downloaded."""
    import huggingface_hub

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))

    def model_info(self, repo_id, **kwargs):
        if not online:
            raise ConnectionError("the hub cannot be reached")
        if repo_id.lower() != SPELLING.lower():
            raise RepositoryNotFoundError(repo_id)
        size = (checkpoint / "model.safetensors").stat().st_size
        return SimpleNamespace(id=SPELLING, siblings=[RepoSibling("model.safetensors", size=size)])

    asked = []

    def snapshot_download(repo_id, **kwargs):
        asked.append(repo_id)
        folder = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots" / "main"
        if not folder.is_dir():
            if not online:
                raise LocalEntryNotFoundError(repo_id)
            shutil.copytree(checkpoint, folder)
        return str(folder)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return asked


def cached_folders(cache) -> list[str]:
    return sorted(path.name for path in cache.iterdir())


def test_case_variants_of_a_hub_id_share_one_download_and_one_cache_folder(
    gqa_checkpoint, tmp_path, monkeypatch
):
    asked = fake_hub(monkeypatch, tmp_path / "hub", gqa_checkpoint)
    for typed in VARIANTS:
        assert explorer.load(typed, device="cpu").config.n_layers == 4
    assert asked == [SPELLING] * 3
    assert cached_folders(tmp_path / "hub") == ["models--HuggingFaceTB--SmolLM2-135M"]


def test_offline_a_case_variant_is_read_from_the_spelling_the_cache_holds(
    gqa_checkpoint, tmp_path, monkeypatch
):
    cache = tmp_path / "hub"
    shutil.copytree(gqa_checkpoint, cache / "models--HuggingFaceTB--SmolLM2-135M" / "snapshots" / "main")
    asked = fake_hub(monkeypatch, cache, gqa_checkpoint, online=False)
    explorer.load("huggingfacetb/smollm2-135m", device="cpu")
    assert asked == [SPELLING] and cached_folders(cache) == ["models--HuggingFaceTB--SmolLM2-135M"]
    # a cache that holds the spelling typed as well (downloaded before ids had one spelling) reads it
    shutil.copytree(gqa_checkpoint, cache / "models--huggingfacetb--smollm2-135m" / "snapshots" / "main")
    explorer.load("huggingfacetb/smollm2-135m", device="cpu")
    assert asked[-1] == "huggingfacetb/smollm2-135m"
    with pytest.raises(explorer.CheckpointError, match="cannot be reached"):  # nothing of it cached
        explorer.load("other-org/other-model", device="cpu")


def test_the_apps_listed_model_typed_in_any_case_is_the_one_download(gqa_checkpoint, tmp_path, monkeypatch):
    """Under `listed` a hub id is allowed in any case; each server (or the same one after the model was
    dropped to make room) that loads a variant reads the one folder."""
    asked = fake_hub(monkeypatch, tmp_path / "hub", gqa_checkpoint)
    label = next(label for label, source in catalog.HUB_CHOICES if source == SPELLING)
    for picked in ("huggingfacetb/smollm2-135m", label, "HUGGINGFACETB/SMOLLM2-135M"):
        Workspace(device="cpu", policy=Policy(models="listed")).explorer(picked)
    assert asked == [SPELLING] * 3
    assert cached_folders(tmp_path / "hub") == ["models--HuggingFaceTB--SmolLM2-135M"]
