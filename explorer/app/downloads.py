"""What visitors download (a layer's tensors as .npz, a head's map as .csv), kept on disk within bounds.

- Each file is written once, straight into Gradio's cache folder (which Gradio serves as it is, with no
  copy of its own), in a folder of the session's named by a random token (`secrets.token_urlsafe`):
  Gradio serves whatever path it is asked for, so the path must be one only that session was told.
  Nothing of a visitor (their address, their session's id) can name it.
- A visitor (an address: a new session is no new allowance) keeps one file: asking for another deletes it,
  whichever of their sessions wrote it.
- A download's size is known before it is written; one past `per_visitor` bytes is refused, naming both,
  and so is one that would take every visitor's files together past `total`.
- A session's folder goes when the session ends (`end_session`: the page's `unload`), and files older
  than `max_age` whenever a download is asked for and on Gradio's timer (`gr.Blocks(delete_cache=…)`,
  set by the layout), so nothing stays for long, not even a client's that never said it left.
"""

from __future__ import annotations

import math
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from explorer.app.visitors import Visitor
from explorer.errors import LimitError

DOWNLOAD_SECONDS = 600  # how long a download stays on disk
DOWNLOAD_SWEEP_SECONDS = 60  # how often Gradio's timer looks for files past that age
TOKEN_BYTES = 24  # of randomness in a session folder's name


class Downloads:
    def __init__(
        self,
        root: Path,
        per_visitor: int,
        total: int,
        max_age: float = DOWNLOAD_SECONDS,
        clock: Callable[[], float] = time.time,
    ):
        self.root, self.per_visitor, self.total, self.max_age, self.clock = (
            Path(root),
            per_visitor,
            total,
            max_age,
            clock,
        )
        self._folders: dict[str, Path] = {}  # each session's folder, while it is on disk
        self._held: dict[str, Path] = {}  # the one file each address keeps, while it is on disk
        self._lock = threading.Lock()

    def path(self, visitor: Visitor, name: str, size: int, what: str) -> Path:
        """Where to write the visitor's next download (`name`, about `size` bytes, described as `what` in
        a refusal): their earlier one, and every file past its age, deleted first."""
        if size > self.per_visitor:
            raise LimitError(
                f"{what} would be {_mib(size)}; this app writes downloads of up to {_mib(self.per_visitor)} "
                "(EXPLORER_DOWNLOAD_MB): use a shorter prompt, or the Python API (explorer.views.export)."
            )
        with self._lock:
            earlier = self._held.pop(visitor.address, None)
            self._delete(lambda file: file == earlier or self._expired(file))
            held = sum(size for _, size in self._files())
            if held + size > self.total:
                oldest = min((file.stat().st_mtime for file, _ in self._files()), default=self.clock())
                wait = max(1, math.ceil(oldest + self.max_age - self.clock()))
                raise LimitError(
                    f"Visitors' downloads fill this app's disk allowance ({_mib(self.total)}, "
                    f"EXPLORER_DOWNLOADS_GB) until some expire: try again in {wait} s."
                )
            folder = self._folder(visitor.session)
            path = folder / name
            path.touch()  # the folder is not empty, so no other request's sweep takes it away
            self._held[visitor.address] = path
            return path

    def end_session(self, session: str) -> None:
        """The session ended (its page closed): its folder and every file in it go."""
        with self._lock:
            folder = self._folders.pop(session, None)
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
                self._forget_gone()

    def held_bytes(self) -> int:
        """Bytes of every download on disk now."""
        with self._lock:
            return sum(size for _, size in self._files())

    def _folder(self, session: str) -> Path:
        """The session's folder, made the first time (a request with no session gets one of its own)."""
        folder = self._folders.get(session) if session else None
        if folder is None:
            folder = self.root / secrets.token_urlsafe(TOKEN_BYTES)
            if session:
                self._folders[session] = folder
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def _files(self) -> list[tuple[Path, int]]:
        found = []
        for folder in self.root.iterdir() if self.root.is_dir() else ():
            for file in folder.iterdir() if folder.is_dir() else ():
                try:
                    found.append((file, file.stat().st_size))
                except FileNotFoundError:  # deleted meanwhile (Gradio's timer)
                    continue
        return found

    def _expired(self, file: Path) -> bool:
        try:
            return self.clock() - file.stat().st_mtime > self.max_age
        except FileNotFoundError:
            return False

    def _delete(self, which: Callable[[Path], bool]) -> None:
        for file, _ in self._files():
            if which(file):
                file.unlink(missing_ok=True)
        for folder in self.root.iterdir() if self.root.is_dir() else ():
            if folder.is_dir() and not any(folder.iterdir()):
                os.rmdir(folder)
        self._forget_gone()

    def _forget_gone(self) -> None:
        """Sessions whose folder and addresses whose file are no longer on disk are forgotten (so a
        client that never says it left is remembered no longer than its file)."""
        self._folders = {s: folder for s, folder in self._folders.items() if folder.is_dir()}
        self._held = {a: file for a, file in self._held.items() if file.exists()}


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"
