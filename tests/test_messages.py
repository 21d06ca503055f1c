"""EvalScope's multimodal formats become parts in the order the model must see them."""

import base64
import json
from pathlib import Path

import pytest

from lalmeval.data import messages as messages_module
from lalmeval.media.images import ImageError, ImageRef
from lalmeval.data.messages import (
    Audio, Conversation, Image, Text, Turn, from_openai_messages, image_parts, interleave, to_openai_content,
    to_openai_messages, vmcq_images,
)

IMAGES = Path(__file__).parent / "fixtures" / "images"


def ref(name: str) -> ImageRef:
    return ImageRef(name, IMAGES)


def decoded(part: dict) -> bytes:
    return base64.b64decode(part["image_url"]["url"].partition(",")[2])


def vqa(*content, system=None):
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": list(content)}]


def text(value):
    return {"type": "text", "text": value}


def image(url, **extra):
    return {"type": "image_url", "image_url": {"url": url, **extra}}


# general_vqa: OpenAI messages


def test_a_system_prompt_two_images_and_text_between_them_reach_the_request_in_order():
    conversation = from_openai_messages(vqa(
        text("Compare these two images:"), image("three.png"), text("and"), image("grey.jpg", detail="high"),
        text("What are the differences?"), system="You are a careful observer.",
    ), IMAGES)
    assert conversation == Conversation("You are a careful observer.", (Turn("user", (
        Text("Compare these two images:"), Image(ref("three.png")), Text("and"), Image(ref("grey.jpg"), "high"),
        Text("What are the differences?"),
    )),))
    sent = to_openai_messages(conversation, image_parts(conversation.parts()))
    assert sent[0] == {"role": "system", "content": "You are a careful observer."}
    content = sent[1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url", "text", "image_url", "text"]
    assert [p.get("text") for p in content] == ["Compare these two images:", None, "and", None, "What are the differences?"]
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,") and "detail" not in content[1]["image_url"]
    assert content[3]["image_url"]["detail"] == "high"
    assert decoded(content[1]) == (IMAGES / "three.png").read_bytes()
    assert decoded(content[3]) == (IMAGES / "grey.jpg").read_bytes()


def test_messages_stored_as_json_text_in_a_tsv_cell_are_parsed():
    cell = json.dumps(vqa(text("What animal is this?"), image("https://example.com/dog.jpg")))
    conversation = from_openai_messages(cell, IMAGES)
    assert list(conversation.parts()) == [Text("What animal is this?"), Image(ImageRef("https://example.com/dog.jpg", IMAGES))]
    sent = to_openai_messages(conversation, image_parts(conversation.parts()))
    assert sent == [{"role": "user", "content": [text("What animal is this?"), image("https://example.com/dog.jpg")]}]


def test_string_content_is_one_text_part():
    assert from_openai_messages([{"role": "user", "content": "Describe the scene."}], None) == Conversation.user([Text("Describe the scene.")])


def test_system_messages_are_joined_wherever_they_stand():
    conversation = from_openai_messages([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "developer", "content": [text("Answer in English."), text("Use one word.")]},
    ], None)
    assert conversation.system == "Be brief.\nAnswer in English.\nUse one word."
    assert conversation.turns == (Turn("user", (Text("Hello"),)),)


def test_assistant_messages_stay_in_place_as_few_shot_context():
    conversation = from_openai_messages([
        {"role": "user", "content": [text("What animal is this?"), image("three.png")]},
        {"role": "assistant", "content": "A dog."},
        {"role": "user", "content": [text("And this?"), image("four.gif")]},
    ], IMAGES)
    assert [t.role for t in conversation.turns] == ["user", "assistant", "user"]
    sent = to_openai_messages(conversation, image_parts(conversation.parts()))
    assert sent[1] == {"role": "assistant", "content": "A dog."}
    assert decoded(sent[0]["content"][1]) == (IMAGES / "three.png").read_bytes()
    assert decoded(sent[2]["content"][1]) == (IMAGES / "four.gif").read_bytes()


def test_a_conversation_must_end_with_a_user_message():
    with pytest.raises(ValueError, match="must end with a user message \\(last turn: 'assistant'\\)"):
        from_openai_messages([{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}], None)
    with pytest.raises(ValueError, match="last turn: none"):
        from_openai_messages([{"role": "system", "content": "Only a system prompt"}], None)


