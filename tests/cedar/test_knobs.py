"""The knobs of the daemon's CEDAR listener (startd.daemon.cedar_wire): where it listens and what bounds it."""

from __future__ import annotations

import ipaddress

import pytest

from startd import config
from startd.cedar import sinful
from startd.daemon import cedar_wire


def _conf(text: str = "") -> config.Config:
    return config.load(text=text)


def test_network_interface_unset_means_loopback() -> None:
    """HTCondor's NETWORK_INTERFACE defaults to *; this daemon listens on 127.0.0.1 unless it is configured."""
    conf = _conf()
    assert conf.get("NETWORK_INTERFACE") == "*"
    assert cedar_wire.listen_address(conf, conf) == ("127.0.0.1", "127.0.0.1")


def test_network_interface_an_address_every_interface_a_pattern() -> None:
    """An address; 0.0.0.0 for every interface (``*`` is HTCondor's default, which a configuration cannot tell
    from no setting: MacroSet.define does not store a value equal to the default); a pattern."""
    conf = _conf("NETWORK_INTERFACE = 127.0.0.1\n")
    assert cedar_wire.listen_address(conf, conf) == ("127.0.0.1", "127.0.0.1")
    conf = _conf("NETWORK_INTERFACE = *\n")
    assert cedar_wire.listen_address(conf, conf) == ("127.0.0.1", "127.0.0.1")
    conf = _conf("NETWORK_INTERFACE = 0.0.0.0\n")
    bind, advertised = cedar_wire.listen_address(conf, conf)
    assert bind == "0.0.0.0"
    assert advertised == "127.0.0.1" or not ipaddress.ip_address(advertised).is_loopback
    conf = _conf("NETWORK_INTERFACE = 127.0.*\n")
    assert cedar_wire.listen_address(conf, conf) == ("127.0.0.1", "127.0.0.1")
    conf = _conf("NETWORK_INTERFACE = 203.0.113.*\n")
    with pytest.raises(ValueError, match=r"^NETWORK_INTERFACE: '203.0.113.\*' matches no address"):
        cedar_wire.listen_address(conf, conf)


@pytest.mark.parametrize("text,port", [("", 0), ("STARTD_CEDAR_PORT = 0\n", 0), ("STARTD_CEDAR_PORT = 9618\n", 9618),
                                       ("STARTD_CEDAR_PORT = -1\n", None)])
def test_startd_cedar_port(text: str, port: int | None) -> None:
    """Unset or 0: a free port; -1: no listener."""
    assert cedar_wire._port(_conf(text)) == port


@pytest.mark.parametrize("text,message", [
    ("STARTD_CEDAR_PORT = many\n", "STARTD_CEDAR_PORT: expected a port number, 0 or -1, got 'many'"),
    ("STARTD_CEDAR_PORT = 70000\n", "STARTD_CEDAR_PORT: 70000 is not a port number"),
])
def test_a_bad_port_is_an_error_naming_the_knob(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        cedar_wire._port(_conf(text))
    assert str(info.value).startswith(message)


def test_read_timeout_and_connection_cap_defaults_and_bad_values() -> None:
    conf = _conf()
    assert cedar_wire._positive(conf, "STARTD_CEDAR_READ_TIMEOUT", 20.0, float) == 20.0
    assert cedar_wire._positive(conf, "STARTD_CEDAR_MAX_CONNECTIONS", 64, int) == 64
    conf = _conf("STARTD_CEDAR_READ_TIMEOUT = 2.5\nSTARTD_CEDAR_MAX_CONNECTIONS = 0\n")
    assert cedar_wire._positive(conf, "STARTD_CEDAR_READ_TIMEOUT", 20.0, float) == 2.5
    with pytest.raises(ValueError, match="STARTD_CEDAR_MAX_CONNECTIONS: 0 must be positive"):
        cedar_wire._positive(conf, "STARTD_CEDAR_MAX_CONNECTIONS", 64, int)


def test_the_sinful_string_the_bindings_parse() -> None:
    """Sinful::regenerateSinfulString: <ip:port?addrs=ip-port&noUDP>, IPv6 in brackets, its colons as
    dashes in addrs (to_ccb_safe_string)."""
    assert sinful("127.0.0.1", 9618) == "<127.0.0.1:9618?addrs=127.0.0.1-9618&noUDP>"
    assert sinful("::1", 9618) == "<[::1]:9618?addrs=[--1]-9618&noUDP>"
