"""Image references become image_url parts whose bytes reach the endpoint unchanged."""

import base64
import hashlib
import os
import shutil
import threading
from pathlib import Path

import pytest

from lalmeval.media.images import ImageError, ImagePart, ImageRef, decode_data_uri, image_ref, image_url, sniff
from tests.fixtures.images import make_images

IMAGES = Path(__file__).parent / "fixtures" / "images"
FILES = {"three.png": "image/png", "grey.jpg": "image/jpeg", "four.gif": "image/gif", "stripes.webp": "image/webp", "three.bmp": "image/bmp"}


def payload(part: ImagePart) -> bytes:
    """The bytes a data-URI part delivers, decoded as the endpoint will."""
    head, _, data = part.url.partition(",")
    assert head.endswith(";base64")
    return base64.b64decode(data, validate=True)


def data_uri(mime: str, data: bytes) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def test_the_fixture_script_reproduces_the_committed_images(tmp_path):
    make_images.main(tmp_path)
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (IMAGES / name).read_bytes(), name


@pytest.mark.parametrize("name, mime", FILES.items())
def test_local_files_become_data_uris_holding_the_file_bytes_unchanged(name, mime):
    original = (IMAGES / name).read_bytes()
    part = image_url(ImageRef(name, IMAGES))
    assert part.url.startswith(f"data:{mime};base64,")
    assert part.mime == mime
    assert payload(part) == original
    assert part.digest == hashlib.sha1(original).hexdigest()
    assert part.detail is None


def test_the_type_comes_from_the_bytes_not_the_file_name(tmp_path):
    shutil.copy(IMAGES / "three.png", tmp_path / "photo.jpg")
    part = image_url(ImageRef("photo.jpg", tmp_path))
    assert part.mime == "image/png" and part.url.startswith("data:image/png;base64,")


def test_svg_and_ico_are_recognised_by_their_bytes(tmp_path):
    (tmp_path / "icon.svg").write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>')
    part = image_url(ImageRef("icon.svg", tmp_path))
    assert part.mime == "image/svg+xml"
    assert payload(part) == (tmp_path / "icon.svg").read_bytes()
    (tmp_path / "x.ico").write_bytes(b"\x00\x00\x01\x00\x01\x00" + bytes(16))
    assert image_url(ImageRef("x.ico", tmp_path)).mime == "image/vnd.microsoft.icon"


@pytest.mark.parametrize("name", ["x.ico", "x.svg", "x.pcx", "x.png"])
def test_a_file_whose_bytes_are_no_image_is_refused_whatever_its_name(tmp_path, name):
    """The name is not trusted: a text file called x.ico used to be sent as an icon."""
    (tmp_path / name).write_bytes(b"HOME=/root\x00OPENAI_API_KEY=sk-...\x00")
    with pytest.raises(ImageError, match=r"image file is named like image/\S+ but its bytes are not"):
        image_url(ImageRef(name, tmp_path))


def test_a_file_named_like_a_known_type_whose_bytes_are_not_is_refused(tmp_path):
    (tmp_path / "broken.png").write_bytes(b"<html>not found</html>")
    with pytest.raises(ImageError, match=r"named like image/png but its bytes are not .*broken\.png"):
        image_url(ImageRef("broken.png", tmp_path))


def test_a_file_of_unknown_type_is_refused(tmp_path):
    (tmp_path / "notes.dat").write_bytes(b"\x00\x01\x02\x03 plain data")
    with pytest.raises(ImageError, match="not a recognised image type"):
        image_url(ImageRef("notes.dat", tmp_path))


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(ImageError, match="image file is empty"):
        image_url(ImageRef("empty.png", tmp_path))


def test_a_missing_file_names_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ImageError) as caught:
        image_url(ImageRef("images/dog.jpg", tmp_path / "data"))
    assert "image file not found: 'images/dog.jpg'" in str(caught.value)
    assert str(tmp_path / "data" / "images" / "dog.jpg") in str(caught.value)
    assert str(tmp_path / "images" / "dog.jpg") in str(caught.value)


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "folder.png").mkdir()
    with pytest.raises(ImageError, match="image path is a directory"):
        image_url(ImageRef("folder.png", tmp_path))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes need POSIX")
