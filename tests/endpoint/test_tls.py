"""HTTPS on the SQS port (elasticmq_py/tls.py): a real `elasticmq-py serve` with a certificate
from a test CA, driven by boto3 (JSON), botocore 1.29 (Query) and our own CLI; what a client
that does not trust the CA, or speaks plain HTTP, gets; the embedded Server; start-up errors."""

import http.client
import json
import socket
import ssl
import subprocess
import sys
import urllib.request

import boto3
import botocore.exceptions
import pytest
from botocore.config import Config as BotoConfig

from elasticmq_py import Config, Server, cli
from elasticmq_py.config import Tls
from elasticmq_py.tls import server_context

from tests.endpoint.certs import make_pki
from tests.endpoint.conftest import ROOT, ServerProcess
from tests.endpoint.external_clients import OLD_BOTOCORE, ensure, run_old_botocore_script

REGION = "us-east-1"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_server(pki):
    """One HTTPS server process for the module, configured by a file that names its
    certificate and key relative to itself."""
    config = pki.ca.parent / "tls.toml"
    config.write_text(f'[tls]\ncert-file = "{pki.cert.name}"\nkey-file = "{pki.key.name}"\n')
    s = ServerProcess("--config", str(config))
    s.url = f"https://127.0.0.1:{s.port}"
    yield s
    err = s.stop()
    assert "Traceback" not in err, err


def _sqs(url: str, verify) -> "boto3.client":
    return boto3.client("sqs", endpoint_url=url, region_name=REGION, verify=verify,
                        aws_access_key_id="a", aws_secret_access_key="b",
                        config=BotoConfig(retries={"max_attempts": 1}))


def test_boto3_json_over_https(tls_server, pki):
    c = _sqs(tls_server.url, str(pki.ca))
    url = c.create_queue(QueueName="secure")["QueueUrl"]
    assert url == f"{tls_server.url}/000000000000/secure"
    c.send_message(QueueUrl=url, MessageBody="over tls")
    [m] = c.receive_message(QueueUrl=url, WaitTimeSeconds=1)["Messages"]
    assert m["Body"] == "over tls"
    c.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
    assert "Messages" not in c.receive_message(QueueUrl=url)
    assert c.list_queues(QueueNamePrefix="secure")["QueueUrls"] == [url]
    c.delete_queue(QueueUrl=url)


@pytest.mark.slow
def test_botocore_1_29_query_over_https(tls_server, pki):
    out = run_old_botocore_script(ensure("botocore-1.29", OLD_BOTOCORE), tls_server.url, REGION, str(pki.ca))
    assert out["botocore"] == "1.29.165"
    assert out["url"] == f"{tls_server.url}/000000000000/old" and out["url"] in out["queues"]
    assert out["body"] == "h\u00e9llo\r\n<&>" and out["deleted"] == 4


def test_a_client_that_does_not_trust_the_ca_fails_the_handshake(tls_server):
    with pytest.raises(botocore.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        _sqs(tls_server.url, True).list_queues()
    with pytest.raises(ssl.SSLCertVerificationError):
        with socket.create_connection(("127.0.0.1", tls_server.port), timeout=5) as raw:
            ssl.create_default_context().wrap_socket(raw, server_hostname="127.0.0.1")


def test_plain_http_to_the_tls_port_is_refused(tls_server):
    conn = http.client.HTTPConnection("127.0.0.1", tls_server.port, timeout=5)
    try:
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            conn.request("GET", "/health")
            conn.getresponse()
    finally:
        conn.close()


def test_the_server_context_offers_tls_1_2_and_later(pki):
    # what a client that offers only TLS 1.1 meets (tried over a socket, this would test the
    # client's OpenSSL, which refuses 1.1 on its own)
    ctx = server_context(Tls(str(pki.cert), str(pki.key)))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2 and ctx.protocol == ssl.PROTOCOL_TLS_SERVER


def test_health_dashboard_and_cluster_routes_over_https(tls_server, pki):
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    for path in ("/health", "/ui", "/cluster", "/metrics"):
        with urllib.request.urlopen(tls_server.url + path, context=ctx, timeout=5) as r:
            assert r.status == 200, path
    c = _sqs(tls_server.url, str(pki.ca))
    url = c.create_queue(QueueName="listed")["QueueUrl"]
    with urllib.request.urlopen(tls_server.url + "/ui/api/queues", context=ctx, timeout=5) as r:
        assert url in [q["url"] for q in json.loads(r.read())["queues"]]
    c.delete_queue(QueueUrl=url)


def test_status_command_over_https(tls_server, pki, capsys):
    assert cli.main(["status", "--endpoint", tls_server.url, "--cafile", str(pki.ca), "--json"]) == 0
    assert "replication" in json.loads(capsys.readouterr().out)
    assert cli.main(["status", "--endpoint", tls_server.url, "--insecure", "--json"]) == 0
    capsys.readouterr()
    assert cli.main(["status", "--endpoint", tls_server.url, "--timeout", "5"]) == 1
    assert "certificate verify failed" in capsys.readouterr().err


def test_embedded_server_with_tls(pki):
    with Server(port=0, config=Config(tls=Tls(str(pki.cert), str(pki.key)))) as s:
        assert s.endpoint_url == f"https://127.0.0.1:{s.port}"
        c = _sqs(s.endpoint_url, str(pki.ca))
        assert c.create_queue(QueueName="embedded")["QueueUrl"] == s.endpoint_url + "/000000000000/embedded"


def _serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "elasticmq_py", "serve", "--port", "0", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("files,msg", [
    (("--tls-cert", "{cert}"), "--tls-cert and --tls-key go together"),
    (("--tls-key", "{key}"), "--tls-cert and --tls-key go together"),
    (("--tls-cert", "{cert}", "--tls-key", "{other_key}"), "the key does not belong to the certificate"),
    (("--tls-cert", "{cert}", "--tls-key", "{dir}/missing.key"), "cannot read key-file {dir}/missing.key"),
    (("--tls-cert", "{key}", "--tls-key", "{key}"), "not a PEM certificate"),
])
def test_start_up_errors_are_clear(pki, files, msg):
    names = dict(cert=pki.cert, key=pki.key, other_key=pki.other_key, dir=pki.ca.parent)
    r = _serve(*(f.format(**names) for f in files))
    assert r.returncode == 2, r.stderr
    assert msg.format(**names) in r.stderr and "Traceback" not in r.stderr
