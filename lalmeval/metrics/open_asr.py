"""The Open ASR Leaderboard's English scoring: the `open_asr` normalizer.

As github.com/huggingface/open_asr_leaderboard @ d1e99b25 scores English (`normalizer/
normalizer.py` EnglishTextNormalizer with `normalizer/english_abbreviations.py`, then
`normalizer/eval_utils.py` score_results: kaldialign `batch_error_rate(..., merge_compounds=True)`
over whitespace-split words). It is openai-whisper's English normalizer with these changes:

- More fillers dropped: ah, aha, ahh, ahm, eh, ehehe, em, hm, huh, hum, mhum, uhm, umm, uhuh
  (beside hmm, mm, mhm, mmm, uh, um).
- `'s` → ` is` only after it, he, she, what, that, who, here, there, how, when, where, why, this
  (Whisper expands every `'s`, possessives included).
- After symbols are removed (so hyphens are spaces): et cetera → etc, al/all right → alright,
  how ever → however, wi fi / hi fi / lo fi / sci fi → wifi …, e mail / e book / e commerce →
  email …, x ray → xray, t shirt → tshirt, a m → am, p m → pm, o k → okay.
- Spellings: Whisper's British → American table, corrected and extended (ok, kay → okay,
  etcetera → etc, flyer → flier, mm → hmm …).
- Name variants to one spelling (jon → john, kathryn → catherine, macdonald → mcdonald …).
- Runs of single letters or digits are joined ("b b c" → bbc, "5 g" → 5g); a run holding "a" or
  "i" must be 3 long ("a big cat" stays).

The error rate aligns words so that a compound written split on one side and joined on the other
costs nothing ("white paper" = "whitepaper"; see `compounds.py`).
"""

from __future__ import annotations

import re

from lalmeval.metrics.normalize import NORMALIZERS, Normalizer, openai_whisper_english

_FILLERS = re.compile(r"\b(hmm|mm|mhm|mmm|uh|um|ah|aha|ahh|ahm|eh|ehehe|em|hm|huh|hum|mhum|uhm|umm|uhuh)\b")
_WHISPER_S = r"'s\b"
_PRONOUN_S = (r"\b(it|he|she|what|that|who|here|there|how|when|where|why|this)'s\b", r"\1 is")
_COMPOUNDS = tuple((re.compile(rf"\b{first}\s+{second}\b"), joined) for first, second, joined in (
    ("et", "cetera", "etc"), ("al", "right", "alright"), ("all", "right", "alright"), ("how", "ever", "however"),
    ("wi", "fi", "wifi"), ("hi", "fi", "hifi"), ("lo", "fi", "lofi"), ("sci", "fi", "scifi"), ("e", "mail", "email"),
    ("e", "book", "ebook"), ("e", "commerce", "ecommerce"), ("x", "ray", "xray"), ("t", "shirt", "tshirt"),
    ("a", "m", "am"), ("p", "m", "pm"), ("o", "k", "okay"),
))
# Differences from Whisper's spelling table (english.json): entries added or changed, entries removed.
_SPELLING_CHANGES = {
    "ok": "okay", "kay": "okay", "etcetera": "etc", "mm": "hmm", "flyer": "flier", "archaeological": "archeological",
    "archaeology": "archeology", "cancellation": "cancelation", "cancellations": "cancelations", "travelogue": "travelog",
    "travelogues": "travelogs", "pummelled": "pummeled", "pummelling": "pummeling", "snowploughs": "snowplows",
}
_SPELLING_REMOVED = ("archeological", "cancelation", "cancelations", "flyer / flier", "travelog", "travelogs")
# Canonical name: the variants the leaderboard maps to it.
_NAMES = (
    "allen: alan allan; bridget: bridgette; charlie: charly charley; gary: garry; greg: gregg; jackie: jacky; "
    "joanne: joann joane; kelly: kellye kelli kelley; lily: lilly; michael: micheal; michelle: michele; molly: mollie; "
    "philip: phillip; sally: sallie; stacy: stacey stacie; tracy: tracey tracie; brett: bret; carol: carrol carole carroll; "
    "alison: allison alyson; russell: russel; douglas: douglass; dominic: dominick; rob: robb; chris: kris; "
    "christopher: kristopher cristopher; christina: kristina; kristin: kristen; carl: karl; cathy: kathy; "
    "catherine: katherine kathryn catharine; eric: erik erick; karen: caren caryn karin; caitlin: katelyn kaitlyn kaitlin; "
    "nicole: nikole; veronica: veronika; victor: viktor; victoria: viktoria; kevin: kevan; patrick: patrik; "
    "frederick: frederik fredrick; lucas: lukas; anne: ann; john: jon; jonathan: johnathan jonathon; sarah: sara; "
    "matthew: mathew; nicholas: nicolas; rachel: rachael; rebecca: rebekah; deborah: devorah; teresa: theresa; "
    "susanne: suzanne; anthony: antony; martin: martyn; dennis: denis; lawrence: laurence; thomas: tomas; toby: tobey; "
    "mcarthur: macarthur; mccartney: macartney; mccarthy: macarthy maccarthy; mcdonald: macdonald; mckay: mackay; "
    "mckenzie: mackenzie; mcleod: macleod; mclean: maclean; mcmillan: macmillan; mcintosh: macintosh; "
    "mcintyre: macintyre; mcnamara: macnamara; mcgowan: macgowan; "
    "mohammed: mohamad mohamed mohammad muhammad muhamad muhammed mouhamed mouhamad mahomet; fatima: fatimah; "
    "yousef: yusuf yusef; miriam: myriam; rajiv: rajeev; alfonso: alphonso; brian: bryan; jeffrey: geoffrey jeffery; "
    "jeff: geoff; neil: neal; sean: shaun shawn; shane: shayne; steven: stephen; tony: toni; lee: leigh; louis: lewis; "
    "mark: marc; megan: meghan; natalie: nathalie; robin: robyn; roger: rodger; lindsay: linsey lindsey; "
    "zachary: zackary zachery; zach: zak; sherry: sheri cheri sherrie; terry: terri; laurie: lori; jamie: jaime; "
    "jason: jayson; leslie: lesley; linda: lynda; lynn: lynne; gail: gayle; ronda: rhonda; ivonne: yvonne; "
    "stuart: stewart; walter: walther; simon: symon; colin: collin; dylan: dillon; aaron: aron; arthur: artur; "
    "henry: henri; joseph: josef; peter: pieter"
)
NAMES = {variant: name for entry in _NAMES.split("; ") for name, variants in [entry.split(": ")] for variant in variants.split()}


