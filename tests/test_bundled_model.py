"""The shipped model is what the issue promised: small, offline, loadable by transformers, and its heads
do recognisable things, measured on held-out text and random tokens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import explorer
from explorer.engine import heads
from explorer.loading import folders
from explorer.loading.checkpoints import BUNDLED_MODEL
from tests.conftest import PROMPT

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def ex():
    return explorer.load(device="cpu")


@pytest.fixture(scope="module")
def head_scores(ex):
    heldout = (BUNDLED_MODEL / "heldout_sample.txt").read_text(encoding="utf-8")
    return heads.head_type_scores(ex, heldout)


def test_load_with_no_argument_returns_the_bundled_model_offline():
    script = (
        "import explorer; ex = explorer.load(device='cpu'); ex.run('To be, or not to be'); print(ex.path)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert Path(done.stdout.strip()) == BUNDLED_MODEL


def test_it_is_a_llama_with_visible_gqa_and_a_256_token_context(ex):
    c = ex.config
    assert c.n_layers >= 4 and c.n_heads >= 8 and c.n_kv_heads * 4 == c.n_heads
    assert c.context_length >= 256 and c.rope_theta > 0


def test_shipped_weights_are_safetensors_under_25_mb():
    weight_suffixes = (".safetensors", *folders.PICKLED_SUFFIXES)
    weights = [p for p in BUNDLED_MODEL.iterdir() if p.suffix in weight_suffixes]
    assert [p.name for p in weights] == ["model.safetensors"]
    assert weights[0].stat().st_size <= 25 * 2**20
    for name in ("config.json", "tokenizer.json", "README.md", "loss_curve.png"):
        assert (BUNDLED_MODEL / name).is_file()


def test_tokenizer_encodes_any_unicode_without_unknown_tokens(ex):
    for text in (PROMPT, "日本語のテキスト", "Ωμέγα ∑ 🦜🏳️‍🌈"):
        assert ex.tokenizer.decode(ex.tokenizer.encode(text).ids) == text


def test_a_head_attends_to_the_previous_token(head_scores):
    assert head_scores["previous_token"].max().item() >= 0.5


def test_a_head_does_induction_on_random_tokens(head_scores):
    assert head_scores["induction"].max().item() >= 0.4


def test_its_induction_heads_fire_on_text_written_twice_too(ex):
    """Random tokens are where induction is measured, text is where people look for it (the app's
    induction example): held-out text written twice must light the same heads up."""
    heldout = (BUNDLED_MODEL / "heldout_sample.txt").read_text(encoding="utf-8")
    windows = heads.token_windows(torch.tensor(ex.tokenizer.encode(heldout).ids), 64, count=8)  # [8, 64]
    twice = torch.cat([windows, windows], dim=1)  # [8, 128]
    scores = heads.mean_layer_scores(ex.model, twice, {"induction": lambda p: heads.induction_score(p, 64)})
    assert scores["induction"].max().item() >= 0.3


def test_the_second_copy_of_a_random_sequence_is_far_easier(ex):
    repeated = heads.repeated_random_tokens(ex.tokenizer, period=128, count=8, seed=1)  # [8, 256]
    with torch.no_grad():
        logits = ex.model(repeated[:, :-1])  # [8, 255, vocab]
    losses = F.cross_entropy(logits.transpose(1, 2), repeated[:, 1:], reduction="none")  # [8, 255]
    first_copy, second_copy = losses[:, :127].mean(), losses[:, 128:].mean()
    assert second_copy < first_copy / 2


def test_transformers_loads_it_with_the_same_logits(ex):
    from transformers import AutoModelForCausalLM

    hf_model = AutoModelForCausalLM.from_pretrained(BUNDLED_MODEL).eval()
    run = ex.run(PROMPT)
    with torch.no_grad():
        hf_logits = hf_model(torch.tensor([run.ids])).logits[0]
    assert (run.logits - hf_logits).abs().max().item() <= 1e-4
