"""The SSE reader of streamed replies: every spelling of the grammar gives the same completion, broken bodies fail with their reason."""

import asyncio
import base64
import json

import pytest
from aiohttp import web

from lalmeval.config.schema import ModelInfo
from lalmeval.inference.client import Endpoint, RequestFailed
from lalmeval.inference.protocols import PROTOCOLS
from lalmeval.inference.stream import Firsts, _spliced, _written, assemble

WORDS = ["Hello", " there", ",", " friend"]


def _body(sep: bytes = b"\n", extra: bytes = b"") -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]} for w in WORDS]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"completion_tokens": 4}})
    out = b"".join(extra + b"data: " + json.dumps(e).encode() + sep + sep for e in events)
    return out + b"data: [DONE]" + sep + sep


def _marks(raw: bytes) -> list[tuple[int, float]]:
    return [(at + 1, float(at)) for at in range(len(raw))]   # byte i arrived at time i: an offset reads as a time


def test_plain_body_assembles_text_finish_usage_and_first_token_time():
    raw = _body()
    got = assemble(raw, _marks(raw))
    assert got.payload["choices"][0]["message"]["content"] == "Hello there, friend"
    assert got.payload["choices"][0]["finish_reason"] == "stop"
    assert got.payload["usage"] == {"completion_tokens": 4}
    assert got.deltas == 4
    first = raw.index(b'"Hello"')
    assert first < got.first_token < raw.index(b" there")   # dated by the event that carried "Hello"


@pytest.mark.parametrize("sep", [b"\r\n", b"\r"])
def test_crlf_and_cr_line_ends_give_the_same_completion_as_lf(sep):
    plain, other = _body(), _body(sep)
    assert assemble(other, _marks(other)).payload == assemble(plain, _marks(plain)).payload
    assert assemble(other, _marks(other)).deltas == 4


def test_comments_and_other_fields_are_ignored():
    raw = b": keep-alive\n\n" + _body(extra=b"event: message\nid: 7\n: note\n")
    got = assemble(raw, _marks(raw))
    assert got.payload["choices"][0]["message"]["content"] == "Hello there, friend"
    assert raw.index(b'"Hello"') < got.first_token < raw.index(b" there")


def test_data_lines_of_one_event_are_joined():
    raw = b'data: {"choices": [{"index": 0,\ndata: "delta": {"content": "hi"}}]}\n\ndata: [DONE]\n\n'
    assert assemble(raw, _marks(raw)).payload["choices"][0]["message"]["content"] == "hi"


def test_a_body_without_a_final_blank_line_still_counts_its_last_event():
    raw = _body().replace(b"data: [DONE]\n\n", b"")[:-2]
    assert assemble(raw, _marks(raw)).payload["usage"] == {"completion_tokens": 4}


def test_done_alone_is_a_reply_without_events():
    with pytest.raises(ValueError, match="no events"):
        assemble(b"data: [DONE]\n\n", [(14, 0.0)])


@pytest.mark.parametrize("bad", [b"data: {not json}\n\n", b"data: 1, 2\n\n", b"data: [DONE]\n\ndata: {\"a\": \n\n"])
def test_a_malformed_event_fails_naming_it(bad):
    raw = _body().replace(b"data: [DONE]\n\n", b"") + bad
    with pytest.raises(ValueError, match="not one JSON value"):
        assemble(raw, _marks(raw))


def test_a_non_object_event_fails():
    with pytest.raises(ValueError, match="not an object"):
        assemble(b"data: [1]\n\n", [(11, 0.0)])


@pytest.mark.parametrize("size", [1, 3, 7, 50])
def test_firsts_sees_text_and_audio_in_events_split_across_reads(size):
    audio = {"choices": [{"index": 0, "delta": {"audio": {"data": "AAAA"}}}]}
    raw = _body(b"\r\n").replace(b"data: [DONE]", b"data: " + json.dumps(audio).encode() + b"\r\n\r\ndata: [DONE]")
    firsts = Firsts(audio=True)
    for at in range(0, len(raw), size):
        firsts.feed(raw[at:at + size])
    assert firsts.text and firsts.sound


def test_firsts_does_not_see_text_before_its_event_is_complete():
    raw = _body()
    firsts = Firsts(audio=False)
    cut = raw.index(b'"Hello"') + 3
    firsts.feed(raw[:cut])
    assert not firsts.seen
    firsts.feed(raw[cut:])
    assert firsts.seen


