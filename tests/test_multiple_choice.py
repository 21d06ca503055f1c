"""Multiple choice, images and the seed systems' formats, through real runs against a scripted endpoint."""

import base64
import csv
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model

QUESTIONS = [
    {"question": "Which animal barks?", "A": "cat", "B": "dog", "C": "cow", "D": "bird", "answer": "B"},
    {"question": "What is 50 + 7?", "A": "507", "B": "57", "C": "157", "D": "5.7", "answer": "B"},
    {"question": "Which is a colour?", "A": "chair", "B": "seven", "C": "blue", "D": "run", "answer": "C"},
    {"question": "Which is the largest?", "A": "mouse", "B": "horse", "C": "elephant", "D": "ant", "answer": "C"},
    {"question": "Where do fish live?", "A": "in trees", "B": "in water", "C": "in the sky", "D": "underground", "answer": "B"},
]
# Free-form replies, one per question, with what each states (option index, or None).
REPLIES = {
    "Which animal barks?": ("Option A is wrong, the answer is B.", 1),
    "What is 50 + 7?": ("It equals 57, which is option B.", 1),
    "Which is a colour?": ("答案是C", 2),
    "Which is the largest?": ("Not the mouse, not the horse... I'd say the elephant.", 2),
    "Where do fish live?": ("I cannot tell from the question.", None),
}


def reply_for(seen, n):
    question = next(q for q in REPLIES if q in seen.text)
    return REPLIES[question][0]


def write_twinkle(ws, kind):
    folder = ws.root / "data"
    folder.mkdir(exist_ok=True)
    path = folder / f"mmlu_like.{kind}"
    if kind == "csv":
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=["question", "A", "B", "C", "D", "answer"])
            writer.writeheader()
            writer.writerows(QUESTIONS)
    elif kind == "json":
        path.write_text(json.dumps(QUESTIONS, ensure_ascii=False))
    else:
        pq.write_table(pa.Table.from_pylist(QUESTIONS), path)
    return f"data/mmlu_like.{kind}"


@pytest.mark.parametrize("kind", ["csv", "json", "parquet"])
def test_twinkle_rows_carry_their_options_and_score_what_each_reply_states(ws, kind):
    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": write_twinkle(ws, kind), "format": "twinkle", "language": "en"}})
    with ScriptedEndpoint(reply_for) as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]])
        result = ws.run()
        for seen in ep.requests:
            row = next(q for q in QUESTIONS if q["question"] in seen.text)
            assert all(f"{letter}. {row[letter]}" in seen.text for letter in "ABCD"), seen.text
    lines = {json.loads(x)["id"]: json.loads(x) for x in (ws.root / "runs" / "t" / "scores" / "mc__accuracy__m.jsonl").read_text().splitlines()}
    for index, row in enumerate(QUESTIONS):
        stated = REPLIES[row["question"]][1]
        gold = "ABCD".index(row["answer"])
        assert lines[str(index)]["score"] == (1.0 if stated == gold else 0.0), (row, lines[str(index)])
    score = result.scores[0]
    assert score.score == pytest.approx(100 * 4 / 5) and score.details["unextracted"] == 1 and score.num_samples == 5


def test_shuffled_options_with_repeats_score_text_only_answers_the_same_in_every_repeat(ws):
    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": write_twinkle(ws, "csv"), "format": "twinkle", "language": "en"}})
    gold_text = {q["question"]: q[q["answer"]] for q in QUESTIONS}
    shown_orders: dict[str, set] = {}

    def name_the_gold_option(seen, n):
        question = next(q for q in gold_text if q in seen.text)
        shown_orders.setdefault(question, set()).add(tuple(re.findall(r"^[A-D]\. (.*)$", seen.text, re.M)))
        return f"The correct one is {gold_text[question]}."

    with ScriptedEndpoint(name_the_gold_option) as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], shuffle_options=True, repeat_runs=3, seed=11)
        result = ws.run()
        assert len(ep.requests) == 15
    assert all(len(orders) > 1 for orders in shown_orders.values()), shown_orders  # the order changes between repeats
    score = result.scores[0]
    assert score.details["repeats"] == [100.0, 100.0, 100.0] and score.details["std"] == 0.0 and score.score == 100.0
    records = ws.records("mc", "m")
    assert len(records) == 15 and {r["repeat"] for r in records} == {0, 1, 2}
    assert all(sorted(r["extra"]["permutation"]) == [0, 1, 2, 3] for r in records)


