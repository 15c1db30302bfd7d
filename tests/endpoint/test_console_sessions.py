"""The console's sessions and request checks without HTTP (elasticmq_py/dashboard/console/
sessions.py and guard.py): ids and tokens, expiry, the login brake, cookies and origins."""

from __future__ import annotations

import pytest

from elasticmq_py.dashboard.console import guard
from elasticmq_py.dashboard.console.sessions import FAILURE_WINDOW_S, MAX_FAILURES, SESSION_TTL_S, Sessions

SECRET = "s" * 20


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_session_has_random_ids_and_tokens_and_an_absolute_expiry():
    now = Clock()
    s = Sessions(SECRET, now)
    a, b = s.login(SECRET, "10.0.0.1"), s.login(SECRET, "10.0.0.1")
    assert a is not None and b is not None
    assert len({a[0], b[0], a[1].csrf, b[1].csrf}) == 4 and all(len(x) >= 40 for x in (a[0], a[1].csrf))
    assert a[1].expires == now.t + SESSION_TTL_S and a[1].peer == "10.0.0.1"
    assert s.get(a[0]) is a[1] and s.get("forged") is None and s.get(None) is None
    now.t += SESSION_TTL_S - 1
    assert s.get(a[0]) is a[1], "using a session does not extend it"
    now.t += 1
    assert s.get(a[0]) is None and s.get(b[0]) is None
    s.logout(a[0])   # already gone: no error


def test_logout_forgets_the_session():
    s = Sessions(SECRET, Clock())
    sid, _ = s.login(SECRET, None)
    s.logout(sid)
    assert s.get(sid) is None


def test_without_a_secret_nobody_logs_in():
    s = Sessions(None, Clock())
    assert not s.writable and s.login("", None) is None and s.login(SECRET, None) is None


def test_failed_logins_brake_one_address_for_a_minute():
    now = Clock()
    s = Sessions(SECRET, now)
    for _ in range(MAX_FAILURES):
        assert not s.throttled("10.0.0.1")
        assert s.login("wrong", "10.0.0.1") is None
    assert s.throttled("10.0.0.1") and not s.throttled("10.0.0.2")
    now.t += FAILURE_WINDOW_S
    assert not s.throttled("10.0.0.1")
    s.login("wrong", "10.0.0.1")
    assert s.login(SECRET, "10.0.0.1") is not None
    assert not s.throttled("10.0.0.1"), "a success clears the count"


def test_the_cookie():
    assert guard.set_cookie("abc", 3600, False) == "elasticmq_console=abc; Max-Age=3600; Path=/ui; HttpOnly; SameSite=Strict"
    assert guard.set_cookie("abc", 3600, True).endswith("; SameSite=Strict; Secure")
    assert guard.clear_cookie(False).startswith("elasticmq_console=; Max-Age=0;")
    assert guard.session_id({"cookie": "a=1; elasticmq_console=xyz_-9; b=2"}) == "xyz_-9"
    assert guard.session_id({"cookie": "a=1"}) is None and guard.session_id({}) is None
    assert guard.session_id({"cookie": 'bad"cookie'}) is None


@pytest.mark.parametrize("headers, foreign", [
    ({"host": "h:9324"}, False),                                             # curl: no browser, no forgery
    ({"host": "h:9324", "origin": "http://h:9324", "sec-fetch-site": "same-origin"}, False),
    ({"host": "h:9324", "origin": "https://H:9324"}, False),                 # TLS ended by a proxy in front
    ({"host": "h:9324", "origin": "http://evil:9324"}, True),
    ({"host": "h:9324", "origin": "http://h:9325"}, True),
    ({"host": "h:9324", "origin": "null"}, True),                            # a sandboxed or file: page
    ({"origin": "http://h:9324"}, True),                                     # no Host to compare with
    ({"host": "h:9324", "sec-fetch-site": "cross-site"}, True),
    ({"host": "h:9324", "sec-fetch-site": "same-site"}, True),               # a sibling subdomain is another origin
    ({"host": "h:9324", "sec-fetch-site": "none"}, True),                    # typed into the address bar: no action does that
])
def test_origins(headers, foreign):
    assert (guard.foreign_origin(headers) is not None) is foreign
