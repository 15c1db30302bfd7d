"""The HTTP surface of a real server process, at the byte level: the Query protocol, admin
routes, and every kind of bad input a client (or an attacker) can send."""

import json
import re
import socket
import time
import urllib.request
from urllib.parse import urlencode


NS = "http://queue.amazonaws.com/doc/2012-11-05/"


def raw(server, data: bytes, timeout=5.0) -> bytes:
    """Send bytes, read until the server closes or goes quiet."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        s.settimeout(1.0)
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        except socket.timeout:
            pass
    return b"".join(chunks)


def status_of(resp: bytes) -> int:
    return int(resp.split(b" ", 2)[1])


def request(method, path, body=b"", headers=()) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost:9324", f"Content-Length: {len(body)}",
             *headers, "", ""]
    return "\r\n".join(lines).encode() + body


def query(server, params, region="us-east-1", path="/") -> tuple[int, str]:
    req = urllib.request.Request(
        server.url + path, data=urlencode(params).encode(), method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Authorization": f"AWS4-HMAC-SHA256 Credential=AK/20240101/{region}/sqs/aws4_request, "
                                  f"SignedHeaders=host, Signature=00"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def json_call(server, action, payload, raw_body=None, region="us-east-1"):
    body = raw_body if raw_body is not None else json.dumps(payload).encode()
    req = urllib.request.Request(server.url + "/", data=body, method="POST", headers={
        "Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": f"AmazonSQS.{action}",
        "Authorization": f"AWS4-HMAC-SHA256 Credential=AK/20240101/{region}/sqs/aws4_request, Signature=0"})
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


# --- Query protocol ----------------------------------------------------------------------------

def test_query_round_trip(server, region):
    st, body = query(server, {"Action": "CreateQueue", "QueueName": "qq", "Attribute.1.Name": "DelaySeconds",
                              "Attribute.1.Value": "0", "Tag.1.Key": "k", "Tag.1.Value": "v"}, region)
    assert st == 200, body
    assert body.startswith(f'<?xml version="1.0"?><CreateQueueResponse xmlns="{NS}"><CreateQueueResult>'
                           f"<QueueUrl>http://localhost:9324/000000000000/qq</QueueUrl>") is False  # Host is ours
    url = re.search(r"<QueueUrl>(.*?)</QueueUrl>", body).group(1)
    assert url == f"{server.url}/000000000000/qq"
    assert re.search(r"<ResponseMetadata><RequestId>[0-9a-f-]{36}</RequestId></ResponseMetadata>", body)
    st, body = query(server, {"Action": "SendMessage", "QueueUrl": url, "MessageBody": "a\r\nb<&>",
                              "MessageAttribute.1.Name": "bin", "MessageAttribute.1.Value.DataType": "Binary",
                              "MessageAttribute.1.Value.BinaryValue": "AAE="}, region)
    assert st == 200 and "<MD5OfMessageBody>" in body and "<MD5OfMessageAttributes>" in body
    # the queue addressed by the request path, as older SDKs do
    st, body = query(server, {"Action": "ReceiveMessage", "MessageAttributeName.1": "All",
                              "AttributeName.1": "All"}, region, path="/000000000000/qq")
    assert st == 200, body
    assert "<Body>a&#xD;\nb&lt;&amp;&gt;</Body>" in body
    assert "<MessageAttribute><Name>bin</Name><Value><BinaryValue>AAE=</BinaryValue><DataType>Binary</DataType></Value></MessageAttribute>" in body
    assert "<Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>" in body


def test_query_get_and_errors(server, region):
    with urllib.request.urlopen(server.url + "/?Action=ListQueues&Version=2012-11-05") as r:
        assert r.status == 200
        assert b"<ListQueuesResponse" in r.read()
    st, body = query(server, {"Action": "GetQueueUrl", "QueueName": "missing"}, region)
    assert st == 400
    assert re.fullmatch(
        rf'<\?xml version="1.0"\?><ErrorResponse xmlns="{NS}"><Error><Type>Sender</Type>'
        r"<Code>AWS.SimpleQueueService.NonExistentQueue</Code>"
        r"<Message>The specified queue does not exist for this wsdl version.</Message>"
        r"<Detail/></Error><RequestId>[0-9a-f-]{36}</RequestId></ErrorResponse>", body), body
    st, body = query(server, {"Action": "Frobnicate"})
    assert st == 400 and "<Code>InvalidAction</Code>" in body
    st, body = query(server, {"Version": "2012-11-05"})
    assert st == 404 and body == "<UnknownOperationException/>"
    st, body = query(server, {"Action": "SendMessage", "QueueUrl": "q", "MessageBody": "x", "DelaySeconds": "soon"})
    assert st == 400 and "<Code>InvalidParameterValue</Code>" in body


# --- JSON protocol errors ----------------------------------------------------------------------

def test_json_error_shapes_over_http(server, region):
    st, headers, body = json_call(server, "GetQueueUrl", {"QueueName": "missing"}, region=region)
    assert st == 400
    assert json.loads(body) == {"__type": "com.amazonaws.sqs#QueueDoesNotExist",
                                "message": "The specified queue does not exist."}
    assert headers["X-Amzn-Query-Error"] == "AWS.SimpleQueueService.NonExistentQueue;Sender"
    st, headers, body = json_call(server, "Frobnicate", {})
    assert st == 400 and headers["X-Amzn-Query-Error"] == "InvalidAction;Sender"
    st, headers, body = json_call(server, "SendMessage", None, raw_body=b'{"QueueUrl": ')
    assert st == 400 and json.loads(body)["__type"].endswith("#SerializationException")
    st, headers, body = json_call(server, "SendMessage", None, raw_body=b'{"QueueUrl": "\xff\xfe"}')
    assert st == 400 and json.loads(body)["__type"].endswith("#SerializationException")
    st, headers, body = json_call(server, "SendMessage", {"QueueUrl": "q", "MessageBody": 5})
    assert st == 400 and headers["X-Amzn-Query-Error"] == "InvalidParameterValue;Sender"
    st, headers, body = json_call(server, "SendMessage", {"QueueUrl": "q"})
    assert st == 400 and headers["X-Amzn-Query-Error"] == "MissingParameter;Sender"


# --- admin -------------------------------------------------------------------------------------

def test_admin_routes(server, sqs):
    url = sqs.create_queue(QueueName="adm")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="x")
    with urllib.request.urlopen(server.url + "/health") as r:
        assert r.status == 200
    with urllib.request.urlopen(server.url + "/cluster") as r:
        doc = json.load(r)
        assert doc["role"] == "master" and doc["active"] is True and doc["view"] is None
    with urllib.request.urlopen(server.url + "/metrics") as r:
        text = r.read().decode()
    assert 'elasticmq_requests_total{action="SendMessage",outcome="ok"}' in text
    assert 'elasticmq_request_seconds_bucket{action="SendMessage",le="0.001"}' in text
    assert re.search(r'elasticmq_queue_messages\{account="000000000000",queue="adm",region="[^"]+",'
                     r'state="visible"\} 1\.0', text)


# --- bad HTTP ----------------------------------------------------------------------------------

def test_garbage_gets_400_and_server_survives(server):
    for junk in (b"\x00\x01\x02garbage\r\n\r\n", b"GET / HTTP/9.9\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
                 b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
        resp = raw(server, junk)
        assert status_of(resp) == 400, resp
        assert b"Traceback" not in resp
        assert b"<Code>InvalidRequest</Code>" in resp
    with urllib.request.urlopen(server.url + "/health") as r:
        assert r.status == 200


def test_huge_headers(server):
    resp = raw(server, request("POST", "/", b"", ["X-Amz-Target: AmazonSQS.ListQueues",
                                                  f"X-Big: {'a' * 100_000}"]))
    assert status_of(resp) == 431
    assert b"com.amazonaws.sqs#RequestHeaderFieldsTooLarge" in resp
    resp = raw(server, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\n\r\n")
    assert status_of(resp) == 431


def test_oversize_bodies(server):
    big = 4 * 1024 * 1024
    # refused from Content-Length, before the body is read
    resp = raw(server, request("POST", "/", b"", [f"Content-Length: {big}", "X-Amz-Target: AmazonSQS.SendMessageBatch",
                                                  "Content-Type: application/x-amz-json-1.0"])
               .replace(b"Content-Length: 0\r\n", b""))
    assert status_of(resp) == 400
    assert b"BatchRequestTooLong" in resp
    # chunked, so only counting the body can catch it
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                  b"Content-Type: application/x-www-form-urlencoded\r\n\r\n")
        chunk = b"a" * 65536
        try:
            for _ in range(80):
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except (BrokenPipeError, ConnectionResetError):
            pass
        resp = s.recv(65536)
    assert status_of(resp) == 413 and b"<Code>RequestEntityTooLarge</Code>" in resp


def test_keep_alive_pipelining_and_expect_continue(server):
    one = request("GET", "/health")
    two = request("POST", "/?Action=ListQueues", b"", ["Content-Type: application/x-www-form-urlencoded"])
    resp = raw(server, one + two + one)
    assert resp.count(b"HTTP/1.1 200 OK") == 3
    assert resp.index(b'{"status": "ok", ') < resp.index(b"<ListQueuesResponse")
    body = b"Action=ListQueues"
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(request("POST", "/", b"", ["Expect: 100-continue", "Content-Type: application/x-www-form-urlencoded"])
                  .replace(b"Content-Length: 0", b"Content-Length: %d" % len(body)))
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue")
        s.sendall(body)
        assert b"<ListQueuesResponse" in s.recv(65536)
    resp = raw(server, b"GET /health HTTP/1.0\r\n\r\n")
    assert b"Connection: close" in resp and status_of(resp) == 200


def test_unknown_paths_and_methods(server):
    resp = raw(server, request("DELETE", "/"))
    assert status_of(resp) == 405
    resp = raw(server, request("POST", "/", b"{}", ["Content-Type: application/json"]))
    assert status_of(resp) == 415


def waiting_receives(server) -> float:
    with urllib.request.urlopen(server.url + "/metrics") as r:
        return float(re.search(rb"(?m)^elasticmq_waiting_receives (\S+)$", r.read()).group(1))


def test_disconnect_cancels_long_poll(server, sqs, region):
    url = sqs.create_queue(QueueName="lpc")["QueueUrl"]
    body = json.dumps({"QueueUrl": url, "WaitTimeSeconds": 20}).encode()
    socks = []
    for _ in range(50):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        s.sendall(request("POST", "/", body, [
            "X-Amz-Target: AmazonSQS.ReceiveMessage", "Content-Type: application/x-amz-json-1.0",
            f"Authorization: AWS4-HMAC-SHA256 Credential=AK/20240101/{region}/sqs/aws4_request, Signature=0"]))
        socks.append(s)
    deadline = time.monotonic() + 5
    while waiting_receives(server) < 50 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert waiting_receives(server) >= 50
    for s in socks:
        s.close()
    deadline = time.monotonic() + 5
    while waiting_receives(server) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert waiting_receives(server) == 0
    # a message sent now is not swallowed by a dead waiter
    sqs.send_message(QueueUrl=url, MessageBody="after")
    assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)["Messages"][0]["Body"] == "after"


def test_idle_connections_are_swept(monkeypatch):
    import asyncio

    from elasticmq_py import httpserver
    from elasticmq_py.server import Server

    monkeypatch.setattr(httpserver, "IDLE_TIMEOUT_S", 0.2)
    monkeypatch.setattr(httpserver, "_SWEEP_INTERVAL_S", 0.1)

    async def main():
        async with Server(port=0) as s:
            r, w = await asyncio.open_connection("127.0.0.1", s.port)
            w.write(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            await r.readuntil(b'is a single node: it executes client calls."}')
            assert await asyncio.wait_for(r.read(), 2) == b""  # closed by the sweep
            w.close()

    asyncio.run(main())
