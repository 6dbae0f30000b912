"""The embedded PostgreSQL server that commands use when no database URL is given.

It keeps running between commands and stops by itself once unused for a while; this module is
the public face of ``storage.embedded`` (see there for how processes share it).
"""

from __future__ import annotations

from neardup.storage.embedded import (
    ServerState,
    default_data_dir,
    embedded_database,
    server_state,
    stop_server,
)

__all__ = ["ServerState", "default_data_dir", "embedded_database", "server_state", "stop_server"]
