"""JSON documents as they are measured and stored (the database engine's
serializer, and the ``properties`` field's), apart from the schemas: the
engine needs them in every process, the schemas only where requests are read."""

import json


class Document(dict):
    """A ``properties`` object that keeps the JSON text it was measured by,
    so the database stores that text rather than encoding it again."""

    __slots__ = ("text",)

    def __init__(self, value: dict, text: str):
        super().__init__(value)
        self.text = text


def document_text(value) -> str:
    """A JSON document as it is measured and stored: compact UTF-8 (no ``\\u``
    escapes), keys in their order. The database engine's JSON serializer."""
    if type(value) is Document:
        return value.text
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
