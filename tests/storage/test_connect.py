"""Database URLs are read and written as SQLAlchemy reads and writes them, without importing it."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from neardup.errors import DatabaseConnectionError
from neardup.storage.connect import connect, libpq_url, redacted, sqlalchemy_url

pytestmark = pytest.mark.distributed_variant

# Characters that URLs quote, split on or mistake for separators, and some that need no quoting.
fragments = st.text(st.sampled_from(list("aZ09 _-.~+@:/?#%&=[]!$'()*,;\u00e9\u4e2d")), max_size=8)
urls = st.builds(
    lambda scheme, user, password, host, port, database, query: (
        f"{scheme}://"
        + ("" if user is None else user + ("" if password is None else f":{password}") + "@")
        + host
        + ("" if port is None else f":{port}")
        + ("" if database is None else f"/{database}")
        + ("" if query is None else f"?{query}")
    ),
    st.sampled_from(["postgresql", "postgresql+psycopg", "postgres", "postgresql+psycopg2", "mysql", "x y"]),
    st.none() | fragments,
    st.none() | fragments,
    st.sampled_from(["", "localhost", "db.example", "[::1]", "[fe80::1%25eth0]"]) | fragments,
    st.none() | st.sampled_from(["5432", "0", "", "x1", " 7"]) | fragments,
    st.none() | fragments,
    st.none() | fragments | st.just("host=%2Ftmp%2Fsock&b=2&a=1&a=0&empty="),
)


def sqlalchemy_renders(url: str) -> tuple[str, str, str] | None:
    """SQLAlchemy's libpq, SQLAlchemy and redacted URLs, or None when it rejects the URL or the
    URL names another database."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        return None
    if parsed.get_backend_name() not in ("postgresql", "postgres"):
        return None
    return (
        parsed.set(drivername="postgresql").render_as_string(hide_password=False),
        parsed.set(drivername="postgresql+psycopg").render_as_string(hide_password=False),
        parsed.render_as_string(hide_password=True),
    )


@given(url=urls | st.text(max_size=40))
def test_urls_read_and_render_as_sqlalchemy_does(url: str) -> None:
    expected = sqlalchemy_renders(url)
    if expected is None:
        with pytest.raises(DatabaseConnectionError):
            libpq_url(url)
        with pytest.raises(DatabaseConnectionError):
            sqlalchemy_url(url)
        assert redacted(url) == "<invalid URL>"
        return
    assert (libpq_url(url), sqlalchemy_url(url), redacted(url)) == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a database URL"),
        ("postgresql://h:port/db", "not a database URL"),
        ("mysql://u@h/db", "neardup needs PostgreSQL, got a 'mysql' URL"),
    ],
)
def test_a_bad_url_is_refused_with_its_reason(url: str, message: str) -> None:
    with pytest.raises(DatabaseConnectionError, match=message):
        libpq_url(url)
    assert redacted(url) == "<invalid URL>"


def test_the_password_is_hidden_and_kept_where_asked() -> None:
    url = "postgresql+psycopg://me:s%40cret@db.example:6432/neardup?sslmode=require"
    assert redacted(url) == "postgresql+psycopg://me:***@db.example:6432/neardup?sslmode=require"
    assert libpq_url(url) == "postgresql://me:s%40cret@db.example:6432/neardup?sslmode=require"


def test_connections_plan_without_jit(database_url: str) -> None:
    """JIT compilation of pair_list's overestimated plans cost far more than running them."""
    conn = connect(database_url)
    try:
        assert conn.execute("SHOW jit").fetchone() == ("off",)
    finally:
        conn.close()
