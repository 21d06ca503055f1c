"""A lean HTTP/1.1 client for the run's requests: keep-alive connections per origin, each reply read in the protocol's own callback."""

from __future__ import annotations

import asyncio
import base64
import ssl
import threading
import time
import zlib
from collections import defaultdict
from functools import partial
from typing import Optional
from urllib.parse import quote, unquote, urlsplit

from multidict import CIMultiDict, CIMultiDictProxy

MAX_HEAD = 64 * 1024   # bytes of status line and headers; a longer head is not an HTTP reply we can use
DEFAULT_PORTS = {"http": 80, "https": 443}
URL_SAFE = "!#$%&'()*+,/:;=?@[]~"   # kept as written in a request target: reserved characters and escapes already made
Piece = tuple[bytes, float]   # body bytes of one network read, and perf_counter when they arrived
READ_SIZE = 256 * 1024   # bytes one network read may take (as asyncio's own reads)
_reads = threading.local()   # the buffer every read of a thread's connections lands in, copied out at once


class HTTPError(Exception):
    """No usable HTTP reply: the connection could not be made, closed early, or did not speak HTTP/1.x."""


class ConnectFailed(HTTPError):
    """The connection could not be made."""


class CertificateFailed(ConnectFailed):
    """TLS refused the server's certificate; `certificate_error` says why."""

    def __init__(self, message: str, certificate_error: str):
        super().__init__(message)
        self.certificate_error = certificate_error


class Disconnected(HTTPError):
    """The server closed the connection before its reply was complete."""


class BadResponse(HTTPError):
    """What came back is not an HTTP/1.x reply."""


class Response:
    """A reply whose head has arrived; its body arrives as pieces, one per network read, into `pieces`."""

    def __init__(self, status: int, reason: str, headers: CIMultiDictProxy, keep_alive: bool):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.keep_alive = keep_alive
        self.by_close = False   # the body ends where the server closes: a cut looks the same as its end
        length = headers.get("Content-Length")
        self.content_length: Optional[int] = int(length) if length is not None and length.strip().isdigit() else None
        self.content_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        self.pieces: list[Piece] = []
        self.size = 0
        self.done = False
        self.error: Optional[BaseException] = None
        self._waiter: Optional[asyncio.Future] = None
        self._connection: Optional[_Connection] = None
        self._taken = 0

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _more(self) -> None:
        """Wait for the next piece of the body, its end, or its failure."""
        if self.error is not None:
            raise self.error
        if not self.done:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            if self.error is not None:
                raise self.error

    async def read(self, limit: int) -> bytes:
        """The whole body, or its first `limit` + 1 bytes when it is longer (the caller decides what that means)."""
        while not self.done and self.size <= limit:
            await self._more()
        if self.error is not None:
            raise self.error
        body = b"".join(piece for piece, _ in self.pieces) if len(self.pieces) != 1 else self.pieces[0][0]
        return body[: limit + 1]

    async def next_pieces(self) -> list[Piece]:
        """The pieces that arrived since the last call, waiting for one when none has; [] once the body has ended."""
        while self._taken == len(self.pieces) and not self.done:
            await self._more()
        if self.error is not None:
            raise self.error
        fresh = self.pieces[self._taken:]
        self._taken = len(self.pieces)
        return fresh

    def pause_reading(self) -> None:
        """Leave what the server sends in the socket for now (read later in fewer, larger reads)."""
        if self._connection is not None:
            self._connection.pause()

    def resume_reading(self) -> None:
        if self._connection is not None:
            self._connection.resume()


