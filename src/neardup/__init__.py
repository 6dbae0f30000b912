"""neardup: a persistent near-duplicate document index that lives in PostgreSQL."""

from neardup.errors import InputError, NeardupError, ParamsError, ParamsMismatchError

__version__ = "0.1.0"

__all__ = ["InputError", "NeardupError", "ParamsError", "ParamsMismatchError", "__version__"]
