"""Careful reading: the corpus of documented reply styles (tests/data/replies) read as a careful grader reads them."""

import json
from pathlib import Path

import pytest

from lalmeval.metrics.accuracy import Accuracy
from lalmeval.metrics.bleu import Bleu
from lalmeval.metrics.wer import WordErrorRate
from lalmeval.postprocess.general import GeneralPostprocessor
from lalmeval.postprocess.label_reading import LabelSet, read_label
from lalmeval.postprocess.reading import read_transcript, without_tags
from lalmeval.results.records import Record
from lalmeval.catalog.runspecs import Dataset, DatasetSpec

REPLIES = Path(__file__).parent / "data" / "replies"


def load(name):
    return [json.loads(line) for line in (REPLIES / name).read_text(encoding="utf-8").splitlines() if line.strip()]


TRANSCRIPTS = {name: load(name) for name in ("transcripts_en.jsonl", "transcripts_zh.jsonl", "translations.jsonl")}
EXACT = [(name, case) for name, cases in TRANSCRIPTS.items() for case in cases]
HARD = load("transcripts_en_hard.jsonl")
LABELS = load("labels.jsonl")


def dataset(language="en", **spec):
    return Dataset("d", "c", "t", DatasetSpec(hf_repo="x", language=language, **spec), Path("x.json"))


def rec(reference, prediction, **extra):
    return Record(id="i", prompt="", system=None, params={}, reference=reference, prediction=prediction, extra=extra)


def wer_items(cases, language, **spec):
    metric = WordErrorRate(dataset(language, **spec), GeneralPostprocessor())
    return metric, [metric.score_record(rec(c["reference"], GeneralPostprocessor().process(c["reply"]))) for c in cases]


# --------------------------------------------------------------------------- the corpus


def test_every_style_in_the_corpus_names_where_it_is_documented():
    for name, cases in {**TRANSCRIPTS, "hard": HARD, "labels": LABELS}.items():
        for case in cases:
            assert case["source"].strip() and case["style"].strip(), (name, case)
    styles = {c["style"] for cases in TRANSCRIPTS.values() for c in cases}
    assert {"qwen2_audio_original_content", "qwen25_omni_content_closer", "qwen3_asr_tags", "gemma3n_here_transcription",
            "canary_qwen_transcription", "refusal"} <= styles
    assert sum(c["style"].startswith("trap") for cases in TRANSCRIPTS.values() for c in cases) >= 10


@pytest.mark.parametrize("name,case", EXACT, ids=[f"{n.split('.')[0]}-{i:02d}-{c['style']}" for i, (n, c) in enumerate(EXACT)])
def test_careful_reading_reads_each_reply_as_the_grader_does(name, case):
    kind = "translation" if name == "translations.jsonl" else "transcript"
    read = read_transcript(GeneralPostprocessor().process(case["reply"]), kind, case.get("target"))
    assert read.text == case["grader"], case["reply"]
    assert read.refusal == (case["style"].endswith("refusal"))


@pytest.mark.parametrize("case", [c for _, c in EXACT] + HARD, ids=lambda c: c["style"])
def test_what_is_read_is_one_span_of_the_reply_once_tags_are_removed(case):
    read = read_transcript(case["reply"])
    assert read.text in without_tags(case["reply"])[0]


@pytest.mark.parametrize("case", [c for _, c in EXACT] + HARD, ids=lambda c: c["style"])
def test_no_reply_is_scored_better_than_the_grader_scores_it(case):
    language = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in case["reference"]) else "en"
    metric = WordErrorRate(dataset(language), GeneralPostprocessor())
    careful = metric.score_record(rec(case["reference"], case["reply"]))
    as_it_is = WordErrorRate(dataset(language, reading="verbatim"), GeneralPostprocessor())  # no rule touches the yardstick
    grader = as_it_is.score_record(rec(case["reference"], case["grader"]))
    assert careful["errors"] >= grader["errors"], case["reply"]


def test_traps_whose_first_words_look_like_a_lead_in_are_left_whole():
    traps = [c for _, c in EXACT if c["style"].startswith("trap")]
    for case in traps:
        read = read_transcript(case["reply"])
        assert read.text == case["reply"] and read.rules == (), case["reply"]


