"""Text nobody should send, sent anyway: lone surrogates, control characters, megabytes of one character.
Each is stored, scored and printed; none ends a run, and none makes answer extraction take minutes."""

import json
import subprocess
import sys
import textwrap

import pytest

from lalmeval.results.store import (
    INTERNAL_WRITE_ERROR,
    JsonlWriter,
    watch_writes,
    write_error,
)
from tests.support.endpoint import Reply, ScriptedEndpoint
from tests.support.workspace import REPO, model

SURROGATE = "\ud800"


def raw_chat(content_json: str) -> Reply:
    """A 200 whose JSON spells the content exactly as given (escapes included)."""
    return Reply(raw=('{"choices": [{"index": 0, "message": {"role": "assistant", "content": "' + content_json + '"}}]}').encode())


def questions_with_hostile_references(ws):
    """Three questions; the references of q0 and q1 hold a lone surrogate and control characters (as JSON escapes)."""
    lines = ['{"id": "q0", "question": "question 0", "reference": "answer \\ud800 0"}',
             '{"id": "q1", "question": "question 1", "reference": "answer \\u0007\\u001b 1"}',
             '{"id": "q2", "question": "question 2", "reference": "answer 2"}']
    (ws.root / "data").mkdir(exist_ok=True)
    (ws.root / "data" / "set.jsonl").write_text("\n".join(lines) + "\n")
    ws.runspec("qa", "questions", {"qs": {"hf_repo": "data/set.jsonl", "id_column": "id", "modality": "text",
                                          "textual_input_column": "question", "audio_column": None}})


def test_lone_surrogates_and_control_characters_in_replies_references_and_judgments_are_stored_and_scored(ws):
    """They used to drop the batch and end the run as a full disk (exit 4), again on every resume."""
    questions_with_hostile_references(ws)

    def answer(seen, n):
        if seen.body["model"] == "judge":
            return raw_chat("\\ud800 close enough \\u001b[2J. Rating: 1")
        number = seen.text.split()[-1]
        return raw_chat(f"answer \\ud800 \\u0000\\u001b[31m {number}")

    with ScriptedEndpoint(answer) as ep:
        judge = {"judge_model": "judge", "judge_api_endpoint": ep.url}
        ws.config([model(ep.url)], [["qs", "word_error_rate"], ["qs", "llm_judge_binary"]], output_dir=str(ws.root / "runs"),
                  judge_properties=judge)
        runs = [subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", "s"],
                               cwd=REPO, capture_output=True, text=True, timeout=180) for _ in range(2)]  # a run, then its resume
    for out in runs:
        assert out.returncode == 0, out.stderr
        assert "\x1b" not in out.stdout + out.stderr
    records = {r["id"]: r for r in ws.records("qs", "m", "s")}  # every line is valid JSON
    assert records["q0"]["reference"] == "answer \ufffd 0" and records["q1"]["reference"] == "answer \x07\x1b 1"
    # (records are written in the order samples finish: match each to its own id)
    assert all(r["prediction"] == f"answer \ufffd \x00\x1b[31m {r['id'][1:]}" and r["error"] is None for r in records.values())
    scores = {s["metric"]: s for s in json.loads((ws.root / "runs" / "s" / "final_scores.json").read_text())["scores"]}
    assert scores["word_error_rate"]["num_failed"] == 0 and scores["word_error_rate"]["score"] is not None
    assert scores["llm_judge_binary"]["num_failed"] == 0 and scores["llm_judge_binary"]["score"] == 100.0
    assert (ws.root / "runs" / "s" / "report.html").read_text().count("\ufffd") >= 3


