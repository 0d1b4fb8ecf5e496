import contextlib
import ipaddress
import socket
import threading
import time

import pytest
from werkzeug import Response

from outbound import AddressPolicy, BlockedAddress, Sender

LOOPBACK = AddressPolicy.from_strings(["127.0.0.0/8", "::1/128"], allow_http=True)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "64:ff9b::a00:1",
        "2002:a00:1::1",
        "224.0.0.1",
    ],
)
def test_default_policy_blocks_non_public_addresses(address):
    with pytest.raises(BlockedAddress):
        AddressPolicy().check(ipaddress.ip_address(address), "h")


def test_public_and_allow_listed_addresses_pass():
    AddressPolicy().check(ipaddress.ip_address("93.184.215.14"), "h")
    LOOPBACK.check(ipaddress.ip_address("127.0.0.1"), "h")


def test_post_reaches_allowed_loopback_receiver(httpserver):
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok", status=200)
    result = Sender(policy=LOOPBACK).post(httpserver.url_for("/hook"), b"{}", {"x": "1"})
    assert (result.status_code, result.response_excerpt, result.error_kind) == (200, "ok", "")


def test_post_to_loopback_is_blocked_by_default_policy(httpserver):
    httpserver.expect_request("/hook").respond_with_data("ok")
    sender = Sender(policy=AddressPolicy(allow_http=True))
    result = sender.post(httpserver.url_for("/hook"), b"{}", {})
    assert (result.status_code, result.error_kind) == (None, "blocked")
    assert httpserver.log == []


def test_name_resolving_to_loopback_is_blocked(httpserver):
    url = (
        httpserver.url_for("/hook").replace("127.0.0.1", "localhost").replace("[::1]", "localhost")
    )
    result = Sender(policy=AddressPolicy(allow_http=True)).post(url, b"{}", {})
    assert result.error_kind == "blocked"


def test_plain_http_is_refused_unless_allowed(httpserver):
    result = Sender(policy=AddressPolicy.from_strings(["127.0.0.0/8"])).post(
        httpserver.url_for("/hook"), b"{}", {}
    )
    assert result.error_kind == "invalid_url"


def test_redirects_are_not_followed(httpserver):
    httpserver.expect_request("/hook").respond_with_data("", status=302, headers={"Location": "/x"})
    result = Sender(policy=LOOPBACK).post(httpserver.url_for("/hook"), b"{}", {})
    assert result.status_code == 302
    assert len(httpserver.log) == 1


def test_slow_receiver_times_out(httpserver):
    def slow(request):
        time.sleep(1.5)
        return Response("late")

    httpserver.expect_request("/hook").respond_with_handler(slow)
    result = Sender(policy=LOOPBACK, read_timeout=0.3, total_deadline=5).post(
        httpserver.url_for("/hook"), b"{}", {}
    )
    assert (result.status_code, result.error_kind) == (None, "timeout")


def test_drip_feeding_receiver_hits_the_total_deadline():
    """Headers, then one byte every 0.2 s: each read is quick, the whole is not."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
        while not stop.is_set():
            try:
                conn.sendall(b"x")
            except OSError:
                break
            time.sleep(0.2)
        conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        result = Sender(policy=LOOPBACK, read_timeout=1, total_deadline=1).post(
            f"http://127.0.0.1:{port}/hook", b"{}", {}
        )
        took = time.monotonic() - started
    finally:
        stop.set()
        server.close()
    assert (result.status_code, result.error_kind) == (None, "deadline")
    assert took < 2.5


def test_connection_refused_is_a_connect_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = Sender(policy=LOOPBACK).post(f"http://127.0.0.1:{port}/", b"{}", {})
    assert (result.status_code, result.error_kind) == (None, "connect")


def test_unresolvable_host_is_a_connect_error():
    result = Sender(policy=AddressPolicy()).post("https://no-such-host.invalid/hook", b"{}", {})
    assert (result.status_code, result.error_kind) == (None, "connect")


def _dripping_server(payload_per_tick: bytes, first: bytes = b""):
    """A raw socket server that sends ``first`` then ``payload_per_tick`` every 0.2 s."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    stop = threading.Event()

    def serve():
        conn, _ = server.accept()
        conn.recv(65536)
        try:
            if first:
                conn.sendall(first)
            while not stop.is_set():
                conn.sendall(payload_per_tick)
                time.sleep(0.2)
        except OSError:
            pass
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, stop


