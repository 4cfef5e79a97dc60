"""Who a visitor is, for the limits that count per visitor (model loads, places in the queue, expensive
readings, downloads): the client's address, and the session its page opened.

A proxy in front of the app appends to X-Forwarded-For the address it was reached from; what comes
before that in the header is whatever the client wrote. So the address is read from the right: the
entry the nearest proxy the operator trusts added (`Proxies`), never a client-written one. Elsewhere,
with no proxy trusted, it is the socket's peer and the header is ignored.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MAX_ADDRESS_CHARS = 64
MAX_SESSION_CHARS = 128
MAX_FORWARDED_ENTRIES = 64  # of X-Forwarded-For, read from the right; more are a client's writing
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
# Where a hosting platform's own proxies live: loopback, private, shared (carrier-grade NAT) and
# link-local ranges. A visitor on the public internet never has such an address.
PRIVATE_NETWORKS: tuple[Network, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
    )
)


@dataclass(frozen=True)
class Visitor:
    address: str
    session: str = ""


@dataclass(frozen=True)
class Proxies:
    """The proxies between visitors and the app, which each append the address they were reached from
    to X-Forwarded-For. Either a count (`hops`: that many proxies, each trusted; the visitor is the
    entry the outermost one added) or the networks they live in (`trusted`: the visitor is the
    rightmost entry outside them, read only when the socket's peer is inside them). Neither: no proxy,
    the peer is the visitor."""

    hops: int | None = None
    trusted: tuple[Network, ...] = ()

    def __post_init__(self):
        if self.hops is not None and (not isinstance(self.hops, int) or self.hops < 0):
            raise ValueError(f"the number of proxy hops must be a whole number ≥ 0, got {self.hops!r}")

    @classmethod
    def parse(cls, hops: str = "", trusted: str = "", on_space: bool = False) -> Proxies:
        """From the operator's settings (EXPLORER_PROXY_HOPS, EXPLORER_TRUSTED_PROXIES: networks,
        comma-separated, or `private`); on a Space with neither, its proxies' private networks."""
        if hops.strip():
            try:
                return cls(hops=int(hops))
            except ValueError:
                raise ValueError(f"EXPLORER_PROXY_HOPS must be a whole number ≥ 0, got {hops!r}") from None
        names = [n.strip() for n in trusted.split(",") if n.strip()]
        if not names:
            return cls(trusted=PRIVATE_NETWORKS) if on_space else cls()
        networks: list[Network] = []
        for name in names:
            if name.lower() == "private":
                networks += PRIVATE_NETWORKS
                continue
            try:
                networks.append(ipaddress.ip_network(name, strict=False))
            except ValueError:
                raise ValueError(
                    f"EXPLORER_TRUSTED_PROXIES lists {name[:60]!r}, which is no address or network "
                    "(write them as 10.0.0.0/8, 192.0.2.7 or private, comma-separated)"
                ) from None
        return cls(trusted=tuple(networks))

    def trusts(self, entry: str) -> bool:
        found = _ip(entry)
        return found is not None and any(found in network for network in self.trusted)

    def client(self, forwarded: Iterable[str], peer: str) -> str:
        """The visitor's address from the X-Forwarded-For entries, left to right, and the socket's peer."""
        if self.hops == 0 or (self.hops is None and not (self.trusted and self.trusts(peer))):
            return peer
        chain = [*_last(forwarded), peer]
        if self.hops is not None:
            return _bare(chain[max(0, len(chain) - 1 - self.hops)])
        for entry in reversed(chain):
            if not self.trusts(entry):
                return _bare(entry)
        return _bare(chain[0])


NO_PROXY = Proxies()


def address_of(
    headers: Mapping[str, str] | Iterable[tuple[str, str]], peer: str | None, proxies: Proxies
) -> str:
    """The client's address from a request's headers (a mapping, or (name, value) pairs where one header
    may come several times) and its socket's peer host."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    forwarded = ",".join(v for k, v in pairs if k.lower() == "x-forwarded-for")
    entries = [e.strip() for e in forwarded.split(",")]
    return proxies.client([e for e in entries if e], peer or "")[:MAX_ADDRESS_CHARS]


def address(request, proxies: Proxies) -> str:
    """The visitor's address from a gr.Request (or anything with `headers` and `client`); '' for none."""
    if request is None:
        return ""
    client = getattr(request, "client", None)
    headers = request.headers
    raw = getattr(headers, "raw", None)  # starlette's Headers: every header as sent, repeats included
    pairs = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in raw] if raw is not None else headers
    return address_of(pairs, client.host if client else None, proxies)


def visitor(request, proxies: Proxies) -> Visitor:
    """The visitor of a gr.Request: its address and its page's session."""
    session = getattr(request, "session_hash", None) or ""
    return Visitor(address(request, proxies), str(session)[:MAX_SESSION_CHARS])


def _last(entries: Iterable[str]) -> list[str]:
    entries = list(entries)
    return [e[:MAX_ADDRESS_CHARS] for e in entries[-MAX_FORWARDED_ENTRIES:]]


def _bare(entry: str) -> str:
    """An entry as the address alone (one visitor whichever port each connection came from)."""
    found = _ip(entry)
    return str(found) if found is not None else entry


def _ip(entry: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An entry as an address: bare, `[v6]:port` or `v4:port`; None for anything else."""
    text = entry.strip()
    if text.startswith("[") and "]" in text:
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:
        text = text.split(":")[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