@pytest.mark.parametrize("name,language,limit", [("transcripts_en.jsonl", "en", 1.5), ("transcripts_zh.jsonl", "zh", 1.5)])
def test_corpus_error_rates_come_within_a_point_and_a_half_of_the_grader(name, language, limit):
    cases = TRANSCRIPTS[name]
    careful = wer_items(cases, language)[0].aggregate(wer_items(cases, language)[1])[0]
    grader = wer_items([{**c, "reply": c["grader"]} for c in cases], language, reading="verbatim")
    grader_rate = grader[0].aggregate(grader[1])[0]
    verbatim_metric, verbatim = wer_items(cases, language, reading="verbatim")
    assert abs(careful - grader_rate) <= limit
    assert verbatim_metric.aggregate(verbatim)[0] > grader_rate + 10  # the wrapping is what verbatim scores


def test_a_refusal_is_scored_as_the_empty_transcript_and_counted():
    metric, items = wer_items([c for c in TRANSCRIPTS["transcripts_en.jsonl"] if c["style"] == "refusal"], "en")
    assert all(x["deletions"] == x["ref_tokens"] and x["insertions"] == 0 and x["refusal"] for x in items)
    assert metric.aggregate(items)[1]["reading"]["refusals"] == len(items)


def test_each_sample_keeps_the_text_scored_and_the_rules_that_cut_it():
    case = next(c for c in TRANSCRIPTS["transcripts_en.jsonl"] if c["style"] == "qwen25_omni_content_closer")
    metric, (item,) = wer_items([case], "en")
    assert item["read"] == case["grader"] and item["reading"] == ["lead_in", "closer"]
    details = metric.aggregate([item])[1]["reading"]
    assert details == {"mode": "careful", "rules": {"closer": 1, "lead_in": 1}, "touched": 1, "unreadable": 0, "refusals": 0}


def test_verbatim_reading_scores_the_reply_as_it_is():
    case = TRANSCRIPTS["transcripts_en.jsonl"][0]
    _, (verbatim,) = wer_items([case], "en", reading="verbatim")
    assert verbatim["insertions"] > 0 and "reading" not in verbatim


@pytest.mark.parametrize("protocol", ["kimi", "lmms", "au_harness", "open_asr"])
def test_the_peer_protocols_read_as_the_peers_do(protocol):
    from lalmeval.catalog.runspecs import with_protocol_defaults

    spec = with_protocol_defaults(DatasetSpec(hf_repo="x", language="en", protocol=protocol), "here")
    assert spec.reading == "verbatim"
    metric = WordErrorRate(Dataset("d", "c", "t", spec, Path("x.json")), GeneralPostprocessor())
    case = TRANSCRIPTS["transcripts_en.jsonl"][0]
    assert metric.score_record(rec(case["reference"], case["reply"]))["insertions"] > 0


def test_translations_are_read_before_bleu_scores_them():
    cases = TRANSCRIPTS["translations.jsonl"]
    english = [c for c in cases if c["reference"].isascii()]
    careful = Bleu(dataset("de", target_language="en"), GeneralPostprocessor())
    verbatim = Bleu(dataset("de", target_language="en", reading="verbatim"), GeneralPostprocessor())
    read = careful.aggregate([careful.score_record(rec(c["grader"], c["reply"])) for c in english])[0]
    raw = verbatim.aggregate([verbatim.score_record(rec(c["grader"], c["reply"])) for c in english])[0]
    assert read == pytest.approx(100.0) and raw < 60.0


# --------------------------------------------------------------------------- labels


def label_item(case, **spec):
    metric = Accuracy(dataset(**spec), GeneralPostprocessor())
    if case["choices"]:
        return metric.score_record(rec(case["reference"], case["reply"], options=case["choices"], gold=case["choices"].index(case["reference"])))
    return metric.score_record(rec(case["reference"], case["reply"]))


@pytest.mark.parametrize("case", LABELS, ids=lambda c: f"{c['style']}-{c['reply'][:30]}")
def test_a_label_reply_scores_as_the_grader_reads_it(case):
    spec = {"choices": case["choices"], "target_column": "answer"} if case["choices"] else {}
    item = label_item(case, **spec)
    assert item["score"] == (1.0 if case["grader"] == case["reference"] else 0.0), case["reply"]
    if case["grader"] is None:
        assert "unreadable" in item["reading"]


def test_a_reply_naming_two_labels_or_none_is_unreadable_never_guessed():
    meld = LabelSet.of(["neutral", "joy", "sadness", "anger", "surprise", "fear", "disgust"])
    for reply in ("It could be fear or surprise.", "I cannot tell.", "Happy? Sad? Hard to say."):
        reading = read_label(reply, meld)
        assert reading.label is None and "unreadable" in reading.rules


def test_a_negated_label_is_no_answer():
    gender = LabelSet.of(["male", "female"])
    assert read_label("Not a man; the speaker is a woman.", gender).label == "female"
    assert read_label("The speaker is not female.", gender).label is None


