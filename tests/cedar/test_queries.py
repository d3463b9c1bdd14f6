"""QUERY_STARTD_ADS and QUERY_MULTIPLE_ADS with the ``htcondor`` wheel as the client, against the listener
with a stand-in daemon (command_query_ads, condor_startd.V6/command.cpp; ResMgr::makeAdList).
"""

from __future__ import annotations

import socket
import struct

import pytest

from cedarkit import QUERY, Client, ServerThread

from startd.cedar.classad_wire import get_classad, put_classad
from startd.cedar.codec import Decoder, Encoder
from startd.classad import ClassAd


def test_query_with_constraint_and_projection_several_times_in_one_process(cedar_server, client: Client) -> None:
    """Collector(addr).query(AdTypes.Startd, constraint, projection): the constraint is the query's
    Requirements (IsAConstraintMatch), the projection is honoured; the second and third calls of the
    process resume the session the first made (the client keeps it for every ValidCommands entry)."""
    server: ServerThread = cedar_server()
    out = client.run(QUERY + f"""
addr = {server.address!r}
result = [query(addr, 'State == "Unclaimed"', ["Name", "Memory"]) for _ in range(3)]
""")
    expected = [{"Name": "slot1@host.test", "Memory": 1024}, {"Name": "slot3@host.test", "Memory": 3072}]
    assert out == [expected, expected, expected]
    assert server.server.served == 3
    assert len(server.server.sessions) == 1  # one session, resumed twice


def test_query_never_sends_private_attributes(cedar_server, client: Client) -> None:
    """putClassAd(PUT_CLASSAD_NO_PRIVATE): ClaimId and _condor_priv* stay home; the rest, expressions
    included, arrives."""
    server = cedar_server()
    out = client.run(QUERY + f"result = query({server.address!r})")
    assert [a["Name"] for a in out] == ["slot1@host.test", "slot2@host.test", "slot3@host.test"]
    for ad in out:
        assert not {"ClaimId", "_condor_privSecret"} & set(ad)
        assert ad["Rank"] == "Memory * 2"


def test_query_with_every_client_security_knob_never(cedar_server, client: Client) -> None:
    """_CONDOR_SEC_CLIENT_{AUTHENTICATION,ENCRYPTION,INTEGRITY}=NEVER: the server's READ policy (OPTIONAL)
    agrees; the answer is the same, call after call."""
    server = cedar_server()
    out = client.run(QUERY + f"result = [query({server.address!r}, 'Cpus == 1', ['Name']) for _ in range(2)]",
                     SEC_CLIENT_AUTHENTICATION="NEVER", SEC_CLIENT_ENCRYPTION="NEVER", SEC_CLIENT_INTEGRITY="NEVER")
    names = [{"Name": f"slot{i}@host.test"} for i in (1, 2, 3)]
    assert out == [names, names]


def test_query_without_negotiation_is_the_bare_command(cedar_server, client: Client) -> None:
    """SEC_CLIENT_NEGOTIATION=NEVER: the client sends the command's number and the query ad in one message,
    no DC_AUTHENTICATE; the server answers it unauthenticated (ReadCommand's old-school path)."""
    server = cedar_server()
    out = client.run(QUERY + f"result = query({server.address!r}, 'Memory > 2000', ['Name'])",
                     SEC_CLIENT_NEGOTIATION="NEVER")
    assert out == [{"Name": "slot2@host.test"}, {"Name": "slot3@host.test"}]
    assert len(server.server.sessions) == 0


def test_bare_query_refused_when_the_level_requires_negotiation(cedar_server, client: Client) -> None:
    """VerifyCommand: an unauthenticated, unnegotiated command is refused when SEC_READ_NEGOTIATION (or a
    requirement it is raised by) is REQUIRED."""
    server = cedar_server("SEC_READ_NEGOTIATION = REQUIRED\n")
    out = client.run(QUERY + f"result = query({server.address!r})", SEC_CLIENT_NEGOTIATION="NEVER")
    assert isinstance(out, str) and out.startswith("error")
    assert server.backend.commands == []


