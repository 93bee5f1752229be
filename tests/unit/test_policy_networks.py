"""`facts.networks`: which CIDR lists are the whole internet. The list of ranges that are not
publicly routable is held against Python's `ipaddress`, an independent implementation of the
same IANA special-purpose registries."""

from __future__ import annotations

import ipaddress
import random

import pytest

from facts.networks import NOT_PUBLIC_V4, NOT_PUBLIC_V6, covers_internet

# Where the list and this Python's `ipaddress` (3.11) differ, and why the list is right.
DIFFERENCES = {
    "192.0.0.0/24": "IANA: the whole /24 is not globally reachable but for 192.0.0.9/32 and 192.0.0.10/32; "
    "Python before 3.11.10 lists only 192.0.0.0/29 and 192.0.0.170/31",
    "::/3": "outside 2000::/3, the only global unicast space IANA allocates (IPv6 Address Space registry)",
    "4000::/2": "the same",
    "8000::/1": "the same (unique local, link local and multicast are in it)",
    "3fff::/20": "documentation prefix of RFC 9637 (2024), newer than this Python",
}


@pytest.mark.parametrize("cidr", NOT_PUBLIC_V4 + NOT_PUBLIC_V6)
def test_every_listed_range_is_not_globally_reachable_per_ipaddress(cidr: str):
    net = ipaddress.ip_network(cidr)
    probes = [net.network_address, net.broadcast_address, net.network_address + net.num_addresses // 2]
    if cidr in DIFFERENCES:
        assert any(a.is_global for a in probes), f"{cidr} no longer differs: drop it from DIFFERENCES"
    else:
        assert all(not a.is_global or a.is_multicast for a in probes), cidr


def test_public_addresses_are_outside_every_listed_range():
    rng = random.Random(15)
    nets = [ipaddress.ip_network(c) for c in NOT_PUBLIC_V4 + NOT_PUBLIC_V6 if c not in DIFFERENCES]
    for _ in range(2000):
        a4 = ipaddress.IPv4Address(rng.getrandbits(32))
        a6 = ipaddress.IPv6Address((0x2 << 124) | rng.getrandbits(124))  # 2000::/3, global unicast
        for a in (a4, a6):
            if a.is_global and not a.is_multicast:
                assert not any(a in n for n in nets), a


@pytest.mark.parametrize(
    ("cidrs", "internet"),
    [
        (["0.0.0.0/0"], True),
        (["0.0.0.0/1", "128.0.0.0/1"], True),
        (["128.0.0.0/1", "0.0.0.0/1"], True),
        ([" 0.0.0.0/1", "128.0.0.1/1"], True),  # host bits and spaces, as AWS reads them
        (
            [
                "0.0.0.0/5",
                "8.0.0.0/7",
                "11.0.0.0/8",
                "12.0.0.0/6",
                "16.0.0.0/4",
                "32.0.0.0/3",
                "64.0.0.0/2",
                "128.0.0.0/1",
            ],
            True,
        ),  # all but 10/8
        (["::/0"], True),
        (["2000::/3"], True),
        (["0.0.0.0/1"], False),
        (["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"], False),
        (["2000::/4"], False),
        ([], False),
        (["not a cidr", None, 7], False),
    ],
)
def test_covers_internet(cidrs, internet):
    assert covers_internet(cidrs) is internet


def test_all_but_one_public_block_is_not_the_whole_internet():
    world = ipaddress.ip_network("0.0.0.0/0")
    rest = [str(n) for n in world.address_exclude(ipaddress.ip_network("8.8.8.0/24"))]
    assert covers_internet(rest) is False
    assert covers_internet([*rest, "8.8.8.0/24"]) is True


def test_a_long_list_is_decided_quickly():
    cidrs = [f"{i}.0.0.0/8" for i in range(256)] * 20 + [f"{i:x}::/16" for i in range(1, 5000)]
    assert covers_internet(cidrs) is True
