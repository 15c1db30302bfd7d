"""[auth]: whether clients are authenticated, and the credentials they may sign with.

::

    [auth]
    mode = "sigv4"                    # "off" (the default): any credentials work, nothing is checked
    [[auth.credentials]]
    access-key-id = "AKIAEXAMPLE1"
    secret-access-key = "..."         # or secret-access-key-file = "key.txt" (relative to the file)
    account-id = "111111111111"       # the account this key acts as
    session-token = "..."             # optional: temporary credentials; requests must carry it

Each key acts as one account: the account's namespace holds the queues it creates and names in
its queue URLs and ARNs, and another account's queues are reachable only where their Policy
grants it (storage/access.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

MODES = ("off", "sigv4")
_KEYS = {"access-key-id", "secret-access-key", "secret-access-key-file", "account-id", "session-token"}
_ACCOUNT = re.compile(r"[0-9]{12}")


class AuthConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Credential:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    account_id: str
    session_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Auth:
    mode: str = "off"
    credentials: tuple[Credential, ...] = ()

    @property
    def enabled(self) -> bool:
        return self.mode == "sigv4"

    @classmethod
    def from_dict(cls, doc: Any, where: str, base_dir: Path | None) -> "Auth":
        if not isinstance(doc, Mapping):
            raise AuthConfigError(f"{where}: expected a table")
        unknown = sorted(set(doc) - {"mode", "credentials"})
        if unknown:
            raise AuthConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
        mode = doc.get("mode", "off")
        if mode not in MODES:
            raise AuthConfigError(f"{where}: mode {mode!r} is not one of {', '.join(MODES)}")
        entries = doc.get("credentials", [])
        if not isinstance(entries, list):
            raise AuthConfigError(f"{where}: credentials must be an array of tables ([[auth.credentials]])")
        creds = tuple(_credential(e, f"{where}.credentials[{i}]", base_dir) for i, e in enumerate(entries))
        ids = [c.access_key_id for c in creds]
        if len(set(ids)) != len(ids):
            raise AuthConfigError(f"{where}: an access-key-id is listed twice")
        if mode == "sigv4" and not creds:
            raise AuthConfigError(f"{where}: mode = \"sigv4\" needs at least one [[auth.credentials]]")
        return cls(mode, creds)


def _credential(doc: Any, where: str, base_dir: Path | None) -> Credential:
    if not isinstance(doc, Mapping):
        raise AuthConfigError(f"{where}: expected a table")
    unknown = sorted(set(doc) - _KEYS)
    if unknown:
        raise AuthConfigError(f"{where}: unknown key(s) {', '.join(unknown)}")
    for k, v in doc.items():
        if not isinstance(v, str) or not v:
            raise AuthConfigError(f"{where}: {k} must be a non-empty string")
    secret = doc.get("secret-access-key")
    secret_file = doc.get("secret-access-key-file")
    if (secret is None) == (secret_file is None):
        raise AuthConfigError(f"{where}: needs exactly one of secret-access-key and secret-access-key-file")
    if secret_file is not None:
        path = Path(secret_file)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        try:
            secret = path.read_text().strip()
        except OSError as e:
            raise AuthConfigError(f"{where}: secret-access-key-file: {e}") from None
    for k in ("access-key-id", "account-id"):
        if k not in doc:
            raise AuthConfigError(f"{where}: {k} is required")
    if not _ACCOUNT.fullmatch(doc["account-id"]):
        raise AuthConfigError(f"{where}: account-id must be 12 digits, as AWS account ids are")
    return Credential(doc["access-key-id"], secret, doc["account-id"], doc.get("session-token"))
