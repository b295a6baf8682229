"""The project's own docs: docs/api.md covers every operation, field and
error code of the OpenAPI document, and every link resolves in the clone."""

import re
from pathlib import Path

import pytest

from mapapi.http.auth import API_PREFIX

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "api.md"
LINKED_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


@pytest.fixture
def document(client):
    return client.get(f"{API_PREFIX}/openapi.json").get_json()


@pytest.fixture(scope="module")
def guide() -> str:
    return GUIDE.read_text()


def operations(document):
    for path, item in document["paths"].items():
        for method in item:
            if method != "parameters":
                yield method.upper(), path


def sections(text: str) -> dict[str, str]:
    """Each ``###`` heading's text, by heading."""
    parts = re.split(r"^(#{2,3} .+)$", text, flags=re.MULTILINE)
    return {heading: body for heading, body in zip(parts[1::2], parts[2::2])}


def test_every_operation_has_its_section_with_a_curl_example(document, guide):
    by_heading = sections(guide)
    for method, path in operations(document):
        heading = f"### `{method} {path}`"
        assert heading in by_heading, heading
        assert re.search(r"```sh\n(.*\n)*?curl .*", by_heading[heading]), heading


def test_every_documented_operation_exists(document, guide):
    documented = set(re.findall(r"^### `([A-Z]+) (/[^`]*)`$", guide, flags=re.MULTILINE))
    assert documented == set(operations(document))


def test_every_error_code_and_request_field_is_explained(document, guide):
    schemas = document["components"]["schemas"]
    for code in schemas["Error"]["properties"]["error"]["properties"]["code"]["enum"]:
        assert f"`{code}`" in guide, code
    for name, schema in schemas.items():
        if name.endswith(("Input", "Update")):
            for field in schema["properties"]:
                assert f"`{field}`" in guide, (name, field)


def test_the_guide_covers_the_overview_topics(guide):
    for words in [
        "## Overview", "### Keys and scopes", "### Error codes", "### The order of the checks",
        "### Rate limits", "### Paging", "X-RateLimit-Limit", "X-RateLimit-Remaining",
        "X-RateLimit-Reset", "Retry-After", "`page`", "`pageSize`", "READ_ONLY",
    ]:  # fmt: skip
        assert words in guide, words


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = heading.lstrip("#").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def test_readme_links_the_guide():
    assert "](docs/api.md)" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("page", LINKED_DOCS, ids=lambda page: page.name)
def test_every_relative_link_resolves_inside_the_repository(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # an absolute URL: not a file of the clone
        file_part, _, fragment = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        assert linked.is_relative_to(ROOT), (page.name, target)
        assert linked.exists(), (page.name, target)
        if fragment and linked.suffix == ".md":
            headings = re.findall(r"^#+ .+$", linked.read_text(), flags=re.MULTILINE)
            assert fragment in {anchor(h) for h in headings}, (page.name, target)


def test_no_path_in_the_docs_or_scripts_climbs_out_of_the_repository():
    """A path such as ``../elsewhere/x.md`` would be broken in any clone."""
    climbing = re.compile(r"(?:\.\./)+[\w.-]+")
    pages = [*LINKED_DOCS, *ROOT.glob("*.cfg"), *ROOT.glob("*.toml"), *(ROOT / ".ci").iterdir()]
    for page in pages:
        for target in climbing.findall(page.read_text()):
            assert (page.parent / target).resolve().is_relative_to(ROOT), (page.name, target)