def join_letter_runs(text: str) -> str:
    """Runs of one-character words (letters or digits) written as one word: "b b c" → bbc, "5 g" → 5g."""
    words, out, i = text.split(), [], 0
    while i < len(words):
        j = i
        while j < len(words) and len(words[j]) == 1 and words[j].isalnum():
            j += 1
        run = words[i:j]
        if not run:
            out.append(words[i])
            i += 1
            continue
        # "a" and "i" are words of their own: a run holding one joins only from three letters up.
        needed = 3 if any(w in ("a", "i") for w in run) else 2
        out += ["".join(run)] if len(run) >= needed else run
        i = j
    return " ".join(out)


@NORMALIZERS.register("open_asr")
class OpenAsrEnglish(Normalizer):
    """The Open ASR Leaderboard's English normalizer, scored with compounds merged (see the module docstring)."""

    convention = ("Open ASR Leaderboard English scoring (github.com/huggingface/open_asr_leaderboard @ d1e99b25: "
                  "normalizer/normalizer.py EnglishTextNormalizer, normalizer/eval_utils.py score_results with kaldialign "
                  "batch_error_rate merge_compounds=True)")
    merge_compounds = True

    def __init__(self, language: str = "") -> None:
        super().__init__(language)
        from whisper_normalizer.basic import remove_symbols_and_diacritics

        whisper = openai_whisper_english()
        self._replacers = [(re.compile(_PRONOUN_S[0]), _PRONOUN_S[1]) if pattern == _WHISPER_S else (re.compile(pattern), text)
                           for pattern, text in whisper.replacers.items()]
        self._numbers = whisper.standardize_numbers
        self._spellings = {**whisper.standardize_spellings.mapping, **_SPELLING_CHANGES}
        for word in _SPELLING_REMOVED:
            self._spellings.pop(word, None)
        self._remove_symbols = remove_symbols_and_diacritics

    def __call__(self, text: str) -> str:
        s = text.lower()
        s = re.sub(r"[<\[][^>\]]*[>\]]", "", s)  # bracketed and parenthesised asides
        s = re.sub(r"\(([^)]+?)\)", "", s)
        s = _FILLERS.sub("", s)
        s = re.sub(r"\s+'", "'", s)
        for pattern, replacement in self._replacers:
            s = pattern.sub(replacement, s)
        s = re.sub(r"(\d),(\d)", r"\1\2", s)  # 1,500 → 1500
        s = re.sub(r"\.([^0-9]|$)", r" \1", s)  # periods not inside a number
        s = self._remove_symbols(s, keep=".%$¢€£")
        for pattern, joined in _COMPOUNDS:
            s = pattern.sub(joined, s)
        s = self._numbers(s)
        s = " ".join(self._spellings.get(w, w) for w in s.split())
        s = " ".join(NAMES.get(w, w) for w in s.split())
        s = join_letter_runs(s)
        s = re.sub(r"[.$¢€£]([^0-9])", r" \1", s)  # symbols left without a number
        s = re.sub(r"([^0-9])%", r"\1 ", s)
        return re.sub(r"\s+", " ", s)
