"""speech_wer and speech_consistency: what a model said aloud, transcribed by the config's transcriber, as error rates."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Optional, Union

from lalmeval.config.schema import Config
from lalmeval.errors import UserError
from lalmeval.metrics.base import METRICS, Metric, SampleScore, unscored
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.results.records import Record

NO_AUDIO = "no spoken reply: the model entry asks for text only (add modalities: [\"text\", \"audio\"])"


def require_voice(name: str, config: Config) -> None:
    """Refuse to start a metric of spoken replies without a transcriber or a model entry that speaks, naming what to add."""
    if config.transcriber is None:
        raise UserError(f"metric '{name}' transcribes spoken replies and the config has no transcriber: add "
                        "transcriber: {url: \"http://127.0.0.1:{port}/v1\", model: whisper-tiny.en, "
                        "launch: \"lalmeval serve --model whisper-tiny.en --port {port}\"}")
    if not any(m.speaks for m in config.models):
        raise UserError(f"metric '{name}' scores spoken replies and no model entry asks for one: add "
                        "modalities: [\"text\", \"audio\"] to a chat model, or use inference_type: speech")


async def transcript_of(metric: Metric, record: Record) -> Union[str, SampleScore]:
    """The transcript of the record's spoken reply, or the unscored result saying why there is none."""
    if not record.audio_path:
        return unscored(NO_AUDIO)
    transcriber = metric.context.transcriber
    assert transcriber is not None, "check() requires a transcriber"
    try:
        return await transcriber.transcribe(record.audio_path, metric.dataset.iso_language or "en")
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - RequestFailed, an unreadable file: this sample is not scored
        return unscored(f"transcription failed: {getattr(exc, 'reason', None) or exc}")


class SpokenErrorRate(WordErrorRate):
    """An error rate of the transcript of the spoken reply, with the dataset's normalizer and unit."""

    display_fields = frozenset({"reference_norm", "prediction_norm", "speech_transcript"})

    @classmethod
    def check(cls, config: Config) -> None:
        require_voice(cls.name, config)

    def compared(self, record: Record, transcript: str) -> Record:
        """The record as the error rate reads it: the transcript as the prediction, against what it should say."""
        raise NotImplementedError

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        heard = await asyncio.gather(*(transcript_of(self, r) for r in records))
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: [self._scored(r, h) for r, h in zip(records, heard)])

    def _scored(self, record: Record, heard: Union[str, SampleScore]) -> SampleScore:
        if not isinstance(heard, str):
            return heard
        return {**self.score_record(self.compared(record, heard)), "speech_transcript": heard}


@METRICS.register("speech_wer")
class SpeechWER(SpokenErrorRate):
    """Intelligibility: the error rate of the transcript of the spoken reply against the dataset's reference."""

    name = "speech_wer"

    def compared(self, record: Record, transcript: str) -> Record:
        return replace(record, prediction=transcript)


@METRICS.register("speech_consistency")
class SpeechConsistency(SpokenErrorRate):
    """Whether the speech says what the text says: the transcript's error rate against the reply's own text part."""

    name = "speech_consistency"

    def compared(self, record: Record, transcript: str) -> Record:
        said: Optional[str] = record.reply
        return replace(record, reference=said, prediction=transcript)


SPOKEN = "spoken:"


class SpokenContent(Metric):
    """`spoken:<metric>`: any metric (a judge too) scoring what was said, as VoiceBench scores the content of a spoken
    answer: the transcript of each spoken reply stands for the reply, and the postprocessor reads its answer from it."""

    base: type[Metric] = Metric

    @classmethod
    def check(cls, config: Config) -> None:
        require_voice(cls.name, config)
        cls.base.check(config)

    async def score_records(self, records: list[Record]) -> list[SampleScore]:
        heard = await asyncio.gather(*(transcript_of(self, r) for r in records))
        said = [i for i, h in enumerate(heard) if isinstance(h, str)]
        loop = asyncio.get_running_loop()
        spoken = await loop.run_in_executor(None, lambda: [replace(records[i], reply=heard[i], prediction=self.postprocessor.process(heard[i]))
                                                           for i in said])
        scored = await self.base.score_records(self, spoken) if spoken else []
        out: list[SampleScore] = list(heard)   # the reasons of those not heard stand as they are
        for i, item in zip(said, scored):
            out[i] = {**item, "speech_transcript": heard[i]}
        return out


def spoken_variant(name: str, base: type[Metric]) -> type[Metric]:
    """The `spoken:` form of a registered metric (see SpokenContent)."""
    fields = base.display_fields | {"speech_transcript"}
    return type(f"Spoken{base.__name__}", (SpokenContent, base), {"name": SPOKEN + name, "base": base, "display_fields": fields})


METRICS.derive(SPOKEN, spoken_variant)