def test_a_sample_that_fails_in_one_repeat_is_one_failed_sample_and_its_other_repeats_leave_the_score(ws):
    """Repeat 1 of the fish question is refused (HTTP 400, not retried). The sample is one failed
    sample; its repeats 0 and 2 — answered wrongly — add nothing to the score either, so the score,
    every per-repeat score and num_failed cover complementary samples: 4 scored, 1 failed."""
    from tests.support.endpoint import Reply

    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": write_twinkle(ws, "csv"), "format": "twinkle", "language": "en"}})
    asked: dict[str, int] = {}

    def answer(seen, n):
        question = next(q for q in QUESTIONS if q["question"] in seen.text)
        asked[question["question"]] = asked.get(question["question"], 0) + 1
        if question["question"] == "Where do fish live?":  # answered wrongly, and refused on its second ask
            return Reply(400, {"error": {"message": "refused"}}) if asked[question["question"]] == 2 else "A"
        return question["answer"]

    with ScriptedEndpoint(answer) as ep:
        ws.config([model(ep.url, batch_size=1)], [["mc", "accuracy"]], repeat_runs=3)
        result = ws.run()
        assert len(ep.requests) == 15
    score = result.scores[0]
    assert score.num_samples == 5 and score.num_failed == 1 and score.details["failures"] == {"HTTP 400": 1}
    assert score.score == 100.0 and score.details["repeats"] == [100.0, 100.0, 100.0] and score.details["scored"] == 4 * 3
    assert not result.complete


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "images"


def test_general_vqa_and_vmcq_send_every_image_byte_identical_and_score_exactly(ws):
    images = ws.root / "data" / "images"
    images.mkdir(parents=True)
    for name in ("three.png", "grey.jpg", "four.gif"):
        (images / name).write_bytes((FIXTURES / name).read_bytes())
    gif64 = base64.b64encode((FIXTURES / "four.gif").read_bytes()).decode()
    vqa = [
        {"messages": [{"role": "system", "content": "You see pictures."},
                      {"role": "user", "content": [{"type": "text", "text": "Compare"}, {"type": "image_url", "image_url": {"url": "images/three.png"}},
                                                   {"type": "text", "text": "and"}, {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{gif64}"}}]}],
         "answer": "the first shows three dots and the second shows four dots"},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "What grey?"}, {"type": "image_url", "image_url": {"url": "images/grey.jpg"}}]}], "answer": "a flat grey square with nothing else in it"},
    ]
    vmcq = [
        {"question": "<image 1> How many?", "options": ["two", "three", "four", "five"], "answer": "B", "image_1": "images/three.png"},
        {"question": "Which image is grey?", "options": ["<image 1>", "<image 2>"], "answer": "B", "image_1": "images/three.png", "image_2": "images/grey.jpg"},
    ]
    ws.runspec("vision", "sets", {"vqa": {"hf_repo": ws.jsonl(vqa, "data/vqa.jsonl"), "format": "general_vqa", "language": "en"},
                                   "vmcq": {"hf_repo": ws.jsonl(vmcq, "data/vmcq.jsonl"), "format": "general_vmcq", "language": "en"}})
    expected = {"Compare": [(FIXTURES / "three.png").read_bytes(), (FIXTURES / "four.gif").read_bytes()],
                "What grey?": [(FIXTURES / "grey.jpg").read_bytes()],
                "How many?": [(FIXTURES / "three.png").read_bytes()],
                "Which image is grey?": [(FIXTURES / "three.png").read_bytes(), (FIXTURES / "grey.jpg").read_bytes()]}
    replies = {"Compare": "the first shows three dots and the second shows five dots", "What grey?": "a flat grey square with nothing else in it",
               "How many?": "The answer is B.", "Which image is grey?": "A"}
    with ScriptedEndpoint(lambda seen, n: next(v for k, v in replies.items() if k in seen.text)) as ep:
        ws.config([model(ep.url)], [["vqa", "bleu"], ["vmcq", "accuracy"]])
        result = ws.run()
        for seen in ep.requests:
            key = next(k for k in expected if k in seen.text)
            sent = [base64.b64decode(url.split(",", 1)[1]) for url in seen.images]
            assert sent == expected[key], key
        vqa_first = next(s for s in ep.requests if "Compare" in s.text)
        assert vqa_first.system == "You see pictures." and [p["type"] for p in vqa_first.body["messages"][1]["content"]] == ["text", "image_url", "text", "image_url"]
    scores = {s.dataset: s for s in result.scores}
    assert scores["vmcq"].score == 50.0 and scores["vmcq"].num_failed == 0
    import sacrebleu

    expected_bleu = sacrebleu.corpus_bleu([replies["Compare"], replies["What grey?"]], [[vqa[0]["answer"], vqa[1]["answer"]]]).score
    assert scores["vqa"].score == pytest.approx(expected_bleu, abs=1e-9) and scores["vqa"].num_failed == 0


