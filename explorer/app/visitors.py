"""Who a visitor is, for the limits that count per visitor (model loads, places in the queue, expensive
readings, downloads): the client's address, and the session its page opened.

On a Space every request comes through the hub's proxy, so the address is the first one that proxy reports
in X-Forwarded-For (one a client could forge: each limit also holds per session, or for all visitors
together); elsewhere it is the socket's peer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_ADDRESS_CHARS = 64
MAX_SESSION_CHARS = 128


@dataclass(frozen=True)
class Visitor:
    address: str
    session: str = ""


def address_of(headers: Mapping[str, str], peer: str | None, behind_proxy: bool) -> str:
    """The client's address from a request's headers and its socket's peer host."""
    forwarded = (headers.get("x-forwarded-for") or "") if behind_proxy else ""
    first = forwarded.split(",")[0].strip()
    return first[:MAX_ADDRESS_CHARS] if first else (peer or "")


def address(request, behind_proxy: bool) -> str:
    """The visitor's address from a gr.Request (or anything with `headers` and `client`); '' for none."""
    if request is None:
        return ""
    client = getattr(request, "client", None)
    return address_of(request.headers, client.host if client else None, behind_proxy)


def visitor(request, behind_proxy: bool) -> Visitor:
    """The visitor of a gr.Request: its address and its page's session."""
    session = getattr(request, "session_hash", None) or ""
    return Visitor(address(request, behind_proxy), str(session)[:MAX_SESSION_CHARS])
