"""Imports point one way. The circles the package had grown are untied, each
by a name put where both sides import it downward:

- ``app`` -> ``cli`` -> ``commands`` -> ``cli``: ``SettingRefused`` lives in
  ``commands/refusals.py`` and ``register_commands`` in ``commands``, so the
  command group (which builds apps) is above both;
- ``services.events`` -> ``metrics`` -> ``delivery.claims`` ->
  ``services.events``: the events service notes what it recorded in the
  session, and ``metrics`` observes the commit; no service imports it.

Read from the source (``ast``), every import of a module counted, those
inside its functions too: a late import is still a circle.
"""

import ast
from pathlib import Path

import mapapi

PACKAGE = Path(mapapi.__file__).resolve().parent


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every mapapi module ``path`` imports, wherever in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {module for module in found if module in known and module != name}


def graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imports(path, name, set(paths)) for name, path in paths.items()}


def reaches(edges: dict[str, set[str]], start: str, goal: str, within: tuple[str, ...]) -> bool:
    """Whether ``start`` imports ``goal`` through modules named in ``within`` only."""
    pending, seen = [start], {start}
    while pending:
        for target in edges[pending.pop()]:
            if target == goal:
                return True
            if target not in seen and target.startswith(within):
                seen.add(target)
                pending.append(target)
    return False


def test_the_command_group_is_above_the_app_and_the_commands():
    edges = graph()
    commands = [name for name in edges if name.startswith("mapapi.commands")]
    assert not [name for name in commands if "mapapi.cli" in edges[name]]
    assert not [name for name in commands if "mapapi.app" in edges[name]]
    assert "mapapi.cli" not in edges["mapapi.app"]
    assert "mapapi.cli" not in edges["mapapi.app_base"]


def test_the_services_never_import_the_metrics_that_observe_them():
    edges = graph()
    assert not [name for name in edges if name.startswith("mapapi.services") and "mapapi.metrics" in edges[name]]
    # metrics reads the due attempts by the deliverers' rule: downward, no way back.
    assert "mapapi.delivery.claims" in edges["mapapi.metrics"]
    within = ("mapapi.services", "mapapi.delivery", "mapapi.storage", "mapapi.contract")
    assert not reaches(edges, "mapapi.delivery.claims", "mapapi.metrics", within)
    assert not reaches(edges, "mapapi.services.events", "mapapi.metrics", within)
