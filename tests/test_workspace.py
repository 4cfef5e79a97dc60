"""What the app holds, and what it lets a visitor load: one budget over models, runs and prompt text;
canonical names; evicted models freed; the operator's policy, whose refusals say nothing about the
server's files."""

from __future__ import annotations

import gc
import sys
import threading
import time
import weakref

import pytest
from conftest import TokenizerSpy, make_hf_checkpoint

from explorer.app import workspace as cache
from explorer.app.policy import REFUSED, Policy
from explorer.app.workspace import Workspace
from explorer.engine.interventions import Ablation
from explorer.errors import CheckpointError
from explorer.loading import catalog as models
from explorer.loading.checkpoints import BUNDLED_MODEL

PROMPT = "To be, or not to be, that is the question."


@pytest.fixture(scope="module")
def other_checkpoint(tmp_path_factory, tiny_tokenizer):
    directory = tmp_path_factory.mktemp("llama-other")
    make_hf_checkpoint(directory, tiny_tokenizer, "qwen2", seed=1)
    return directory


def test_dir_and_dir_dot_and_a_symlink_share_one_entry(gqa_checkpoint, tmp_path):
    workspace = Workspace(gqa_checkpoint, device="cpu")
    (tmp_path / "link").symlink_to(gqa_checkpoint)
    spellings = [
        "",
        str(gqa_checkpoint),
        f"{gqa_checkpoint}/.",
        f"{gqa_checkpoint}/./.",
        f" {gqa_checkpoint}// ",
    ]
    loaded = {id(workspace.explorer(s)) for s in [*spellings, str(tmp_path / "link")]}
    assert len(loaded) == 1 and workspace.explorer("").forward_count == 0
    workspace.run(spellings[1], PROMPT)
    workspace.run(spellings[3], PROMPT)
    assert workspace.explorer("").forward_count == 1


def test_the_bundled_model_and_hub_ids_have_one_name_however_spelled():
    workspace = Workspace(device="cpu")
    assert workspace.key("") == workspace.key(models.BUNDLED_LABEL) == workspace.key(str(BUNDLED_MODEL))
    assert workspace.key(f"{BUNDLED_MODEL}/.") == workspace.key("")
    assert workspace.key("HuggingFaceTB/SmolLM2-135M") == workspace.key(" huggingfacetb/smollm2-135m ")


def test_an_evicted_model_is_freed_even_while_runs_of_it_were_cached(gqa_checkpoint, other_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu")
    first = workspace.explorer("")
    for prompt in (PROMPT, "Now is the winter of our discontent"):
        workspace.run("", prompt).attention(1)
    workspace.max_bytes = workspace.nbytes()  # room for this model and its runs, not for a second model
    freed = weakref.ref(first)
    del first
    workspace.explorer(str(other_checkpoint))
    workspace.run(str(other_checkpoint), PROMPT)
    gc.collect()
    assert freed() is None and workspace.key("") not in workspace
    assert not any(isinstance(k, tuple) and k[0] == workspace.key("") for k in workspace.budget.held())


def test_a_model_being_loaded_is_made_room_for_before_its_weights_are_read(
    gqa_checkpoint, other_checkpoint, monkeypatch
):
    """A model being loaded sat beside a full cache until it was in: the process passed its budget by
    the model's size while its weights were read (the stress run's loads: 1.29x the budget)."""
    from explorer.loading import folders

    workspace = Workspace(gqa_checkpoint, device="cpu")
    workspace.run("", PROMPT)
    workspace.max_bytes = workspace.nbytes()  # room for this model and its run, not for a second model
    held_as_weights_were_read = []
    read = folders.read_state_dict

    def read_state_dict(path):
        held_as_weights_were_read.append((workspace.key("") in workspace, workspace.nbytes()))
        return read(path)

    monkeypatch.setattr(folders, "read_state_dict", read_state_dict)
    workspace.explorer(str(other_checkpoint))
    [(first_model_held, counted)] = held_as_weights_were_read
    assert not first_model_held and counted <= workspace.max_bytes
    assert workspace.nbytes() <= workspace.max_bytes  # the reservation gave way to the model itself


def test_the_budget_counts_the_prompt_text_held_in_keys_and_a_huge_prompt_keeps_only_what_is_read(
    gqa_checkpoint, monkeypatch
):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(max_tokens=32))
    spy = TokenizerSpy(workspace.explorer("").tokenizer)
    monkeypatch.setattr(workspace.explorer(""), "tokenizer", spy)
    before = workspace.nbytes()
    text = "¿Qué? " * 10_000_000  # 60 MB of characters, two bytes each in Python
    cached = workspace.cached_run("", text)
    assert spy.lengths == [32 * 16] and cached.run.n_tokens == 32  # the tokenizer read what is kept
    read = 32 * 16  # the app's tokens per run times the characters read per token
    assert cached.text == text[:read] and (workspace.key(""), text[:read]) in workspace
    grown = workspace.nbytes() - before
    assert grown >= cached.run.cache_nbytes() + sys.getsizeof(text[:read]) and grown < 2 << 20