@pytest.mark.parametrize("messages, error", [
    ("[{\"role\": \"user\"", "messages: not valid JSON"),
    ([], "messages: expected a non-empty list"),
    ({"role": "user", "content": "hi"}, "messages: expected a non-empty list of {role, content}, got an object"),
    (["hi"], r"messages\[0\]: expected an object {role, content}, got a string"),
    ([{"role": "tool", "content": "x"}], r"messages\[0\].role: 'tool' is not one of"),
    ([{"content": "x"}], r"messages\[0\].role: None is not one of"),
    ([{"role": "user"}], r"messages\[0\].content: expected a string or a non-empty list of parts, got null"),
    ([{"role": "user", "content": "   "}], r"messages\[0\].content: empty"),
    ([{"role": "user", "content": []}], r"messages\[0\].content: .* got an empty list"),
    ([{"role": "user", "content": ["hi"]}], r"messages\[0\].content\[0\]: expected an object with a type, got a string"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}], r"messages\[0\].content\[0\].input_audio.data: expected a string, got null"),
    ([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "not base64!"}}]}], r"messages\[0\].content\[0\].input_audio.data: not valid base64"),
    ([{"role": "user", "content": [{"type": "audio_url", "audio_url": {"url": "https://example.com/a.wav"}}]}], r"audio_url.url: audio at an http\(s\) URL is not fetched"),
    ([{"role": "user", "content": [{"type": "input_video", "input_video": {}}]}], r"messages\[0\].content\[0\].type: 'input_video' is not supported"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "input_audio", "input_audio": {"data": "AAAA"}}]}, {"role": "user", "content": "q"}],
     r"messages\[1\].content: assistant messages hold text only"),
    ([{"role": "user", "content": [{"type": "text", "text": 3}]}], r"messages\[0\].content\[0\].text: expected a string, got a number"),
    ([{"role": "user", "content": [text("a"), {"type": "image_url", "image_url": "dog.jpg"}]}], r"messages\[0\].content\[1\].image_url: expected an object {url, detail}, got a string"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}], r"messages\[0\].content\[0\].image_url.url: expected a string, got null"),
    ([{"role": "user", "content": [image(" ")]}], r"messages\[0\].content\[0\].image_url.url: empty"),
    ([{"role": "user", "content": [image("a.png", detail=1)]}], r"messages\[0\].content\[0\].image_url.detail: expected a string"),
    ([{"role": "system", "content": [image("a.png")]}, {"role": "user", "content": "q"}], r"messages\[0\].content: system messages hold text only"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": [image("a.png")]}, {"role": "user", "content": "q"}], r"messages\[1\].content: assistant messages hold text only"),
])
def test_malformed_messages_are_refused_naming_the_message_and_field(messages, error):
    with pytest.raises(ValueError, match=error):
        from_openai_messages(messages, None)


# general_vmcq: <image k> placeholders


def test_a_question_with_image_options_interleaves_every_image_in_place():
    images = [ref("three.png"), ref("grey.jpg"), ref("four.gif")]
    question = "Which option shows the same picture as <image 2>?\nA. <image 1>\nB. <image 3>\nAnswer with the letter."
    parts = interleave(question, images)
    assert parts == [
        Text("Which option shows the same picture as"), Image(images[1]), Text("?\nA."), Image(images[0]),
        Text("\nB."), Image(images[2]), Text("\nAnswer with the letter."),
    ]
    content = to_openai_content(parts, image_parts(parts))
    assert [decoded(p) for p in content if p["type"] == "image_url"] == [(IMAGES / n).read_bytes() for n in ("grey.jpg", "three.png", "four.gif")]


def test_a_leading_placeholder_leaves_no_empty_text():
    assert interleave("<image 1> What building is this?", [ref("three.png")]) == [Image(ref("three.png")), Text("What building is this?")]


def test_underscore_placeholders_are_recognised_too():
    assert interleave("Look: <image_1>", [ref("three.png")]) == [Text("Look:"), Image(ref("three.png"))]


def test_text_without_placeholders_is_kept_exactly_and_images_follow_it():
    assert interleave("  What is shown?\n", [ref("three.png"), ref("four.gif")]) == [
        Text("  What is shown?\n"), Image(ref("three.png")), Image(ref("four.gif")),
    ]


def test_images_no_placeholder_refers_to_are_appended_after_the_text():
    images = [ref("three.png"), ref("grey.jpg"), ref("four.gif")]
    assert interleave("Is <image 2> a photo?", images) == [Text("Is"), Image(images[1]), Text("a photo?"), Image(images[0]), Image(images[2])]


def test_a_placeholder_used_twice_sends_its_image_twice():
    assert interleave("<image 1> vs <image 1>", [ref("three.png")]) == [Image(ref("three.png")), Text("vs"), Image(ref("three.png"))]


@pytest.mark.parametrize("question, error", [
    ("Compare <image 1> with <image 3>.", "<image 3> refers to image 3, but the sample has 2 images"),
    ("What is <image 0>?", "<image 0> refers to image 0"),
    ("See <image 101>.", "placeholders go up to <image 100>"),
    ("Hear <audio 1>.", "<audio 1> refers to audio 1, but the sample has 0 audio clips"),
])
def test_a_placeholder_without_its_image_is_an_error(question, error):
    with pytest.raises(ValueError, match=error):
        interleave(question, [ref("three.png"), ref("grey.jpg")])