class _Connection(asyncio.BufferedProtocol):
    """One keep-alive connection: writes a request, parses its reply as the bytes arrive (head, then a body by
    length, by chunks, or to the close), and hands the body to the Response piece by piece.

    Reads land in one buffer kept for the thread (recv_into) and only the bytes that came are copied out: a plain
    recv would allocate READ_SIZE bytes on every read and shrink them, which costs a read of a few kilobytes about
    three times the read itself (a streamed reply is many such reads)."""

    def __init__(self, max_body: int = 0) -> None:
        self.max_body = max_body              # bytes of a decompressed body worth holding (0: any); see _inflated
        self.transport: Optional[asyncio.Transport] = None
        self.closed = False
        self.used = False                     # a request was written on it before (a reused connection)
        self._buffer = b""
        self._response: Optional[Response] = None
        self._head_waiter: Optional[asyncio.Future] = None
        self._mode = ""                       # body: "length", "chunked", "close", or "" while reading a head
        self._left = 0                        # bytes of the body ("length") or of the current chunk ("chunked") still due
        self._chunk_state = "size"            # chunked: "size", "data", "crlf", "trailer"
        self._inflate: Optional["zlib._Decompress"] = None
        self._wrapped_unknown = False
        self._got_bytes = False               # any byte of a reply arrived (a reused connection closed before: stale)
        self._paused = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Optional[Exception]) -> None:
        self.closed = True
        response = self._response
        if response is not None and not response.done and self._mode == "close" and exc is None:
            self._finish(b"")   # a body delimited by the close of the connection ends here
            return
        self._fail(Disconnected("server closed the connection" + (f": {exc}" if exc else "") + " before its reply was complete"))

    def get_buffer(self, sizehint: int) -> memoryview:
        view = getattr(_reads, "view", None)
        if view is None:
            view = _reads.view = memoryview(bytearray(READ_SIZE))
        return view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(_reads.view[:nbytes]))

    def data_received(self, data: bytes) -> None:
        self._got_bytes = True
        try:
            self._feed(data)
        except HTTPError as exc:
            self._fail(exc)
            self.abort()

    # -- the request
    def send(self, head: bytes, body: bytes) -> asyncio.Future:
        """Write one request; the future resolves to its Response once the reply's head has arrived."""
        assert self.transport is not None and self._response is None
        self.used = True
        self._buffer, self._mode, self._got_bytes = b"", "", False
        self._head_waiter = asyncio.get_running_loop().create_future()
        self.transport.writelines((head, body)) if body else self.transport.write(head)
        return self._head_waiter

    def _feed(self, data: bytes) -> None:
        if not self._mode:
            self._buffer += data
            if not self._read_head():
                return
            data, self._buffer = self._buffer, b""
        if data:
            self._body(data)

    def _read_head(self) -> bool:
        """Parse the reply's head once it is whole (skipping 1xx interim replies); False while more is due."""
        while True:
            buffer = self._buffer
            end, size = buffer.find(b"\r\n\r\n"), 4
            status_end = buffer.find(b"\n", 0, 64)
            if status_end > 0 and buffer[status_end - 1] != 13:   # 13: CR. A status line ended by a bare LF, which
                end, size = self._bare_lf_end(buffer)          # RFC 9112 2.2 lets a client accept (aiohttp did)
            if end < 0:
                if len(buffer) > MAX_HEAD:
                    raise BadResponse(f"reply head longer than {MAX_HEAD} bytes")
                return False
            text = buffer[:end].decode("latin-1")
            lines = text.split("\r\n") if size == 4 else [line.rstrip("\r") for line in text.split("\n")]
            self._buffer = buffer[end + size:]
            version, _, rest = lines[0].partition(" ")
            code, _, reason = rest.partition(" ")
            if not version.startswith("HTTP/1.") or not code.isdigit() or len(code) != 3:
                raise BadResponse(f"not an HTTP/1.x reply: {lines[0][:80]!r}")
            status = int(code)
            if 100 <= status < 200:
                continue
            headers: CIMultiDict[str] = CIMultiDict()
            for line in lines[1:]:
                name, colon, value = line.partition(":")
                if not colon or not name or name != name.strip():
                    raise BadResponse(f"malformed header line: {line[:80]!r}")
                headers.add(name, value.strip())
            self._start(status, reason, version, CIMultiDictProxy(headers))
            return True

    @staticmethod
    def _bare_lf_end(buffer: bytes) -> tuple[int, int]:
        """Where a head whose lines end in LF ends (its blank line, LF or CRLF), and that line's length; -1 while due."""
        end = buffer.find(b"\n\n")
        crlf = buffer.find(b"\n\r\n", 0, end if end >= 0 else len(buffer))
        return (crlf, 3) if crlf >= 0 else (end, 2)

    def _start(self, status: int, reason: str, version: str, headers: CIMultiDictProxy) -> None:
        connection = (headers.get("Connection") or "").lower()
        keep_alive = "close" not in connection and (version != "HTTP/1.0" or "keep-alive" in connection)
        response = self._response = Response(status, reason, headers, keep_alive)
        response._connection = self
        encoding = (headers.get("Content-Encoding") or "").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS)
            self._wrapped_unknown = encoding == "deflate"   # its first byte says whether it has its zlib header
        elif encoding not in ("", "identity"):
            raise BadResponse(f"unsupported Content-Encoding {encoding!r}")
        else:
            self._inflate = None
        if status in (204, 304):   # never a body, whatever the head says of one (RFC 9112 6.3)
            self._mode, self._left = "length", 0
        elif "chunked" in (headers.get("Transfer-Encoding") or "").lower():
            self._mode, self._chunk_state = "chunked", "size"
        elif response.content_length is not None:
            if len(lengths := headers.getall("Content-Length")) > 1 and len(set(lengths)) > 1:
                # Two lengths: which one frames the body is a guess, and a wrong guess reads the next reply's bytes.
                raise BadResponse(f"two Content-Length headers that differ: {', '.join(lengths)[:40]}")
            self._mode, self._left = "length", response.content_length
        elif headers.get("Content-Length") is not None:
            raise BadResponse(f"bad Content-Length {headers.get('Content-Length')!r}")
        else:
            self._mode, response.keep_alive, response.by_close = "close", False, True
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(response)
        if self._mode == "length" and self._left == 0:
            self._finish(b"")

    def _body(self, data: bytes) -> None:
        if not self._mode:
            raise BadResponse("bytes after the end of a reply")
        if self._mode == "length":
            if len(data) > self._left:
                raise BadResponse("more bytes than the reply's Content-Length")
            self._left -= len(data)
            self._finish(data) if self._left == 0 else self._piece(data)
        elif self._mode == "close":
            self._piece(data)
        else:
            self._chunks(data)

    def _chunks(self, data: bytes) -> None:
        """Chunked transfer coding: the data of every chunk that arrived in this read becomes one piece. Whole chunks
        are cut in a tight loop (a stream of hundreds of small events is hundreds of chunks); a chunk cut by the read
        waits in the buffer for the rest of it."""
        buffer = self._buffer + data if self._buffer else data
        at, out, end_of_data = 0, [], len(buffer)
        if self._chunk_state == "data":   # the rest of a chunk begun in an earlier read
            take = min(self._left, end_of_data)
            out.append(buffer[:take])
            at, self._left = take, self._left - take
            if self._left:
                self._buffer = b""
                return self._piece(out[0]) if take else None
            self._chunk_state = "crlf"
        find, view = buffer.find, memoryview(buffer)   # chunks are cut as views: their bytes are copied once, by the join
        if self._chunk_state == "size":   # the usual run: whole chunks back to back, each cut by a few calls in C
            ends_line = buffer.startswith
            while (line_end := find(b"\r\n", at, at + 20)) > at:
                try:
                    size = int(buffer[at:line_end], 16)
                except ValueError:
                    break
                stop = line_end + 2 + size
                if size <= 0 or not ends_line(b"\r\n", stop):
                    break   # the body's end, a chunk this read cut, or a bad one: the loop below reads it
                out.append(view[line_end + 2:stop])
                at = stop + 2
        while True:
            if self._chunk_state == "crlf":
                if not b"\r\n".startswith(buffer[at:at + 2]):
                    raise BadResponse("chunk data not followed by CRLF")
                if end_of_data - at < 2:
                    break
                if buffer[at:at + 2] != b"\r\n":
                    raise BadResponse("chunk data not followed by CRLF")
                at += 2
                self._chunk_state = "size"
            if self._chunk_state == "trailer":
                if buffer.startswith(b"\r\n", at) or find(b"\r\n\r\n", at) >= 0:
                    self._buffer = b""
                    return self._finish(b"".join(out))
                if end_of_data - at > MAX_HEAD:   # trailer fields are a head: bounded as one
                    raise BadResponse(f"chunked trailer longer than {MAX_HEAD} bytes")
                break
            line_end = find(b"\r\n", at)
            if line_end < 0:
                if end_of_data - at > 1024:
                    raise BadResponse("chunk size line too long")
                break
            try:
                size = int(buffer[at:line_end], 16)
            except ValueError:
                size = self._size_with_extension(buffer[at:line_end])
            if size < 0:
                raise BadResponse(f"bad chunk size {buffer[at:line_end][:20]!r}")
            start = line_end + 2
            if size == 0:
                at, self._chunk_state = start, "trailer"
                continue
            stop = start + size
            if stop + 2 <= end_of_data and buffer[stop:stop + 2] == b"\r\n":   # the usual case: a whole chunk
                out.append(view[start:stop])
                at = stop + 2
                continue
            take = min(size, end_of_data - start)
            out.append(view[start:start + take])
            at, self._left = start + take, size - take
            self._chunk_state = "data" if self._left else "crlf"
            if self._left:
                break
        self._buffer = buffer[at:] if self._chunk_state != "data" else b""
        if out:
            self._piece(b"".join(out))

    @staticmethod
    def _size_with_extension(line: bytes) -> int:
        """A chunk size line with an extension (`1a;name=value`), or a bad one."""
        size = line.split(b";", 1)[0].strip()
        try:
            return int(size, 16)
        except ValueError:
            raise BadResponse(f"bad chunk size {size[:20]!r}") from None

    def _piece(self, data: bytes, last: bool = False) -> None:
        response = self._response
        if response is None:
            raise BadResponse("bytes after the end of a reply")
        if self._inflate is not None:
            data = self._inflated(data, response, last)
            if self._response is None:
                return
        if data:
            response.pieces.append((data, time.perf_counter()))
            response.size += len(data)
        if last:
            response.done = True
            self._response = None
            self._mode = ""
        response._wake()

    def _inflated(self, data: bytes, response: Response, last: bool) -> bytes:
        """A compressed piece, decompressed no further than max_body + 1 bytes of body: a kilobyte of gzip can hold a
        gigabyte of zeros. Past that the reply is left unread (the reader sees it is longer than it takes, and
        the connection is closed); the bytes up to it are its last piece."""
        inflate = self._inflate
        assert inflate is not None
        if self._wrapped_unknown and data:
            self._wrapped_unknown = False
            if data[0] & 0x0F != 8:   # deflate without its zlib header, as some servers send it (and aiohttp read)
                inflate = self._inflate = zlib.decompressobj(-zlib.MAX_WBITS)
        room = self.max_body + 1 - response.size if self.max_body else 0
        try:
            data = inflate.decompress(data, max(room, 1) if self.max_body else 0)
            if self.max_body and (inflate.unconsumed_tail or len(data) >= room):
                response.pieces.append((data, time.perf_counter()))
                response.size += len(data)
                self._response = None   # never done, never failed: too large is for its reader to say
                response._wake()
                self.abort()
                return b""
            return data + (inflate.flush() if last else b"")
        except zlib.error as exc:
            raise BadResponse(f"cannot decompress the reply: {exc}") from None

    def _finish(self, data: bytes) -> None:
        self._piece(data, last=True)

    def _fail(self, exc: BaseException) -> None:
        waiter, self._head_waiter = self._head_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        response, self._response = self._response, None
        if response is not None and not response.done:
            response.error = exc
            response._wake()

    def time_out(self) -> None:
        """The request took longer than its timeout: whatever waits for it raises TimeoutError."""
        self._fail(asyncio.TimeoutError())
        self.abort()

    def pause(self) -> None:
        if not self._paused and self.transport is not None and not self.closed:
            self._paused = True
            self.transport.pause_reading()

    def resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def reusable(self) -> bool:
        return not self.closed and self._response is None and not self._mode and not self._buffer and not self._paused


