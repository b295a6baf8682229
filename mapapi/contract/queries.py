"""Query-string schemas of lists beyond ``page`` and ``pageSize``."""

from marshmallow import pre_load

from .fields import QueryTexts
from .pagination import PageQuerySchema
from .schemas import BULK_MAX, EXTERNAL_ID_MAX


class LocationQuerySchema(PageQuerySchema):
    """``GET /maps/:mapId/locations``: a page, and the filters."""

    #: Parameters that may be given more than once: read as a list.
    REPEATABLE = ("externalId",)

    external_ids = QueryTexts(
        data_key="externalId",
        max_length=EXTERNAL_ID_MAX,
        max_count=BULK_MAX,
        metadata={
            "description": "Locations with this externalId (exact); up to 100 times, matching any.",
        },
    )

    @pre_load
    def repeated_as_lists(self, data, **_kwargs):
        if not hasattr(data, "getlist"):
            return data
        values = data.to_dict()
        for name in self.REPEATABLE:
            if name in data:
                values[name] = data.getlist(name)
        return values