def test_a_word_naming_two_labels_of_the_set_names_neither_but_a_label_keeps_its_own_name():
    scenes = LabelSet.of(["cafe", "restaurant", "street"])
    assert read_label("a café", scenes).label == "cafe"
    assert read_label("in a restaurant", scenes).label == "restaurant"
    merged = LabelSet.of(["cafe/restaurant", "street"])
    assert read_label("a quiet coffee shop", merged).label == "cafe/restaurant"


def test_a_runspec_adds_its_own_synonyms():
    plain = LabelSet.of(["hound", "cat"])
    taught = LabelSet.of(["hound", "cat"], {"hound": ["puppy"]})
    assert read_label("a puppy", plain).label is None and read_label("a puppy", taught).label == "hound"


def test_every_fixed_label_set_in_the_catalog_has_a_synonym_for_each_label():
    from lalmeval.catalog.runspecs import BUILTIN_DIR

    found = 0
    for path in Path(BUILTIN_DIR).rglob("*.json"):
        for name, entry in json.loads(path.read_text(encoding="utf-8")).items():
            if not isinstance(entry, dict) or not entry.get("choices") or "accuracy" not in entry.get("metrics", []):
                continue
            label_set = LabelSet.of(entry["choices"])
            for index, label in enumerate(entry["choices"]):
                assert sum(1 for i in label_set.words.values() if i == index) > 2, (name, label)
            found += 1
    assert found >= 5


# --------------------------------------------------------------------------- multiple choice


