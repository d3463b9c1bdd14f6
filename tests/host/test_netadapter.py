"""The primary network adapter as NetworkAdapterBase::publish describes it (HardwareAddress, SubnetMask)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from startd.host.netadapter import adapter_facts, primary_ipv4


def _entry(family: int, address: str, netmask: str | None = None) -> SimpleNamespace:
    return SimpleNamespace(family=family, address=address, netmask=netmask)


def test_the_adapter_holding_the_primary_address_gives_its_mac_and_netmask() -> None:
    """NetworkAdapterBase::publish: the hardware address and subnet mask of the primary adapter."""
    packet = getattr(socket, "AF_PACKET", 17)
    addrs = {"lo": [_entry(socket.AF_INET, "127.0.0.1", "255.0.0.0"), _entry(packet, "00:00:00:00:00:00")],
             "eth0": [_entry(socket.AF_INET, "10.1.2.3", "255.255.255.0"), _entry(packet, "02:42:ac:11:00:02")]}
    assert adapter_facts(addrs, "10.1.2.3") == {"SubnetMask": "255.255.255.0", "HardwareAddress": "02:42:ac:11:00:02"}


def test_no_adapter_holding_the_address_publishes_nothing() -> None:
    """Without a primary adapter the HibernationManager publishes no adapter attributes."""
    assert adapter_facts({"lo": [_entry(socket.AF_INET, "127.0.0.1", "255.0.0.0")]}, "10.9.9.9") == {}


def test_this_machine_has_a_primary_address() -> None:
    ip = primary_ipv4()
    assert ip is not None and socket.inet_aton(ip)
