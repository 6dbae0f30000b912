"""The core is pure numpy: no module under neardup/core may import the database side."""

import ast
import re
from pathlib import Path

import pytest

import neardup.core

FORBIDDEN = (
    "sqlalchemy",
    "psycopg",
    "psycopg2",
    "alembic",
    "neardup.storage",
    "neardup.index",
    "neardup.cli",
)
CORE = Path(neardup.core.__file__).parent


def forbidden_imports(source: str, forbidden: tuple[str, ...] = FORBIDDEN) -> list[str]:
    """Names of ``forbidden`` modules a source text imports (absolute, relative-free, any depth)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from neardup import storage" imports neardup.storage; "from x import y" may import x.y.
            names = [node.module] if node.module != "neardup" else []
            names += [f"{node.module}.{alias.name}" for alias in node.names if node.module == "neardup"]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names = ["<relative import>"]  # the core uses absolute imports only, so this is checkable
        found += [
            n
            for n in names
            if n == "<relative import>" or any(n == f or n.startswith(f + ".") for f in forbidden)
        ]
    return found


def test_the_checker_catches_violations() -> None:
    bad = "\n".join(
        [
            "import os",
            "import psycopg",
            "from sqlalchemy import text",
            "from neardup import storage",
            "def f():",
        ]
    )
    bad += "\n    import alembic\n"
    assert forbidden_imports(bad) == ["psycopg", "sqlalchemy", "neardup.storage", "alembic"]
    assert forbidden_imports("from . import storage") == ["<relative import>"]
    assert forbidden_imports("import numpy as np\nfrom neardup.errors import ParamsError") == []


def test_core_imports_nothing_from_the_database_side() -> None:
    modules = sorted(CORE.rglob("*.py"))
    assert len(modules) >= 8
    offenders = {str(m.relative_to(CORE)): forbidden_imports(m.read_text()) for m in modules}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_importing_the_core_loads_no_database_driver() -> None:
    import subprocess
    import sys

    code = (
        "import sys, neardup, neardup.core; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'sqlalchemy', 'alembic')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


PACKAGE = CORE.parent
# The command line and the service reach the database through Index and Database only.
ABOVE_STORAGE = ("cli", "service")


@pytest.mark.parametrize("folder", ABOVE_STORAGE)
def test_cli_and_service_import_nothing_from_storage(folder: str) -> None:
    modules = sorted((PACKAGE / folder).rglob("*.py"))
    assert len(modules) >= 10
    offenders = {
        str(m.relative_to(PACKAGE)): forbidden_imports(m.read_text(), ("neardup.storage",)) for m in modules
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_storage_checker_sees_every_spelling() -> None:
    source = "\n".join(
        [
            "def f():",
            "    from neardup.storage.keyset_pages import pair",
            "from neardup import storage",
            "import neardup.storage",
        ]
    )
    assert forbidden_imports(source, ("neardup.storage",)) == [
        "neardup.storage",
        "neardup.storage",
        "neardup.storage.keyset_pages",
    ]


STORAGE = PACKAGE / "storage"
DRIVERS = ("sqlalchemy", "psycopg", "psycopg2", "alembic")
# A string that starts like an SQL statement: outside storage/ none may exist.
_SQL = re.compile(
    r"^\s*(SELECT |INSERT INTO|UPDATE \S+ SET|DELETE FROM|TRUNCATE |COPY |WITH \w+ AS|SET \w|LOCK TABLE"
    r"|RESET |(CREATE|DROP|ALTER) (TABLE|INDEX|UNIQUE|SCHEMA|VIEW))"
)


def sql_strings(source: str) -> list[str]:
    """String constants of a source text that read like SQL statements."""
    return [
        node.value[:40]
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.match(node.value)
    ]


def driver_imports(source: str) -> list[str]:
    """Database drivers and migration tools a source text imports."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        found += [n for n in names if any(n == d or n.startswith(d + ".") for d in DRIVERS)]
    return found


def test_the_sql_checker_catches_statements() -> None:
    source = 'q = "SELECT 1"\nx = "DELETE FROM t"\ny = "the SELECT"\nz = "Create the collection"'
    assert sql_strings(source) == ["SELECT 1", "DELETE FROM t"]
    imports = "import psycopg\nfrom alembic import command\nimport numpy"
    assert driver_imports(imports) == ["psycopg", "alembic"]


def test_only_storage_writes_sql_or_talks_to_the_database() -> None:
    modules = [m for m in sorted(PACKAGE.rglob("*.py")) if STORAGE not in m.parents]
    assert len(modules) >= 20
    offenders = {
        str(m.relative_to(PACKAGE)): sql_strings(m.read_text()) + driver_imports(m.read_text())
        for m in modules
    }
    assert {k: v for k, v in offenders.items() if v} == {}