MC_CASES = [json.loads(line) for line in (Path(__file__).parent / "data" / "mc_answers.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("reading", ["careful", "verbatim"])
def test_multiple_choice_scores_are_unchanged_by_reading(reading):
    """Questions with their own options (choices_column) are read only by answer extraction, whatever the reading."""
    for case in MC_CASES:
        metric = Accuracy(dataset(choices_column="options", target_column="answer", reading=reading), GeneralPostprocessor())
        gold = case["expected"] if case["expected"] is not None else 0
        item = metric.score_record(rec("A", case["reply"], options=case["options"], gold=gold))
        assert item["score"] == (1.0 if case["expected"] is not None else 0.0), case["reply"]
        assert "reading" not in item


def test_fixed_choices_keep_every_answer_extraction_already_reads():
    for case in MC_CASES:
        metric = Accuracy(dataset(choices=case["options"], target_column="answer"), GeneralPostprocessor())
        if case["expected"] is not None:
            item = metric.score_record(rec("A", case["reply"], options=case["options"], gold=case["expected"]))
            assert item["score"] == 1.0 and "reading" not in item, case["reply"]
            continue
        for gold in range(len(case["options"])):  # a reply no option can be read from stays wrong, whatever the gold
            assert metric.score_record(rec("A", case["reply"], options=case["options"], gold=gold))["score"] == 0.0, case["reply"]


def test_a_plain_reference_is_one_label_with_the_words_of_every_concept_it_names():
    from lalmeval.postprocess.label_reading import reference_sets

    scenes = reference_sets("cafe/restaurant")
    assert read_label("a busy café", scenes).label == "cafe/restaurant"
    assert read_label("a quiet bistro", scenes).label == "cafe/restaurant"
    assert read_label("a city bus", scenes).label == "bus"
    assert reference_sets("hello world") is None  # no set holds it: compared as it always was


def test_a_runspecs_synonyms_make_a_label_set_of_plain_references_only_with_two_labels_or_more():
    one = Accuracy(dataset(label_synonyms={"hound": ["puppy"]}), GeneralPostprocessor())
    two = Accuracy(dataset(label_synonyms={"hound": ["puppy"], "cat": ["kitty"]}), GeneralPostprocessor())
    assert one.score_record(rec("hound", "a puppy or a kitty"))["score"] == 0.0  # a set of one would credit any mention
    assert two.score_record(rec("hound", "a puppy"))["score"] == 1.0
    assert two.score_record(rec("hound", "a puppy or a kitty"))["reading"] == ["synonym", "unreadable"]


# --------------------------------------------------------------------------- rules found on held-out replies


def test_an_announced_quote_ends_where_the_quote_closes():
    assert read_transcript("The original content of this audio is: 'Go home now.' The speaker sounds tired.").text == "Go home now."
    assert read_transcript('The audio says: "Wait here." This appears to be an instruction.').text == "Wait here."
    assert read_transcript("这段音频的原始内容是：“请在八点前到达。”这是一段通知。").text == "请在八点前到达。"
    hedged = read_transcript('It sounds like someone says "pass the salt", but I\'m not certain.')
    assert hedged.text == "pass the salt" and hedged.rules == ("lead_in", "note", "quotes")


def test_a_quote_not_announced_or_followed_by_more_quoted_speech_is_left_whole():
    for reply in ('"Stop," she said, "you\'re going to fall."', 'He told me "leave it" and walked out.',
                  '"Go home," he said.'):
        assert read_transcript(reply).text == reply
    assert read_transcript('The audio says: "Stop," she said, "or you fall."').text == '"Stop," she said, "or you fall."'
    assert read_transcript("The audio says: 'I don't know.' He sounds unsure.").text == "I don't know."  # an apostrophe closes nothing
    assert read_transcript("The original content of this audio is: 'The boys' bikes were stolen.'").text.strip("'") == "The boys' bikes were stolen."


def test_a_quote_left_open_by_the_postprocessor_loses_its_opening_mark_only_after_a_lead_in():
    reply = GeneralPostprocessor().process('"Das Wetter ist schön" translates to "The weather is nice."')
    assert read_transcript(reply, "translation", "en").text == "The weather is nice."
    assert read_transcript('"Keep going').text == '"Keep going'


def test_bulleted_speech_and_what_the_audio_says_lead_ins_are_cut():
    assert read_transcript('- **Transcription:** "Put the books back."').text == "Put the books back."
    assert read_transcript("The speech in the audio is: hello there").text == "hello there"
    assert read_transcript("Well, this is what the audio says: we left early.").text == "we left early."
    assert read_transcript('The speaker seems to say: "we will be there."').text == "we will be there."


def test_chinese_lead_ins_with_a_quoted_source_bold_or_a_content_noun_are_cut():
    assert read_transcript('"I\'m hungry" 的中文翻译是 "我饿了"。', "translation", "zh").text == "我饿了"
    assert read_transcript("**翻译：** 他是我的朋友。", "translation", "zh").text == "他是我的朋友。"
    assert read_transcript("好的，以下是音频的转录内容：\n\n这家餐厅很好。").text == "这家餐厅很好。"
    for trap in ("以下是今天的新闻：股市上涨了。", "他说：“我明天不来了。”", "内容是什么并不重要。"):
        assert read_transcript(trap).rules == ()


def test_a_paragraph_explaining_a_quoted_word_after_a_translation_is_a_note():
    reply = 'Translation: "Thank you for your help."\n\nThe German phrase "vielen Dank" expresses gratitude.'
    assert read_transcript(reply, "translation", "en").text == "Thank you for your help."
    assert read_transcript('我们应该早点出发。\n\n这里"早点"表达了"earlier"的意思。', "translation", "zh").text == "我们应该早点出发。"


def test_a_closer_needs_the_models_offer_so_a_speakers_own_invitation_stays():
    assert read_transcript("Thank you. If you have any questions, please ask after the talk.").rules == ()
    assert read_transcript("It is late. Let me know if you need a ride tomorrow.").rules == ()
    assert read_transcript("天很晚了。如果您还有其他问题，可以来办公室找我。").rules == ()
    assert read_transcript("Go home. If you have any more questions, please feel free to ask.").text == "Go home."
    assert read_transcript("Go home. Let me know if you'd like a summary.").text == "Go home."
    assert read_transcript("回家吧。如果您还有其他问题，请随时告诉我。").text == "回家吧。"


def test_every_esc50_class_is_a_sound_event_label():
    from lalmeval.postprocess.label_reading import reference_sets

    for reference, reply in (("clapping", "People are clapping."), ("crackling fire", "a campfire crackling"),
                             ("vacuum cleaner", "Someone is vacuuming."), ("chirping birds", "birds singing in a tree")):
        assert read_label(reply, reference_sets(reference)).label == reference, reply


def test_a_refusal_declines_the_task_not_anything_at_all():
    from lalmeval.postprocess.reading import is_refusal

    for reply in ("I'm sorry, I can't transcribe your handwriting.", "Sorry, I can't listen to this song again.",
                  "Unfortunately, the audio equipment broke down.", "I'm sorry but the recording studio is closed today.",
                  "I can't translate my feelings into words.", "I'm sorry, I can't hear you, the line is bad."):
        assert not is_refusal(reply), reply
    for reply in ("I'm sorry, I can't transcribe that.", "I'm sorry, but the audio is not clear enough to transcribe.",
                  "As an AI language model, I cannot listen to audio.", "Sorry, I couldn't make out any speech in this clip."):
        assert is_refusal(reply), reply


def test_a_lead_in_qualifies_what_it_announces_only_with_words_that_describe_a_transcript():
    for speech in ("Send the text: I'll be late.", "Read the words: love, hope and faith.", "Check the content: nothing is missing.",
                   "My words: never again.", "Her transcript: straight A's in every class.",
                   "Here's the content of my speech: thank you all.", 'Someone says "hello" every morning.'):
        assert read_transcript(speech).rules == (), speech
    assert read_transcript("Here's the full English transcription of the provided audio: hi there").text == "hi there"


def test_a_label_asked_about_rather_than_stated_is_no_answer():
    gender = LabelSet.of(["male", "female"])
    meld = LabelSet.of(["neutral", "joy", "sadness", "anger", "surprise", "fear", "disgust"])
    assert read_label("It is not possible to tell whether the speaker is male.", gender).label is None
    assert read_label("I can't say if the speaker is female.", gender).label is None
    assert read_label("Happy or sad? I'd go with sad.", meld).label == "sadness"
    assert read_label("If I had to guess, female.", gender).label == "female"


def test_a_throat_cleared_by_anyone_is_throat_clearing():
    vocal = LabelSet.of(["Laughter", "Sigh", "Cough", "Throat clearing", "Sneeze", "Sniff"])
    for reply in ("Someone clears their throat.", "The sound is a throat clear.", "He cleared his throat."):
        assert read_label(reply, vocal).label == "Throat clearing", reply


def test_what_its_source_means_announces_a_translation_but_not_a_transcript():
    for reply in ('"Wir gehen nach Hause" means "We are going home."', 'The sentence "Wir gehen" means "We go."',
                  'It means: "Where is the station?"'):
        read = read_transcript(GeneralPostprocessor().process(reply), "translation", "en")
        assert "lead_in" in read.rules and '"' not in read.text and "means" not in read.text, reply
    assert read_transcript('"Hola" means "hello" in Spanish.').rules == ()


def test_what_was_said_in_the_audio_is_a_lead_in():
    assert read_transcript('Here\'s what was said in the audio: "We are going home."').text == "We are going home."


def test_a_chinese_refusal_declines_the_task_not_anything_at_all():
    from lalmeval.postprocess.reading import is_refusal

    for reply in ("对不起，我不能去。", "对不起，我听不懂你说的话。", "不好意思，我无法参加会议。"):
        assert not is_refusal(reply), reply
    for reply in ("抱歉，我无法识别这段音频。", "作为AI，我无法听取音频。", "很抱歉，我不能处理音频文件。"):
        assert is_refusal(reply), reply


def test_a_hedge_may_open_with_believe_or_guess():
    assert read_transcript('I believe the audio says "close the door".').text == "close the door"
    assert read_transcript('I guess someone says "go home", but it is faint.').text == "go home"


def test_chinese_translation_lead_ins_notes_and_asides_about_the_wording_are_cut():
    assert read_transcript("好的，这句话的中文是：我们回家吧。", "translation", "zh").text == "我们回家吧。"
    assert read_transcript("我们回家吧。\n\n这句话的意思是说话人想回家。", "translation", "zh").text == "我们回家吧。"
    assert read_transcript("我们回家吧。（直译：让我们去家。）", "translation", "zh").text == "我们回家吧。"
    assert read_transcript("中文是一门难学的语言。").rules == ()


def test_no_rule_reads_inside_the_quotes_that_hold_the_text():
    cases = {"The original content of this audio is: 'The audio says it all.'": "The audio says it all.",
             'The audio says: "Let me know if you need anything else."': "Let me know if you need anything else.",
             'Well, this is the content of the audio: "Note: the shop is closed."': "Note: the shop is closed.",
             'Transcription: "The speaker says hello."': "The speaker says hello."}
    for reply, text in cases.items():
        assert read_transcript(reply).text == text, reply
    closed = read_transcript('The audio says: "Go home." If you have any more questions, please feel free to ask.')
    assert closed.text == "Go home." and closed.rules == ("lead_in", "closer", "quotes")


def test_a_doubt_added_after_an_announced_text_is_a_note_but_a_speakers_doubt_stays():
    read = read_transcript("It sounds like someone says we should go home now, but I'm not certain.")
    assert read.text == "we should go home now" and read.rules == ("lead_in", "note")
    assert read_transcript("The audio says: we left early, though it's a little unclear.").text == "we left early"
    for speech in ("I'll come, but I'm not sure.", "Someone says we should go, but I'm not sure."):
        assert read_transcript(speech).rules == (), speech
