"""Secret redaction: every text that reaches a file or the console passes through one Redactor."""

from __future__ import annotations

import base64
import json
import re
from contextlib import contextmanager
from typing import Any, Iterable, Iterator, Sequence
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from lalmeval.errors import UserError
from lalmeval.text import printable


REDACTED = "<redacted>"

# Shorter values cannot be told apart from ordinary text (vLLM users write `auth_token: EMPTY`, a
# throwaway token may be `x`): replacing them inside replies, model ids or URLs would change what is
# recorded and compared. They are blanked where they are the secret (their own field), nowhere else.
MIN_SECRET_LENGTH = 6
# A secret's first and last this many characters are secret wherever they appear, and so is any longer
# run of its start or end: OpenAI's 401 echoes a key as "sk-proj-ab****wxyz", a cut message keeps half
# of a key, and neither may show where the key begins or ends.
END_LENGTH = 6
# How far a stream must be held back so that a URL's `user:password@` split between two chunks is still seen.
USERINFO_HOLD = 512


def _base64_forms(value: str) -> set[str]:
    """A secret as base64 (standard and URL-safe) of itself or of `Bearer <secret>`: whole, padded or not, and the
    characters that spell it at any of the three byte offsets it can take inside a longer encoded text."""
    forms = set()
    for data in (value.encode("utf-8"), b"Bearer " + value.encode("utf-8")):
        for shift in range(3):
            encoded = base64.b64encode(b"\0" * shift + data).decode("ascii")
            first = -(-8 * shift // 6)                      # the first character made of the secret's bits only
            last = (8 * (shift + len(data))) // 6           # one past the last such character
            core = encoded[first:last]
            whole = [encoded, encoded.rstrip("=")] if shift == 0 else []
            for text in (core, *whole):
                forms |= {text, text.translate(_URL_SAFE)}
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


_URL_SAFE = str.maketrans("+/", "-_")


def _forms(value: str) -> set[str]:
    """The spellings a secret can take once it is embedded in text: raw, upper- and lower-cased, JSON-escaped,
    repr, URL-quoted, base64 (an endpoint echoing an Authorization header encoded)."""
    forms = {value, value.upper(), value.lower(), json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1],
             repr(value)[1:-1], quote(value, safe="")} | _base64_forms(value)
    # A JSON-encoded reply that itself holds a repr (or the reverse) doubles the backslashes again.
    forms |= {json.dumps(form)[1:-1] for form in list(forms)}
    # PHP, Jackson and many gateways write `/` as `\/` (valid JSON for the same string).
    forms |= {form.replace("/", "\\/") for form in list(forms)}
    return {f for f in forms if f}


# `scheme://user:password@host`: the password part, whatever its length.
_USERINFO = re.compile(r"[^\s/?#@:\[\]]*:([^\s/?#@]+)@")


def userinfo_spans(text: str) -> list[tuple[int, int]]:
    """Where the passwords of `scheme://user:password@` URLs stand in `text` (linear: anchored at each '://')."""
    spans = []
    at = text.find("://")
    while at >= 0:
        match = _USERINFO.match(text, at + 3)
        if match:
            spans.append(match.span(1))
        at = text.find("://", at + 3)
    return spans


def _run_length(text: str, start: int, form: str, forward: bool) -> int:
    """How many characters of `form`'s start (forward) or end (backward) stand in `text` from `start`;
    at least END_LENGTH is known. Binary search over slice comparisons: C speed, whatever the text."""
    room = len(text) - start if forward else start
    low, high = END_LENGTH, min(len(form), room)
    while low < high:
        mid = (low + high + 1) // 2
        same = text[start:start + mid] == form[:mid] if forward else text[start - mid:start] == form[-mid:]
        low, high = (mid, high) if same else (low, mid - 1)
    return low