def test_runs_load_only_the_default_model_and_another_must_be_loaded_again(gqa_checkpoint, other_checkpoint):
    workspace = Workspace(gqa_checkpoint, device="cpu")
    assert workspace.run("", PROMPT).n_tokens > 0  # the default model loads on demand
    with pytest.raises(CheckpointError, match="no longer in memory .*: load it again"):
        workspace.run(str(other_checkpoint), PROMPT)
    workspace.explorer(str(other_checkpoint))
    assert workspace.run(str(other_checkpoint), PROMPT).n_tokens > 0


def test_a_held_run_is_found_however_long_its_text_and_nothing_is_loaded_or_run_for_one_not_held(
    gqa_checkpoint, other_checkpoint, monkeypatch
):
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(max_tokens=32))
    assert workspace.held_run("", PROMPT) is None  # the default model not even loaded: not loaded now
    assert not workspace.is_loaded("")
    long_text = PROMPT * 100  # cut to what a run reads, as the run's key is
    run = workspace.run("", long_text)
    assert workspace.held_run("", long_text) is run and workspace.held_run(None, long_text) is run
    ablation = Ablation(heads=((0, 1),), mode="zero")  # a run the views show ablated, held apart
    ablated = workspace.run("", PROMPT, ablation)
    assert workspace.held_run("", PROMPT, ablation) is ablated
    assert workspace.held_run("", PROMPT) is not ablated
    monkeypatch.setattr(type(run.explorer), "run", lambda *a, **k: pytest.fail("a forward was run"))
    assert workspace.held_run("", "another prompt") is None
    assert workspace.held_run("", PROMPT, Ablation(heads=((0, 2),), mode="zero")) is None
    assert workspace.held_run(str(other_checkpoint), PROMPT) is None


def test_a_model_bigger_than_the_budget_is_refused_before_its_weights_are_read(gqa_checkpoint, monkeypatch):
    monkeypatch.setattr("explorer.loading.folders.load_file", lambda *a: pytest.fail("weights were read"))
    workspace = Workspace(gqa_checkpoint, device="cpu", max_bytes=100_000)
    with pytest.raises(CheckpointError, match=r"above the memory budget of 0\.0001 GB"):
        workspace.explorer("")


