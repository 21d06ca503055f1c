"""The run's HTTP/1.1 client against a server that writes exact bytes: bodies by length, by chunks and to the close,
split at every boundary; keep-alive reuse and stale connections; timeouts, bad replies and compressed bodies."""

import asyncio
import gzip
import http.server
import threading
import json
import random
import tracemalloc
import zlib

import pytest

from lalmeval.config.schema import ModelInfo
from lalmeval.inference.client import STREAM_CUT, Endpoint, RequestFailed
from lalmeval.inference.http import BadResponse, Client, ConnectFailed, Disconnected


class ByteServer:
    """A TCP server whose every request (read up to its body's length) is answered by `script(n, request)`: a list
    of byte strings, each written on its own after a short pause, or None to close without answering."""

    def __init__(self, script, close_after=False):
        self.script, self.close_after = script, close_after
        self.requests: list[bytes] = []
        self.connections = 0

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1/chat"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                pieces = self.script(len(self.requests) - 1, body)
                if pieces is None:
                    break
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.002)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def split_everywhere(data: bytes, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, 12)))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


def chunked(body: bytes, sizes=(1, 7, 300), extension=b"") -> bytes:
    out, at, i = [], 0, 0
    while at < len(body):
        size = sizes[i % len(sizes)]
        out.append(b"%x%s\r\n%s\r\n" % (len(body[at:at + size]), extension, body[at:at + size]))
        at, i = at + size, i + 1
    return b"".join(out) + b"0\r\nX-Trailer: yes\r\n\r\n"


async def post(client, url, body=b'{"q": 1}', limit=1 << 20):
    request = await client.post(url, body, {"Content-Type": "application/json"})
    try:
        return request.response, await request.response.read(limit)
    finally:
        request.release()


BODY = json.dumps({"choices": [{"message": {"content": "set a timer " * 40}}]}).encode()


@pytest.mark.parametrize("seed", range(6))
def test_bodies_by_length_by_chunks_and_to_the_close_read_whole_however_the_bytes_are_split(seed):
    heads = {
        "length": b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY,
        "chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + chunked(BODY),
        "extensions": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(BODY, (5, 64), b";name=value"),
        "close": b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + BODY,
    }

    async def go():
        for kind, reply in heads.items():
            async with ByteServer(lambda n, body: split_everywhere(reply, seed + n), close_after=kind == "close") as server:
                client = Client(timeout=10)
                for _ in range(2):
                    response, body = await post(client, server.url)
                    assert response.status == 200 and body == BODY, kind
                await client.close()
                # a reply delimited by the close cannot be followed by another on its connection
                assert server.connections == (2 if kind == "close" else 1), kind
    asyncio.run(go())


@pytest.mark.parametrize("seed", range(4))
def test_runs_of_many_chunks_read_whole_whatever_their_size_lines_and_data_hold(seed):
    """Hundreds of chunks, as a stream sends them: size lines in upper case, with leading zeros or an extension, data
    that holds CRLF or a size line's look, a chunk of one byte; read whole however the bytes are split."""
    rng = random.Random(seed)
    datas = [rng.choice([b"data: {}\n\n", b"a\r\nb", b"\r\n", b"5\r\nhello\r\n", b"x", b"y" * rng.randint(1, 3000)]) for _ in range(300)]
    lines = [rng.choice([b"%x", b"%X", b"00%x", b"%x;ext=1"]) % len(data) for data in datas]
    body = b"".join(datas)
    reply = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
             + b"".join(line + b"\r\n" + data + b"\r\n" for line, data in zip(lines, datas)) + b"0\r\n\r\n")

    async def go():
        async with ByteServer(lambda n, _: split_everywhere(reply, seed + n)) as server:
            client = Client(timeout=10)
            for _ in range(2):
                assert (await post(client, server.url, limit=len(body) + 1))[1] == body
            await client.close()
    asyncio.run(go())


