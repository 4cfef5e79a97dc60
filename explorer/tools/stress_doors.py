"""The stress run's round four (issue 52): around the queue, and through the side doors. It runs on a
server of its own started as a Space's (SPACE_ID set: the proxy's address read from X-Forwarded-For,
each request bounded to 60 s), as the outside probe found them:

    outside   handlers outside the queue fed long text: Intervene's prefill of a 160 KB prompt, 45
              prefills of 30 KB at once while a visitor from elsewhere runs a prompt, "Swap names" of
              100 KB
    kinds     one address joins eight runs at the token limit under four of the run's events; a visitor
              from elsewhere then runs a short prompt
    expiry    a session joins eight runs at the limit under four of the run's events every 31 s, never
              reading its stream (its places expire after 30 s unread); a visitor joining after is told
              its rank in the queue and waits its turn
    forged    50 fresh sessions each with another client-written first entry in X-Forwarded-For (the
              run speaks as the proxy, which appends the real address) load the model and run 500
              tokens; a visitor from elsewhere then runs
    doors     a 512 MB upload; a visitor's head CSV fetched by another address at the path derived from
              the first's address; markup in a toast; a layer view's event with layer 10³⁰ and head 99;
              the circuit's time estimate asked three times (16, 15, 16 pairs)

Every case is recorded as a `Result` of the stress run: `ok` says whether the app held.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx

from explorer.app.fair_queue import PER_KIND
from explorer.app.policy import Policy
from explorer.loading import catalog
from explorer.tools.stress_client import App
from explorer.tools.stress_page import Page

LINE = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. "
NAMES = "When Mary And John Went To The Store, John Gave A Drink To Mary. "  # a name a word
QUIET_SECONDS = 30.0  # the longest a visitor may wait behind one attacker
ROUNDS = 4  # of the attacker's joins that outlive their places
LOADS_A_MINUTE = Policy.loads_per_minute  # from one address, the stress server's own
GRACE_SECONDS = 0.25  # how late a client may hear an answer the server has sent
MARKUP = '<img src="//127.0.0.1:9/t.png"><a href="//evil.example/login">Sign in again</a>'


class RoundFour:
    """The phases above, on a `Stress` run over the round's own server (`downloads`: its Gradio folder)."""

    def __init__(self, stress, downloads: Path, long_model: Path, timeout: float):
        self.stress, self.downloads, self.timeout = stress, downloads, timeout
        self.model = catalog.SMOLLM2_LABEL if catalog.smollm2_gguf() else str(long_model)
        self.long_text = LINE * (stress.max_tokens // 8)  # past the token limit: cut to it

    def page(self, address: str) -> Page:
        return Page(self.stress.url, address, self.timeout)

    def victim(self, category: str, name: str):
        """A visitor from a new address runs a short prompt: waiting past QUIET_SECONDS fails it."""
        address = self.stress.address()
        self.stress.app(address, self.timeout)
        victim = self.stress.request(category, name, "run", [LINE, 0, 0], _ran, address=address)
        victim.ok = victim.ok and victim.seconds < QUIET_SECONDS
        return victim

    def loaded(self, category: str) -> dict:
        """A visitor's session with the round's model loaded."""
        visit = dict(session=uuid.uuid4().hex, address=self.stress.address())
        self.stress.app(visit["address"], self.timeout)
        self.stress.request(category, "load", "load_model", [self.model], _says("Loaded"), **visit)
        return visit

    def outside(self) -> None:
        stress = self.stress
        page = self.page(stress.address())
        prefill = page.event("tab-intervene", "select", reading="patch-clean")
        start = time.monotonic()
        data = _prefilled(page, prefill, NAMES * (160_000 // len(NAMES)))
        body = {"fn_index": prefill["id"], "data": data, "session_hash": "p"}
        answer = page.http.post(f"{page.url}/gradio_api/run/predict", json=body)
        stress.record("outside", "prefill of 160 KB", start, answer.status_code == 200 and _quick(start))
        flood = self.page(stress.address())
        text = NAMES * (30_000 // len(NAMES))

        def prefill_once(i):
            data = _prefilled(flood, prefill, text)
            body = {"fn_index": prefill["id"], "data": data, "session_hash": f"f{i}"}
            return flood.http.post(f"{flood.url}/gradio_api/run/predict", json=body)

        with ThreadPoolExecutor(45) as pool:
            flooding = [pool.submit(prefill_once, i) for i in range(45)]
            time.sleep(0.5)
            self.victim("outside", "a run while 45 prefills of 30 KB")
            start = time.monotonic()
            done = [f.result() for f in flooding]
        stress.record(
            "outside",
            f"45 prefills of 30 KB ({sum(d.status_code == 200 for d in done)} answered)",
            start,
            all(d.status_code == 200 for d in done),
        )
        swap = page.event("patch-swap", "click")
        start = time.monotonic()
        status, event, heard = page.answered(
            swap, [NAMES * (100_000 // len(NAMES)), None], "swap", self.timeout
        )
        stress.record("outside", "Swap names of 100 KB", start, status == 200 and event in heard.done)

    def kinds(self) -> None:
        stress = self.stress
        visit = self.loaded("kinds")
        page = self.page(visit["address"])
        runs = page.alike(page.named("run"))[:4]
        statuses = []
        for dependency in runs * 2:
            values = page.values(dependency, prompt=f"{len(statuses)} {self.long_text}")
            statuses.append(page.join(dependency, values, visit["session"])[0])
        listening, _ = page.listen(visit["session"], 900)
        admitted = statuses.count(200)
        stress.record(
            "kinds",
            f"8 runs at the limit under {len(runs)} events ({admitted} admitted)",
            time.monotonic(),
            admitted <= 2,
        )
        self.victim("kinds", "a short run from elsewhere")
        listening.join()

    def expiry(self) -> None:
        """A session with the model loaded joins eight runs at the limit under four of the run's events,
        never reading its stream, ROUNDS times 31 s apart (the places it is refused while they count, it
        gets back as they go); a visitor joining after is told its rank: were the attacker's events
        kept past their places, they would wait ahead of it."""
        stress = self.stress
        attacker = self.loaded("expiry")
        page = self.page(attacker["address"])
        runs = page.alike(page.named("run"))[:4]
        start, joined = time.monotonic(), []
        for round in range(ROUNDS):
            for dependency in runs * 2:
                text = f"round {round}, {len(joined)}: {self.long_text}"
                joined.append(
                    page.join(dependency, page.values(dependency, prompt=text), attacker["session"])[0]
                )
            time.sleep(31.0)
        victim = self.page(stress.address())
        run = victim.named("run")
        waited = time.monotonic()
        status, event, heard = victim.answered(run, victim.values(run, prompt=LINE), "victim", 900)
        rank = max((r for r, _ in heard.ranks.get(event, [])), default=0)
        waited = heard.done.get(event, (time.monotonic(), {}))[0] - waited
        stress.record(
            "expiry",
            f"{ROUNDS} rounds of 8 unread joins 31 s apart ({joined.count(200)} admitted); the next visitor "
            f"ranked {rank}, answered in {waited:.1f} s",
            start,
            status == 200 and event in heard.done and waited < QUIET_SECONDS,
        )

    def forged(self) -> None:
        """50 clients, each another first entry of X-Forwarded-For (the proxy appends the one real
        address), each loads the model and runs 500 tokens; a visitor from elsewhere then runs. The app
        holds if the 50 count as one address: no more loads than one address's a minute, and at most
        PER_KIND loads or runs at once (an answer frees its place, so more may be admitted in turn)."""
        stress = self.stress
        proxy = self.page(stress.address())
        load, run = proxy.named("load_model"), proxy.named("run")

        def one(i) -> tuple[Joined, Joined]:
            page, session = proxy.fork(), uuid.uuid4().hex
            forwarded = {"x-forwarded-for": f"198.51.100.{i}, 203.0.113.7"}
            loading = page.values(load, **{"model-source": self.model})
            running = page.values(run, prompt=f"{i} {LINE * 25}")  # about 500 tokens
            loaded = _joined(page, load, loading, session, forwarded)
            return loaded, _joined(page, run, running, session, forwarded)

        start = time.monotonic()
        with ThreadPoolExecutor(50) as pool:
            clients = [pool.submit(one, i) for i in range(50)]
            time.sleep(5.0)  # their loads answered, their runs joined
            self.victim("forged", "a run from elsewhere")
            joins = [c.result() for c in clients]
        loaded = sum("Loaded" in j[0].answer for j in joins)
        at_once = [_most_at_once([j[k].span for j in joins if j[k].span]) for k in (0, 1)]
        said = f"50 forged addresses ({loaded} loaded; at most {at_once[0]} loads, {at_once[1]} runs at once)"
        stress.record("forged", said, start, loaded <= LOADS_A_MINUTE and max(at_once) <= PER_KIND)

    def doors(self) -> None:
        self._upload()
        self._download()
        self._toast()
        self._event_data()
        self._estimate()

    def _upload(self) -> None:
        before = _disk(self.downloads)
        start = time.monotonic()
        chunk = b"x" * (1 << 20)
        try:
            answer = self.stress.app(self.stress.address()).http.post(
                f"{self.stress.url.rstrip('/')}/gradio_api/upload",
                files={"files": ("pairs.csv", _Stream(chunk, 512), "text/csv")},
            )
            status = answer.status_code
        except httpx.HTTPError:
            status = 0  # the server closed the connection on the refusal
        grown = _disk(self.downloads) - before
        said = f"512 MB upload (HTTP {status}, {grown / 2**20:,.0f} MiB left on disk)"
        self.stress.record("doors", said, start, grown < 1 << 20)

    def _download(self) -> None:
        stress = self.stress
        visit = dict(session=uuid.uuid4().hex, address=stress.address())
        stress.request("doors", "run", "run", [LINE * 4, 0, 0], _ran, **visit)
        stress.request("doors", "a head's CSV", "csv", [0, 0], _any, **visit)
        folder = hashlib.sha256(visit["address"].encode()).hexdigest()[:24]
        guessed = self.downloads / "explorer-downloads" / folder / "layer0-head0-softmax.csv"
        start = time.monotonic()
        other = stress.app(stress.address()).http.get(f"{stress.url.rstrip('/')}/gradio_api/file={guessed}")
        said = f"another address at the derived path (HTTP {other.status_code})"
        stress.record("doors", said, start, other.status_code != 200)

    def _toast(self) -> None:
        stress = self.stress
        visit = dict(session=uuid.uuid4().hex, address=stress.address())
        stress.request("doors", "run", "run", [LINE, 0, 0], _ran, **visit)
        page = self.page(visit["address"])
        attribution = page.named("attribution")
        start = time.monotonic()
        values = page.values(attribution)
        values[1] = MARKUP  # the target, after the run on screen
        _, _, heard = page.answered(attribution, values, visit["session"], 60)
        raw = [t for t in heard.toasts if "<img" in t or "<a " in t]
        stress.record("doors", f"markup in a toast ({len(raw)} raw of {len(heard.toasts)})", start, not raw)

    def _event_data(self) -> None:
        """What the layer view asks through its server function, past what the page sends: refused by
        name, never a broken answer."""
        stress = self.stress
        for name, data in (
            ("layer 10³⁰", {"part": "beside", "layer": 10**30, "head": 0, "layers": [1]}),
            ("head 99", {"part": "beside", "layer": 1, "head": 99, "layers": [0, 2]}),
        ):
            visit = dict(session=uuid.uuid4().hex, address=stress.address())
            start = time.monotonic()
            app = App(stress.url, self.timeout, visit["address"])
            ran, outputs = app.call("run", [LINE, 0, 0], visit["session"])
            views = [o["view"] for o in outputs if isinstance(o, dict) and "view" in o] if ran else []
            page = self.page(visit["address"])
            status, answer = page.call_server(
                "pipeline-plot", "layer_pack", {"view": (views or [""])[0], **data}, visit["session"]
            )
            told = answer.get("error", "") if isinstance(answer, dict) else str(answer)
            broken = any(s in told for s in ("64-bit", "Something went wrong", "IndexError"))
            answered = ran and status == 200 and bool(told)
            said = f"layer_pack with {name}: {told or 'no refusal'}"[:200]
            stress.record("doors", said, start, answered and not broken)

    def _estimate(self) -> None:
        stress = self.stress
        visit = self.loaded("doors")
        estimates = []
        # each past the 60 s bound on SmolLM2 several times over (every method, each head patched at
        # each position from the first difference on), so even a much faster machine refuses it, saying
        # its time
        for pairs in (16, 15, 16):
            methods = ["exact", "atp", "eap", "graph"]
            data = ["built-in", "ioi", pairs, 0, "", None, "logit_diff", methods, "differ"]
            result = stress.request("doors", f"circuit of {pairs} pairs", "circuit", data, _any, **visit)
            found = re.search(r"about (\d+) s", result.detail)
            if found:
                estimates.append(int(found.group(1)) / pairs)
        # The forward time an estimate reads is the lowest measured so far (`limits.ForwardTimes`): a
        # later estimate per pair may fall (a quieter moment), never rise past the rounding of its text
        # and a longer prompt among fewer pairs.
        rises = [later / earlier for earlier, later in itertools.pairwise(estimates)]
        stress.record(
            "doors",
            "circuit estimates per pair: " + ", ".join(f"{e:.1f} s" for e in estimates),
            time.monotonic(),
            len(estimates) == 3 and all(rise < 1.1 for rise in rises),
        )


class _Stream:
    """`count` copies of `chunk`, read as a file, never held whole."""

    def __init__(self, chunk: bytes, count: int):
        self.chunk, self.left = chunk, count

    def read(self, size: int = -1) -> bytes:
        if self.left <= 0:
            return b""
        self.left -= 1
        return self.chunk


def _prefilled(page: Page, prefill: dict, prompt: str) -> list:
    """What Intervene's prefill reads as the tab opens: the prompt on screen, its own boxes empty."""
    return page.values(prefill, prompt=prompt, **{"patch-clean": "", "patch-corrupted": ""})


@dataclass(frozen=True)
class Joined:
    """One join's fate: its span from admission to the answer heard, and that answer's text."""

    span: tuple[float, float] | None = None  # None: refused
    answer: str = ""


def _joined(page: Page, dependency: dict, values: list, session: str, headers: dict) -> Joined:
    """Join one event and, if admitted, read the session's stream until it is answered."""
    status, event, heard = page.answered(dependency, values, session, 300, headers)
    if status != 200:
        return Joined()
    answered, message = heard.done.get(event, (float("inf"), {}))
    return Joined((heard.opened, answered), json.dumps(message, ensure_ascii=False))


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans (admitted, answered) open at one instant, each taken to end GRACE_SECONDS before
    its client heard its answer: the server frees a place as it sends the answer, and may admit the
    next join before the client's reader has taken that answer in."""
    edges = sorted(e for a, b in spans if b - GRACE_SECONDS > a for e in ((a, 1), (b - GRACE_SECONDS, -1)))
    return max(itertools.accumulate(step for _, step in edges), default=0)


def _disk(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.is_dir() else 0


def _quick(start: float) -> bool:
    return time.monotonic() - start < QUIET_SECONDS


def _first(toasts: list[str]) -> str:
    return re.sub(r"\s+", " ", toasts[0])[:80] if toasts else ""


def _says(message: str):
    return lambda status: message in status.replace("&#x27;", "'")


def _ran(status: str) -> bool:
    return "one fast forward" in status or "the views show its first" in status


def _any(status: str) -> bool:
    return True
