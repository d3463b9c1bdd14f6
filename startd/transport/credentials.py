"""What a client command signs its commands with, found as HTCondor's tools find it.

HTCondor's clients try their authentication methods in order (SEC_DEFAULT_AUTHENTICATION_METHODS,
``FS,TOKEN`` first): FS proves the Unix user to a daemon on the same machine by a file only that user can
make; a token proves whatever identity it names. Over MQTT the daemon cannot see a file the client makes,
so the FS method is carried over as what it amounts to: a client that can read the pool signing key (root
on the machine, or the daemon's own account in a container) signs for its own Unix user,
``<user>@$(UID_DOMAIN)`` (Condor_Auth_FS sets the remote domain to the local UID_DOMAIN), with a token it
mints for a few minutes and never writes down. Any other client uses the first IDTOKEN of its token
directories issued by this pool (``TRUST_DOMAIN``); without one its commands are unauthenticated.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Any

from ..security.keys import SigningKeyError, find_signing_key
from ..security.tokens import mint, pick_token

#: How long a token minted for one client command lives (seconds)
FS_TOKEN_LIFETIME = 300


@dataclass(frozen=True)
class ClientCredentials:
    """The token a client signs with (None: none) and how it was found, for messages."""

    token: str | None
    how: str  # "signing key <path>", "token file", or "none"


def issuer_of(conf: Any) -> str:
    """The pool's token issuer: TRUST_DOMAIN (default $(UID_DOMAIN))."""
    return (conf.get("TRUST_DOMAIN") or conf.get("UID_DOMAIN") or "").strip()


def _unix_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def client_credentials(conf: Any) -> ClientCredentials:
    """The credentials a client command uses with configuration ``conf``. Raises ValueError (one line,
    naming the file) when the signing key it can read is not kept safely."""
    issuer = issuer_of(conf)
    try:
        found = find_signing_key(conf)
    except SigningKeyError as e:
        raise ValueError(str(e)) from None
    if found is not None and issuer:
        path, key = found
        domain = (conf.get("UID_DOMAIN") or "").strip() or "unmapped"
        token = mint(key, identity=f"{_unix_user()}@{domain}", issuer=issuer, lifetime=FS_TOKEN_LIFETIME)
        return ClientCredentials(token, f"signing key {path}")
    token = pick_token(conf, issuer=issuer) if issuer else None
    if token is not None:
        return ClientCredentials(token, "token file")
    return ClientCredentials(None, "none")