def test_a_named_pipe_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "pipe.png")
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(pytest.raises(ImageError, image_url, ImageRef("pipe.png", tmp_path))), daemon=True)
    worker.start()
    worker.join(5)
    if worker.is_alive():  # unblock the reader so the test run can end
        with open(tmp_path / "pipe.png", "wb"):
            pass
        pytest.fail("reading a named pipe blocked")
    assert "not a regular file" in str(outcome[0].value)


def test_relative_paths_try_the_data_folder_first_then_the_working_directory(tmp_path, monkeypatch):
    data, cwd = tmp_path / "data", tmp_path / "run"
    (data / "img").mkdir(parents=True)
    (cwd / "img").mkdir(parents=True)
    shutil.copy(IMAGES / "three.png", data / "img" / "a.png")
    shutil.copy(IMAGES / "four.gif", cwd / "img" / "a.png")  # same name, other content
    shutil.copy(IMAGES / "grey.jpg", cwd / "img" / "only_here.jpg")
    monkeypatch.chdir(cwd)
    assert image_url(ImageRef("img/a.png", data)).mime == "image/png"  # the data folder wins
    assert image_url(ImageRef("img/only_here.jpg", data)).mime == "image/jpeg"  # EvalScope-style: from the cwd
    assert image_url(ImageRef("img/a.png", None)).mime == "image/gif"  # no data folder: the cwd only


def test_absolute_paths_and_file_urls_are_read_as_given(tmp_path):
    shutil.copy(IMAGES / "grey.jpg", tmp_path / "my photo.jpg")
    absolute = image_url(ImageRef(str(tmp_path / "my photo.jpg"), IMAGES))
    from_url = image_url(ImageRef((tmp_path / "my photo.jpg").as_uri(), IMAGES))
    assert payload(absolute) == payload(from_url) == (IMAGES / "grey.jpg").read_bytes()


def test_stray_whitespace_around_a_cell_is_ignored():
    assert image_url(ImageRef("  three.png\n", IMAGES)).mime == "image/png"


@pytest.mark.parametrize("url", ["https://example.com/images/dog.jpg", "http://127.0.0.1:9/cat.png?size=large"])
def test_http_urls_pass_through_unchanged_identified_by_the_url(url):
    part = image_url(ImageRef(url, IMAGES), detail="low")
    assert part == ImagePart(url, hashlib.sha1(url.encode()).hexdigest(), None, "low")


@pytest.mark.parametrize("url", ["http://", "https:// example.com/x.png", "https://exa mple.com/x.png"])
def test_malformed_http_urls_are_refused(url):
    with pytest.raises(ImageError, match="malformed image URL"):
        image_url(ImageRef(url))


def test_other_url_schemes_are_refused():
    with pytest.raises(ImageError, match="unsupported image URL scheme 's3'"):
        image_url(ImageRef("s3://bucket/dog.jpg"))


def test_a_data_uri_passes_through_unchanged_with_the_digest_of_its_bytes():
    original = (IMAGES / "stripes.webp").read_bytes()
    uri = data_uri("image/webp", original)
    part = image_url(ImageRef(uri), detail="high")
    assert part.url == uri
    assert part.digest == hashlib.sha1(original).hexdigest() == image_url(ImageRef("stripes.webp", IMAGES)).digest
    assert (part.mime, part.detail) == ("image/webp", "high")


def test_a_mislabelled_data_uri_is_still_sent_as_given():
    uri = data_uri("image/jpeg", (IMAGES / "three.png").read_bytes())
    assert image_url(ImageRef(uri)).url == uri


@pytest.mark.parametrize("uri, reason", [
    ("data:image/png," + base64.b64encode(b"\x89PNG\r\n\x1a\n").decode(), "must be data:<mime>;base64,"),
    ("data:;base64,iVBORw0KGgo=", "no MIME type, not an image"),
    ("data:application/pdf;base64,JVBERi0xLjQK", "holds application/pdf, not an image"),
    ("data:image/png;base64,iVBOR w0KGgo=", "not valid base64"),
    ("data:image/png;base64,iVBORw0KGgo", "not valid base64"),
    ("data:image/png;base64,", "holds no bytes"),
    ("data:image/png;base64," + base64.b64encode(b"<html>404</html>").decode(), "says image/png but its bytes are not an image"),
    ("data:image/png;base64", "must be data:<mime>;base64,"),
])
def test_broken_data_uris_are_refused_with_the_reason(uri, reason):
    with pytest.raises(ImageError, match=reason.replace("(", r"\(").replace(")", r"\)").replace("+", r"\+")):
        image_url(ImageRef(uri))


