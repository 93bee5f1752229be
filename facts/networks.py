"""Which address ranges are "the internet": a list of CIDRs that together cover every
publicly routable address opens a door to the whole internet, however it is split
(`0.0.0.0/1` + `128.0.0.0/1` is `0.0.0.0/0`).

Ranges that are not publicly routable, from the IANA special-purpose address registries
(https://www.iana.org/assignments/iana-ipv4-special-registry/ and
https://www.iana.org/assignments/iana-ipv6-special-registry/, entries with "Globally
Reachable: False"), plus IPv4 multicast (224.0.0.0/4, never a source address) and, for IPv6,
everything outside the global unicast space 2000::/3 (IANA IPv6 Address Space registry).
Python's `ipaddress` implements the same registries; tests/unit/test_policy_networks.py holds
this list against it (and says where and why they differ).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

IPv4Net = ipaddress.IPv4Network
IPv6Net = ipaddress.IPv6Network

NOT_PUBLIC_V4 = (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8",  # private use
    "100.64.0.0/10",  # shared address space (carrier-grade NAT)
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link local
    "172.16.0.0/12",  # private use
    "192.0.0.0/24",  # IETF protocol assignments
    "192.0.2.0/24",  # documentation (TEST-NET-1)
    "192.168.0.0/16",  # private use
    "198.18.0.0/15",  # benchmarking
    "198.51.100.0/24",  # documentation (TEST-NET-2)
    "203.0.113.0/24",  # documentation (TEST-NET-3)
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, limited broadcast
)
NOT_PUBLIC_V6 = (
    "::/3",  # outside global unicast: unspecified, loopback, IPv4-mapped, discard-only...
    "4000::/2",
    "8000::/1",  # ...unique local fc00::/7, link local fe80::/10, multicast ff00::/8
    "2001::/23",  # IETF protocol assignments
    "2001:db8::/32",  # documentation
    "3fff::/20",  # documentation (RFC 9637)
)

_WORLD: dict[int, IPv4Net | IPv6Net] = {4: IPv4Net("0.0.0.0/0"), 6: IPv6Net("::/0")}
_NOT_PUBLIC: dict[int, list[IPv4Net | IPv6Net]] = {
    4: [IPv4Net(c) for c in NOT_PUBLIC_V4],
    6: [IPv6Net(c) for c in NOT_PUBLIC_V6],
}
MAX_CIDRS = 10_000
"""Far more CIDRs than any AWS list holds: beyond it the answer is "treat it as the internet"
rather than unbounded work."""


def parse_cidr(cidr: object) -> IPv4Net | IPv6Net | None:
    """A CIDR string as a network (host bits ignored, as AWS reads it), or None."""
    if not isinstance(cidr, str):
        return None
    try:
        return ipaddress.ip_network(cidr.strip(), strict=False)
    except ValueError:
        return None


def _uncovered(world: IPv4Net | IPv6Net, nets: list[IPv4Net | IPv6Net]) -> list[IPv4Net | IPv6Net]:
    """The parts of `world` none of `nets` (one IP version) covers, as CIDRs."""
    gaps: list[IPv4Net | IPv6Net] = []
    address = type(world.network_address)
    nxt = int(world.network_address)
    for net in ipaddress.collapse_addresses(nets):  # type: ignore[type-var]  # sorted, merged, non-overlapping
        first = int(net.network_address)
        if first > nxt:
            gaps.extend(ipaddress.summarize_address_range(address(nxt), address(first - 1)))
        nxt = max(nxt, int(net.broadcast_address) + 1)
    last = int(world.broadcast_address)
    if nxt <= last:
        gaps.extend(ipaddress.summarize_address_range(address(nxt), address(last)))
    return gaps


def covers_internet(cidrs: Iterable[object]) -> bool:
    """True when the CIDRs, taken together, include every publicly routable IPv4 address or
    every publicly routable IPv6 address."""
    nets = [n for n in (parse_cidr(c) for c in cidrs) if n is not None]
    if len(nets) > MAX_CIDRS:
        return True
    for version, world in _WORLD.items():
        mine = [n for n in nets if n.version == version]
        if not mine:
            continue
        gaps = _uncovered(world, mine)
        if all(any(gap.subnet_of(p) for p in _NOT_PUBLIC[version]) for gap in gaps):  # type: ignore[arg-type]
            return True
    return False


PRIVATE_USE_V4 = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
"""RFC 1918 private-use space: what the VPC user guide (vpc-cidr-blocks) asks a VPC to take."""
NEVER_A_PEER_V4 = {
    "0.0.0.0/8": "'this network'",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved",
}
"""Ranges no packet reaching a VPC or an API endpoint comes from: not forwardable beyond their
link or host (IANA IPv4 special-purpose registry: 0/8, 127/8, 169.254/16 have Forwardable False;
240/4 is reserved) or never a source address (multicast, RFC 1112). A CIDR inside one admits
nobody; a VPC or subnet cannot use them."""


def never_a_peer(cidr: str) -> str | None:
    """The kind of range (`loopback`, ...) a CIDR lies in, when no peer can have its addresses."""
    net = parse_cidr(cidr)
    if not isinstance(net, IPv4Net):
        return None
    for block, kind in NEVER_A_PEER_V4.items():
        if net.subnet_of(IPv4Net(block)):
            return kind
    return None


def private_use(cidr: str) -> bool:
    """The CIDR lies in RFC 1918 private-use space."""
    net = parse_cidr(cidr)
    return isinstance(net, IPv4Net) and any(net.subnet_of(IPv4Net(block)) for block in PRIVATE_USE_V4)
