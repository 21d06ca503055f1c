"""CHAT transcripts: structure, time bullets, and one test per cleaning rule."""

from pathlib import Path

import pytest

from lalmeval.data.chat import clean_text, parse_chat, read_chat, span_of
from lalmeval.errors import UserError

HEADER = (
    "@UTF8\n@Begin\n@Languages:\teng\n@Participants:\tA Subject, B Subject\n"
    "@ID:\teng|CallHome|A||female|||Subject|||\n@ID:\teng|CallHome|B||male|||Subject|||\n@Media:\t4065, audio\n"
)


def chat(*tiers: str) -> str:
    return HEADER + "".join(t + "\n" for t in tiers) + "@End\n"


def B(start_ms: int, end_ms: int) -> str:
    return f"\x15{start_ms}_{end_ms}\x15"


@pytest.mark.parametrize("raw,heard", [
    # retracings and repetitions were spoken: the words stay, the code goes
    ("I want [/] I want to go .", "I want I want to go"),
    ("<I thought> [//] I think so .", "I thought I think so"),
    ("<we were> [///] they went .", "we were they went"),
    # [x N]: said N times
    ("no [x 3] .", "no no no"),
    ("<yes I do> [x 2] .", "yes I do yes I do"),
    # other bracketed codes go with their content
    ("gonna [: going to] go .", "gonna go"),
    ("<what a day> [=! laughs] .", "what a day"),
    ("he's here [% sic] .", "he's here"),
    ("that [= the car] one [*] [?] [!] .", "that one"),
    ("<okay> [>] fine [<] .", "okay fine"),
    ("[- spa] hola amigo .", "hola amigo"),
    ("bueno [+ bch] .", "bueno"),
    # &-codes are not words
    ("&=laughs yes .", "yes"),
    ("&-uh I &-um think .", "I think"),
    ("&+fr friend .", "friend"),
    ("right &*B:mhm so .", "right so"),
    ("&{l=laughs funny story &}l=laughs .", "funny story"),
    # unintelligible, phonetic-only, untranscribed
    ("it was xxx yyy www there .", "it was there"),
    ("xxx@s .", ""),
    # omitted words were not said
    ("0is he here ?", "he here"),
    # special form markers
    ("it is@s:spa fine a@l b@l c@l .", "it is fine a b c"),
    # incomplete words are written in full
    ("(be)cause I was runnin(g) .", "because I was running"),
    # compounds and names
    ("ice+cream in New_York .", "ice cream in New York"),
    # terminators, linkers, precodes, commas, tag and vocative
    ("well +...", "well"),
    ("I was +/.", "I was"),
    ("so then +//.", "so then"),
    ('+" he said +"/.', "he said"),
    ("+< okay , right „ John‡ !", "okay right John"),
    ("++ and then ?", "and then"),
    # pauses
    ("so (.) I (..) went (...) home (1.5) now (2.) yes (1:02.5) .", "so I went home now yes"),
    # CA marks leave the word whole
    ("so:: ↑really ↓no .", "so really no"),
    ("⌈2 yeah ⌉2 ⌊ mhm ⌋ .", "yeah mhm"),
    ("word≈ ≈next ≋ ∆fast∆ ∇slow∇ °soft° ▔high▔ ▁low▁ ☺smile☺ .", "word next fast slow soft high low smile"),
    ("up⇗ mid↗ level→ down↘ low⇘ open∞ .", "up mid level down low open"),
    ("ˈstress ʔuh wo^rd wo↫hh↫rd ‹group› “quote” .", "stress uh word word group quote"),
    # hyphens inside words stay, at the edges they go; apostrophes stay
    ("uh-huh that's -it- .", "uh-huh that's it"),
    # case is kept; other scripts are letters too
    ("Hola MUNDO .", "Hola MUNDO"),
    ("そう です ね ⌈ はい ⌉ 。", "そう です ね はい"),
])
def test_cleaning_keeps_the_words_a_listener_hears(raw, heard):
    assert clean_text(raw + " " + B(0, 1000)) == heard


def test_bullet_gives_the_span_in_seconds():
    assert span_of("hello ." + B(1234, 5678)) == (1.234, 5.678)


def test_several_bullets_span_from_the_first_start_to_the_last_end():
    assert span_of("first part " + B(4100, 4500) + " second part ." + B(4600, 5200)) == (4.1, 5.2)


def test_old_style_sound_bullet_is_read():
    assert span_of('hello . \x15%snd:"4065"_1000_2500\x15') == (1.0, 2.5)


def test_reversed_bullet_is_no_span():
    assert span_of("hello ." + B(3000, 2000)) is None


def test_utterances_come_in_file_order_with_speaker_raw_text_and_times():
    t = parse_chat(chat(
        "*A:\t&=laughs hello there ." + B(1000, 2500),
        "%com:\tA laughs first",
        "*B:\thi ⌈ you ⌉ ." + B(2400, 3000),
    ), Path("4065.cha"))
    assert [(u.speaker, u.text, u.start, u.end) for u in t.utterances] == [
        ("A", "hello there", 1.0, 2.5),
        ("B", "hi you", 2.4, 3.0),
    ]
    assert t.utterances[0].raw == "&=laughs hello there ." + B(1000, 2500)
    assert t.languages == ["eng"]


def test_continuation_lines_join_the_utterance_and_dependent_tiers_stay_out():
    t = parse_chat(chat(
        "*A:\tthis is a long one that\n\tgoes on to a second line ." + B(0, 4000),
        "%com:\tnot a word of this",
    ), Path("4065.cha"))
    assert t.utterances[0].text == "this is a long one that goes on to a second line"


def test_utterance_without_bullet_is_skipped_and_counted():
    t = parse_chat(chat("*A:\tno time here .", "*B:\ttimed ." + B(100, 900), "*A:\tnor here ."), Path("4065.cha"))
    assert [u.text for u in t.utterances] == ["timed"]
    assert t.untimed == 2


def test_media_header_need_not_name_the_file():
    t = parse_chat(chat("*A:\thello ." + B(0, 500)), Path("renamed_by_user.cha"))
    assert t.utterances[0].text == "hello"


def test_crlf_line_ends_and_a_byte_order_mark_are_read(tmp_path):
    path = tmp_path / "4065.cha"
    path.write_bytes(b"\xef\xbb\xbf" + chat("*A:\thello ." + B(0, 500), "*B:\tbye ." + B(600, 900)).replace("\n", "\r\n").encode())
    assert [u.text for u in read_chat(path).utterances] == ["hello", "bye"]


def test_undecodable_bytes_are_one_line_error_naming_the_file(tmp_path):
    path = tmp_path / "4065.cha"
    path.write_bytes(chat("*A:\tcaf\xe9 ." + B(0, 500)).encode("latin-1"))
    with pytest.raises(UserError) as err:
        read_chat(path)
    message = str(err.value)
    assert str(path) in message and "not UTF-8" in message and "\n" not in message


def test_file_without_utterances_is_an_error_naming_it(tmp_path):
    path = tmp_path / "notes.cha"
    path.write_text("just some notes\nnothing CHAT about them\n")
    with pytest.raises(UserError, match="notes.cha: no utterances"):
        read_chat(path)
