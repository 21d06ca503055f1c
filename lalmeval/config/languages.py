"""Language names and ISO 639 codes, and which languages are scored by characters."""

from __future__ import annotations

import re
from typing import Optional

from lalmeval.errors import UserError, closest

NAMES = {
    "english": "en", "chinese": "zh", "mandarin": "zh", "cantonese": "yue", "japanese": "ja",
    "korean": "ko", "thai": "th", "lao": "lo", "burmese": "my", "myanmar": "my", "khmer": "km",
    "french": "fr", "german": "de", "spanish": "es", "italian": "it", "portuguese": "pt",
    "russian": "ru", "arabic": "ar", "hindi": "hi", "dutch": "nl", "vietnamese": "vi",
    "indonesian": "id", "malay": "ms", "turkish": "tr", "polish": "pl", "swedish": "sv",
    "persian": "fa", "welsh": "cy", "catalan": "ca", "estonian": "et", "latvian": "lv",
    "slovenian": "sl", "tamil": "ta", "mongolian": "mn", "ukrainian": "uk", "czech": "cs",
    "greek": "el", "hebrew": "he", "danish": "da", "finnish": "fi", "norwegian": "no",
    "hungarian": "hu", "romanian": "ro", "bengali": "bn", "urdu": "ur", "tagalog": "tl",
    "filipino": "fil", "swahili": "sw", "multilingual": "mul",
}

# ISO 639-3 (and 639-2/B) codes of the languages above, as FLEURS, Common Voice and CallHome name them:
# the same language as its two-letter code, so it gets the same normalizer and unit (cmn is Mandarin: zh).
THREE_LETTER = {
    "eng": "en", "zho": "zh", "chi": "zh", "cmn": "zh", "jpn": "ja", "kor": "ko", "tha": "th", "lao": "lo",
    "mya": "my", "bur": "my", "khm": "km", "fra": "fr", "fre": "fr", "deu": "de", "ger": "de", "spa": "es",
    "ita": "it", "por": "pt", "rus": "ru", "ara": "ar", "hin": "hi", "nld": "nl", "dut": "nl", "vie": "vi",
    "ind": "id", "msa": "ms", "may": "ms", "tur": "tr", "pol": "pl", "swe": "sv", "fas": "fa", "per": "fa",
    "cym": "cy", "wel": "cy", "cat": "ca", "est": "et", "lav": "lv", "slv": "sl", "tam": "ta", "mon": "mn",
    "ukr": "uk", "ces": "cs", "cze": "cs", "ell": "el", "gre": "el", "heb": "he", "dan": "da", "fin": "fi",
    "nor": "no", "nob": "no", "hun": "hu", "ron": "ro", "rum": "ro", "ben": "bn", "urd": "ur", "tgl": "tl",
    "swa": "sw", "swh": "sw",
}

# Scripts written without spaces between words: error rates are counted in characters.
CHARACTER_LANGUAGES = frozenset({"zh", "ja", "ko", "th", "yue", "lo", "my", "km"})

_CODE = re.compile(r"^[a-z]{2,3}([-_][a-z0-9]{2,8})*$")

# Every ISO 639-1 code: a two-letter code outside it is no language ('cn', 'jp'), and taking it as one
# would silently score with another normalizer and unit. (Three-letter ISO 639-3 codes number about
# 7,900, so a three-letter code is taken as given.)
TWO_LETTER = frozenset("""
aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da de dv dz ee el en eo
es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki
kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr
nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th
ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu sh
""".split())
# Withdrawn codes still written (Whisper's 'jw' for Javanese, Java's 'iw' and 'in'): their languages' codes.
_WITHDRAWN = {"iw": "he", "in": "id", "ji": "yi", "jw": "jv", "mo": "ro"}
# Two letters that are a country, not a language: what was probably meant.
_COUNTRY_NOT_LANGUAGE = {"cn": "zh", "jp": "ja", "gr": "el", "dk": "da", "ua": "uk", "cz": "cs", "vn": "vi", "kz": "kk",
                         "ir": "fa", "il": "he", "rs": "sr", "us": "en"}


def iso_code(language: str, where: Optional[str] = None) -> str:
    """'English' → 'en', 'zh-CN' → 'zh', 'cmn_hans_cn' → 'zh'; an unknown name is a UserError naming `where`."""
    text = language.strip().lower()
    if text in NAMES:
        return NAMES[text]
    if _CODE.match(text):
        code = re.split(r"[-_]", text)[0]
        code = _WITHDRAWN.get(code, code)
        if len(code) == 3 or code in TWO_LETTER:
            return THREE_LETTER.get(code, code)
        meant = _COUNTRY_NOT_LANGUAGE.get(code)
        hint = f" ('{code}' is a country code: did you mean '{meant}'?)" if meant else " (not an ISO 639-1 code)"
        raise UserError(f"{where or 'language'}: unknown language '{language}'{hint}")
    raise UserError(f"{where or 'language'}: unknown language '{language}'{closest(text, NAMES)}")


def uses_characters(code: str) -> bool:
    """Whether error rates for this language are character error rates."""
    return code in CHARACTER_LANGUAGES


# Defaults of a runspec's `normalizer:` and `error_unit:` (README, Metrics, names each convention's source).
_NORMALIZERS = {"en": "whisper_english", "zh": "chinese", "yue": "chinese"}
_MIXED_LANGUAGES = frozenset({"zh", "yue"})


def default_normalizer(code: str) -> str:
    """whisper_english for English, chinese for Mandarin and Cantonese, basic for every other language."""
    return _NORMALIZERS.get(code, "basic")


def default_error_unit(code: str) -> str:
    """mixed for Mandarin and Cantonese, character for the other unspaced scripts, word otherwise."""
    if code in _MIXED_LANGUAGES:
        return "mixed"
    return "character" if uses_characters(code) else "word"