def test_kimi_jsonl_reports_each_subsets_exact_word_error_rate(ws):
    import jiwer
    import soundfile as sf
    from whisper_normalizer.english import EnglishTextNormalizer

    rows = ws.copy_demo_audio(demo_rows(6))
    kimi = [{"index": i, "audio_path": r["audio"], "question": "Transcribe.", "answer": r["reference"], "subset": "clean" if i < 3 else "noisy"}
            for i, r in enumerate(rows)]
    kimi[4]["audio_path"] = [rows[4]["audio"], rows[5]["audio"]]  # a list of clips: both are sent
    ws.runspec("asr", "kimi", {"kimi_set": {"hf_repo": ws.jsonl(kimi, "data/kimi.jsonl"), "format": "kimi", "language": "en"}})
    replies = {i: r["answer"] for i, r in enumerate(kimi)} | {1: "turn off the", 4: "hello"}  # two wrong transcripts
    first_clip = [r["audio_path"] if isinstance(r["audio_path"], str) else r["audio_path"][0] for r in kimi]
    seconds = [sf.info(str(ws.root / "data" / path)).duration for path in first_clip]  # every demo clip has its own length

    def transcribe(seen, n):
        index = next(i for i, length in enumerate(seconds) if abs(seen.audio_seconds[0] - length) < 1e-3 and (len(seen.audio_seconds) == 2) == (i == 4))
        return replies[index]

    with ScriptedEndpoint(transcribe) as ep:
        ws.config([model(ep.url)], [["kimi_set", "word_error_rate"]])
        result = ws.run()
        assert sorted(len(s.audio_seconds) for s in ep.requests) == [1, 1, 1, 1, 1, 2]
    normalize = EnglishTextNormalizer()
    subsets = result.scores[0].details["subsets"]
    for name, members in (("clean", [0, 1, 2]), ("noisy", [3, 4, 5])):
        expected = jiwer.wer([normalize(kimi[i]["answer"]) for i in members], [normalize(replies[i]) for i in members])
        assert subsets[name]["score"] == pytest.approx(100 * expected, abs=1e-9) and subsets[name]["num_samples"] == 3


MC_ROWS = [{"id": "a", "question": "Which animal barks?", "options": ["cat", "dog"], "answer": "B"},
           {"id": "b", "question": "Which is a colour?", "options": ["blue", "run"], "answer": "A"}]


def mc_run(ws, capsys, template: str):
    """A prompts file whose `terse` template a multiple-choice runspec uses; (exit code, stderr lines, requests sent)."""
    from lalmeval.cli.commands import main

    (ws.root / "prompts.yaml").write_text(json.dumps({"mc_templates": {"terse": template}}))
    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": ws.jsonl(MC_ROWS), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer",
                                          "mc_template": "terse"}})
    with ScriptedEndpoint(lambda seen, n: "A") as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], output_dir=str(ws.root / "runs"), prompts_file="prompts.yaml")
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        sent = [seen.text for seen in ep.requests]
    return code, capsys.readouterr().err.strip().splitlines(), sent


