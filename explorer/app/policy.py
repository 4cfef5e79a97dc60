"""What the operator of the app allows its visitors: which models they may load, how much work one
request may ask for, how much memory the app may hold, and how many requests may wait. Read once
from the environment (docs/deploying.md):

    EXPLORER_MODELS            any | listed | bundled    default: listed on a Space (SPACE_ID set), else any
                               (any also lists the models found on the machine; the others never look)
    EXPLORER_ALLOWED_MODELS    sources allowed beside the picker's choices, comma-separated
    EXPLORER_MAX_TOKENS        tokens per run                                          2048
    EXPLORER_MEMORY_GB         models, runs, eager layers and prompt text together     4
    EXPLORER_QUEUE_SIZE        requests waiting in the queue                           64
    EXPLORER_QUEUE_PER_VISITOR requests one visitor (address, or session) holds in it  8
    EXPLORER_CONCURRENCY       requests of one kind computed at once (the expensive    1
                               readings count as one kind)
    EXPLORER_REQUEST_SECONDS   how long one request may compute, then it stops         60 on a Space, else
                               (0: no bound)                                           no bound
    EXPLORER_DOWNLOAD_MB       the largest download, the one file a visitor keeps      256
    EXPLORER_DOWNLOADS_GB      every visitor's downloads together on disk              2
    EXPLORER_LOADS_PER_MINUTE         model loads started from one address a minute      3
    EXPLORER_SERVER_LOADS_PER_MINUTE  model loads started by all visitors a minute       12
    EXPLORER_TRUSTED_PROXIES   the proxies' networks: a visitor's address is the      private on a Space,
                               rightmost X-Forwarded-For entry outside them            else none
    EXPLORER_PROXY_HOPS        or their number: the entry the outermost one added      (the socket's peer)
    EXPLORER_REMOTE            1, with NDIF_API_KEY set: the picker offers models NDIF  off
                               runs (`explorer.app.remote`)

It is applied where the app loads a model (`explorer.app.workspace.Workspace`), never in `explorer.load`: a
Python user loads whatever they like. A refused source gets one message whatever it names, so the
refusal says nothing about the server's files.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

from explorer.app import remote
from explorer.app.visitors import NO_PROXY, Proxies
from explorer.errors import CheckpointError
from explorer.loading import catalog
from explorer.loading.hub import HUB_ID

MODES = ("any", "listed", "bundled")
PUBLIC_REQUEST_SECONDS = 60.0  # a Space's bound on one request's work, unless the operator sets another
MAX_SOURCE_CHARS = 1024  # a model source (a path or a hub id) longer than this is refused unread
REFUSED = {
    "listed": "This app loads only the models in its list (EXPLORER_MODELS=listed): pick one of them.",
    "bundled": "This app serves its bundled model only (EXPLORER_MODELS=bundled); no other can be loaded.",
}
UNREADABLE = (
    "This app could not load that model. It reads a directory with config.json, *.safetensors and "
    "tokenizer.json, a .gguf file, or a hub id (org/name) of a llama, mistral or qwen2 model within its "
    "size limits."
)


@dataclass(frozen=True)
class Policy:
    models: str = "any"  # any: every source; listed: the picker's choices and `allowed`; bundled: '' only
    allowed: tuple[str, ...] = ()
    public: bool = False  # on a Space: a typed source that fails to load gets one message (UNREADABLE)
    max_tokens: int = 2048
    memory_bytes: int = 4_000_000_000
    queue_size: int = 64
    queue_per_visitor: int = 8  # places one address, or one session, holds in the queue
    concurrency: int = 1
    request_seconds: float = 0.0  # how long one request computes before it stops (0: no bound)
    download_bytes: int = 256 << 20  # one download; the one file each visitor keeps on disk
    downloads_bytes: int = 2_000_000_000  # every visitor's downloads on disk together
    loads_per_minute: int = 3  # from one client address
    server_loads_per_minute: int = 12  # from all of them together
    proxies: Proxies = NO_PROXY  # who stands between visitors and the app (`explorer.app.visitors`)
    remote: bool = False  # models NDIF runs offered (`explorer.app.remote`): the operator's key, and asked

    def __post_init__(self):
        if self.models not in MODES:
            raise ValueError(f"EXPLORER_MODELS must be one of {', '.join(MODES)}, got {self.models!r}")
        numbers = ("max_tokens", "memory_bytes", "queue_size", "queue_per_visitor", "concurrency")
        numbers += ("download_bytes", "downloads_bytes", "loads_per_minute", "server_loads_per_minute")
        for name in numbers:
            value = getattr(self, name)
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive whole number, got {value!r}")
        if not (isinstance(self.request_seconds, int | float) and 0 <= self.request_seconds < math.inf):
            raise ValueError(
                f"request_seconds must be a number of seconds (0: none), got {self.request_seconds!r}"
            )

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> Policy:
        """The policy the operator set in the environment (defaults above where a variable is unset)."""
        public = bool(environ.get("SPACE_ID"))
        allowed = tuple(s.strip() for s in environ.get("EXPLORER_ALLOWED_MODELS", "").split(",") if s.strip())
        return cls(
            models=environ.get("EXPLORER_MODELS", "").strip().lower() or ("listed" if public else "any"),
            allowed=allowed,
            public=public,
            max_tokens=_whole(environ, "EXPLORER_MAX_TOKENS", cls.max_tokens),
            memory_bytes=int(_number(environ, "EXPLORER_MEMORY_GB", cls.memory_bytes / 1e9) * 1e9),
            queue_size=_whole(environ, "EXPLORER_QUEUE_SIZE", cls.queue_size),
            queue_per_visitor=_whole(environ, "EXPLORER_QUEUE_PER_VISITOR", cls.queue_per_visitor),
            concurrency=_whole(environ, "EXPLORER_CONCURRENCY", cls.concurrency),
            request_seconds=_number(
                environ, "EXPLORER_REQUEST_SECONDS", PUBLIC_REQUEST_SECONDS if public else 0
            ),
            download_bytes=int(_number(environ, "EXPLORER_DOWNLOAD_MB", cls.download_bytes / 2**20) * 2**20),
            downloads_bytes=int(_number(environ, "EXPLORER_DOWNLOADS_GB", cls.downloads_bytes / 1e9) * 1e9),
            loads_per_minute=_whole(environ, "EXPLORER_LOADS_PER_MINUTE", cls.loads_per_minute),
            server_loads_per_minute=_whole(
                environ, "EXPLORER_SERVER_LOADS_PER_MINUTE", cls.server_loads_per_minute
            ),
            proxies=Proxies.parse(
                environ.get("EXPLORER_PROXY_HOPS", ""), environ.get("EXPLORER_TRUSTED_PROXIES", ""), public
            ),
            remote=remote.offered(environ),
        )

    @property
    def lists_local(self) -> bool:
        """Whether the models found on this machine are offered: under `any` alone. Under `listed` or
        `bundled` (and so on a Space) they are neither listed nor looked for."""
        return self.models == "any"

    def choices(self) -> list[tuple[str, str]]:
        """The picker's choices as (label, source): the ready ones (all of them and the models on this
        machine, or the bundled model alone under `bundled`), then the allow-list under `listed`."""
        ready = catalog.choices(with_local=self.lists_local)
        if self.models == "bundled":
            return ready[:1]
        ready += list(remote.CHOICES) if self.remote else []
        if self.models == "listed":
            return ready + [(source, source) for source in self.allowed]
        return ready

    def local_choices(self) -> list[tuple[str, str]]:
        """The models on this machine that the picker offers (none unless `lists_local`)."""
        return list(catalog.local_scan().choices) if self.lists_local else []

    def local_note(self) -> str:
        """Why the search for models on this machine stopped short, if it did ('' when not searched)."""
        return catalog.local_scan().note if self.lists_local else ""

    def source_of(self, choice: str | None) -> str:
        """What `explorer.load` takes for a picker value: a choice's source (a label typed or picked), or
        the text typed."""
        remote_source = dict(remote.CHOICES).get((choice or "").strip()) if self.remote else None
        return remote_source or catalog.source_of(choice, with_local=self.lists_local)

    def label_of(self, source: str) -> str:
        """How the picker names a source: a choice's label, or the source itself."""
        labels = {found: label for label, found in remote.CHOICES} if self.remote else {}
        return labels.get(source) or catalog.label_of(source, with_local=self.lists_local)

    def is_listed(self, source: str) -> bool:
        """Whether `source` names one of the choices or the allow-list, spelled as listed (a hub id in
        any case; a path with any `./` or `//` the listing lacks). Compares text: no file is touched."""
        wanted = normalised(source)
        listed = [source for _, source in catalog.choices()] + list(self.allowed)
        return wanted == "" or any(wanted == normalised(s) for s in listed)

    def check(self, source: str) -> None:
        """Refuse, before anything is looked up, a source the app may not load (`source` is what
        `catalog.source_of` gives for the picker's value; '' is the bundled or default model)."""
        if len(source) > MAX_SOURCE_CHARS:
            raise CheckpointError(
                f"A model source is at most {MAX_SOURCE_CHARS:,} characters; this one has {len(source):,}."
            )
        try:
            source.encode("utf-8")
        except UnicodeEncodeError:
            raise CheckpointError(
                "The model source holds a lone surrogate, which is not a character."
            ) from None
        if remote.model_of(source) is not None:
            listed = source.strip() in dict(remote.CHOICES).values() or self.models == "any"
            if self.remote and listed and self.models != "bundled":
                return
            raise CheckpointError(remote.REFUSED if not self.remote else REFUSED[self.models])
        if self.models == "any" or source.strip() == "":
            return
        if self.models == "listed" and self.is_listed(source):
            return
        raise CheckpointError(REFUSED[self.models])