class Redactor:
    """Replaces each secret, in any of its spellings, and any run of END_LENGTH or more characters of its
    start or end, by <redacted>; and the password of every `scheme://user:password@` URL."""

    def __init__(self, values: Iterable[str] = (), min_length: int = MIN_SECRET_LENGTH):
        spelled = {form for value in values if value and len(value) >= min_length for form in _forms(value)}
        self._forms: Sequence[str] = sorted(spelled, key=len, reverse=True)
        self._heads: dict[str, list[str]] = {}
        self._tails: dict[str, list[str]] = {}
        for form in self._forms:
            if len(form) >= END_LENGTH:
                self._heads.setdefault(form[:END_LENGTH], []).append(form)
                self._tails.setdefault(form[-END_LENGTH:], []).append(form)

    def __bool__(self) -> bool:
        return bool(self._forms)

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Every (start, end) of `text` to hide, unmerged."""
        found = userinfo_spans(text) if "://" in text else []
        for head, forms in self._heads.items():
            at = text.find(head)
            while at >= 0:
                found.append((at, at + max(_run_length(text, at, f, True) for f in forms)))
                at = text.find(head, at + 1)
        for tail, forms in self._tails.items():
            at = text.find(tail)
            while at >= 0:
                end = at + END_LENGTH
                found.append((end - max(_run_length(text, end, f, False) for f in forms), end))
                at = text.find(tail, at + 1)
        return found

    def __call__(self, text: str) -> str:
        found = self.spans(text)
        if not found:
            return text
        merged: list[list[int]] = []
        for start, end in sorted(found):
            if merged and start <= merged[-1][1]:  # overlapping or touching: one <redacted>
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        out, done = [], 0
        for start, end in merged:
            out += [text[done:start], REDACTED]
            done = end
        out.append(text[done:])
        return "".join(out)

    def bytes(self, data: bytes) -> bytes:
        """The same for raw bytes (a launched server's output); bytes that are not UTF-8 pass unchanged."""
        return self(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    @property
    def longest(self) -> int:
        """Length in bytes of the longest spelling: how much of a stream to hold back between chunks."""
        return max((len(f.encode("utf-8", "replace")) for f in self._forms), default=0)


def clip(text: str, redactor: Redactor, limit: int) -> str:
    """A message made of outside text: redacted first (cutting first could leave part of a token behind),
    control characters escaped (they would drive the terminal that prints it), then cut to `limit` characters."""
    text = printable(redactor(text))
    return text if len(text) <= limit else text[: limit - 1] + "…"


NO_SECRETS = Redactor()


def scrub(node: Any, redactor: Redactor, keys: bool = True) -> Any:
    """A copy of JSON-like data with every string passed through the redactor, mapping keys too unless
    `keys` is false: data whose keys are lalmeval's own field names (a config, a record) keeps them, as a
    secret that happens to start like `max_audio_seconds` must not turn a field into another."""
    if isinstance(node, dict):
        return {(scrub(k, redactor) if keys else k): scrub(v, redactor, keys) for k, v in node.items()}
    if isinstance(node, (list, tuple)):
        return [scrub(v, redactor, keys) for v in node]
    return redactor(node) if isinstance(node, str) else node


@contextmanager
def redacted_errors(redactor: Redactor) -> Iterator[None]:
    """User errors raised inside are scrubbed: they name URLs, commands and settings, which may hold a secret."""
    try:
        yield
    except UserError as exc:
        text = redactor(str(exc))
        if text == str(exc):
            raise
        raise UserError(text) from None  # not chained: a traceback (--debug) would show the original


# A field name is credential-like when, lower-cased with its separators and camelCase humps removed
# (`x-api-key`, `clientSecret`, `PRIVATE_KEY` → xapikey, clientsecret, privatekey), it contains one of
# CREDENTIAL_PARTS, or one of its words is in CREDENTIAL_WORDS, or it is exactly `key`. Whole words
# only for the short ones: `max_tokens`, `author` and `keywords` are ordinary settings.
CREDENTIAL_PARTS = re.compile(r"apikey|accesskey|privatekey|secretkey|signingkey|subscriptionkey|licensekey|masterkey|accountkey"
                              r"|clientkey|appkey|sshkey|secret|passw|passphrase|pwd|authoriz|oauth|credential|cookie|session"
                              r"|signature|bearer")
CREDENTIAL_WORDS = frozenset({"token", "auth", "jwt", "sig", "pass"})


def is_credential(name: str) -> bool:
    """Whether a request field's name says it carries a credential (CREDENTIAL_PARTS, CREDENTIAL_WORDS, `key`)."""
    words = [w for w in re.split(r"[^a-z0-9]+", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()) if w]
    joined = "".join(words)
    return bool(CREDENTIAL_PARTS.search(joined)) or bool(CREDENTIAL_WORDS & set(words)) or joined == "key"


def _leaves(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, text) of every string or number at any depth of `node` (a credential may be a list of keys,
    or a number YAML read from an unquoted password)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _leaves(value, f"{where}[{index}]")
    elif isinstance(node, str) or (isinstance(node, (int, float)) and not isinstance(node, bool)):
        yield where, str(node)


def _credentials(node: Any, where: str) -> Iterator[tuple[str, str]]:
    """(where, value) of everything under a credential-named key, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if is_credential(str(key)):
                yield from _leaves(value, f"{where}.{key}")
            else:
                yield from _credentials(value, f"{where}.{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _credentials(value, f"{where}[{index}]")


def blank_credentials(node: Any) -> Any:
    """A copy with whatever stands under a credential-named key (a string, a number, a list or an object of
    them) replaced by <redacted>, whatever its length."""
    if isinstance(node, dict):
        return {k: REDACTED if v is not None and not isinstance(v, bool) and is_credential(str(k)) else blank_credentials(v)
                for k, v in node.items()}
    if isinstance(node, list):
        return [blank_credentials(v) for v in node]
    return node


def _secret_fields(config: Any) -> list[tuple[str, str]]:
    """(where, value) of every secret a config holds: model tokens, the judge key, credentials in extra_body."""
    found = [(f"models[{m.name}].auth_token", m.auth_token.get_secret_value()) for m in config.models if m.auth_token]
    if config.judge_properties and config.judge_properties.judge_api_key:
        found.append(("judge_properties.judge_api_key", config.judge_properties.judge_api_key.get_secret_value()))
    for m in config.models:
        found += _credentials(m.generation_kwargs.extra_body, f"models[{m.name}].generation_kwargs.extra_body")
        found += [(f"models[{m.name}].url", secret) for secret in url_secrets(m.url)]
    if config.judge_properties:
        found += [("judge_properties.judge_api_endpoint", p) for p in url_secrets(config.judge_properties.judge_api_endpoint)]
    if config.transcriber is not None:
        if config.transcriber.auth_token:
            found.append(("transcriber.auth_token", config.transcriber.auth_token.get_secret_value()))
        found += [("transcriber.url", secret) for secret in url_secrets(config.transcriber.url)]
    for index, override in enumerate(config.generation_overrides):
        found += _credentials(override.extra_body, f"generation_overrides[{index}].extra_body")
    return [(where, value) for where, value in found if value]


def url_secrets(urls: Any) -> list[str]:
    """The secrets an endpoint URL carries (one URL or a list): the password of `user:password@` and the
    Basic credentials the client makes of it (base64 of `user:password`, which a server may echo); a token
    given as the user name alone (`https://TOKEN@host`, sent as Basic auth); and the values of
    credential-named query parameters (`?api-key=…`, `?key=…`, `?sig=…`)."""
    texts = [urls] if isinstance(urls, str) else [u for u in urls or [] if isinstance(u, str)]
    found = []
    for text in texts:
        parts = urlsplit(text)
        user, colon, password = parts.netloc.rpartition("@")[0].partition(":")
        if colon:
            found += [password, unquote(password), *_basic_credentials(unquote(user), unquote(password))]
        elif len(user) >= MIN_SECRET_LENGTH:  # a short user name is a user name ("admin"), not a token
            found += [user, unquote(user)]
        found += [value for name, value in parse_qsl(parts.query, keep_blank_values=False) if is_credential(name)]
    return list(dict.fromkeys(f for f in found if f))


def _basic_credentials(user: str, password: str) -> list[str]:
    """The base64 an `Authorization: Basic` header carries for these credentials (latin-1 as aiohttp sends it, or UTF-8)."""
    encoded = []
    for encoding in ("latin-1", "utf-8"):
        try:
            encoded.append(base64.b64encode(f"{user}:{password}".encode(encoding)).decode("ascii"))
        except UnicodeEncodeError:
            continue
    return encoded


def raw_secrets(raw: Any) -> list[str]:
    """The secrets of a config not yet validated (its credential-named fields), to scrub its errors."""
    return [value for _, value in _credentials(raw, "")]


def config_secrets(config: Any) -> list[str]:
    """Every secret value a config holds (model tokens, the judge key, credential fields of extra_body)."""
    return [value for _, value in _secret_fields(config)]


def redacted_params(params: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """Generation parameters as recorded and keyed: credentials blanked, secrets scrubbed from the rest."""
    if params.get("extra_body"):
        params = {**params, "extra_body": blank_credentials(params["extra_body"])}
    return scrub(params, redactor)


def redacted_config(config: Any) -> dict:
    """The resolved config as plain data: secret fields blanked, and secrets long enough to tell apart from
    ordinary text replaced wherever else they appear (a launch command, a URL)."""
    data = config.model_dump(mode="json")
    for model in data["models"]:
        if model.get("auth_token"):
            model["auth_token"] = REDACTED
        model["generation_kwargs"] = blank_credentials(model["generation_kwargs"])
    data["generation_overrides"] = blank_credentials(data["generation_overrides"])
    if data.get("judge_properties") and data["judge_properties"].get("judge_api_key"):
        data["judge_properties"]["judge_api_key"] = REDACTED
    if data.get("transcriber") and data["transcriber"].get("auth_token"):
        data["transcriber"]["auth_token"] = REDACTED
    return scrub(data, Redactor(config_secrets(config)), keys=False)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from _strings(value)
    elif isinstance(node, str):
        yield node


def short_secret_warnings(config: Any) -> list[str]:
    """One line per secret too short to scrub that the config repeats elsewhere: there it is written as is."""
    dumped = [text.replace(REDACTED, "") for text in _strings(redacted_config(config))]
    return [f"warning: {where} is shorter than {MIN_SECRET_LENGTH} characters, so it is not scrubbed from other text "
            f"and is written as is where the config repeats it (and in any reply that does); fine for a placeholder "
            f"such as EMPTY, not for a real secret"
            for where, value in _secret_fields(config) if len(value) < MIN_SECRET_LENGTH and any(value in text for text in dumped)]
