"""Every never of the layout, checked by parsing each module's imports (those inside functions too):
the command line and the service never import storage; storage never imports ingest, the index,
the command line or the service; ingest never imports the index; the embedded server's package
imports none of them; the core imports nothing of the
database side (of neardup, only the core itself, its errors and its argument checks). And only
storage writes SQL or talks to the database."""

import ast
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import neardup

PACKAGE = Path(neardup.__file__).parent
DRIVERS = ("sqlalchemy", "psycopg", "psycopg2", "alembic")

# (folder, what no module under it may import). A name covers its submodules.
NEVER: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cli", ("neardup.storage",)),
    ("service", ("neardup.storage",)),
    ("storage", ("neardup.ingest", "neardup.index", "neardup.cli", "neardup.service")),
    ("ingest", ("neardup.index",)),
    # The embedded server's processes know nothing of collections or SQL: storage stands on them.
    ("embedded", ("neardup.storage", "neardup.ingest", "neardup.index", "neardup.cli", "neardup.service")),
)
# The core is pure numpy: of neardup it may import only these (and of the rest, no driver).
CORE_MAY_IMPORT = ("neardup.core", "neardup.errors", "neardup.validate")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def module_name(path: Path) -> str:
    """The dotted name of a module file under the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str = "neardup.x", *, package: bool = False) -> list[str]:
    """Every module a source text imports, at any depth (in functions too), relative imports
    resolved against ``module`` (a package's ``__init__`` when ``package``): ``from a import b``
    names ``a`` and ``a.b`` (b may be a module), and ``importlib.import_module("a")`` names ``a``."""
    base = module.split(".") if package else module.split(".")[:-1]
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            where = base[: len(base) - node.level + 1] if node.level else []
            origin = ".".join([*where, *(node.module.split(".") if node.module else [])])
            found += [origin] if node.module else []
            found += [f"{origin}.{alias.name}" for alias in node.names if alias.name != "*"]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant | ast.JoinedStr)
        ):
            first = node.args[0]
            text = first.value if isinstance(first, ast.Constant) else first.values[0]
            if isinstance(text, ast.Constant):
                text = text.value
            found += [str(text).rstrip(".")]
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def _offences(folder: str, rule: Callable[[str], bool]) -> dict[str, list[str]]:
    offenders = {}
    for path in _modules(folder):
        name = module_name(path)
        bad = [n for n in imports(path.read_text(), name, package=path.name == "__init__.py") if rule(n)]
        if bad:
            offenders[str(path.relative_to(PACKAGE))] = bad
    return offenders


def test_the_import_reader_sees_every_spelling() -> None:
    source = "\n".join(
        [
            "import os",
            "import psycopg",
            "from sqlalchemy import text",
            "from neardup import storage",
            "from ..storage.keyset_pages import pair",
            "from . import lsh",
            "def f():",
            "    import neardup.index",
            "    importlib.import_module('neardup.cli.main')",
            "    importlib.import_module(f'neardup.ingest.{name}')",
        ]
    )
    assert imports(source, "neardup.core.tuning") == [
        "os",
        "psycopg",
        "sqlalchemy",
        "sqlalchemy.text",
        "neardup",
        "neardup.storage",
        "neardup.storage.keyset_pages",
        "neardup.storage.keyset_pages.pair",
        "neardup.core.lsh",
        "neardup.index",
        "neardup.cli.main",
        "neardup.ingest",
    ]
    assert imports("from . import params", "neardup.core", package=True) == ["neardup.core.params"]


@pytest.mark.parametrize(("folder", "never"), NEVER, ids=[f for f, _ in NEVER])
def test_a_layer_never_imports_what_lies_above_or_beside_it(folder: str, never: tuple[str, ...]) -> None:
    assert len(_modules(folder)) >= 4  # the folder is there and read
    assert _offences(folder, lambda n: _within(n, never)) == {}


def test_the_core_imports_nothing_of_the_database_side() -> None:
    assert len(_modules("core")) >= 8

    def outside(name: str) -> bool:
        if name == "neardup" or _within(name, CORE_MAY_IMPORT):
            return False
        return name.startswith("neardup.") or _within(name, DRIVERS)

    assert _offences("core", outside) == {}


def test_a_rule_fails_on_a_violation() -> None:
    rule = dict(NEVER)["ingest"]
    assert [n for n in imports("def f():\n    from neardup.index import Index\n") if _within(n, rule)] == [
        "neardup.index",
        "neardup.index.Index",
    ]


def test_importing_the_core_loads_no_database_driver() -> None:
    code = (
        "import sys, neardup, neardup.core; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('psycopg', 'sqlalchemy', 'alembic')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


STORAGE = PACKAGE / "storage"
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
