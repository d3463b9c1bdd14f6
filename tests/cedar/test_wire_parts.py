"""The pieces of the CEDAR wire, each against its C++ original: ReliSock's packets and AES-GCM
(reli_sock.cpp, condor_crypt_aesgcm.cpp), the stream encoding (stream.cpp), the policy table
(SecMan::ReconcileSecurityAttribute, ReconcileSecurityDependency) and the command table.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from startd import config
from startd.cedar.codec import Decoder, Encoder
from startd.cedar.commands import COMMANDS, valid_commands
from startd.cedar.framing import CedarError, Channel
from startd.cedar.policy import ServerPolicy, _act, reconcile
from startd.classad import ClassAd
from startd.security.authz import AuthorizationTable, Level, Requirement
from startd.transport.broker_users import COMMAND_PERMISSIONS

R, P, O, N = Requirement.REQUIRED, Requirement.PREFERRED, Requirement.OPTIONAL, Requirement.NEVER


# --- the stream encoding -----------------------------------------------------------------------------------


def test_integers_travel_as_eight_bytes_and_an_int_keeps_its_low_32_bits() -> None:
    """Stream::put(int) sends a long long; Stream::get(int&) casts it back: (int) ll."""
    data = Encoder(False).put_int(5).put_int(-1).put_int((1 << 32) + 7).getvalue()
    assert data[:8] == b"\0" * 7 + b"\x05" and len(data) == 24
    dec = Decoder(data, False)
    assert (dec.get_int(), dec.get_int(), dec.get_int()) == (5, -1, 7)


def test_strings_in_the_clear_end_with_nul_and_encrypted_ones_carry_their_length() -> None:
    """Stream::put(char const*): the bytes and a NUL; under encryption an int length (the NUL counted) first."""
    assert Encoder(False).put_string("ab").getvalue() == b"ab\0"
    assert Encoder(True).put_string("ab").getvalue() == struct.pack(">q", 3) + b"ab\0"
    assert Decoder(struct.pack(">q", 3) + b"ab\0", True).get_string() == "ab"
    with pytest.raises(CedarError, match="impossible length"):
        Decoder(struct.pack(">q", 1 << 30) + b"ab\0", True).get_string()
    with pytest.raises(CedarError, match="terminating NUL"):
        Decoder(b"abc", False).get_string()
    with pytest.raises(ValueError):
        Encoder(False).put_string("a\0b")


def test_a_double_is_a_scaled_fraction_and_an_exponent() -> None:
    """Stream::put(double): frexp's fraction times FRAC_CONST, then the exponent."""
    dec = Decoder(Encoder(False).put_double(1.5).put_double(-0.25).getvalue(), False)
    assert dec.get_double() == pytest.approx(1.5) and dec.get_double() == pytest.approx(-0.25)


# --- packets and AES-GCM -----------------------------------------------------------------------------------


class _Pair:
    """Two channels on a socket pair; ``raw`` writes bytes to the second one behind the first's back."""

    def __init__(self, a: socket.socket, writers: list[asyncio.StreamWriter], x: Channel, y: Channel) -> None:
        self._a, self._writers, self.x, self.y = a, writers, x, y

    def raw(self, data: bytes) -> None:
        self._a.send(data)

    def close(self) -> None:
        for w in self._writers:  # through the transports, so the loop forgets the sockets first
            w.close()


async def _pair(read_timeout: float = 5.0) -> _Pair:
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    rb, wb = await asyncio.open_connection(sock=b)
    return _Pair(a, [wa, wb], Channel(ra, wa, read_timeout=read_timeout), Channel(rb, wb, read_timeout=read_timeout))


async def test_a_long_message_travels_in_several_packets_and_arrives_whole() -> None:
    """SndMsg: packets with the end flag 0 until the last; RcvMsg hands out the message once it is whole."""
    p = await _pair()
    body = bytes(range(256)) * 4000  # 1 MB: four packets of at most 256 KiB
    _, got = await asyncio.gather(p.x.write_message(body), p.y.read_message(2 << 20))
    assert got == body
    p.close()


async def test_encrypted_packets_carry_the_iv_first_and_authenticate_the_handshake() -> None:
    """condor_crypt_aesgcm.cpp: the first packet each way starts with its 16-byte IV; packet n's IV is the
    first four bytes advanced by n; the first packet's AAD is SHA-256(sent) || SHA-256(received) || header."""
    a, b = socket.socketpair()
    ra, wa = await asyncio.open_connection(sock=a)
    x = Channel(ra, wa, read_timeout=5)
    await x.write_message(b"hello")  # in the clear: digested
    key = bytes(range(32))
    x.start_encryption(key)
    await x.write_message(b"first")
    await x.write_message(b"second")
    b.setblocking(True)
    raw = b""
    while len(raw) < 5 + 5 + 2 * 5 + (16 + 5 + 16) + (5 + 16):
        raw += b.recv(4096)
    clear = raw[:10]
    assert clear == struct.pack(">Bi", 1, 5) + b"hello"
    h1 = raw[10:15]
    assert h1 == struct.pack(">Bi", 1, 16 + 5 + 16)
    iv = raw[15:31]
    sealed1 = raw[31:31 + 21]
    aad = hashlib.sha256(clear).digest() + bytes(32) + h1  # nothing received: 32 zero bytes
    assert AESGCM(key).decrypt(iv, sealed1, aad) == b"first"
    h2 = raw[52:57]
    iv2 = ((int.from_bytes(iv[:4], "big") + 1) & 0xFFFFFFFF).to_bytes(4, "big") + iv[4:]
    assert AESGCM(key).decrypt(iv2, raw[57:57 + 22], h2) == b"second"
    wa.close()
    b.close()