def test_models_load_one_at_a_time(gqa_checkpoint, other_checkpoint, monkeypatch):
    loading, overlaps = [], []
    real = cache.load

    def slow_load(*args, **kwargs):
        loading.append(1)
        overlaps.append(len(loading))
        time.sleep(0.2)
        try:
            return real(*args, **kwargs)
        finally:
            loading.pop()

    monkeypatch.setattr(cache, "load", slow_load)
    workspace = Workspace(gqa_checkpoint, device="cpu")
    threads = [
        threading.Thread(target=workspace.explorer, args=(s,)) for s in ("", str(other_checkpoint)) * 2
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlaps == [1, 1]  # two loads, never together; the repeated requests found them loaded


# --- the operator's policy ---


def refused(policy: Policy, source: str) -> str | None:
    try:
        policy.check(source)
    except CheckpointError as error:
        return str(error)
    return None


def test_under_bundled_a_typed_path_is_refused_and_the_bundled_model_served(gqa_checkpoint):
    workspace = Workspace(device="cpu", policy=Policy(models="bundled"))
    for source in (str(gqa_checkpoint), models.HUB_CHOICES[0][1], "/etc", "/no/such/dir"):
        with pytest.raises(CheckpointError) as error:
            workspace.explorer(source)
        assert str(error.value) == REFUSED["bundled"]
    assert workspace.explorer(models.BUNDLED_LABEL) is workspace.explorer("")


def test_under_listed_the_choices_and_the_allow_list_load_and_nothing_else(gqa_checkpoint):
    policy = Policy(models="listed", allowed=(str(gqa_checkpoint), "Org/Extra"))
    assert refused(policy, "") is None and refused(policy, "huggingfacetb/smollm2-360m") is None
    assert refused(policy, f"{gqa_checkpoint}/./") is None and refused(policy, "org/extra") is None
    assert refused(policy, "org/other") == refused(policy, f"{gqa_checkpoint}/..") == REFUSED["listed"]
    workspace = Workspace(device="cpu", policy=policy)
    assert workspace.explorer(str(gqa_checkpoint)).config.n_layers == 4
    assert [label for label, _ in policy.choices()][-2:] == [str(gqa_checkpoint), "Org/Extra"]


@pytest.mark.parametrize("mode", ["listed", "bundled"])
def test_every_refusal_is_the_same_whether_the_path_exists_or_not(mode, gqa_checkpoint, tmp_path):
    policy = Policy(models=mode)
    (tmp_path / "file.txt").write_text("x")
    sources = [
        str(gqa_checkpoint),
        "/root/.ssh",
        "/root/.ssh/id_rsa",
        "~root",
        "/no/such",
        str(tmp_path / "file.txt"),
    ]
    assert {refused(policy, s) for s in sources} == {REFUSED[mode]}


def test_on_a_public_app_every_failed_load_reads_the_same_whether_the_path_exists_or_not(
    gqa_checkpoint, tmp_path
):
    (tmp_path / "empty").mkdir()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "config.json").write_text('{"model_type": "secret-value-123"}')
    (tmp_path / "notes.gguf").write_text("my notes")
    (tmp_path / "file.txt").write_text("x")
    workspace = Workspace(gqa_checkpoint, device="cpu", policy=Policy(models="any", public=True))
    sources = ["empty", "foreign", "notes.gguf", "file.txt", "missing", "missing/deeper"]
    messages = set()
    for source in [str(tmp_path / s) for s in sources] + ["~nosuchuser/x", "/" + "a" * 1000]:
        with pytest.raises(CheckpointError) as error:
            workspace.explorer(source)
        messages.add(str(error.value))
    assert len(messages) == 1 and "secret-value" not in messages.pop()
    assert workspace.explorer("").config.n_layers == 4  # the default model is the operator's: it loads


def test_long_and_surrogate_sources_are_refused_with_a_clear_message():
    assert "at most 1,024 characters; this one has 5,000" in refused(Policy(), "a" * 5000)
    assert "lone surrogate" in refused(Policy(), "org/\ud800")


def test_the_environment_sets_the_policy_and_a_space_defaults_to_listed():
    assert Policy.from_environment({}) == Policy()
    space = Policy.from_environment({"SPACE_ID": "someone/attention-explorer"})
    assert (space.models, space.public) == ("listed", True)
    env = {"SPACE_ID": "x/y", "EXPLORER_MODELS": "ANY", "EXPLORER_ALLOWED_MODELS": " a/b , ,c/d "}
    env |= {"EXPLORER_MAX_TOKENS": "512", "EXPLORER_MEMORY_GB": "1.5", "EXPLORER_LOADS_PER_MINUTE": "2"}
    policy = Policy.from_environment(env)
    assert (policy.models, policy.allowed, policy.max_tokens) == ("any", ("a/b", "c/d"), 512)
    assert (policy.memory_bytes, policy.loads_per_minute) == (1_500_000_000, 2)
    for bad in ({"EXPLORER_MODELS": "some"}, {"EXPLORER_MAX_TOKENS": "lots"}, {"EXPLORER_QUEUE_SIZE": "0"}):
        with pytest.raises(ValueError, match="EXPLORER_|queue_size"):
            Policy.from_environment(bad)
