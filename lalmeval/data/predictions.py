"""An outside prediction file: a jsonl, json, csv, tsv or parquet of rows {id, prediction[, reference]}.

Kimi-Audio-Evalkit's result files read as they are: `index` is the id, `answer` the reference, and its
`"null"` prediction (what it writes for a sample it has no answer for) is no prediction, as is a null.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from lalmeval.data.cells import cell_text, reference_text
from lalmeval.errors import UserError

ID_COLUMNS = ("id", "index")              # index: Kimi-Audio-Evalkit
PREDICTION_COLUMN = "prediction"
REFERENCE_COLUMNS = ("reference", "answer")   # answer: Kimi-Audio-Evalkit
KINDS = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
NO_ANSWER = "null"   # Kimi-Audio-Evalkit's prediction for a sample it could not answer


@dataclass(frozen=True)
class Prediction:
    """One row of the file: its prediction (None: none given), its reference, or why a value cannot be used."""

    row: int
    text: Optional[str]
    reference: Optional[str] = None
    problem: Optional[str] = None


@dataclass(frozen=True)
class Predictions:
    """A prediction file read whole: the rows by id, and which columns held ids and references."""

    path: Path
    id_column: str
    reference_column: Optional[str]
    by_id: dict[str, Prediction]

    def missing(self, row: Optional[Prediction]) -> str:
        """Why a sample has no prediction (the reason its record fails with)."""
        if row is None:
            return f"no prediction in {self.path}"
        return f"no prediction in {self.path}: row {row.row} holds {'null' if row.text is None else repr(row.text)}"


def _open(path: Path) -> Any:
    from lalmeval.data import hub  # noqa: F401  (registers every data file format)
    from lalmeval.data.tables import FORMATS, TableRequest

    kind = KINDS.get(path.suffix.lower())
    if kind is None:
        raise UserError(f"{path}: a prediction file is .jsonl, .json, .csv, .tsv or .parquet")
    if not path.exists():
        raise UserError(f"{path}: prediction file not found")
    if not path.is_file():
        raise UserError(f"{path}: the prediction file is not a regular file")
    return FORMATS.get(kind)(path, TableRequest([], str(path)))


def _column(columns: list[str], names: tuple[str, ...]) -> Optional[str]:
    return next((n for n in names if n in columns), None)


def _row(number: int, row: dict[str, Any], reference_column: Optional[str]) -> Prediction:
    """One row's prediction and reference as text (the rule every cell follows); a value that is not text is its problem."""
    try:
        text = cell_text(row.get(PREDICTION_COLUMN), PREDICTION_COLUMN)
        reference = reference_text(row.get(reference_column), reference_column) if reference_column else None
    except ValueError as exc:
        return Prediction(number, None, problem=f"prediction file row {number}: {exc}")
    return Prediction(number, None if text == NO_ANSWER else text, reference)


def read_predictions(path: Path) -> Predictions:
    """Read a prediction file; a missing column, an empty or repeated id is one line naming the file and row."""
    table = _open(path)
    columns = list(table.columns)
    id_column = _column(columns, ID_COLUMNS)
    if id_column is None or PREDICTION_COLUMN not in columns:
        wanted = "an id column ('id' or 'index')" if id_column is None else f"a '{PREDICTION_COLUMN}' column"
        raise UserError(f"{path}: a prediction file needs {wanted} (columns: {', '.join(columns) or 'none'})")
    reference_column = _column(columns, REFERENCE_COLUMNS)
    found: dict[str, Prediction] = {}
    for number, row in enumerate(table.rows(None), 1):
        try:
            sample_id = cell_text(row.get(id_column), id_column)
        except ValueError as exc:
            raise UserError(f"{path}: row {number}: {exc}") from None
        if sample_id is None or not sample_id.strip():
            raise UserError(f"{path}: row {number} has no id (column '{id_column}' is {'empty' if sample_id is not None else 'null'})")
        if sample_id in found:
            raise UserError(f"{path}: id '{sample_id}' appears twice (rows {found[sample_id].row} and {number}): one prediction per sample")
        found[sample_id] = _row(number, row, reference_column)
    if not found:
        raise UserError(f"{path}: the prediction file has no rows")
    return Predictions(path, id_column, reference_column, found)
