"""The picker's "Remote (NDIF)" source: offered only where the operator set both NDIF_API_KEY and
EXPLORER_REMOTE=1, and a remote source typed anywhere else refused before anything is loaded."""

from __future__ import annotations

import pytest

from explorer.app import remote
from explorer.app.policy import Policy
from explorer.errors import CheckpointError

ASKED = {"NDIF_API_KEY": "key", "EXPLORER_REMOTE": "1"}
SOURCE = remote.CHOICES[1][1]  # "ndif:meta-llama/Llama-3.1-70B"


def remote_labels(policy: Policy) -> list[str]:
    return [
        label for label, source in policy.choices() if source.startswith(remote.PREFIX) or "NDIF" in label
    ]


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"NDIF_API_KEY": "key"},
        {"EXPLORER_REMOTE": "1"},
        {"NDIF_API_KEY": " ", "EXPLORER_REMOTE": "1"},
        {"NDIF_API_KEY": "key", "EXPLORER_REMOTE": "yes"},
        {"SPACE_ID": "org/space", "NDIF_API_KEY": "key"},
    ],
)
def test_the_picker_offers_nothing_remote_unless_the_operator_asked(environ):
    policy = Policy.from_environment(environ)
    assert remote_labels(policy) == []
    with pytest.raises(CheckpointError, match="EXPLORER_REMOTE=1"):
        policy.check(SOURCE)
    assert policy.source_of(remote.CHOICES[1][0]) != SOURCE


@pytest.mark.parametrize("models", ["any", "listed"])
def test_the_picker_offers_ndif_models_where_the_key_is_set_and_remote_asked(models):
    policy = Policy.from_environment({**ASKED, "EXPLORER_MODELS": models})
    labels = remote_labels(policy)
    assert labels == [label for label, _ in remote.CHOICES] and all(
        "Remote (NDIF)" in label for label in labels
    )
    label = remote.CHOICES[1][0]
    assert policy.source_of(label) == SOURCE and policy.label_of(SOURCE) == label
    policy.check(SOURCE)
    assert remote.model_of(SOURCE) == "meta-llama/Llama-3.1-70B" and remote.model_of("org/name") is None


def test_a_bundled_only_app_offers_nothing_remote_even_when_asked():
    policy = Policy.from_environment({**ASKED, "EXPLORER_MODELS": "bundled"})
    assert remote_labels(policy) == []
    with pytest.raises(CheckpointError):
        policy.check(SOURCE)


def test_a_remote_pick_loads_through_nnsight_on_ndif_and_needs_the_key_at_once(monkeypatch):
    from explorer.app.workspace import Workspace

    monkeypatch.delenv("NDIF_API_KEY", raising=False)  # the operator's key gone since the app started
    workspace = Workspace(device="cpu", policy=Policy(remote=True))
    with pytest.raises(CheckpointError, match="NDIF_API_KEY"):
        workspace.explorer(remote.CHOICES[0][0])


def test_a_runs_status_says_where_nnsight_ran_it_and_what_it_moved(gqa_checkpoint):
    import explorer

    pytest.importorskip("nnsight")
    assert remote.moved_note(explorer.load(gqa_checkpoint, device="cpu").run("To be")) == ""
    run = explorer.load(gqa_checkpoint, device="cpu", backend="nnsight").run("To be")
    assert run.moved_bytes > 0
    assert (
        remote.moved_note(run)
        == f" Run here, through nnsight: {run.moved_bytes / 1e6:,.2f} MB moved back from the model."
    )


def test_a_remote_runs_estimate_is_said_before_it_is_sent_and_is_what_it_moves(gqa_checkpoint):
    """nnsight's serialising dry run of a remote request stands in for NDIF, which this machine cannot
    reach: the note said before the run names the bytes the run then moves."""
    import explorer

    pytest.importorskip("nnsight")
    text = "To be, or not to be, that is the question"
    assert remote.estimate_note(explorer.load(gqa_checkpoint, device="cpu"), text, 256) == ""
    here = explorer.load(gqa_checkpoint, device="cpu", backend="nnsight")
    assert remote.estimate_note(here, text, 256) == ""  # in this process: nothing crosses a network
    simulated = explorer.load(gqa_checkpoint, device="cpu", backend="nnsight")
    simulated.model.remote = "local"
    note = remote.estimate_note(simulated, text, 256)
    run = simulated.run(text)
    assert note == (
        f"This run sends {run.n_tokens:,} tokens to NDIF and moves about {run.moved_bytes / 1e6:,.1f} MB "
        f"back ({simulated.runs_where})."
    )
