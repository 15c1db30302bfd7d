"""What a browser request must carry to act: the checks against cross-site use, and the cookie.

* The session cookie is ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (a browser sends
  it with no request that another site starts), ``Path=/ui`` (nor to the SQS API), and
  ``Secure`` where the port serves TLS.
* The CSRF token (``CSRF_HEADER``), given to the page at login and by ``GET /ui/api/session``,
  which only a page of this origin can read: a forged form cannot set a header at all.
* The origin: a browser names the page that started a request in ``Origin`` and says in
  ``Sec-Fetch-Site`` whether it is this origin. Either, when sent, must say this origin; a
  request with neither comes from no browser (curl, a script), which cross-site forgery needs.
  Compared with the ``Host`` the browser addressed, by host and port only, so that a proxy that
  terminates TLS in front of the node (an ``https`` origin, an ``http`` port) is this origin too.
"""

from __future__ import annotations

from http.cookies import CookieError, SimpleCookie
from urllib.parse import urlsplit

COOKIE = "elasticmq_console"
CSRF_HEADER = "x-csrf-token"


def session_id(headers: dict[str, str]) -> str | None:
    raw = headers.get("cookie")
    if not raw:
        return None
    jar = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def set_cookie(sid: str, max_age_s: int, secure: bool) -> str:
    return (f"{COOKIE}={sid}; Max-Age={max_age_s}; Path=/ui; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def clear_cookie(secure: bool) -> str:
    return set_cookie("", 0, secure)


def foreign_origin(headers: dict[str, str]) -> str | None:
    """Why the request comes from another site, or None when it does not."""
    site = headers.get("sec-fetch-site")
    if site is not None and site != "same-origin":
        return f"Sec-Fetch-Site is {site}"
    origin = headers.get("origin")
    if origin is not None:
        host = (headers.get("host") or "").lower()
        try:
            netloc = urlsplit(origin).netloc.lower()
        except ValueError:
            netloc = ""
        if not netloc or netloc != host:
            return f"Origin {origin} is not this dashboard's ({host or 'no Host'})"
    return None