def test_a_kept_alive_connection_the_server_closed_is_replaced_and_the_request_sent_once():
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

    async def go():
        async with ByteServer(lambda n, body: [reply], close_after=True) as server:
            client = Client(timeout=10)
            for _ in range(3):
                response, body = await post(client, server.url)
                await asyncio.sleep(0.05)   # the server closes the kept connection meanwhile
                assert body == b"ok"
            assert len(server.requests) == 3 and server.connections == 3
            await client.close()
    asyncio.run(go())


def test_the_head_says_status_and_headers_case_blind_and_interim_replies_are_skipped():
    reply = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\nretry-after: 3\r\nContent-Type: application/json; charset=utf-8\r\n"
             b"Content-Length: 2\r\n\r\n{}")

    async def go():
        async with ByteServer(lambda n, body: [reply]) as server:
            client = Client(timeout=10)
            response, body = await post(client, server.url)
            assert (response.status, response.headers["Retry-After"], response.content_type, body) == (429, "3", "application/json", b"{}")
            await client.close()
    asyncio.run(go())


def test_the_request_carries_host_length_fixed_headers_and_basic_auth_from_the_url():
    async def go():
        async with ByteServer(lambda n, body: [b"HTTP/1.1 204 No Content\r\n\r\n"]) as server:
            client = Client(timeout=10, headers={"Authorization": "Bearer sk-1"})
            response, body = await post(client, server.url + "?api-version=1", b"x" * 10)
            assert response.status == 204 and body == b""
            plain = Client(timeout=10)
            await post(plain, server.url.replace("http://", "http://us%40er:p%3Ass@"))
            first, second = server.requests
            assert first.startswith(b"POST /v1/chat?api-version=1 HTTP/1.1\r\n") and b"\r\nContent-Length: 10\r\n" in first
            assert f"Host: 127.0.0.1:{server.url.split(':')[2].split('/')[0]}".encode() in first and b"Authorization: Bearer sk-1" in first
            assert b"Authorization: Basic dXNAZXI6cDpzcw==" in second   # us@er:p:ss
            await client.close()
            await plain.close()
    asyncio.run(go())


def _raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


def test_gzip_and_deflate_bodies_are_decompressed():
    # "deflate" comes with its zlib header (RFC 9110) or, from some servers, without it
    for encoding, packed in (("gzip", gzip.compress(BODY)), ("deflate", zlib.compress(BODY)), ("deflate", _raw_deflate(BODY))):
        reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: %s\r\nContent-Length: %d\r\n\r\n" % (encoding.encode(), len(packed)) + packed

        async def go():
            async with ByteServer(lambda n, body: split_everywhere(reply, 3)) as server:
                client = Client(timeout=10)
                assert (await post(client, server.url))[1] == BODY
                await client.close()
        asyncio.run(go())


@pytest.mark.parametrize("reply, error, words", [
    (b"SSH-2.0-OpenSSH_9\r\n\r\n", BadResponse, "not an HTTP/1.x reply"),
    (b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n", BadResponse, "malformed header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcdefg", BadResponse, "more bytes than"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", BadResponse, "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n", BadResponse, "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX", BadResponse, "not followed by CRLF"),
    # the same after a run of whole chunks (read by the quick loop, which leaves a bad one to the careful one)
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3\r\nabc\r\n" * 20 + b"zz\r\n", BadResponse, "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3\r\nabc\r\n" * 20 + b"-1\r\n", BadResponse, "bad chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3\r\nabc\r\n" * 20 + b"3\r\nabcX", BadResponse, "not followed by CRLF"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"3\r\nabc\r\n" * 20 + b"3\r\nabcXY\r\n0\r\n\r\n", BadResponse,
     "not followed by CRLF"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello", BadResponse, "two Content-Length headers"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Endless: " + b"a" * 100_000, BadResponse,
     "trailer longer than"),
    (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\nx", BadResponse, "unsupported Content-Encoding"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part", Disconnected, "closed the connection"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", Disconnected, "closed the connection"),
])
def test_a_broken_reply_fails_its_request_with_what_is_wrong(reply, error, words):
    async def go():
        async with ByteServer(lambda n, body: [reply], close_after=True) as server:
            client = Client(timeout=10)
            with pytest.raises(error, match=words):
                await post(client, server.url)
            await client.close()
    asyncio.run(go())


