"""CSV and TSV as spreadsheets write them: a byte-order mark, CRLF rows, and quoted cells holding
Unicode line and page separators, which are text, not row ends."""

import csv

import pytest

from lalmeval.data.source import iter_samples
from lalmeval.errors import UserError
from tests.support.endpoint import ScriptedEndpoint
from tests.support.workspace import demo_rows, model

# Characters str.splitlines() breaks on but the csv module does not: inside a quoted cell they are text.
SEPARATORS = {"line separator": "\u2028", "paragraph separator": "\u2029", "next line": "\x85", "form feed": "\x0c",
              "vertical tab": "\x0b", "file separator": "\x1c"}


def excel_csv(ws, rows, name="data/set.csv", delimiter=",", bom=True, line_end="\r\n", quoting=csv.QUOTE_MINIMAL):
    """What Excel's "CSV UTF-8" writes: a BOM, CRLF, every cell with a separator quoted."""
    path = ws.root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8-sig" if bom else "utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator=line_end, quoting=quoting)
        writer.writerow(["id", "audio", "reference"])
        writer.writerows([[r["id"], r["audio"], r["reference"]] for r in rows])
    return name


def samples_of(ws, name, **spec):
    ws.runspec("asr", "sheet", {"sheet": {"hf_repo": name, "id_column": "id", **spec}})
    ws.config([model("http://127.0.0.1:9/v1")], [["sheet", "word_error_rate"]])
    return list(iter_samples(ws.plan().catalog.datasets["sheet"]))


def rows_with_separators(ws):
    rows = ws.copy_demo_audio(demo_rows(len(SEPARATORS)))
    return [{**row, "reference": f"turn on{sep}the lights \"{name}\""} for row, (name, sep) in zip(rows, SEPARATORS.items())]


@pytest.mark.parametrize("delimiter,suffix", [(",", "csv"), ("\t", "tsv")])
def test_a_bom_and_unicode_separators_inside_quoted_cells_are_read_as_text(ws, delimiter, suffix):
    rows = rows_with_separators(ws)
    name = excel_csv(ws, rows, f"data/set.{suffix}", delimiter)
    assert (ws.root / name).read_bytes().startswith(b"\xef\xbb\xbfid")
    samples = samples_of(ws, name)
    assert [s.id for s in samples] == [r["id"] for r in rows]  # the header's first column is 'id', not '\ufeffid'
    assert [s.reference for s in samples] == [r["reference"] for r in rows]
    assert all(s.problem is None and s.audio for s in samples)


@pytest.mark.parametrize("line_end", ["\r\n", "\n", "\r"])
def test_rows_end_at_crlf_lf_or_a_lone_cr(ws, line_end):
    rows = ws.copy_demo_audio(demo_rows(3))
    rows[1]["reference"] = "two\nlines"  # a newline inside a quoted cell stays in the cell whatever ends the rows
    # Quoted throughout: the csv module's writer leaves "\n" unquoted when rows end in a lone CR.
    samples = samples_of(ws, excel_csv(ws, rows, bom=False, line_end=line_end, quoting=csv.QUOTE_ALL))
    assert [s.reference for s in samples] == [r["reference"] for r in rows]


def test_bytes_that_are_not_utf8_name_their_line(ws):
    path = ws.root / "data" / "set.csv"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"\xef\xbb\xbfid,audio,reference\r\na,x.wav,on\r\nb,y.wav,caf\xe9\r\n")
    with pytest.raises(UserError, match=r"set.csv: line 3: data file is not valid UTF-8 \(byte 0xe9"):
        samples_of(ws, "data/set.csv")


def test_a_jsonl_file_opening_with_a_bom_is_read(ws):
    rows = ws.copy_demo_audio(demo_rows(2))
    name = ws.jsonl(rows)
    path = ws.root / name
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [s.reference for s in samples_of(ws, name)] == [r["reference"] for r in rows]


def test_a_run_over_an_excel_csv_scores_every_row_against_its_separator_holding_reference(ws, capsys):
    """End to end: validate passes, and every row is answered and scored with its reference intact."""
    from lalmeval.cli.commands import main

    rows = rows_with_separators(ws)
    ws.runspec("asr", "sheet", {"sheet": {"hf_repo": excel_csv(ws, rows), "id_column": "id"}})
    references = {r["id"]: r["reference"] for r in rows}
    with ScriptedEndpoint(lambda seen, n: "turn on the lights") as ep:
        ws.config([model(ep.url)], [["sheet", "word_error_rate"]])
        assert main(["validate", "--config", str(ws.root / "config.yaml")]) == 0
        result = ws.run()
    assert "data of sheet: OK" in capsys.readouterr().out
    records = ws.records("sheet", "m")
    assert {r["id"]: r["reference"] for r in records} == references
    assert len(ep.requests) == len(rows) and result.scores[0].num_samples == len(rows) and result.scores[0].num_failed == 0