def test_a_lone_surrogate_escaped_in_the_json_text_of_a_cell_is_sent_mended(ws):
    """A TSV cell holds a message list, options or turns as JSON (or Python) text: "\\ud800" there decoded to a
    string no request body can encode, and the sample failed as an internal error."""
    (ws.root / "data").mkdir()
    messages = '[{"role": "user", "content": "say \\ud800 yes"}]'
    (ws.root / "data" / "vqa.tsv").write_text(f"messages\tanswer\n{messages}\tyes\n")
    (ws.root / "data" / "mc.tsv").write_text('id\tquestion\toptions\tanswer\n0\tPick one\t["cat \\ud800", "dog"]\tB\n')
    (ws.root / "data" / "turns.tsv").write_text('id\tturns\treference\n0\t["hello \\udc00", "bye"]\tyes\n')
    ws.runspec("seed", "sets", {
        "vqa": {"hf_repo": "data/vqa.tsv", "format": "general_vqa"},
        "mc": {"hf_repo": "data/mc.tsv", "id_column": "id", "modality": "text", "audio_column": None, "textual_input_column": "question",
               "choices_column": "options", "target_column": "answer"},
        "turns": {"hf_repo": "data/turns.tsv", "id_column": "id", "modality": "text", "audio_column": None, "turns_column": "turns"}})
    with ScriptedEndpoint(lambda seen, n: "B. dog yes") as ep:
        ws.config([model(ep.url)], [["vqa", "bleu"], ["mc", "accuracy"], ["turns", "bleu"]], output_dir=str(ws.root / "runs"))
        result = ws.run()
        sent = [m["content"] for r in ep.requests for m in r.body["messages"]]
    assert all(s.num_failed == 0 for s in result.scores), [(s.dataset, s.details.get("failures")) for s in result.scores]
    text = json.dumps(sent, ensure_ascii=False)
    assert "say \ufffd yes" in text and "cat \ufffd" in text and "hello \ufffd" in text


def test_a_lone_surrogate_that_reaches_the_writer_is_stored_escaped_and_reads_back_identically(tmp_path):
    watch_writes(None)
    path = tmp_path / "records.jsonl"
    writer = JsonlWriter(path)
    writer.write({"id": "q0", "reply": f"a{SURROGATE}b é"})
    writer.write({"id": "q1", "reply": "plain é"})
    writer.close()
    assert write_error() is None
    lines = path.read_bytes().decode("utf-8").splitlines()  # valid UTF-8 throughout
    assert [json.loads(line) for line in lines] == [{"id": "q0", "reply": f"a{SURROGATE}b é"}, {"id": "q1", "reply": "plain é"}]
    assert "\\ud800" in lines[0] and "plain é" in lines[1]


def test_a_record_the_writer_cannot_serialize_is_called_an_internal_error_not_a_full_disk(tmp_path):
    watch_writes(None)
    looped: dict = {"id": "q0"}
    looped["self"] = looped
    writer = JsonlWriter(tmp_path / "records.jsonl")
    writer.write(looped)
    writer.close()
    assert write_error().startswith(f"{INTERNAL_WRITE_ERROR}: ValueError: Circular reference")
    watch_writes(None)