def test_a_multiple_choice_template_without_its_placeholders_is_refused_at_start(ws, capsys):
    """`mc_templates: {terse: "Pick one of {labels}."}` (no {question}, no {options}) is refused
    before any work, naming the prompts file and the template — not recorded as `internal error`
    for every sample (exit 3)."""
    code, err, sent = mc_run(ws, capsys, "Pick one of {labels}.")
    assert code == 2 and not sent and not (ws.root / "runs" / "t").exists()
    assert err == [f"error: {ws.root / 'prompts.yaml'}: mc_templates.terse: the template never shows {{question}} and {{options}} "
                   "(it must contain {question} and {options}; {labels} is optional)"]


@pytest.mark.parametrize("template,problem", [
    ("{question}\n{option}", "the template never shows {options}"),
    ("{question}\n{options}\nAnswer with one of {lables}.", "'{lables}' is not filled in (did you mean '{labels}'?)"),
    ("{Question}\n{options}", "the template never shows {question}"),
    ("{question}\n{options}\nAnswer with one of { labels }.", "'{ labels }' is not filled in (did you mean '{labels}'?)"),
])
def test_a_misspelt_multiple_choice_placeholder_is_refused_naming_it(ws, capsys, template, problem):
    code, err, sent = mc_run(ws, capsys, template)
    assert code == 2 and not sent and len(err) == 1 and f"mc_templates.terse: {problem}" in err[0], err


def test_other_braces_in_a_multiple_choice_template_are_sent_as_written(ws, capsys):
    code, err, sent = mc_run(ws, capsys, "{question}\n{options}\nPut {answer} as \\boxed{X}, one of {labels}.")
    assert code == 0, err
    # Both rows are in flight at once, so they may arrive in either order.
    assert "Which animal barks?\nA. cat\nB. dog\nPut {answer} as \\boxed{X}, one of A, B." in sent


# --- answer_extraction: llm --------------------------------------------------------------------

ANIMALS = ["cat", "dog", "cow", "hen", "pig", "owl", "bee", "ant", "elk", "fox"]


def llm_extraction(ws, options=2):
    """One question whose gold option is B, read with `answer_extraction: llm`."""
    rows = [{"id": "a", "question": "Which animal barks?", "options": ANIMALS[:options], "answer": "B"}]
    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer",
                                          "answer_extraction": "llm"}})


def llm_scores(ws, run_id="t"):
    return [json.loads(x) for x in (ws.root / "runs" / run_id / "scores" / "mc__accuracy__m.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("options", [2, 10])
@pytest.mark.parametrize("judgment", ["I would say B.", "Answer: B", "**Answer:** (b)", "The model picks the dog.\nAnswer: B",
                                      "The answer I would pick is B.", "I think it is B", "Answer: A\nOn reflection:\nAnswer: B"])
def test_llm_answer_extraction_reads_the_letter_the_judge_names(ws, options, judgment):
    """The model's reply names no option, so the judge is asked which option it chooses; the option
    it names decides — never the pronoun "I" (option I when there are nine or more options)."""
    llm_extraction(ws, options)
    with ScriptedEndpoint(lambda seen, n: "It is hard to say.") as ep, ScriptedEndpoint(lambda seen, n: judgment) as judge_ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        result = ws.run()
        assert len(judge_ep.requests) == 1
        assert '"Answer: X"' in judge_ep.requests[0].text  # the judge is asked for a fixed form
    line = llm_scores(ws)[0]
    assert result.scores[0].score == 100.0 and line["extracted"] == "B" and line["extracted_by"] == "judge", line


def test_llm_extraction_judge_saying_none_is_wrong_and_an_unreadable_judgment_is_a_failure_asked_again(ws):
    """"Answer: none" is the judge's verdict: the sample is wrong (unextracted). A judgment naming no
    option is a judge failure — not scored, not cached — and resuming the run asks the judge again."""
    llm_extraction(ws, 4)
    judgments = iter(["I cannot tell.", "Answer: B"])
    with ScriptedEndpoint(lambda seen, n: "It is hard to say.") as ep, ScriptedEndpoint(lambda seen, n: next(judgments)) as judge_ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        failed = ws.run("t")
        assert (failed.scores[0].score, failed.scores[0].num_failed) == (None, 1) and not failed.complete
        assert llm_scores(ws)[0]["judge_failed"] == "unparseable judgment"
        resumed = ws.run("t", fresh=False)
        assert len(judge_ep.requests) == 2 and resumed.scores[0].score == 100.0 and resumed.complete
    with ScriptedEndpoint(lambda seen, n: "It is hard to say.") as ep, ScriptedEndpoint(lambda seen, n: "Answer: none") as judge_ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], judge_properties={"judge_model": "j", "judge_api_endpoint": judge_ep.url})
        result = ws.run("none", fresh=True)
    line = llm_scores(ws, "none")[0]
    assert result.scores[0].score == 0.0 and result.scores[0].num_failed == 0 and line["unextracted"] and result.scores[0].details["unextracted"] == 1


