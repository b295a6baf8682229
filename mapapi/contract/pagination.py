"""The page/pageSize query and one count plus one page query per list."""

import math

from marshmallow import EXCLUDE, Schema, fields, validate
from sqlalchemy import func, select

from ..extensions import db
from .fields import QueryInteger


class PageQuerySchema(Schema):
    class Meta:
        unknown = EXCLUDE  # unknown query parameters are ignored

    page = QueryInteger(load_default=1, validate=validate.Range(min=1))
    page_size = QueryInteger(data_key="pageSize", load_default=50, validate=validate.Range(1, 100))


class PaginationSchema(Schema):
    total = fields.Integer(required=True)
    page = fields.Integer(required=True)
    page_size = fields.Integer(data_key="pageSize", required=True)
    total_pages = fields.Integer(data_key="totalPages", required=True)


def list_schema(plural: str, item_schema: type[Schema]) -> Schema:
    """The one list shape: ``{"<plural>": [...], "pagination": {...}}``."""
    return Schema.from_dict(
        {
            plural: fields.List(fields.Nested(item_schema), attribute="items", required=True),
            "pagination": fields.Nested(PaginationSchema, required=True),
        },
        name=f"{item_schema.__name__.removesuffix('Schema')}ListSchema",
    )()


def paginate(statement, query: dict, *options) -> dict:
    """Run ``statement`` (already ordered) for the page ``query`` asks for
    (as loaded by PageQuerySchema).

    The page query runs only when the page is not past the end, so a huge
    page number costs one count and no OFFSET arithmetic in SQL.
    """
    page, page_size = query["page"], query["page_size"]
    total = db.session.scalar(select(func.count()).select_from(statement.order_by(None).subquery()))
    offset = (page - 1) * page_size
    items = []
    if offset < total:
        items = db.session.scalars(
            statement.options(*options).limit(page_size).offset(offset)
        ).all()
    return {"items": items, "pagination": page_info(total, page, page_size)}


def page_info(total: int, page: int, page_size: int) -> dict:
    """A list's ``pagination``, to dump with PaginationSchema."""
    return {
        "total": total,
        "page": page,
        "page_size": page_size,
        "total_pages": math.ceil(total / page_size),
    }
