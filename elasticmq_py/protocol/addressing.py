"""Where a request lands: its region (from the SigV4 scope), and queue URLs <-> queue keys."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit

from storage.commands import Namespace, QueueKey
from storage.errors import queue_does_not_exist

from elasticmq_py.protocol.errors import invalid_address

# The signature is not checked (any client credentials work, as in ElasticMQ); only the scope's
# region is used, because SDKs put the region the user configured there.
_SCOPE = re.compile(r"Credential=[^/,\s]*/\d{8}/([A-Za-z0-9-]{1,64})/")
_ACCOUNT = re.compile(r"^[0-9A-Za-z-]{1,64}$")
_NAME = re.compile(r"^[^/\s]{1,1024}$")


def region_from_headers(headers: dict[str, str], query_params: dict[str, str] | None,
                        default: str) -> str:
    auth = headers.get("authorization")
    if auth:
        region = _region_of(auth)
        if region is not None:
            return region
    if query_params:
        # presigned requests carry the scope in X-Amz-Credential instead
        cred = query_params.get("X-Amz-Credential")
        if cred:
            parts = cred.split("/")
            if len(parts) >= 3 and re.fullmatch(r"[A-Za-z0-9-]{1,64}", parts[2]):
                return parts[2]
    return default


# The region of each credential seen ("Credential=" up to the next ","; None: no scope there).
# SDKs sign every request anew, but a credential's scope (key, day, region) stays the same all
# day, and matching _SCOPE cost more than the rest of a request's addressing. A match from the
# first "Credential=" cannot run past that "," (no part of the pattern takes one), so whether
# and what it matches depends on that text alone.
_REGIONS: dict[str, str | None] = {}
_REGIONS_MAX = 4096


def _region_of(auth: str) -> str | None:
    """``_SCOPE.search(auth)``'s region."""
    at = auth.find("Credential=")
    if at < 0:
        return None
    end = auth.find(",", at)
    cred = auth[at:end] if end >= 0 else auth[at:]
    try:
        region = _REGIONS[cred]
    except KeyError:
        m = _SCOPE.match(auth, at)
        region = m.group(1) if m else None
        if len(_REGIONS) >= _REGIONS_MAX:
            _REGIONS.clear()
        _REGIONS[cred] = region
    if region is None:   # a later "Credential=" may still match
        m = _SCOPE.search(auth, at + 1)
        return m.group(1) if m else None
    return region


def region_of_scope(scope: str) -> str | None:
    """The region named by the text of an Authorization header up to its first ",", if it
    names one; every header that starts with that text names the same region (the scope's
    pattern cannot run past a ",")."""
    return _region_of(scope)


def queue_url(base_url: str, key: QueueKey) -> str:
    return f"{base_url}/{key.account}/{key.name}"


def base_url(headers: dict[str, str], fallback_host: str, scheme: str = "http") -> str:
    host = headers.get("host") or fallback_host
    return f"{scheme}://{host}"


def key_from_path(path: str, ns: Namespace) -> QueueKey | None:
    """A queue named by the request path, as older SDKs address queue actions."""
    parts = [unquote(p) for p in path.split("/") if p]
    if len(parts) != 2:
        return None
    first, name = parts
    if not _NAME.match(name):
        return None
    if first == "queue":
        return ns.key(name)
    if _ACCOUNT.match(first):
        return QueueKey(ns.region, first, name)
    return None


# Clients repeat the same few URLs; parsing one costs more than the send. Emptied when full.
# Refused URLs raise and are not kept.
_KEYS: dict[tuple[str, str, str], QueueKey] = {}
_KEYS_MAX = 4096


def key_from_queue_url(url: str, ns: Namespace) -> QueueKey:
    k = (url, ns.region, ns.account)
    key = _KEYS.get(k)
    if key is None:
        key = _key_from_queue_url(url, ns)
        if len(_KEYS) >= _KEYS_MAX:
            _KEYS.clear()
        _KEYS[k] = key
    return key


def _key_from_queue_url(url: str, ns: Namespace) -> QueueKey:
    """Accepts http(s)://host/<account>/<name>, ElasticMQ's .../queue/<name>, a path of either
    form, and a bare queue name. The host is not checked: clients reach us under many names
    (localhost, a container name, a load balancer).

    A well-formed URL whose path names no queue is a queue that does not exist (AWS answers
    ``http://whatever-incorrect-queue-address`` so, as moto's tests have it); InvalidAddress is
    for what is not an address at all."""
    if "/" not in url:
        if not _NAME.match(url):
            raise invalid_address(url)
        return ns.key(url)
    path = url
    is_url = "://" in url
    if is_url:
        try:
            parts = urlsplit(url)
        except ValueError:
            raise invalid_address(url) from None
        path = parts.path
        is_url = bool(parts.scheme and parts.netloc)
    key = key_from_path(path, ns)
    if key is None:
        raise queue_does_not_exist() if is_url else invalid_address(url)
    return key
