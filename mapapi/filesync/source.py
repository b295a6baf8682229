"""Reading the file: CSV or GeoJSON, told apart by content.

CSV is UTF-8 with a header row (a BOM allowed). Its delimiter (comma,
semicolon, tab or bar) is found by the standard library's ``csv.Sniffer``,
checked against the header: the delimiter must split it into columns that
include the id column, else the other delimiters are tried on it. Quoting is
always RFC 4180's (double quotes, doubled inside a quoted cell), which the
Sniffer cannot tell from a sample. GeoJSON is read as a stream of Features
(ijson), so a large file is never held twice, as bytes and as objects.

GeoJSON is first walked without building anything (ijson's basic events,
whose memory does not grow with depth: its path-keeping parsers grow with
the square of it), to refuse a file nested deeper than the API takes once
that depth is reached. A file with a run of 19 digits may hold an integer
beyond 64 bits, which ijson's C parser refuses: it is read by ijson's
Python parser, which keeps it exactly.
"""

import csv
import io
import re
import sys
from collections.abc import Iterator
from typing import NamedTuple

import ijson

from ..contract.fields import PROPERTIES_MAX_DEPTH

BOM = b"\xef\xbb\xbf"
DELIMITERS = ",;\t|"
#: How much of the file the Sniffer reads.
SNIFF_CHARACTERS = 64 * 1024
#: Delimiters of files whose numbers may be written with a decimal comma.
DECIMAL_COMMA_DELIMITERS = ";\t"
#: The deepest a GeoJSON file the API takes may nest: the collection (1),
#: its features (2), a Feature (3), its properties (4), and in them the
#: location's ``properties`` (5, their level 1).
MAX_DEPTH = 4 + PROPERTIES_MAX_DEPTH
_OPENING = frozenset({"start_map", "start_array"})
_CLOSING = frozenset({"end_map", "end_array"})
#: A string, or an opening bracket: to find where the n-th bracket is.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{]')
#: A run of 19 digits: a number that may be beyond 64 bits.
_LONG_DIGITS = re.compile(rb"\d{19}")


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
    delimiter: str = ","

    @property
    def decimal_comma(self) -> bool:
        """Whether a number may be written ``48,8566`` (the cells are not comma-separated)."""
        return self.delimiter in DECIMAL_COMMA_DELIMITERS


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
    return CsvFile([name.strip() for name in header], _records(reader), delimiter)


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
    it is one, and nested no deeper than the API takes, is checked now)."""
    data = data.removeprefix(BOM)
    parser = parser_for(data)
    kind = _collection_type(parser, data)
    if kind != "FeatureCollection":
        raise FileError(f"GeoJSON: must be a FeatureCollection, not type {kind!r}")
    features = parser.items(io.BytesIO(data), "features.item", use_float=True)
    return _guarded(
        features, ijson.JSONError, lambda error: f"not valid JSON: {_first_line(error)}"
    )


def parser_for(data: bytes):
    """ijson's C parser, or its Python one where an integer may pass 64 bits."""
    return ijson.get_backend("python") if _LONG_DIGITS.search(data) else ijson


def _collection_type(parser, data: bytes):
    """The top-level ``type``, the whole file walked: FileError at the first
    bracket deeper than ``MAX_DEPTH``, naming its line."""
    depth, openings, kind, at_type = 0, 0, None, False
    try:
        for event, value in parser.basic_parse(io.BytesIO(data)):
            if event in _OPENING:
                depth += 1
                openings += 1
                if depth > MAX_DEPTH:
                    raise FileError(
                        f"line {_line_of_opening(data, openings)}: nested deeper than "
                        f"{MAX_DEPTH} levels, which no location can hold (its properties "
                        f"nest {PROPERTIES_MAX_DEPTH} levels at most)"
                    )
            elif event in _CLOSING:
                depth -= 1
            elif depth == 1 and event == "map_key":
                at_type = value == "type"
                continue
            if at_type and depth == 1:
                kind = value
            at_type = False
    except ijson.JSONError as error:
        raise FileError(f"not valid JSON: {_first_line(error)}") from None
    return kind


def _line_of_opening(data: bytes, number: int) -> int:
    """The line of the ``number``-th opening bracket outside strings."""
    seen = 0
    for token in _TOKEN.finditer(data):
        if token.group() in (b"[", b"{"):
            seen += 1
            if seen == number:
                return data.count(b"\n", 0, token.start()) + 1
    return data.count(b"\n") + 1


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
