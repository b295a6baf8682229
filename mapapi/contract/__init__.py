"""The API's shapes: fields, schemas, loading and serialization, pagination,
the OpenAPI document and the page that shows it."""
