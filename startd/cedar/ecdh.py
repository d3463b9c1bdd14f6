"""The session key of a CEDAR connection: ECDH on P-256, then HKDF (condor_io/condor_secman.cpp).

``SecMan::GenerateKeyExchange`` makes a P-256 key pair; ``EncodePubkey`` sends its public half as the
base64 of the uncompressed point (``i2d_PublicKey``); ``FinishKeyExchange`` derives the shared secret
with the peer's and turns it into the key with ``Condor_Crypt_Base::hkdf``: HKDF-SHA256, salt
"htcondor", info "keygen", 32 bytes for AES-GCM (condor_io/condor_crypt.cpp).
"""

from __future__ import annotations

import base64
import binascii

from .framing import CedarError

__all__ = ["KeyExchange", "SESSION_KEY_BYTES", "hkdf_by_library"]

#: SEC_SESSION_KEY_LENGTH_V9: an AES-256 key
SESSION_KEY_BYTES = 32
# an uncompressed P-256 point is 65 bytes; base64 of anything much longer is not one
_MAX_ENCODED = 256


class KeyExchange:
    """This side's half of one key exchange."""

    def __init__(self) -> None:
        # lazy: the crypto library is loaded by the first CEDAR key exchange, not by every daemon at start
        from cryptography.hazmat.primitives.asymmetric import ec

        self._private = ec.generate_private_key(ec.SECP256R1())

    @property
    def public(self) -> str:
        """The public key as ``ECDHPublicKey`` carries it."""
        from cryptography.hazmat.primitives import serialization  # lazy: loaded with the exchange (__init__)

        point = self._private.public_key().public_bytes(serialization.Encoding.X962,
                                                         serialization.PublicFormat.UncompressedPoint)
        return base64.b64encode(point).decode("ascii")

    def session_key(self, peer: str) -> bytes:
        """The 32-byte AES-GCM key shared with the peer whose public key is ``peer``. Raises
        :class:`CedarError` for a key that is not a point of P-256."""
        from cryptography.hazmat.primitives.asymmetric import ec  # lazy: loaded with the exchange (__init__)

        if not isinstance(peer, str) or not peer or len(peer) > _MAX_ENCODED:
            raise CedarError("the peer's ECDHPublicKey is not a P-256 public key")
        try:
            point = base64.b64decode("".join(peer.split()), validate=True)
            public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
        except (binascii.Error, ValueError):
            raise CedarError("the peer's ECDHPublicKey is not a P-256 public key") from None
        secret = self._private.exchange(ec.ECDH(), public)
        return hkdf_by_library(secret, salt=b"htcondor", info=b"keygen", length=SESSION_KEY_BYTES)


def hkdf_by_library(secret: bytes, *, salt: bytes, info: bytes, length: int = 32) -> bytes:
    """Condor_Crypt_Base::hkdf: HKDF-SHA256 by the crypto library, which a CEDAR session loads anyway (its
    key exchange needs it); imported here, at the first session, not at start. (The MQTT token path, which
    must not load the library, derives with ``startd.security.keys.hkdf_sha256``.)"""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(secret)