def test_audio_placeholders_place_clips_and_unreferenced_clips_follow_images():
    parts = interleave("Does <audio 2> describe <image 1>?", [ref("three.png"), ref("four.gif")], audios=3)
    assert parts == [Text("Does"), Audio(1), Text("describe"), Image(ref("three.png")), Text("?"), Image(ref("four.gif")), Audio(0), Audio(2)]


def test_vmcq_images_are_collected_in_order_up_to_the_first_missing_column():
    row = {"question": "q", "image_2": "grey.jpg", "image_1": "three.png", "image_3": "", "image_4": None, "image_5": float("nan")}
    assert vmcq_images(row, IMAGES) == [ref("three.png"), ref("grey.jpg")]
    assert vmcq_images({"question": "q"}, IMAGES) == []


def test_a_vmcq_image_after_a_gap_is_an_error_not_silently_dropped():
    with pytest.raises(ImageError, match="image_3 is given but image_2 is missing"):
        vmcq_images({"image_1": "three.png", "image_2": " ", "image_3": "four.gif"}, IMAGES)


def test_more_than_100_vmcq_images_is_an_error():
    row = {f"image_{k}": "three.png" for k in range(1, 102)}
    with pytest.raises(ImageError, match="image_101: a sample holds at most 100 images"):
        vmcq_images(row, IMAGES)
    del row["image_101"]
    assert len(vmcq_images(row, IMAGES)) == 100


def test_vmcq_cells_may_be_hugging_face_image_structs_or_an_images_list():
    png = (IMAGES / "three.png").read_bytes()
    assert vmcq_images({"image_1": {"bytes": png, "path": "x.png"}, "image_2": {"bytes": None, "path": "grey.jpg"}}, IMAGES) == [
        ImageRef(png, IMAGES), ref("grey.jpg"),
    ]
    assert vmcq_images({"images": ["three.png", "four.gif"]}, IMAGES) == [ref("three.png"), ref("four.gif")]
    assert vmcq_images({"images": ["ignored.png"], "image_1": "grey.jpg"}, IMAGES) == [ref("grey.jpg")]  # image_k wins, as in EvalScope


def test_a_bad_vmcq_cell_names_its_column():
    with pytest.raises(ImageError, match="image_2: image struct has neither 'bytes' nor 'path'"):
        vmcq_images({"image_1": "three.png", "image_2": {"bytes": None}}, IMAGES)
    with pytest.raises(ImageError, match=r"images\[1\]: an image cell must be"):
        vmcq_images({"images": ["three.png", None]}, IMAGES)
    with pytest.raises(ImageError, match="images: expected a list of images, got a string"):
        vmcq_images({"images": "three.png"}, IMAGES)


# building the JSON content


def test_image_parts_reads_an_image_referenced_twice_once(monkeypatch):
    calls = []
    real = messages_module.image_url
    monkeypatch.setattr(messages_module, "image_url", lambda r, d=None, m=None: calls.append(r) or real(r, d, m))
    parts = interleave("<image 1> or <image 1>, then <image 2>", [ref("three.png"), ref("four.gif")])
    built = image_parts(parts)
    assert [p.mime for p in built] == ["image/png", "image/png", "image/gif"]
    assert calls == [ref("three.png"), ref("four.gif")]


def test_a_broken_image_surfaces_as_the_samples_image_error(tmp_path):
    parts = interleave("<image 1>", [ImageRef("nowhere.png", tmp_path)])
    with pytest.raises(ImageError, match="image file not found: 'nowhere.png'"):
        image_parts(parts)


def test_audio_parts_are_left_to_the_callers_builder():
    parts = interleave("Listen: <audio 1> and look: <image 1>", [ref("three.png")], audios=1)
    content = to_openai_content(parts, image_parts(parts), audio=lambda a: {"type": "input_audio", "input_audio": {"data": f"@@slot{a.index}@@", "format": "wav"}})
    assert [p["type"] for p in content] == ["text", "input_audio", "text", "image_url"]
    assert content[1]["input_audio"]["data"] == "@@slot0@@"
    with pytest.raises(ValueError, match="needs an audio part builder"):
        to_openai_content(parts, image_parts(parts))


def test_image_parts_that_do_not_match_the_image_parts_are_refused():
    parts = interleave("<image 1> and <image 2>", [ref("three.png"), ref("four.gif")])
    built = image_parts(parts)
    with pytest.raises(ValueError, match="fewer ImageParts than Image parts"):
        to_openai_content(parts, built[:1])
    with pytest.raises(ValueError, match="more ImageParts than Image parts"):
        to_openai_content(parts, built + built)
    with pytest.raises(ValueError, match="more ImageParts than Image parts"):
        to_openai_messages(Conversation.user(parts[:1]), built)