KEYED = [
    {"id": "a", "question": "Which animal barks?", "options": ["cat", "dog"], "answer": "A"},   # a wrong key: dog is B
    {"id": "b", "question": "Which is a colour?", "options": ["blue", "run"], "answer": "A"},
]


@pytest.mark.parametrize("how", ["resume", "reeval"])
def test_rescoring_uses_the_current_answer_key(ws, how):
    """A wrong answer key is corrected in the data (questions and options unchanged, so every request
    is the same): resumed or re-evaluated, the stored answers are scored against the current key."""
    from lalmeval.cli.commands import main

    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": ws.jsonl(KEYED), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer"}})
    replies = {"Which animal barks?": "B", "Which is a colour?": "A"}
    final = lambda: json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]  # noqa: E731
    with ScriptedEndpoint(lambda seen, n: next(v for k, v in replies.items() if k in seen.text)) as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], output_dir=str(ws.root / "runs"))
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) == 0
        assert final()["score"] == 50.0
        ws.jsonl([dict(KEYED[0], answer="B"), KEYED[1]])
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", *(["--reeval"] if how == "reeval" else [])]) == 0
        assert len(ep.requests) == 2  # nothing was requested again
    assert final()["score"] == 100.0
    scored = {x["id"]: x for x in map(json.loads, (ws.root / "runs" / "t" / "scores" / "mc__accuracy__m.jsonl").read_text().splitlines())}
    assert scored["a"]["gold"] == "B" and scored["a"]["score"] == 1.0


def test_rescoring_a_gold_option_the_model_never_saw_fails_that_sample(ws):
    """--reeval after the options themselves changed: the new gold option is not among those the
    stored answer chose from, so that sample cannot be scored (exit 3), rather than scored wrong."""
    from lalmeval.cli.commands import main

    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": ws.jsonl(KEYED), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer"}})
    with ScriptedEndpoint(lambda seen, n: "A") as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], output_dir=str(ws.root / "runs"))
        main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        ws.jsonl([dict(KEYED[0], options=["cat", "wolf"], answer="B"), KEYED[1]])
        code = main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", "--reeval"])
    score = json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]
    assert code == 3 and score["num_failed"] == 1 and score["details"]["failures"] == {"no gold option": 1} and score["score"] == 100.0


@pytest.mark.parametrize("shuffle", [False, True])
def test_rescoring_keeps_the_gold_among_options_with_the_same_text(ws, shuffle):
    """Two options read the same: a resume or --reeval of unchanged data scores the stored answer as
    the first run did (the gold follows the options as shown, not the first option with its text)."""
    from lalmeval.cli.commands import main

    rows = [{"id": "d", "question": "Pick the third.", "options": ["same", "other", "same"], "answer": "C"}]
    ws.runspec("knowledge", "mc", {"mc": {"hf_repo": ws.jsonl(rows), "id_column": "id", "modality": "text", "audio_column": None,
                                          "textual_input_column": "question", "choices_column": "options", "target_column": "answer"}})
    final = lambda: json.loads((ws.root / "runs" / "t" / "final_scores.json").read_text())["scores"][0]["score"]  # noqa: E731

    with ScriptedEndpoint(lambda seen, n: "C" if not shuffle else "A") as ep:
        ws.config([model(ep.url)], [["mc", "accuracy"]], output_dir=str(ws.root / "runs"), shuffle_options=shuffle, seed=3)
        main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"])
        first = final()
        assert main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t"]) in (0, 3)
        assert final() == first
        main(["run", "--config", str(ws.root / "config.yaml"), "--run-id", "t", "--reeval"])
        assert final() == first and len(ep.requests) == 1
    if not shuffle:
        assert first == 100.0
