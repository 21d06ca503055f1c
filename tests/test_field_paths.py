"""A runspec reaches a field inside an object column with a dotted path: `meta.text` is the `text` of
the object in column `meta` (a JSONL object, a parquet struct, a webdataset sample's json)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lalmeval.config.schema import Filters
from lalmeval.data.source import iter_samples, open_source
from lalmeval.errors import UserError
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model


def nested_rows(ws, count=4):
    rows = ws.copy_demo_audio(demo_rows(count))
    langs = ["en", "fr", "en", "de"]
    return [{"audio": r["audio"], "meta": {"text": r["reference"], "lang": langs[i % 4], "key": {"id": f"utt-{i}"}}} for i, r in enumerate(rows)]


def dataset(ws, hf_repo, **spec):
    ws.runspec("asr", "nested", {"nested": {"hf_repo": hf_repo, "target_column": "meta.text", "id_column": "meta.key.id", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["nested", "word_error_rate"]])
    return ws.plan().catalog.datasets["nested"]


@pytest.mark.parametrize("layout", ["jsonl", "parquet struct"])
def test_references_and_ids_come_from_fields_of_an_object_column(ws, layout):
    rows = nested_rows(ws)
    if layout == "jsonl":
        hf_repo = ws.jsonl(rows)
    else:
        pq.write_table(pa.Table.from_pylist(rows), ws.root / "data" / "set.parquet")
        hf_repo = "data/set.parquet"
    samples = list(iter_samples(dataset(ws, hf_repo)))
    assert [s.id for s in samples] == [f"utt-{i}" for i in range(4)]
    assert [s.reference for s in samples] == [r["meta"]["text"] for r in rows]
    assert all(s.problem is None and s.audio for s in samples)


def test_a_filter_reads_a_field_path_in_the_light_scan(ws):
    rows = nested_rows(ws)
    data = dataset(ws, ws.jsonl(rows), language="multilingual", language_column="meta.lang")
    kept = list(open_source(data, Filters(language="en")).samples())
    assert [s.id for s in kept] == ["utt-0", "utt-2"] and [s.language for s in kept] == ["en", "en"]


def test_a_row_whose_object_lacks_the_field_has_no_reference_and_fails_alone(ws):
    rows = nested_rows(ws)
    del rows[1]["meta"]["text"]
    rows[2]["meta"]["text"] = {"nested": "object"}
    for i, row in enumerate(rows):
        row["id"] = f"r{i}"
    ws.runspec("asr", "nested", {"nested": {"hf_repo": ws.jsonl(rows), "target_column": "meta.text", "id_column": "id"}})
    with ScriptedEndpoint(lambda seen, n: "what is the weather this weekend") as ep:
        ws.config([model(ep.url)], [["nested", "word_error_rate"]])
        samples = list(iter_samples(ws.plan().catalog.datasets["nested"]))
        score = ws.run().scores[0]
    assert samples[1].reference is None and samples[1].problem is None  # a missing field is a missing cell
    assert samples[2].problem == "data: meta.text: an object (keys: nested) is not a text (a cell is never scored as its JSON); map the column that holds the text"
    assert len(ep.requests) == 3 and (score.num_samples, score.num_failed) == (4, 2)


def test_a_path_into_no_column_names_the_field_and_the_columns(ws):
    rows = nested_rows(ws)
    with pytest.raises(UserError, match=r"target_column 'notes.text' not found \(columns: audio, meta\)"):
        list(iter_samples(dataset(ws, ws.jsonl(rows), target_column="notes.text")))


def test_a_real_column_with_a_dot_in_its_name_wins_over_a_path(ws):
    rows = [{**r, "meta.text": "the column"} for r in nested_rows(ws, 2)]
    samples = list(iter_samples(dataset(ws, ws.jsonl(rows))))
    assert [s.reference for s in samples] == ["the column", "the column"]


def test_an_object_column_itself_is_still_refused_as_a_reference(ws):
    rows = nested_rows(ws, 2)
    samples = list(iter_samples(dataset(ws, ws.jsonl(rows), target_column="meta")))
    assert all(s.problem.startswith("data: meta: an object (keys: text, lang, key) is not a text") for s in samples)