def test_decode_data_uri_returns_the_type_and_bytes():
    original = (IMAGES / "four.gif").read_bytes()
    assert decode_data_uri(data_uri("image/gif", original)) == ("image/gif", original)


def test_raw_bytes_become_a_data_uri_typed_by_their_magic():
    original = (IMAGES / "grey.jpg").read_bytes()
    part = image_url(ImageRef(original))
    assert part.url == data_uri("image/jpeg", original)
    assert part.digest == hashlib.sha1(original).hexdigest()


def test_raw_bytes_of_no_known_image_type_are_refused():
    with pytest.raises(ImageError, match="not a recognised image type"):
        image_url(ImageRef(b"<html>not an image</html>"))
    assert image_url(ImageRef(b"<svg/>")).mime == "image/svg+xml"  # SVG is told by its text, as every type by its bytes
    with pytest.raises(ImageError, match="image bytes are empty"):
        image_url(ImageRef(b""))


def test_max_bytes_refuses_larger_images_before_sending_them():
    size = (IMAGES / "grey.jpg").stat().st_size
    assert image_url(ImageRef("grey.jpg", IMAGES), max_bytes=size).mime == "image/jpeg"
    for ref in (ImageRef("grey.jpg", IMAGES), ImageRef((IMAGES / "grey.jpg").read_bytes())):
        with pytest.raises(ImageError, match=f"{size} bytes, over the {size - 1}-byte limit"):
            image_url(ref, max_bytes=size - 1)


def box(kind: bytes, body: bytes) -> bytes:
    return (8 + len(body)).to_bytes(4, "big") + kind + body


@pytest.mark.parametrize("head, mime", [
    (b"II*\x00\x08\x00\x00\x00", "image/tiff"),
    (b"MM\x00*\x00\x00\x00\x08", "image/tiff"),
    (box(b"ftyp", b"heic\x00\x00\x00\x00mif1heic"), "image/heic"),
    (box(b"ftyp", b"avif\x00\x00\x00\x00mif1miaf"), "image/avif"),
    (box(b"ftyp", b"mif1\x00\x00\x00\x00avifmiaf"), "image/avif"),
    (box(b"ftyp", b"mif1\x00\x00\x00\x00mif1miaf"), "image/heif"),
    (box(b"ftyp", b"isom\x00\x00\x02\x00isomiso2mp41"), None),  # an MP4 video
    (b"BM" + bytes(12) + (40).to_bytes(4, "little"), "image/bmp"),
    (b"BM is also how some text starts", None),
    (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),  # a WAV file is RIFF too
])
def test_sniff_recognises_formats_by_their_first_bytes(head, mime):
    assert sniff(head + bytes(16)) == mime


def test_image_ref_reads_every_cell_shape():
    png = (IMAGES / "three.png").read_bytes()
    assert image_ref("img/a.png", IMAGES) == ImageRef("img/a.png", IMAGES)
    assert image_ref(png, IMAGES) == ImageRef(png, IMAGES)
    assert image_ref({"bytes": png, "path": "ignored.jpg"}, IMAGES) == ImageRef(png, IMAGES)  # Hugging Face Image()
    assert image_ref({"bytes": None, "path": "three.png"}, IMAGES) == ImageRef("three.png", IMAGES)
    with pytest.raises(ImageError, match="neither 'bytes' nor 'path'"):
        image_ref({"bytes": None, "path": None}, IMAGES)
    for empty in (None, "", "  ", float("nan")):
        with pytest.raises(ImageError, match="not an empty value"):
            image_ref(empty, IMAGES)
    with pytest.raises(ImageError, match="not int"):
        image_ref(3, IMAGES)


def test_printing_refs_and_parts_never_dumps_image_data():
    png = (IMAGES / "three.png").read_bytes()
    assert repr(ImageRef(png)) == "ImageRef(<88 bytes>, base=None)"
    uri = data_uri("image/png", png * 100)
    assert len(repr(ImageRef(uri))) < 100 and len(repr(image_url(ImageRef(uri)))) < 160