def normalised(source: str) -> str:
    """A source as compared: a hub id in lower case (the hub ignores case), a path lexically normalised
    (`dir/./.` is `dir`), '' for the default model."""
    text = source.strip()
    if not text:
        return ""
    if HUB_ID.match(text) and not text.startswith("."):
        return text.lower()
    return os.path.normpath(text)


class LoadLimit:
    """At most `per_address` model loads started from one client address, and `per_server` from all of
    them, in any `window_seconds`. A session is no unit here: a new client is a new session, so a
    limit per session is one anybody can dodge by reconnecting."""

    def __init__(self, per_address: int, per_server: int, window_seconds: float = 60.0):
        self.per_address, self.per_server, self.window = per_address, per_server, window_seconds
        self._starts: dict[str, deque[float]] = {}  # by address
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    @classmethod
    def of(cls, policy: Policy) -> LoadLimit:
        return cls(policy.loads_per_minute, policy.server_loads_per_minute)

    def check(self, address: str | None) -> None:
        """Count a load from `address`, or refuse it saying in how many seconds one is allowed."""
        now = time.monotonic()
        with self._lock:
            for key in [k for k, s in self._starts.items() if not s or now - s[-1] >= self.window]:
                del self._starts[key]  # addresses idle for a window are forgotten
            starts = self._starts.setdefault(address or "", deque())
            for window in (starts, self._all):
                while window and now - window[0] >= self.window:
                    window.popleft()
            if len(starts) >= self.per_address:
                raise CheckpointError(
                    f"This app allows {self.per_address} model loads a minute from one address "
                    f"(EXPLORER_LOADS_PER_MINUTE); try again in {self._wait(starts, now)} s."
                )
            if len(self._all) >= self.per_server:
                raise CheckpointError(
                    f"This app allows {self.per_server} model loads a minute from all its visitors "
                    f"together (EXPLORER_SERVER_LOADS_PER_MINUTE), and they are taken; try again in "
                    f"{self._wait(self._all, now)} s."
                )
            starts.append(now)
            self._all.append(now)

    def _wait(self, starts: deque[float], now: float) -> int:
        return max(1, math.ceil(self.window - (now - starts[0])))


def _whole(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    try:
        return int(value) if value else default
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number.") from None


def _number(environ: Mapping[str, str], name: str, default: float) -> float:
    value = environ.get(name, "").strip()
    try:
        number = float(value) if value else default
    except ValueError:
        number = math.nan
    if not 0 <= number < math.inf:
        raise ValueError(f"{name}={value!r} is not a finite number of at least 0.")
    return number