def test_a_server_that_never_answers_times_out_at_the_timeout_and_one_that_refuses_fails_to_connect():
    async def go():
        async with ByteServer(lambda n, body: [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc"] if n == 0 else [b""]) as server:
            client = Client(timeout=0.5)
            loop = asyncio.get_running_loop()
            for _ in range(2):   # the body stalls halfway; then the head never comes
                started = loop.time()
                with pytest.raises(asyncio.TimeoutError):
                    await post(client, server.url)
                assert 0.45 <= loop.time() - started < 2.0
            await client.close()
        with pytest.raises(ConnectFailed, match="cannot connect to 127.0.0.1:9"):
            await post(Client(timeout=5), "http://127.0.0.1:9/v1")
    asyncio.run(go())


def test_a_body_past_the_limit_stops_reading_and_its_connection_is_not_reused():
    big = b"x" * 200_000
    reply = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(big, (4096,))

    async def go():
        async with ByteServer(lambda n, body: [reply]) as server:
            client = Client(timeout=10)
            response, body = await post(client, server.url, limit=10_000)
            assert len(body) == 10_001 and not response.done   # one byte past the limit says it is longer
            response, body = await post(client, server.url, limit=1 << 20)
            assert body == big and server.connections == 2
            await client.close()
    asyncio.run(go())


def test_a_streamed_body_arrives_in_pieces_with_their_arrival_times_in_order():
    events = [b"data: {\"n\": %d}\n\n" % i for i in range(20)]
    reply = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
             *(b"%x\r\n%s\r\n" % (len(e), e) for e in events), b"0\r\n\r\n"]

    async def go():
        async with ByteServer(lambda n, body: reply) as server:
            client = Client(timeout=10)
            request = await client.post(server.url, b"{}", {})
            pieces = []
            while fresh := await request.response.next_pieces():
                pieces += fresh
            request.release()
            assert b"".join(p for p, _ in pieces) == b"".join(events) and len(pieces) > 1
            assert [t for _, t in pieces] == sorted(t for _, t in pieces)
            await client.close()
    asyncio.run(go())


@pytest.mark.parametrize("head", [
    b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\nContent-Length: 120\r\n\r\n",
])
def test_a_204_or_304_reply_has_no_body_whatever_its_head_announces(head):
    async def go():
        async with ByteServer(lambda n, body: [head]) as server:
            client = Client(timeout=2)
            for _ in range(2):   # and its connection serves the next request
                response, body = await post(client, server.url)
                assert response.status == int(head[9:12]) and body == b"" and response.done
            assert server.connections == 1
            await client.close()
    asyncio.run(go())


def test_a_path_with_spaces_or_letters_beyond_ascii_is_sent_percent_encoded_and_an_idn_host_in_idna():
    async def go():
        async with ByteServer(lambda n, body: [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]) as server:
            client = Client(timeout=5)
            port = server.url.split(":")[2].split("/")[0]
            response, body = await post(client, f"http://127.0.0.1:{port}/v1/deployments/modèle a/chat?q=à b&x=%2F")
            assert body == b"ok"
            assert server.requests[0].startswith(b"POST /v1/deployments/mod%C3%A8le%20a/chat?q=%C3%A0%20b&x=%2F HTTP/1.1\r\n")
            await client.close()
        origin, target = Client(timeout=5)._origin("https://bücher.example/v1")
        assert (origin.host, origin.host_line, target) == ("xn--bcher-kva.example", "Host: xn--bcher-kva.example\r\n", "/v1")
    asyncio.run(go())


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999/v1", "http://[::1/v1", "ftp://127.0.0.1/v1", "http:///v1"])
def test_a_url_that_names_no_reachable_origin_fails_as_a_connection_error_naming_only_its_scheme(url):
    async def go():
        with pytest.raises(ConnectFailed, match="not an http\\(s\\) URL") as caught:
            await post(Client(timeout=5), url)
        assert "127.0.0.1" not in str(caught.value) and "v1" not in str(caught.value)
    asyncio.run(go())


def test_a_request_the_server_drops_unanswered_is_resent_once_on_a_new_connection_not_once_per_idle_one():
    # A server that reads a request and closes without a byte of reply looks like a stale kept-alive connection;
    # resending on every idle connection would deliver a request that crashes the server's worker a dozen times.
    ok = [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"]

    async def go():
        async with ByteServer(lambda n, body: ok if body == b"warm" else None) as server:
            client = Client(timeout=5)
            await asyncio.gather(*(post(client, server.url, b"warm") for _ in range(6)))
            assert server.connections == 6
            with pytest.raises(Disconnected):
                await post(client, server.url, b"poison")
            assert sum(r.endswith(b"poison") for r in server.requests) == 2   # the first send and one resend
            await client.close()
    asyncio.run(go())


def test_a_compressed_body_is_decompressed_no_further_than_the_largest_body_read():
    bomb = gzip.compress(b"\0" * 50_000_000, compresslevel=1)   # some 200 kB that inflate to 50 MB
    reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb) + bomb
    small = gzip.compress(BODY)
    fine = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(small) + small

    async def go():
        async with ByteServer(lambda n, body: [reply] if body == b"bomb" else [fine]) as server:
            client = Client(timeout=10, max_body=1_000_000)
            response, body = await post(client, server.url, b"bomb", limit=1_000_000)
            assert len(body) == 1_000_001 and response.size == 1_000_001 and not response.done
            response, body = await post(client, server.url, b"fine", limit=1_000_000)
            assert body == BODY and response.done and server.connections == 2
            await client.close()
    asyncio.run(go())


def test_a_gzip_bomb_fails_its_sample_as_too_large_without_holding_the_inflated_body():
    bomb = gzip.compress(b"\0" * 50_000_000, compresslevel=1)
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(bomb) + bomb

    async def go():
        async with ByteServer(lambda n, body: [reply]) as server:
            info = ModelInfo(name="m", url=server.url.rsplit("/", 1)[0], model="m", max_reply_mb=1, retry_attempts=2)
            endpoint = Endpoint(info)
            await endpoint.open()
            tracemalloc.start()
            try:
                with pytest.raises(RequestFailed, match=r"^reply too large: more than 1 MB \(max_reply_mb\)$") as failed:
                    await endpoint.post("/chat", b"{}", "application/json", lambda payload: payload)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            await endpoint.close()
            assert failed.value.attempts == 1 and len(server.requests) == 1
            assert peak < 10_000_000   # the 50 MB it inflates to were never held
    asyncio.run(go())


def _event(delta: str, finish=None) -> bytes:
    choice = {"index": 0, "delta": {"content": delta} if delta else {}, "finish_reason": finish}
    return b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n"


@pytest.mark.parametrize("ending, whole", [
    (_event("", "stop"), True),               # the last event says why it stopped
    (b"data: [DONE]\n\n", True),             # or the stream's end marker does
    (b"", False),                             # cut between two events
    (_event("three")[:-2], False),            # cut before an event's blank line
])
def test_an_http10_stream_that_ends_at_the_close_is_whole_only_when_it_says_it_ended(ending, whole):
    class Handler(http.server.BaseHTTPRequestHandler):   # Python's own server: HTTP/1.0, the body ends at the close
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(_event("one ") + _event("two ") + ending)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()

    async def go():
        info = ModelInfo(name="m", url=f"http://127.0.0.1:{server.server_address[1]}/v1", model="m", stream=True, retry_attempts=1)
        endpoint = Endpoint(info)
        await endpoint.open()
        try:
            reply = await endpoint.post("/chat/completions", b"{}", "application/json", lambda payload: payload["choices"][0])
            return reply.value["message"]["content"]
        except RequestFailed as failed:
            return failed.reason, failed.attempts
        finally:
            await endpoint.close()
    try:
        outcome = asyncio.run(go())
    finally:
        server.shutdown()
        server.server_close()
    assert outcome == ("one two " if whole else (STREAM_CUT, 2))


def test_an_idle_connection_that_received_stray_bytes_is_closed_not_left_open_when_the_pool_skips_it():
    closed: list[int] = []

    async def serve(reader, writer):
        number = len(closed)
        closed.append(0)
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(2)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                await asyncio.sleep(0.05)
                writer.write(b"\r\n")   # a stray line after the reply, as some servers write one
        except (asyncio.IncompleteReadError, ConnectionError):
            closed[number] = 1   # the client closed it
        finally:
            writer.close()

    async def go():
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
        client = Client(timeout=5)
        await post(client, url, b"{}")
        await asyncio.sleep(0.2)   # the stray bytes arrive while the connection is idle
        await post(client, url, b"{}")
        await asyncio.sleep(0.2)
        assert closed == [1, 0]   # the first was closed when it was found unusable, the second serves on
        await client.close()
        server.close()
    asyncio.run(go())


@pytest.mark.parametrize("seed", range(4))
def test_a_head_whose_lines_end_in_a_bare_lf_is_read_and_crlfs_in_its_body_stay_body(seed):
    body = b'{"text": "a\r\n\r\nb"}'
    reply = (b"HTTP/1.1 100 Continue\n\nHTTP/1.1 200 OK\nContent-Type: application/json\r\nContent-Length: %d\n\n" % len(body)) + body

    async def go():
        async with ByteServer(lambda n, request: split_everywhere(reply, seed + n)) as server:
            client = Client(timeout=5)
            for _ in range(2):
                response, got = await post(client, server.url)
                assert (response.status, response.content_type, got) == (200, "application/json", body)
            assert server.connections == 1
            await client.close()
    asyncio.run(go())


def test_a_server_that_answered_before_and_then_drops_a_request_gets_no_hint_about_https():
    async def go():
        async with ByteServer(lambda n, body: [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"] if n == 0 else None) as server:
            client = Client(timeout=5)
            await post(client, server.url)
            with pytest.raises(Disconnected) as dropped:
                await post(client, server.url)
            assert "https" not in str(dropped.value)
            await client.close()
        async with ByteServer(lambda n, body: None) as server:   # never a byte: it may be a TLS server
            with pytest.raises(Disconnected, match="if the server speaks TLS, write https:// instead of http:// in url"):
                await post(Client(timeout=5), server.url)
    asyncio.run(go())


def test_an_endpoints_requests_reuse_its_kept_alive_connections_however_many_are_sent():
    """A run's requests to one endpoint travel on at most batch_size connections, each reused: a connection opened
    per request (one the pool failed to take back) would cost a connect, and a TCP handshake, every time."""
    from lalmeval.config.schema import ModelInfo
    from lalmeval.inference.client import Endpoint

    reply = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()

    async def go():
        async with ByteServer(lambda n, body: [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(reply), reply]) as server:
            endpoint = Endpoint(ModelInfo(name="m", url=server.url.rsplit("/chat", 1)[0], model="m", batch_size=4))
            await endpoint.open()
            replies = await asyncio.gather(*(endpoint.post("/chat", b'{"q": 1}', "application/json", lambda p: p) for _ in range(60)))
            await endpoint.close()
            assert len(replies) == 60 and len(server.requests) == 60
            assert server.connections <= 4
    asyncio.run(go())
