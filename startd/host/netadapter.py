"""The machine's primary network adapter as HTCondor's NetworkAdapterBase::publish describes it
(HardwareAddress, SubnetMask); the wake-on-LAN figures stay those of an adapter that cannot wake the
machine (the engine publishes them)."""

from __future__ import annotations

import socket
from typing import Any


def primary_ipv4() -> str | None:
    """The address this host would use to reach others: the source address the kernel picks for an
    outbound route (nothing is sent), else the address of the host name."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: routing decision only
            return str(s.getsockname()[0])
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return None


def adapter_facts(addrs: dict[str, list[Any]] | None = None, ip: str | None = None) -> dict[str, str]:
    """HardwareAddress and SubnetMask of the interface that holds ``ip`` (default: the primary IPv4
    address), from ``psutil.net_if_addrs()``-shaped data; empty when no interface holds it."""
    if addrs is None:
        try:
            import psutil

            addrs = psutil.net_if_addrs()
        except Exception:  # psutil reports platform errors with several exception types
            return {}
    ip = ip if ip is not None else primary_ipv4()
    if not ip:
        return {}
    for entries in addrs.values():
        if not any(getattr(e, "family", None) == socket.AF_INET and e.address == ip for e in entries):
            continue
        out: dict[str, str] = {}
        for e in entries:
            if getattr(e, "family", None) == socket.AF_INET and e.address == ip and e.netmask:
                out["SubnetMask"] = e.netmask
            elif getattr(e, "family", None) == getattr(socket, "AF_PACKET", -1) and e.address:
                out["HardwareAddress"] = e.address
        return out
    return {}