def test_a_malformed_streamed_event_fails_the_request_with_its_reason():
    async def chat(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices": [{"index": 0, "delta": {"content": "hi"}}]}\n\n')
        await response.write(b"data: {broken\n\ndata: [DONE]\n\n")
        await response.write_eof()
        return response

    async def scenario() -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        endpoint = Endpoint(ModelInfo(name="m", url=f"http://127.0.0.1:{port}/v1", model="m", stream=True, retry_attempts=0))
        await endpoint.open()
        try:
            protocol = PROTOCOLS.get("openai")
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
            await endpoint.post(protocol.path, body, "application/json", protocol.parse)
            return "no failure"
        except RequestFailed as exc:   # the failure, with the reason a record keeps
            return str(exc)
        finally:
            await endpoint.close()
            await runner.cleanup()

    reason = asyncio.run(scenario())
    assert "malformed JSON reply" in reason and "{broken" in reason


def _openai_event(delta: dict, finish=None, **more) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m", "system_fingerprint": "fp_1",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}], **more}


def _sse(events: list, sep: bytes = b"\n", compact: bool = True) -> bytes:
    dump = (lambda e: json.dumps(e, separators=(",", ":"))) if compact else json.dumps
    return b"".join(b"data: " + dump(e).encode() + sep + sep for e in events) + b"data: [DONE]" + sep + sep


def _same_as_the_general_reader(events: list, compact: bool = True):
    """The LF body (read by the text fast path where it applies) against the CRLF body (read event by event by json)."""
    lf, crlf = _sse(events, compact=compact), _sse(events, b"\r\n", compact=compact)
    fast, general = assemble(lf, _marks(lf)), assemble(crlf, _marks(crlf))
    assert fast.payload == general.payload and fast.deltas == general.deltas
    # the first text is dated by the same event in both (CRLF adds two bytes per event before it)
    assert (fast.first_token is None) == (general.first_token is None)
    return fast


TRICKY = ["plain", ' "quoted" ', "back\\slash", "new\nline", "caf\u00e9 \U0001F600", "", "tab\there", "</script>", "\u2028"]


@pytest.mark.parametrize("compact", [True, False])
def test_text_deltas_in_openais_full_shape_read_as_json_reads_them(compact):
    events = [_openai_event({"role": "assistant", "content": ""})] + [_openai_event({"content": t}) for t in TRICKY]
    events += [_openai_event({}, "stop", obfuscation="abc"), {"id": "chatcmpl-1", "choices": [], "usage": {"completion_tokens": 9}}]
    got = _same_as_the_general_reader(events, compact)
    body = _sse(events, compact=compact)
    assert _written(body, _marks(body)) is not None   # the comparison is of the fast path, not of json with itself
    assert got.payload["choices"][0]["message"]["content"] == "".join(TRICKY)
    assert got.payload["choices"][0]["finish_reason"] == "stop" and got.payload["usage"] == {"completion_tokens": 9}
    assert got.deltas == len([t for t in TRICKY if t])


def test_text_in_an_unusual_event_keeps_its_place_among_usual_ones():
    odd = _openai_event({"content": " middle"})
    odd["choices"][0]["logprobs"] = {"content": [{"token": " middle", "logprob": -0.1}]}
    events = [_openai_event({"content": "first"}), odd, _openai_event({"content": " last"})]
    got = _same_as_the_general_reader(events)
    assert got.payload["choices"][0]["message"]["content"] == "first middle last"


def test_reasoning_and_a_second_choice_beside_usual_text_deltas_are_read_as_json_reads_them():
    events = [_openai_event({"reasoning_content": "think"}), _openai_event({"content": "an"}),
              {"choices": [{"index": 1, "delta": {"content": "other"}}]}, _openai_event({"content": "swer"}), _openai_event({}, "length")]
    got = _same_as_the_general_reader(events)
    message = got.payload["choices"][0]["message"]
    assert message["content"] == "answer" and message["reasoning_content"] == "think"
    assert got.payload["choices"][0]["finish_reason"] == "length"


def test_an_error_event_after_text_deltas_is_the_reply():
    events = [_openai_event({"content": "partial"}), {"error": {"message": "overloaded", "code": 503}}]
    got = _same_as_the_general_reader(events)
    assert got.payload == {"error": {"message": "overloaded", "code": 503}}


def test_a_broken_event_among_usual_ones_still_fails():
    raw = _sse([_openai_event({"content": "ok"})]).replace(b"data: [DONE]", b"data: {\"choices\": [\n\ndata: [DONE]")
    with pytest.raises(ValueError, match="not one JSON value"):
        assemble(raw, _marks(raw))


def test_the_first_text_of_a_usual_reply_is_dated_by_its_own_event():
    events = [_openai_event({"role": "assistant", "content": ""}), _openai_event({"content": "Hi"}), _openai_event({"content": "!"})]
    raw = _sse(events)
    got = assemble(raw, _marks(raw))
    assert raw.index(b'"Hi"') < got.first_token < raw.index(b'"!"')


def _spoken_body(words: list[str]) -> bytes:
    """A spoken reply as OpenAI streams it: transcript deltas, then audio deltas (base64 pcm16), then [DONE]."""
    deltas = [{"audio": {"transcript": w}} for w in words] + [{"audio": {"data": "AAAA" * 50}}, {"audio": {"data": "AQAB"}}]
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(e, ensure_ascii=False).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def test_a_spoken_reply_in_characters_beyond_ascii_is_dated_by_its_events_bytes():
    # The plain reader walks the body as text; a first arrival is still found by the byte its event ends at.
    raw = _spoken_body(["Grüße", " 日本語", " ok"])
    got = assemble(raw, _marks(raw))
    said = got.payload["choices"][0]["message"]["audio"]
    assert said["transcript"] == "Grüße 日本語 ok" and said["data"] == ["AAAA" * 50, "AQAB"]
    # byte i arrived at time i: each first is the time of its event's last byte
    assert got.first_audio == raw.index(b"\n\n", raw.index(b'"AAAA')) - 1
    assert got.first_token == raw.index(b"\n\n", raw.index(b"Gr")) - 1


@pytest.mark.parametrize("spelling", [b"data:", b"data:  "])
@pytest.mark.parametrize("words", [["plain"], ["Grüße", " 日本語"]])
def test_every_spelling_of_a_data_line_gives_the_plain_readers_completion(spelling, words):
    plain = _spoken_body(words)
    other = plain.replace(b"data: ", spelling)
    want, got = assemble(plain, _marks(plain)), assemble(other, _marks(other))
    assert got.payload == want.payload and got.deltas == want.deltas


def test_an_event_with_space_after_its_value_is_still_read():
    raw = _body().replace(b"}\n\n", b"} \n\n")
    assert assemble(raw, _marks(raw)).payload["choices"][0]["message"]["content"] == "Hello there, friend"


@pytest.mark.parametrize("gap", [b"\n", b"\n\n"])
def test_a_value_spread_over_lines_is_read_as_sse_reads_it(gap):
    # SSE ends a data line at its line end: `{"content":` alone is not JSON, even where a JSON parser would read on.
    raw = b'data: {"choices":[{"index":0,"delta":{"content":' + gap + b'"Hi"},"finish_reason":null}]}\n\ndata: [DONE]\n\n'
    with pytest.raises(ValueError, match="not one JSON value"):
        assemble(raw, _marks(raw))
    firsts = Firsts(audio=False)
    firsts.feed(raw)
    assert not firsts.text


B64 = base64.b64encode(bytes(range(256)) * 3).decode()   # 1024 characters, `/` and `+` among them


def _audio_events(event: str) -> bytes:
    """A spoken reply whose second event is `event` (written as is), between a transcript delta and the finish."""
    words = {"choices": [{"index": 0, "delta": {"audio": {"transcript": "hi"}}, "finish_reason": None}]}
    end = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    return (b"data: " + json.dumps(words).encode() + b"\n\ndata: " + event.encode() + b"\n\ndata: " + json.dumps(end).encode()
            + b"\n\ndata: [DONE]\n\n")


@pytest.mark.parametrize("event, data", [
    # OpenAI's own shape, compact; and with spaces around the colon
    ('{"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"audio":{"id":"audio_1","data":"%s",'
     '"expires_at":1,"transcript":""}},"finish_reason":null}],"usage":null}' % B64, B64),
    ('{"choices": [{"index": 0, "delta": {"audio": {"data" : "%s"}}}]}' % B64, B64),
    # an escape in the base64 (`\/`, as some JSON writers spell `/`) is read as JSON reads it
    ('{"choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}}]}' % B64.replace("/", "\\/"), B64),
    # a second data key: JSON keeps the last
    ('{"choices": [{"index": 0, "delta": {"audio": {"data": "%s", "data": "AQAB"}}}]}' % B64, "AQAB"),
    # another long string under a data key elsewhere, and "data" as a value
    ('{"data": "%s", "choices": [{"index": 0, "delta": {"audio": {"data": "AQAB"}}}]}' % B64, "AQAB"),
    ('{"data": "%s", "choices": [{"index": 0, "delta": {"audio": {"data": ""}}}]}' % B64, None),   # no sound at all
    ('{"type": "data", "choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}}]}' % B64, B64),
    ('{"choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}}], "kind": "data"}' % B64, B64),
    # a key that only ends in data; a second data key spelled with an escape (JSON keeps the last)
    ('{"choices": [{"index": 0, "delta": {"audio": {"\\"data": "%s", "data": "AQAB"}}}]}' % B64, "AQAB"),
    ('{"choices": [{"index": 0, "delta": {"audio": {"data": "%s", "d\\u0061ta": ""}}}]}' % B64, None),
    ('{"data": "%s", "choices": [{"index": 0, "delta": {"audio": {"d\\u0061ta": "AQAB"}}}]}' % B64, "AQAB"),
    # the long data string is not the audio's: an audio object without data, an audio that is no object
    ('{"data": "%s", "choices": [{"index": 0, "delta": {"audio": {"transcript": "x"}}}]}' % B64, None),
    ('{"data": "%s", "choices": [{"index": 0, "delta": {"audio": ["x"]}}]}' % B64, None),
])
def test_long_audio_data_reads_as_json_reads_it_whatever_the_event_around_it(event, data):
    # A delta's base64 is taken from the text as it stands, not scanned; what comes out is what json.loads reads.
    raw = _audio_events(event)
    got = assemble(raw, _marks(raw))
    assert got.payload["choices"][0]["message"]["audio"]["data"] == ([data] if data else [])
    assert got.payload == assemble(raw.replace(b"\n", b"\r\n"), _marks(raw)).payload   # the spec reader: json.loads per event
    assert got.first_audio == (raw.index(b"\n\n", raw.index(b"data: {", 10)) - 1 if data else None)


@pytest.mark.parametrize("broken", [
    '{"choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}}]} 1' % B64,      # two values on the line
    '{"choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}}]' % B64,          # a value cut short
    '{"choices": [{"index": 0, "delta": {"audio": {"data": "%s" "x"}}}]}' % B64,     # not JSON after the data
])
def test_a_broken_event_with_long_audio_data_still_fails(broken):
    raw = _audio_events(broken)
    with pytest.raises(ValueError, match="not one JSON value"):
        assemble(raw, _marks(raw))


def test_a_delta_of_words_and_sound_together_keeps_both_in_order():
    events = [{"choices": [{"index": 0, "delta": {"audio": {"transcript": w, "data": d}}}]} for w, d in (("a", B64), ("", "AQAB"), ("b", ""))]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    got = assemble(raw, _marks(raw))
    said = got.payload["choices"][0]["message"]["audio"]
    assert said["transcript"] == "ab" and said["data"] == [B64, "AQAB"] and got.deltas == 2


def test_a_usual_audio_delta_is_read_without_scanning_its_base64():
    # OpenAI's shape and lalmeval serve's: the base64 is sliced from the text (the quick path is the one taken)
    for event in ('{"choices":[{"index":0,"delta":{"audio":{"id":"a","data":"%s","transcript":""}},"finish_reason":null}]}' % B64,
                  '{"choices": [{"index": 0, "delta": {"audio": {"data": "%s"}}, "finish_reason": null}]}' % B64):
        text = "data: " + event
        got = _spliced(text, 6, len(text))
        assert got == json.loads(event) and got["choices"][0]["delta"]["audio"]["data"] == B64
    # and is not taken where a full scan could read otherwise: an escape anywhere on the line, a short string
    for event in ('{"choices": [{"index": 0, "delta": {"audio": {"data": "%s", "transcript": "\\u00e9"}}}]}' % B64,
                  '{"choices": [{"index": 0, "delta": {"audio": {"data": "AQAB"}}}]}'):
        text = "data: " + event
        assert _spliced(text, 6, len(text)) is None