def test_control_characters_in_a_servers_error_are_recorded_and_printed_escaped(ws):
    ws.text_questions(1)
    with ScriptedEndpoint(lambda seen, n: Reply(status=400, payload={"error": {"message": "bad \x1b[2J\x07 input"}})) as ep:
        ws.config([model(ep.url)], [["qs", "accuracy"]], output_dir=str(ws.root / "runs"))
        out = subprocess.run([sys.executable, "-m", "lalmeval", "run", "--config", str(ws.root / "config.yaml"), "--run-id", "s"],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 3
    assert ws.records("qs", "m", "s")[0]["error"] == "HTTP 400: bad \\x1b[2J\\x07 input"
    assert "bad \\x1b[2J\\x07 input" in out.stdout and "\x1b" not in out.stdout + out.stderr


# --- Extraction takes time in proportion to what it reads -------------------------------------------

ADVERSARIAL = {  # shapes that each made some step quadratic or worse
    "bare letters": "A ", "letters on lines": "A\n", "labelled options": "A. cat\n", "open boxes": "\\boxed{",
    "nested wrappers": "\\boxed{\\text{", "unclosed think": "<think>", "bold markers": "**", "spaces": " ",
    "conclusions": "so ", "negations": "so not A, ", "answer cues": "the answer is ", "cue and spaces": "answer" + " " * 30,
    "Chinese cues": "所以选 ", "conditions": "if so ", "option words": "hot" + " " * 9, "joined options": "A or ",
}

SCRIPT = textwrap.dedent("""
    import sys
    from lalmeval.data.choices import gold_index, normalize_text, parse_options
    from lalmeval.postprocess.extraction import extract_choice
    from lalmeval.postprocess.general import GeneralPostprocessor
    from lalmeval.postprocess.labels import normalize_label

    options = ["cat", "dog", "hot dog", "D major"]
    for unit in {shapes!r}:
        for size in (1_000_000, 10_000_000):
            reply = unit * (size // len(unit))
            for strategy in ("default", "box", "first_letter"):
                extract_choice(strategy, reply, options)
            extract_choice("regex", reply, options, pattern=r"Answer: ([A-D])")
            if size == 1_000_000:  # these read every character, in C or in one Python pass
                GeneralPostprocessor().process(reply)
                normalize_label(reply, letters=True)
                normalize_text(reply)
                try:
                    gold_index(reply, options)
                except ValueError:
                    pass
                try:
                    parse_options(reply)
                except ValueError:
                    pass
        print("done", repr(unit[:12]), flush=True)
""")


@pytest.mark.slow
def test_answer_extraction_is_linear_in_the_reply_on_adversarial_shapes():
    """1 MB and 10 MB replies of each shape. Quadratic work would take hours on them, so a generous time
    limit on the whole separates linear from not without asserting any duration."""
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(shapes=list(ADVERSARIAL.values()))], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("done") == len(ADVERSARIAL)


NORMALIZING = textwrap.dedent("""
    import lalmeval.metrics
    from lalmeval.metrics.gsm8k import reply_answer
    from lalmeval.metrics.ifeval_rules import follows
    from lalmeval.metrics.normalize import normalizer, units_of

    rules = [normalizer("whisper_english"), normalizer("open_asr"), normalizer("chinese"), normalizer("kimi", "en"), normalizer("au_harness", "en")]
    for unit in ("[", "(", "<", "<|x ", " ", "\\t", "[ (", "\\\\boxed{"):
        reply = unit * (300_000 // len(unit)) + "'"
        for rule in rules:
            units_of(rule, reply, "word")
        reply_answer(reply)
        print("done", repr(unit), flush=True)
    for unit, instruction, args in (("[", "detectable_content:number_placeholders", {"num_placeholders": 1}),
                                    ("<<", "detectable_format:title", {}),
                                    ("Mr. ", "length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"})):
        follows(unit * (300_000 // len(unit)), instruction, args, loose=False)
        print("done", instruction, flush=True)
""")


@pytest.mark.slow
def test_normalizing_a_degenerate_reply_for_an_error_rate_is_linear():
    """A reply of brackets (or GSM8K boxes, IFEval placeholders and titles) that never close, or of one long run
    of spaces or of abbreviations: the normalizers' bracket and apostrophe rules, the last-box reading and
    IFEval's checks scanned from each to the end (300 000 characters took minutes for each normalizer, a
    megabyte hours, so one looping reply stalled the scoring of a run). A time limit quadratic work could
    never meet separates linear from not without asserting any duration."""
    out = subprocess.run([sys.executable, "-c", NORMALIZING], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("done") == 11


def test_long_texts_are_tokenized_exactly_as_before_when_nothing_in_them_is_degenerate():
    """The linear form changes nothing a rule would see: a long transcript with a few unclosed brackets and
    long runs of spaces gets the tokens its normalizer gives it directly."""
    from lalmeval.metrics.normalize import defused, normalizer, units_of

    text = ("He said [laughs] it costs $5 (roughly) — ok ?  " * 60 + "[unfinished (aside <note " + " " * 300 + "'s end") * 2
    assert len(text) > 2000 and defused(text) != text
    for name, language in (("whisper_english", ""), ("open_asr", ""), ("basic", ""), ("kimi", "en"), ("lmms", "en"), ("au_harness", "en")):
        rules = normalizer(name, language) if language else normalizer(name)
        assert units_of(rules, text, "word") == rules.tokens(text, "word"), name
