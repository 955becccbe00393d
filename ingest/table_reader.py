"""Reads typed columns from a CSV or Parquet file; a bad value names file, line or row, column.

pyarrow does the reading. Its CSV errors do not say which line failed, so on a parse or
conversion error the file is scanned again with Python's ``csv`` module to find the first bad
line (1-based, the header is line 1). Parquet positions are 0-based row numbers.
"""
from __future__ import annotations

import csv
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from gnnstore.common.errors import MalformedFileError

logger = logging.getLogger(__name__)

CSV_SUFFIXES = (".csv",)
PARQUET_SUFFIXES = (".parquet", ".pq")
_INT = re.compile(r"[+-]?\d+")
_BOOLS = {"1", "0", "true", "false", "True", "False", "TRUE", "FALSE"}


def is_csv(path: Path) -> bool:
    """True for a ``.csv`` file, False for Parquet.

    Raises:
        MalformedFileError: any other suffix.
    """
    if path.suffix.lower() in CSV_SUFFIXES:
        return True
    if path.suffix.lower() in PARQUET_SUFFIXES:
        return False
    raise MalformedFileError(
        f"{path}: unknown file type {path.suffix!r} (expected .csv, .parquet or .pq)"
    )


def read_header(path: Path) -> list[str]:
    """Column names of a CSV (its first line) or Parquet file (its schema).

    Raises:
        MalformedFileError: the file cannot be read, or a CSV file is empty.
    """
    try:
        if not is_csv(path):
            return list(pq.read_schema(path).names)
        with open(path, newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), None)
    except (OSError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise MalformedFileError(f"{path}: cannot be read ({exc})") from exc
    if not header:
        raise MalformedFileError(f"{path}: line 1: empty file, expected a header line")
    return header


def position(path: Path, row: int) -> str:
    """Where data row ``row`` (0-based) is: ``line N`` in a CSV file, ``row N`` in Parquet."""
    if not is_csv(path):
        return f"row {row} (0-based)"
    for seen, (line, _) in enumerate(_csv_records(path)):
        if seen == row:
            return f"line {line}"
    return f"data row {row}"


def _csv_records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The non-blank data records of a CSV file, each with the line it starts on (1-based).

    A quoted field may span lines, so the line is where the record starts.
    """
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        next(reader, None)
        start = reader.line_num + 1
        for record in reader:
            line, start = start, reader.line_num + 1
            if record:
                yield line, record


def read_table(path: Path, types: dict[str, pa.DataType | None]) -> pa.Table:
    """The columns named in ``types``, converted to their types (``None``: strings for CSV,
    the stored type for Parquet), with no empty value.

    Raises:
        MalformedFileError: a missing column, a row with the wrong number of fields, a value
            that does not convert, or an empty value; the message names the file, the line
            (CSV) or row (Parquet) and the column.
    """
    header = read_header(path)
    missing = [name for name in types if name not in header]
    if missing:
        where = "line 1 (header)" if is_csv(path) else "schema"
        raise MalformedFileError(
            f"{path}: {where}: missing column {missing[0]!r} (the file has columns {header})"
        )
    table = _read_csv(path, header, types) if is_csv(path) else _read_parquet(path, types)
    for name in types:
        column = table.column(name)
        if column.null_count:
            row = int(pc.index(pc.is_null(column), True).as_py())
            raise MalformedFileError(f"{path}: {position(path, row)}, column {name!r}: empty value")
    return table


def _read_csv(path: Path, header: list[str], types: dict[str, pa.DataType | None]) -> pa.Table:
    column_types = {name: typ or pa.string() for name, typ in types.items()}
    options = pacsv.ConvertOptions(
        column_types=column_types, include_columns=list(types), strings_can_be_null=True
    )
    try:
        return pacsv.read_csv(path, convert_options=options)
    except pa.ArrowInvalid as exc:
        raise MalformedFileError(_locate_csv_error(path, header, column_types) or
                                 f"{path}: {exc}") from exc


def _locate_csv_error(path: Path, header: list[str], types: dict[str, pa.DataType]) -> str | None:
    """The first line of ``path`` with a wrong field count or a value that does not convert."""
    checks = [(header.index(name), name, typ) for name, typ in types.items()]
    for line, record in _csv_records(path):
        where = f"{path}: line {line}"
        if len(record) != len(header):
            return (f"{where}: expected {len(header)} fields ({', '.join(header)}), "
                    f"got {len(record)}")
        for index, name, typ in checks:
            problem = _bad_value(record[index], typ)
            if problem:
                return f"{where}, column {name!r}: {problem}"
    return None


def _bad_value(text: str, typ: pa.DataType) -> str | None:
    """Why ``text`` is not a value of ``typ`` (``None`` when it is)."""
    if text == "" and not pa.types.is_string(typ):
        return "empty value"
    if pa.types.is_integer(typ) and not _INT.fullmatch(text):
        return f"{text!r} is not an integer"
    if pa.types.is_boolean(typ) and text not in _BOOLS:
        return f"{text!r} is not a boolean (use 1/0 or true/false)"
    if pa.types.is_floating(typ):
        try:
            float(text)
        except ValueError:
            return f"{text!r} is not a number"
    return None


def _read_parquet(path: Path, types: dict[str, pa.DataType | None]) -> pa.Table:
    try:
        table = pq.read_table(path, columns=list(types))
    except (OSError, pa.ArrowException) as exc:
        raise MalformedFileError(f"{path}: cannot be read as Parquet ({exc})") from exc
    for name, typ in types.items():
        if typ is None or table.column(name).type == typ:
            continue
        column = table.column(name)
        try:
            converted = pc.cast(column, typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            row = _first_uncastable_row(column, typ)
            value = column[row].as_py() if row is not None else None
            raise MalformedFileError(
                f"{path}: row {row} (0-based), column {name!r}: {value!r} cannot be read as "
                f"{typ} (the column holds {column.type})"
            ) from exc
        table = table.set_column(table.schema.get_field_index(name), name, converted)
    return table


def _first_uncastable_row(column: pa.ChunkedArray, typ: pa.DataType) -> int | None:
    """Bisect for the shortest prefix of ``column`` that does not cast to ``typ``."""
    low, high = 0, len(column)
    try:
        pc.cast(column.slice(0, high), typ)
        return None
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    while high - low > 1:
        mid = (low + high) // 2
        try:
            pc.cast(column.slice(0, mid), typ)
            low = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            high = mid
    return low
