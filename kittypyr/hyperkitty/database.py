"""Reading a HyperKitty database: its SQLite file, or a PostgreSQL URL."""

import itertools
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlparse


_CURSORS = itertools.count()


class UnreadableDatabase(ValueError):
    """The URL names no HyperKitty database this machine can open."""


def _without_password(parsed):
    """A database URL as it may be printed: its password left out."""
    if parsed.password is None:
        return parsed.geturl()
    return parsed._replace(netloc=parsed.netloc.replace(f":{parsed.password}@", ":…@", 1)).geturl()


def open_database(url):
    """A DB-API connection to the HyperKitty database ``url``.

    ``url`` is a SQLite file's path (or ``sqlite:///path``) or a
    ``postgresql://`` URL (which needs psycopg2, as kittypyr[postgresql]
    installs). Raises ``UnreadableDatabase``.
    """
    parsed = urlparse(url)
    if parsed.scheme in ("postgres", "postgresql"):
        try:
            import psycopg2
        except ImportError as exc:
            raise UnreadableDatabase("reading PostgreSQL needs psycopg2: pip install 'kittypyr[postgresql]'") from exc
        try:
            connection = psycopg2.connect(url)
        except psycopg2.Error as exc:
            error = " ".join(str(exc).split())
            raise UnreadableDatabase(f"cannot open {_without_password(parsed)}: {error}".strip()) from exc
        connection.set_session(readonly=True)
        return connection
    if parsed.scheme not in ("", "sqlite", "file") and "://" in url:
        raise UnreadableDatabase(
            f"{_without_password(parsed)}: kittypyr reads HyperKitty's SQLite file or its PostgreSQL database, "
            f"not {'MySQL' if parsed.scheme.startswith('mysql') else parsed.scheme}: export each list from "
            "HyperKitty as an mbox (its list page's download) and import those with kittypyr import")
    path = Path(parsed.path if parsed.scheme == "sqlite" else url)
    what_to_give = "give HyperKitty's SQLite file (such as mailman3web.db) or a postgresql:// URL"
    if path.is_dir():
        raise UnreadableDatabase(f"{path} is a folder: {what_to_give}")
    if not path.is_file():
        raise UnreadableDatabase(f"no such file: {path}: {what_to_give}")
    # Read only: the HyperKitty site may still be serving from it.
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        connection.execute("SELECT 1 FROM hyperkitty_email LIMIT 1")
    except sqlite3.DatabaseError as exc:
        connection.close()
        raise UnreadableDatabase(f"{path} is not a HyperKitty database ({exc})") from exc
    return connection


def rows(connection, sql, parameters=()):
    """The rows of ``sql`` as dicts, one at a time.

    ``?`` in ``sql`` stands for each of ``parameters``, whatever the driver.
    """
    if isinstance(connection, sqlite3.Connection):
        cursor = connection.cursor()
    else:
        # A server-side cursor: a site's whole mail does not fit in memory.
        sql = sql.replace("?", "%s")
        cursor = connection.cursor(name=f"kittypyr_{next(_CURSORS)}")
        cursor.itersize = 200
    cursor.execute(sql, parameters)
    names = None
    try:
        for row in cursor:
            # A server-side cursor describes its columns once it has fetched.
            names = names or [column[0] for column in cursor.description]
            yield dict(zip(names, row))
    finally:
        cursor.close()


def as_datetime(value):
    """A database date (SQLite gives text, PostgreSQL datetimes) as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        # Django stores UTC (USE_TZ) without saying so in SQLite.
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)
