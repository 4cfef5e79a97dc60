"""Who a visitor is: behind proxies, the address the nearest trusted proxy added to X-Forwarded-For,
never one the client wrote; with no proxy trusted, the socket's peer, whatever the header says."""

from __future__ import annotations

import ipaddress
import types

import pytest

from explorer.app.policy import Policy
from explorer.app.visitors import NO_PROXY, PRIVATE_NETWORKS, Proxies, address, address_of

SPACE = Proxies(trusted=PRIVATE_NETWORKS)  # a Space's default: its proxies live in private networks
HUB_PROXY = "10.16.3.80"


def forwarded(header: str, peer: str = HUB_PROXY, proxies: Proxies = SPACE) -> str:
    return address_of({"x-forwarded-for": header}, peer, proxies)


def test_behind_a_spaces_proxy_the_address_is_the_entry_the_proxy_appended():
    assert forwarded("203.0.113.7") == "203.0.113.7"
    assert forwarded("203.0.113.7, 10.16.3.81") == "203.0.113.7"  # a second proxy of the platform's


def test_addresses_a_client_writes_into_the_header_change_nothing():
    """The probe sent 50 forged first entries and was 50 visitors; each is now the one it is."""
    forged = {forwarded(f"198.51.100.{i}, 203.0.113.7") for i in range(50)}
    assert forged == {"203.0.113.7"}
    assert forwarded("10.0.0.9, 203.0.113.7") == "203.0.113.7"  # a private entry written by the client
    assert forwarded("not an address, 203.0.113.7") == "203.0.113.7"
    assert forwarded(", ".join(["192.0.2.1"] * 10_000) + ", 203.0.113.7") == "203.0.113.7"


def test_a_request_straight_from_the_internet_is_its_peer_whatever_it_forwards():
    assert forwarded("203.0.113.7", peer="198.51.100.1") == "198.51.100.1"
    assert address_of({"x-forwarded-for": "203.0.113.7"}, "127.0.0.1", NO_PROXY) == "127.0.0.1"


def test_a_number_of_hops_takes_the_entry_the_outermost_proxy_added():
    two = Proxies(hops=2)
    assert forwarded("198.51.100.9, 203.0.113.7, 192.0.2.5", peer="192.0.2.6", proxies=two) == "203.0.113.7"
    assert forwarded("203.0.113.7", peer="192.0.2.6", proxies=Proxies(hops=1)) == "203.0.113.7"
    assert forwarded("203.0.113.7", peer="192.0.2.6", proxies=Proxies(hops=0)) == "192.0.2.6"
    assert forwarded("", peer="192.0.2.6", proxies=two) == "192.0.2.6"  # came round the proxies


def test_repeated_headers_count_as_one_list_and_an_address_is_one_whatever_its_port():
    pairs = [("X-Forwarded-For", "198.51.100.9"), ("x-forwarded-for", "203.0.113.7:51234")]
    assert address_of(pairs, HUB_PROXY, SPACE) == "203.0.113.7"
    assert forwarded("[2001:db8::7]:443, [fd00::1]:80") == "2001:db8::7"


def test_a_gradio_request_is_read_with_every_header_it_carried():
    raw = [(b"x-forwarded-for", b"198.51.100.9"), (b"x-forwarded-for", b"203.0.113.7")]
    headers = types.SimpleNamespace(raw=raw)
    request = types.SimpleNamespace(headers=headers, client=types.SimpleNamespace(host=HUB_PROXY))
    assert address(request, SPACE) == "203.0.113.7"
    assert address(None, SPACE) == ""


def test_the_operators_settings_name_the_proxies_and_a_space_trusts_private_networks_by_default():
    assert Policy.from_environment({"SPACE_ID": "a/b"}).proxies == SPACE
    assert Policy.from_environment({}).proxies == NO_PROXY
    hops = Policy.from_environment({"SPACE_ID": "a/b", "EXPLORER_PROXY_HOPS": "2"}).proxies
    assert hops == Proxies(hops=2)
    listed = Policy.from_environment({"EXPLORER_TRUSTED_PROXIES": "192.0.2.0/24, 2001:db8::1"}).proxies
    assert listed.trusted == (ipaddress.ip_network("192.0.2.0/24"), ipaddress.ip_network("2001:db8::1"))
    with pytest.raises(ValueError, match="EXPLORER_TRUSTED_PROXIES lists 'a proxy'"):
        Proxies.parse(trusted="a proxy")
    with pytest.raises(ValueError, match="EXPLORER_PROXY_HOPS must be a whole number"):
        Proxies.parse(hops="-1")