def test_query_through_a_relay_shows_no_slot_name_in_the_clear(cedar_server, client: Client, relay) -> None:
    """By default the client offers an ECDH key and the server answers it (DaemonCommandProtocol: a 9.0+
    daemon keys every connection whose client offers one), so the query and its answer travel under
    AES-GCM: no slot name, no attribute name of the ads, crosses the relay in the clear."""
    server = cedar_server()
    r = relay(server.port)
    out = client.run(QUERY + f"result = [query({r.address!r}, 'true', ['Name', 'State']) for _ in range(2)]")
    assert [a["Name"] for a in out[0]] == ["slot1@host.test", "slot2@host.test", "slot3@host.test"]
    wire = bytes(r.to_server) + bytes(r.to_client)
    assert b"ECDHPublicKey" in wire  # the handshake itself is in the clear, as in HTCondor
    for secret in (b"slot1", b"slot2", b"host.test", b"Unclaimed", b"State", b"Memory"):
        assert secret not in wire, secret


def test_start_daemon_ad_by_query_multiple(cedar_server, client: Client) -> None:
    """AdTypes.StartDaemon is QUERY_MULTIPLE_ADS with TargetType "StartD" (STARTD_DAEMON_ADTYPE): the daemon
    ad alone (makeAdList)."""
    server = cedar_server()
    out = client.run(QUERY + f"result = query({server.address!r}, ad_type=htcondor2.AdTypes.StartDaemon)")
    assert [a.get("MyType") for a in out] == ["StartD"]


def _bare(port: int, number: int, payload: ClassAd) -> list[ClassAd]:
    """A hand-written client of the bare path: the number and the query ad in one message; the ads read
    back until the 0 that ends them."""
    enc = Encoder(False).put_int(number)
    put_classad(enc, payload)
    body = enc.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">Bi", 1, len(body)) + body)
        data = b""
        ads: list[ClassAd] = []
        while True:
            header = _recv(s, 5)
            data += _recv(s, struct.unpack(">i", header[1:])[0])
            if header[0]:
                break
    dec = Decoder(data, False)
    while dec.get_int():
        ads.append(get_classad(dec))
    assert dec.at_end()
    return ads


def _recv(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "the server closed the connection"
        out += chunk
    return out


def test_limit_results_caps_the_ads_sent(cedar_server) -> None:
    """makeAdList: LimitResults stops the walk once that many ads matched."""
    server = cedar_server()
    q = ClassAd({"MyType": "Query", "TargetType": "Machine", "LimitResults": 2})
    q.set_expr("Requirements", "Cpus == 1")
    assert [a.evaluate("Name") for a in _bare(server.port, 5, q)] == ["slot1@host.test", "slot2@host.test"]


def test_projection_brings_the_attributes_its_expressions_refer_to(cedar_server) -> None:
    """putClassAd expands the whitelist with GetInternalReferences: Rank = Memory * 2 brings Memory."""
    server = cedar_server()
    q = ClassAd({"MyType": "Query", "TargetType": "Machine", "Projection": "Name Rank"})
    q.set_expr("Requirements", 'Name == "slot1@host.test"')
    [ad] = _bare(server.port, 5, q)
    assert sorted(ad) == ["Memory", "Name", "Rank"]
    assert ad.evaluate("Rank") == 2048


def test_a_constraint_refers_to_the_slot_as_target(cedar_server) -> None:
    """IsAConstraintMatch evaluates the query's Requirements with the query as MY: TARGET.x is the slot's,
    MY.x the query's."""
    server = cedar_server()
    q = ClassAd({"MyType": "Query", "TargetType": "Machine", "Wanted": 2048})
    q.set_expr("Requirements", "TARGET.Memory == MY.Wanted")
    assert [a.evaluate("Name") for a in _bare(server.port, 5, q)] == ["slot2@host.test"]


def test_a_long_constraint_is_read_and_answered(cedar_server, client: Client) -> None:
    """A query ad of some 100 KiB (a constraint naming thousands of slots) is read off the event loop's turn
    and answered like any other; before authorization (a bare command) a message that large is refused."""
    server = cedar_server()
    constraint = " || ".join(f'Name == "slot{i}@host.test"' for i in range(3, 3500))
    out = client.run(QUERY + f"result = query({server.address!r}, {constraint!r}, ['Name'])")
    assert out == [{"Name": "slot3@host.test"}]
    q = ClassAd({"MyType": "Query", "TargetType": "Machine"})
    q.set_expr("Requirements", constraint)
    with pytest.raises(AssertionError, match="closed the connection"):
        _bare(server.port, 5, q)
