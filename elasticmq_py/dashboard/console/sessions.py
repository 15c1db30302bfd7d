"""Who is logged in to the console: random session ids, each with its expiry and CSRF token, and
a brake on guessing the secret. Sans-I/O: the time is given (``now``, seconds), so tests move it.

A session lives in this node's memory only: a restart, or another member's dashboard, asks for
the secret again. That is the price of keeping no secret-derived token anywhere a browser or a
disk could leak it, and an operator logs in once per incident.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass
from typing import Callable

SESSION_TTL_S = 3600.0      # an absolute lifetime: a forgotten browser tab does not stay armed
MAX_FAILURES = 5            # failed logins from one address within FAILURE_WINDOW_S ...
FAILURE_WINDOW_S = 60.0     # ... refuse its next logins until the window has passed


@dataclass(frozen=True, slots=True)
class Session:
    csrf: str          # sent back by the page in a header with every action
    expires: float     # the ``now`` at which it ends
    peer: str | None   # the address it was opened from, for the audit


class Sessions:
    def __init__(self, secret: str | None, now: Callable[[], float], ttl_s: float = SESSION_TTL_S) -> None:
        self._secret = secret.encode() if secret is not None else None
        self.now = now
        self.ttl_s = ttl_s
        self._by_id: dict[str, Session] = {}
        self._failures: dict[str | None, list[float]] = {}

    @property
    def writable(self) -> bool:
        """False without a secret: nobody can log in, the console is read-only."""
        return self._secret is not None

    def throttled(self, peer: str | None) -> bool:
        """Whether ``peer`` failed MAX_FAILURES logins within the last FAILURE_WINDOW_S."""
        now = self.now()
        recent = [t for t in self._failures.get(peer, ()) if now - t < FAILURE_WINDOW_S]
        if recent:
            self._failures[peer] = recent
        else:
            self._failures.pop(peer, None)
        return len(recent) >= MAX_FAILURES

    def login(self, given: str, peer: str | None) -> tuple[str, Session] | None:
        """A new session's (id, session) when ``given`` is the secret, else None (and counted)."""
        if self._secret is None:
            return None
        if not hmac.compare_digest(given.encode(), self._secret):
            self._failures.setdefault(peer, []).append(self.now())
            return None
        self._failures.pop(peer, None)
        self._expire()
        sid = secrets.token_urlsafe(32)
        session = self._by_id[sid] = Session(secrets.token_urlsafe(32), self.now() + self.ttl_s, peer)
        return sid, session

    def get(self, sid: str | None) -> Session | None:
        """The live session of id ``sid``; an expired one is forgotten."""
        if not sid:
            return None
        session = self._by_id.get(sid)
        if session is not None and session.expires <= self.now():
            del self._by_id[sid]
            return None
        return session

    def logout(self, sid: str) -> None:
        self._by_id.pop(sid, None)

    def _expire(self) -> None:
        now = self.now()
        for sid in [s for s, session in self._by_id.items() if session.expires <= now]:
            del self._by_id[sid]
        for peer in [p for p, ts in self._failures.items() if all(now - t >= FAILURE_WINDOW_S for t in ts)]:
            del self._failures[peer]