async def test_a_tampered_encrypted_packet_ends_the_connection() -> None:
    """Condor_Crypt_AESGCM::decrypt: a packet whose tag does not check out is refused."""
    p = await _pair()
    p.x.start_encryption(bytes(32))
    p.y.start_encryption(bytes(32))
    await p.x.write_message(b"ok")
    assert await p.y.read_message(1024) == b"ok"
    p.raw(struct.pack(">Bi", 1, 2 + 16) + b"\0" * 18)  # no IV (not the first packet) and a wrong tag
    with pytest.raises(CedarError, match="integrity check"):
        await p.y.read_message(1024)
    p.close()


async def test_packet_headers_are_checked_before_bodies_are_read() -> None:
    """rcv_packet: end flag 0..10, length 1..1 MiB, and here the caller's bound on the whole message."""
    for header, reason in ((struct.pack(">Bi", 11, 5), "unrecognised"), (struct.pack(">Bi", 1, 0), "improperly"),
                           (struct.pack(">Bi", 1, (1 << 20) + 1), "1 MiB"), (struct.pack(">Bi", 1, 5000), "more than")):
        p = await _pair()
        p.raw(header)
        with pytest.raises(CedarError, match=reason):
            await p.y.read_message(4096)
        p.close()


# --- the policy ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cli,srv,act", [
    (R, R, "YES"), (R, P, "YES"), (R, O, "YES"), (R, N, "FAIL"),
    (P, R, "YES"), (P, P, "YES"), (P, O, "YES"), (P, N, "NO"),
    (O, R, "YES"), (O, P, "YES"), (O, O, "NO"), (O, N, "NO"),
    (N, R, "FAIL"), (N, P, "NO"), (N, O, "NO"), (N, N, "NO"),
])
def test_reconcile_security_attribute_table(cli: Requirement, srv: Requirement, act: str) -> None:
    """SecMan::ReconcileSecurityAttribute's table, row by row."""
    assert _act(cli, srv) == act


def _policy(text: str) -> ServerPolicy:
    conf = config.load(text=text)
    return ServerPolicy.from_config(conf, AuthorizationTable.from_config(conf), "td")


def test_authentication_never_turns_encryption_off_and_required_encryption_requires_negotiation() -> None:
    """FillInSecurityPolicyAd's ReconcileSecurityDependency: authentication NEVER makes encryption NEVER;
    encryption REQUIRED raises the older Authentication and the negotiation to REQUIRED."""
    lp = _policy("SEC_READ_AUTHENTICATION = NEVER\nSEC_READ_ENCRYPTION = OPTIONAL\n")[Level.READ]
    assert (lp.authentication, lp.encryption) == (N, N)
    lp = _policy("SEC_READ_AUTHENTICATION = OPTIONAL\nSEC_READ_ENCRYPTION = REQUIRED\n")[Level.READ]
    assert (lp.authentication, lp.authentication_new, lp.negotiation) == (R, O, R)
    assert "SEC_READ_ENCRYPTION" in _policy("SEC_READ_AUTHENTICATION = NEVER\nSEC_READ_ENCRYPTION = REQUIRED\n"
                                            )[Level.READ].invalid


def test_a_client_that_requires_what_the_server_never_does_is_refused() -> None:
    lp = _policy("SEC_READ_ENCRYPTION = NEVER\n")[Level.READ]
    ad = ClassAd({"AuthenticationNew": "OPTIONAL", "Encryption": "REQUIRED", "Integrity": "OPTIONAL"})
    agreed, why = reconcile(ad, lp, "td")
    assert agreed is None and why == "the client's encryption REQUIRED cannot meet SEC_READ_ENCRYPTION = NEVER"


def test_the_agreed_policy_says_what_the_client_reads() -> None:
    """ReconcileSecurityPolicyAds: YES/NO per feature, the methods both sides list in the server's order,
    the shorter session, Enact = YES, the trust domain and the issuer keys for TOKEN."""
    lp = _policy("")[Level.ADMINISTRATOR]
    ad = ClassAd({"Authentication": "OPTIONAL", "AuthenticationNew": "OPTIONAL", "Encryption": "OPTIONAL",
                  "Integrity": "OPTIONAL", "AuthMethods": "FS,TOKEN,KERBEROS", "CryptoMethods": "AES,BLOWFISH,3DES",
                  "SessionDuration": "60", "SessionLease": 3600})
    agreed, _ = reconcile(ad, lp, "td")
    assert agreed is not None
    got = {k: agreed.evaluate(k) for k in agreed}
    assert got == {"Authentication": "YES", "Encryption": "YES", "Integrity": "YES", "AuthMethodsList": "TOKEN",
                   "AuthMethods": "TOKEN", "CryptoMethods": "AES", "CryptoMethodsList": "AES",
                   "SessionDuration": "60", "SessionLease": 3600, "Enact": "YES", "TrustDomain": "td",
                   "IssuerKeys": "POOL"}


# --- the command table ---------------------------------------------------------------------------------------


def test_each_command_has_the_level_of_its_mqtt_twin() -> None:
    """One authorization for both wires: a CEDAR command's level (startd_main.cpp, daemon_core_main.cpp) is
    the level MQTT gives the command it becomes."""
    for c in COMMANDS.values():
        assert c.level.value == COMMAND_PERMISSIONS[c.twin].value, c.name


def test_valid_commands_of_a_level_include_the_levels_it_implies() -> None:
    """GetCommandsInAuthLevel walks DCpermissionHierarchy::nextImplied: ADMINISTRATOR lists READ's commands."""
    admin = valid_commands(Level.ADMINISTRATOR).split(",")
    assert {"5", "53", "512", "513", "60004", "60005"} <= set(admin)
    assert valid_commands(Level.READ).split(",") == ["5", "53"]
