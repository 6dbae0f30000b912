"""neardup: a persistent near-duplicate document index that lives in PostgreSQL.

``from neardup import Index`` loads the database side on first use only, so ``neardup.core``
stays importable (and fast to import) without touching psycopg, SQLAlchemy or alembic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from neardup.errors import (
    CollectionExistsError,
    CollectionNotFoundError,
    DatabaseConnectionError,
    DatabaseError,
    InputError,
    InternalError,
    NeardupError,
    ParamsError,
    ParamsMismatchError,
    SchemaError,
    ServerError,
    TextNotStoredError,
    UnicodeVersionWarning,
)

if TYPE_CHECKING:
    from neardup.config import IndexConfig
    from neardup.database import Database
    from neardup.evaluation import Evaluation
    from neardup.index import AddResult, Index, Stats

__version__ = "0.1.0"

_LAZY = {"Index", "AddResult", "Evaluation", "Stats", "IndexConfig", "Database"}


def __getattr__(name: str) -> Any:
    if name == "Database":
        from neardup import database

        return database.Database
    if name == "Evaluation":
        from neardup import evaluation

        return evaluation.Evaluation
    if name == "IndexConfig":
        from neardup import config

        return config.IndexConfig
    if name in _LAZY:
        from neardup import index

        return getattr(index, name)
    raise AttributeError(f"module 'neardup' has no attribute {name!r}")


__all__ = [
    "AddResult",
    "CollectionExistsError",
    "CollectionNotFoundError",
    "Database",
    "DatabaseConnectionError",
    "DatabaseError",
    "Evaluation",
    "Index",
    "IndexConfig",
    "InputError",
    "InternalError",
    "NeardupError",
    "ParamsError",
    "ParamsMismatchError",
    "SchemaError",
    "ServerError",
    "Stats",
    "TextNotStoredError",
    "UnicodeVersionWarning",
    "__version__",
]