@pytest.mark.parametrize(
    ("first", "tick"),
    [
        (b"", b"H"),  # the status line, one byte at a time
        (b"HTTP/1.1 200 OK\r\n", b"X-Slow: 1\r\n"),  # endless headers
        (b"", b"HTTP/1.1 102 Processing\r\n\r\n"),  # endless interim responses
    ],
)
def test_dripping_status_line_or_headers_hit_the_total_deadline(first, tick):
    server, stop = _dripping_server(tick, first)
    port = server.getsockname()[1]
    try:
        started = time.monotonic()
        result = Sender(policy=LOOPBACK, read_timeout=1, total_deadline=1).post(
            f"http://127.0.0.1:{port}/hook", b"{}", {}
        )
        took = time.monotonic() - started
    finally:
        stop.set()
        server.close()
    assert result.status_code is None and result.error_kind in ("deadline", "protocol")
    assert took < 2.5


def test_nul_in_the_response_is_replaced_in_the_excerpt(httpserver):
    httpserver.expect_request("/hook").respond_with_data(b"ok\x00thanks")
    result = Sender(policy=LOOPBACK).post(httpserver.url_for("/hook"), b"{}", {})
    assert (result.status_code, result.response_excerpt) == (200, "ok\ufffdthanks")


def test_compressed_answer_is_not_inflated(httpserver):
    import gzip

    bomb = gzip.compress(b"0" * 5_000_000)
    httpserver.expect_request("/hook").respond_with_data(bomb, headers={"Content-Encoding": "gzip"})
    result = Sender(policy=LOOPBACK).post(httpserver.url_for("/hook"), b"{}", {})
    assert result.status_code == 200 and len(result.response_excerpt) <= 1024
    request, _ = httpserver.log[0]
    assert request.headers["Accept-Encoding"] == "identity"


@pytest.mark.parametrize(
    "address", ["::127.0.0.1", "::169.254.169.254", "::ffff:0:7f00:1", "fec0::1"]
)
def test_ipv6_forms_embedding_ipv4_are_blocked(address):
    with pytest.raises(BlockedAddress):
        AddressPolicy().check(ipaddress.ip_address(address), "h")


def test_post_sends_the_request_a_client_would_and_reads_retry_after(httpserver):
    """The sender drives its connection pool directly: the request still carries Host,
    Content-Length, the user agent, identity encoding, the caller's headers and the
    credentials written in the URL; Retry-After comes back."""
    httpserver.expect_request("/hook", method="POST").respond_with_data(
        "slow down", status=429, headers={"Retry-After": "7"}
    )
    url = httpserver.url_for("/hook").replace("http://", "http://us%40er:p%3Ass@")
    result = Sender(policy=LOOPBACK, user_agent="UA/1").post(
        url + "?a=b", b'{"x":1}', {"webhook-id": "msg_1", "Content-Type": "application/json"}
    )
    assert (result.status_code, result.retry_after, result.response_excerpt) == (
        429,
        "7",
        "slow down",
    )
    request, _ = httpserver.log[0]
    assert request.headers["Host"] == url.split("@")[1].split("/")[0]
    assert request.headers["Content-Length"] == "7"
    assert request.headers["User-Agent"] == "UA/1"
    assert request.headers["Accept-Encoding"] == "identity"
    assert request.headers["webhook-id"] == "msg_1"
    assert request.authorization.username == "us@er"
    assert request.authorization.password == "p:ss"
    assert request.args["a"] == "b"
    assert request.get_data() == b'{"x":1}'


def test_posts_reuse_one_kept_alive_connection():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)
            with contextlib.suppress(OSError):  # the client closing its connection
                while conn.recv(65536):  # one request per read
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    threading.Thread(target=serve, daemon=True).start()
    sender = Sender(policy=LOOPBACK)
    try:
        # No body: each request is its headers alone, one read for the server above.
        results = [sender.post(f"http://127.0.0.1:{port}/hook", b"", {}) for _ in range(5)]
    finally:
        sender.close()
        server.close()
    assert [r.status_code for r in results] == [200] * 5
    assert len(accepted) == 1


def test_a_url_refused_once_is_refused_again_from_the_parsed_cache():
    sender = Sender(policy=AddressPolicy())
    for _ in range(2):
        result = sender.post("http://example.com/hook", b"{}", {})
        assert (result.status_code, result.error_kind) == (None, "invalid_url")
