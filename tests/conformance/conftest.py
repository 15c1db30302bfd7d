"""The conformance corpus's fixtures: one real server per module, and a client per protocol.

``client`` is parametrized over both protocols, so a test written once runs against each: the JSON
protocol through boto3 as installed (what current SDKs send), and the Query protocol through the
same botocore driving botocore 1.29's own SQS model, the last that spoke Query (as older SDKs,
the AWS CLI v1 and LocalStack's ``sqs_query`` client do). Both raise ``ClientError`` with
``Error.Code`` holding the Query error code, which is what users match on.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from urllib.parse import urlencode

import boto3
import botocore.session
import pytest
from botocore.config import Config as BotoConfig

from tests.conformance import recording_server
from tests.endpoint.conftest import ServerProcess
from tests.endpoint.queue_keys import disagreements
from tests.endpoint.external_clients import OLD_BOTOCORE, ensure

JSON, QUERY = "json", "query"
_CONFIG = BotoConfig(retries={"max_attempts": 1}, read_timeout=30)
_CREDENTIALS = {"aws_access_key_id": "AKIDTEST", "aws_secret_access_key": "secret"}
# One boto3 session for every JSON client: a fresh session loads botocore's models and endpoint
# rules again (~80 ms a client, several times that on a loaded machine); a client made from a
# shared one still gets its own copy of the event hooks, so a test's handlers stay its own.
JSON_SESSION = boto3.session.Session()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    recorded = tmp_path_factory.mktemp("requests") / "requests.msgpack"
    s = ServerProcess(launcher=("-m", "tests.conformance.recording_server", str(recorded)))
    yield s
    err = s.stop()
    assert "Traceback" not in err, err   # the server logs tracebacks only for internal errors
    # Every request the module sent, replayed in-process: the cheap queue key a member routes by
    # (elasticmq_py/protocol/queue_key.py) never disagrees with the full parse.
    requests = recording_server.read(recorded)
    wrong, _ = disagreements(requests)
    assert not wrong, f"{len(wrong)} of {len(requests)} requests:\n" + "\n".join(wrong[:20])


@pytest.fixture(scope="session")
def old_botocore() -> Path:
    return ensure("botocore-1.29", OLD_BOTOCORE)


@pytest.fixture(scope="session")
def query_session(old_botocore, tmp_path_factory) -> botocore.session.Session:
    """A botocore session whose SQS model is botocore 1.29's (protocol: query)."""
    models = tmp_path_factory.mktemp("query-model")
    target = models / "sqs" / "2012-11-05"
    target.mkdir(parents=True)
    shutil.copy(old_botocore / "botocore/data/sqs/2012-11-05/service-2.json", target / "service-2.json")
    session = botocore.session.get_session()
    session.get_component("data_loader").search_paths.insert(0, str(models))
    assert session.get_service_model("sqs").metadata["protocol"] == "query"
    return session


@pytest.fixture
def region() -> str:
    """A fresh namespace per test: every region is a separate namespace."""
    return f"conf-{uuid.uuid4().hex[:12]}"


def make_client(server, protocol: str, region: str, query_session=None):
    if protocol == JSON:
        return JSON_SESSION.client("sqs", endpoint_url=server.url, region_name=region, config=_CONFIG,
                                   **_CREDENTIALS)
    return query_session.create_client("sqs", endpoint_url=server.url, region_name=region, config=_CONFIG,
                                       **_CREDENTIALS)


@pytest.fixture(params=[JSON, QUERY])
def protocol(request) -> str:
    return request.param


@pytest.fixture
def client(server, protocol, region, query_session):
    return make_client(server, protocol, region, query_session)


# --- raw HTTP, for what no SDK sends or shows --------------------------------------------------

def _auth(region: str) -> str:
    return (f"AWS4-HMAC-SHA256 Credential=AKIDTEST/20240101/{region}/sqs/aws4_request, "
            f"SignedHeaders=host, Signature=0")


def http(server, method: str, path: str, body: bytes = b"", headers: dict | None = None
         ) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(server.url + path, data=body if method == "POST" else None, method=method,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def query_post(server, region: str, params: dict, path: str = "/", headers: dict | None = None):
    return http(server, "POST", path, urlencode(params).encode(), {
        "Content-Type": "application/x-www-form-urlencoded", "Authorization": _auth(region), **(headers or {})})


def query_get(server, region: str, params: dict, path: str = "/", headers: dict | None = None):
    qs = f"?{urlencode(params)}" if params else ""
    return http(server, "GET", path + qs, headers={"Authorization": _auth(region), **(headers or {})})


def json_post(server, region: str, action: str, payload: dict | bytes, path: str = "/", headers: dict | None = None):
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return http(server, "POST", path, body, {
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}",
        "Authorization": _auth(region), **(headers or {})})
