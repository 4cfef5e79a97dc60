"""The training script stays alive: a few steps of the real command on a small text give a loadable model,
and training is deterministic on CPU."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import explorer
from explorer.engine import heads
from explorer.engine.model import Transformer
from explorer.tools.training import data as train_data
from explorer.tools.training import train
from explorer.tools.training.config import PRESETS
from tests.conftest import PROMPT, TEXT

REPO = Path(__file__).resolve().parent.parent
TINY = PRESETS["tiny"]


def small_corpus() -> str:
    """About 20 kB of varied text: numbered lines, so the held-out tail is not the head verbatim."""
    words = TEXT.split()
    return "".join(f"{i}: {' '.join(words[i % 17 :] + words[: i % 17])}\n" for i in range(80))


@pytest.mark.slow
def test_training_command_writes_a_model_that_loads(tmp_path):
    corpus, out = tmp_path / "corpus.txt", tmp_path / "models" / "tiny-gqa"
    corpus.write_text(small_corpus(), encoding="utf-8")
    command = [sys.executable, "-m", "explorer.train", "--corpus", str(corpus), "--out", str(out)]
    command += ["--preset", "tiny", "--steps", "4", "--work-dir", str(tmp_path / "work")]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "tok/s" in done.stderr and "loss=" in done.stderr  # the progress bar

    assert sorted(p.name for p in out.iterdir()) == [
        "README.md", "config.json", "heldout_sample.txt", "loss_curve.png", "model.safetensors",
        "tokenizer.json",
    ]  # fmt: skip
    assert [p.name for p in out.parent.iterdir()] == ["tiny-gqa"]  # no staging folder left behind
    hf_config = json.loads((out / "config.json").read_text())
    assert hf_config["architectures"] == ["LlamaForCausalLM"]
    assert (hf_config["num_attention_heads"], hf_config["num_key_value_heads"]) == (8, 2)
    card = (out / "README.md").read_text()
    assert "bits per character" in card and "python -m explorer.train --corpus" in card

    ex = explorer.load(out, device="cpu")
    run = ex.run("To be — café ☕ 🙂!")
    assert run.logits.shape == (run.n_tokens, ex.config.vocab_size) and torch.isfinite(run.logits).all()
    assert ex.tokenizer.decode(run.ids) == "To be — café ☕ 🙂!"


def test_tokenizer_encodes_any_unicode_without_unknown_tokens():
    tokenizer = train_data.train_tokenizer(small_corpus(), vocab_size=TINY.vocab)
    assert tokenizer.get_vocab_size() == TINY.vocab
    for text in (PROMPT, "日本語のテキスト", "Ωμέγα ∑ 🦜🏳️‍🌈", "\x00\t\u200b"):
        assert tokenizer.decode(tokenizer.encode(text).ids) == text


def test_heldout_split_is_the_last_tenth():
    text = small_corpus()
    train_text, heldout_text = train_data.split_corpus(text)
    assert train_text + heldout_text == text
    assert abs(len(heldout_text) - len(text) / 10) <= 1


def period(row: list[int]) -> int | None:
    return next((p for p in range(1, len(row)) if row[p:] == row[:-p]), None)


def test_repeated_windows_repeat_one_span_and_short_windows_come_first():
    tokens = torch.arange(5000)  # every token distinct, so a repeated span shows as a period
    vocabulary = torch.arange(5000, 5100)
    generator = torch.Generator().manual_seed(0)
    config = dataclasses.replace(TINY, batch_size=64, repeat_fraction=1.0, repeat_source="text")
    short = train_data.sample_batch(tokens, vocabulary, config, 0, generator)
    assert short.shape == (config.tokens_per_step // config.short_context, config.short_context + 1)
    for row in train_data.sample_batch(tokens, vocabulary, config, config.short_steps, generator).tolist():
        assert 4 <= period(row) <= len(row) // 2 and row[0] < 5000
    config = dataclasses.replace(config, repeat_source="vocabulary")
    for row in train_data.sample_batch(tokens, vocabulary, config, config.short_steps, generator).tolist():
        assert period(row) <= len(row) // 2 and set(row) <= set(vocabulary.tolist())
    config = dataclasses.replace(config, repeat_source="mixed")
    rows = train_data.sample_batch(tokens, vocabulary, config, config.short_steps, generator).tolist()
    from_text = [row[0] < 5000 for row in rows]
    assert all(period(row) <= len(row) // 2 for row in rows) and 0.25 < sum(from_text) / len(rows) < 0.75
    config = dataclasses.replace(config, repeat_fraction=0.0)
    for row in train_data.sample_batch(tokens, vocabulary, config, config.short_steps, generator).tolist():
        assert row == list(range(row[0], row[0] + config.context + 1))


def train_once(tokens: torch.Tensor, tokenizer, config) -> dict[str, torch.Tensor]:
    torch.manual_seed(config.seed)
    model = Transformer(train.model_config(config, tokenizer))
    model.init_weights(generator=torch.Generator().manual_seed(config.seed))
    heldout = heads.token_windows(tokens, config.context + 1, count=2)
    train.train(model, tokens, heldout, config, after_eval=lambda: None)
    return model.state_dict()


def test_training_is_deterministic_on_cpu():
    text = small_corpus()
    tokenizers = [train_data.train_tokenizer(text, TINY.vocab) for _ in range(2)]
    assert tokenizers[0].to_str() == tokenizers[1].to_str()
    tokens = torch.tensor(tokenizers[0].encode(text).ids)
    first, second = (train_once(tokens, tokenizers[0], TINY) for _ in range(2))
    assert all(torch.equal(first[key], second[key]) for key in first)
    other_seed = train_once(tokens, tokenizers[0], dataclasses.replace(TINY, seed=1))
    assert not torch.equal(first["embed_tokens.weight"], other_seed["embed_tokens.weight"])
