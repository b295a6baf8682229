"""Reading the file: CSV or GeoJSON, told apart by content.

CSV is UTF-8 with a header row (a BOM allowed). Its delimiter (comma,
semicolon, tab or bar) is found by the standard library's ``csv.Sniffer``,
checked against the header: the delimiter must split it into columns that
include the id column, else the other delimiters are tried on it. Quoting is
always RFC 4180's (double quotes, doubled inside a quoted cell), which the
Sniffer cannot tell from a sample. GeoJSON is read as a stream of Features
(ijson), so a large file is never held twice, as bytes and as objects.
"""

import csv
import io
import sys
from collections.abc import Iterator
from typing import NamedTuple

import ijson

BOM = b"\xef\xbb\xbf"
DELIMITERS = ",;\t|"
#: How much of the file the Sniffer reads.
SNIFF_CHARACTERS = 64 * 1024


class FileError(Exception):
    """The file cannot be read: the message is one line for the user."""


class CsvRecord(NamedTuple):
    """One data row: the line it starts on and its cells (fewer than the
    header's columns when the row ends early)."""

    line: int
    cells: list[str]


class CsvFile(NamedTuple):
    header: list[str]
    records: Iterator[CsvRecord]


def read_bytes(path: str) -> bytes:
    """The whole file, or standard input for ``-``."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as stream:
            return stream.read()
    except OSError as error:
        raise FileError(f"{path}: {error.strerror}") from None


def is_geojson(data: bytes) -> bool:
    """GeoJSON starts with ``{``; anything else is read as CSV."""
    start = data.removeprefix(BOM).lstrip()
    if not start:
        raise FileError("the file is empty")
    return start.startswith(b"{")


def csv_file(data: bytes, id_columns: tuple[str, ...]) -> CsvFile:
    """The header and the records of a CSV file whose header should name
    one of ``id_columns`` (compared without case)."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise FileError(
            f"not UTF-8 text: byte {error.object[error.start]:#04x} at offset {error.start}"
        ) from None
    delimiter = _delimiter(text, {name.lower() for name in id_columns})
    reader = csv.reader(io.StringIO(text, newline=""), csv.excel, delimiter=delimiter)
    try:
        header = next(reader)
    except csv.Error as error:
        raise FileError(f"line 1: {error}") from None
    return CsvFile([name.strip() for name in header], _records(reader))


def _records(reader) -> Iterator[CsvRecord]:
    ended = reader.line_num
    for cells in _guarded(reader, csv.Error, lambda error: f"line {reader.line_num}: {error}"):
        if cells:  # a blank line is no row
            yield CsvRecord(ended + 1, cells)
        ended = reader.line_num


def _delimiter(text: str, id_columns: set[str]) -> str:
    """The Sniffer's delimiter if it splits the header into columns naming
    the id; else the first delimiter that does; else the Sniffer's."""
    sample = text[:SNIFF_CHARACTERS]
    if len(text) > len(sample) and "\n" in sample:
        sample = sample[: sample.rindex("\n") + 1]
    try:
        sniffed = csv.Sniffer().sniff(sample, delimiters=DELIMITERS).delimiter
    except csv.Error:
        sniffed = ","
    header_line = sample.splitlines()[0] if sample else ""
    for candidate in (sniffed, *DELIMITERS):
        columns = next(csv.reader([header_line], csv.excel, delimiter=candidate), [])
        if id_columns & {column.strip().lower() for column in columns}:
            return candidate
    return sniffed


def geojson_features(data: bytes) -> Iterator[object]:
    """The Features of a GeoJSON FeatureCollection, one at a time (whether
    it is one is checked now)."""
    data = data.removeprefix(BOM)
    try:
        kind = next(ijson.items(io.BytesIO(data), "type"), None)
    except ijson.JSONError as error:
        raise FileError(f"not valid JSON: {_first_line(error)}") from None
    if kind != "FeatureCollection":
        raise FileError(f"GeoJSON: must be a FeatureCollection, not type {kind!r}")
    features = ijson.items(io.BytesIO(data), "features.item", use_float=True)
    return _guarded(
        features, ijson.JSONError, lambda error: f"not valid JSON: {_first_line(error)}"
    )


def _guarded(items: Iterator, error_type, describe) -> Iterator:
    """``items``, a parse error of ``error_type`` raised as a FileError
    that ``describe(error)`` words."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except error_type as error:
            raise FileError(describe(error)) from None
        yield item


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