class _Origin:
    """What every request to one scheme://host:port shares: where to connect and the head's fixed lines."""

    def __init__(self, scheme: str, host: str, port: int, authorization: Optional[str]):
        self.scheme, self.host, self.port = scheme, host, port
        shown = f"[{host}]" if ":" in host else host
        self.host_line = f"Host: {shown}" + ("" if port == DEFAULT_PORTS[scheme] else f":{port}") + "\r\n"
        self.authorization = authorization
        self.name = f"{shown}:{port}"
        self.answered = False   # a reply's head came from it: it speaks HTTP on this scheme


def _parse(url: str) -> tuple[_Origin, str]:
    """The origin of `url` and its request target, as a request line can carry them: a space or a character beyond
    ASCII in the path or query is percent-encoded, a host name beyond ASCII is spelt in IDNA (as aiohttp sent them)."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS[parts.scheme]
        host = parts.hostname or ""
        host = host if host.isascii() else host.encode("idna").decode("ascii")
    except (KeyError, ValueError, UnicodeError):
        host, port = "", 0
    if not host:   # the URL is named by its scheme only: the rest may hold a key
        raise ConnectFailed(f"not an http(s) URL with a host and a valid port: {url.split(':', 1)[0][:10]}://...")
    authorization = None
    if parts.username is not None:   # user:password@host, as a browser would send it
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode()
    target = quote(parts.path or "/", safe=URL_SAFE) + (f"?{quote(parts.query, safe=URL_SAFE)}" if parts.query else "")
    return _Origin(parts.scheme, host, port, authorization), target


class Client:
    """Keep-alive HTTP/1.1 connections, per origin, for one endpoint. A request has a total timeout, from its start to
    the end of its body; its connection goes back to the pool once the body was read whole (`Request.release`)."""

    def __init__(self, timeout: float, verify_ssl: bool = True, headers: Optional[dict[str, str]] = None, max_idle: int = 64,
                 max_body: int = 0):
        self.timeout = timeout
        self.max_body = max_body   # the most body bytes any reader of a reply takes (0: any); a compressed one stops there
        self.max_idle = max_idle
        self._ssl: "ssl.SSLContext | None" = None
        self._verify = verify_ssl
        self._fixed = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self._idle: dict[tuple[str, str, int], list[_Connection]] = defaultdict(list)
        self._origins: dict[str, tuple[_Origin, str]] = {}
        self._open: set[_Connection] = set()

    def _origin(self, url: str) -> tuple[_Origin, str]:
        """The origin of `url` and the request target (path and query), parsed once per URL."""
        known = self._origins.get(url)
        if known is None:
            known = _parse(url)
            if len(self._origins) > 256:
                self._origins.clear()
            self._origins[url] = known
        return known

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            context = ssl.create_default_context()
            if not self._verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl = context
        return self._ssl

    async def _connect(self, origin: _Origin, deadline: float) -> _Connection:
        loop = asyncio.get_running_loop()
        context = self._context() if origin.scheme == "https" else None
        try:
            _, connection = await asyncio.wait_for(
                loop.create_connection(partial(_Connection, self.max_body), origin.host, origin.port, ssl=context), max(0.0, deadline - loop.time()))
        except ssl.SSLCertVerificationError as exc:
            raise CertificateFailed(f"cannot connect to {origin.name}: {exc}", str(exc)) from None
        except asyncio.TimeoutError:
            raise
        except ssl.SSLError as exc:
            # What OpenSSL says when the answer to its hello is not TLS: the server speaks plain HTTP there.
            plain = exc.reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG")
            hint = " (the server answers in plain HTTP: write http:// instead of https:// in url)" if plain else ""
            raise ConnectFailed(f"cannot connect to {origin.name}: {exc}{hint}") from None
        except OSError as exc:
            raise ConnectFailed(f"cannot connect to {origin.name}: {exc}") from None
        self._open.add(connection)
        return connection

    def _pooled(self, key: tuple[str, str, int]) -> Optional[_Connection]:
        idle = self._idle.get(key)
        while idle:
            connection = idle.pop()
            if connection.reusable():
                return connection
            connection.abort()   # closed by the server, or holding bytes no request asked for: its socket must not linger
            self._open.discard(connection)
        return None

    async def post(self, url: str, body: bytes, headers: dict[str, str]) -> "Request":
        """Send a POST; returns once the reply's head has arrived. Always `release()` the Request (try/finally)."""
        origin, target = self._origin(url)
        lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        if origin.authorization is not None and "Authorization:" not in self._fixed:
            lines += f"Authorization: {origin.authorization}\r\n"
        head = (f"POST {target} HTTP/1.1\r\n{origin.host_line}{self._fixed}{lines}Content-Length: {len(body)}\r\n"
                "Accept: */*\r\nAccept-Encoding: gzip, deflate\r\n\r\n").encode()   # UTF-8, as aiohttp wrote header values
        request = Request(self, (origin.scheme, origin.host, origin.port))
        try:
            pooled = self._pooled(request.key)
            while True:
                connection = pooled or await self._connect(origin, request.deadline)
                request.connection = connection
                try:
                    request.response = await connection.send(head, body)
                    origin.answered = True
                    return request
                except Disconnected as exc:
                    if not origin.answered and not connection._got_bytes and origin.scheme == "http":
                        # A new connection closed without a byte in answer: what a TLS server does with plain HTTP.
                        raise Disconnected(f"{exc} (not a byte in answer: if the server speaks TLS, write https:// "
                                           "instead of http:// in url)") from None
                    # A kept-alive connection closed before a byte of its reply: most likely the server had closed it
                    # meanwhile, so the request goes again, once, on a new connection. (The server may also have read
                    # it and dropped it: a resend on every idle connection would deliver it a dozen times.)
                    if pooled is None or connection._got_bytes:
                        raise
                    self._open.discard(connection)
                    pooled = None
        except BaseException:
            request.release()
            raise

    def _keep(self, key: tuple[str, str, int], connection: _Connection) -> None:
        idle = self._idle[key]
        if connection.reusable() and len(idle) < self.max_idle:
            idle.append(connection)
        else:
            connection.abort()
            self._open.discard(connection)

    async def close(self) -> None:
        for connection in list(self._open):
            connection.abort()
        self._open.clear()
        self._idle.clear()


class Request:
    """One request in flight: its connection, its reply once the head came, and its timeout."""

    def __init__(self, client: Client, key: tuple[str, str, int]):
        self.client, self.key = client, key
        loop = asyncio.get_running_loop()
        self.deadline = loop.time() + client.timeout
        self._timer: Optional[asyncio.TimerHandle] = loop.call_at(self.deadline, self._expire)
        self.connection: Optional[_Connection] = None
        self.response: Optional[Response] = None

    def _expire(self) -> None:
        self._timer = None
        if self.connection is not None:
            self.connection.time_out()

    def release(self) -> None:
        """End the request: its connection goes back to the pool when its reply was read whole, else it is closed."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        connection, self.connection = self.connection, None
        if connection is None:
            return
        response = self.response
        if response is not None and response.done and response.error is None and response.keep_alive:
            self.client._keep(self.key, connection)
        else:
            connection.abort()
            self.client._open.discard(connection)
