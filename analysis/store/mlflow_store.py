"""Which MLflow store a tracking URI names, checked before MLflow opens it.

MLflow makes a new, empty store at a database path or folder that does not exist, and
adds its tables to any SQLite file it is given; so a wrong ``--tracking-uri`` (or none,
with no ``./mlflow.db`` here) would leave a stray store behind. :func:`check_store`
reads only. mlflow is imported lazily.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, unquote, urlparse, urlsplit, urlunsplit

from sublayer_search.analysis.errors import AnalysisError

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.tracking import MlflowClient

__all__ = ["SECRET_QUERY_KEYS", "StoreError", "check_store", "open_store", "query_secrets",
           "redact_uri", "redact_text", "server_problem", "store_uri"]

SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "sslpassword", "token",
                               "access_token", "auth_token", "api_key", "apikey", "secret"})
"""Query parameters whose value is a secret (``postgresql://u@h/db?password=…``)."""


def query_secrets(uri: str) -> dict[str, str]:
    """The secret query parameters of ``uri`` (name as written: value), e.g.
    ``{"password": "…"}`` for ``postgresql://u@h/db?password=…``."""
    try:
        query = urlsplit(uri).query
    except ValueError:
        return {}
    return {k: v for k, v in parse_qsl(query, keep_blank_values=True)
            if k.lower() in SECRET_QUERY_KEYS and v}


def _redact_query(query: str) -> str:
    """``query`` with the value of every secret parameter replaced by ``***``."""
    parts = []
    for item in query.split("&"):
        key, sep, _ = item.partition("=")
        secret = sep and unquote(key.replace("+", " ")).lower() in SECRET_QUERY_KEYS
        parts.append(f"{key}=***" if secret else item)
    return "&".join(parts)


def redact_uri(uri: str) -> str:
    """``uri`` as it may be shown or logged: the password of ``scheme://user:password@host``
    and the value of a secret query parameter (``?password=``, ``?token=``: see
    :data:`SECRET_QUERY_KEYS`) replaced by ``***`` (anything else unchanged)."""
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:  # not a URL urllib can take apart: shown whole only without an '@'
        return uri if "@" not in uri else "<a URI with credentials>"
    if password is None and not query_secrets(uri):
        return uri
    if password is not None:
        user = parts.netloc.rpartition("@")[0].partition(":")[0]
        host = parts.netloc.rpartition("@")[2]
        parts = parts._replace(netloc=f"{user}:***@{host}")
    return urlunsplit(parts._replace(query=_redact_query(parts.query)))


def redact_text(text: str, uri: str) -> str:
    """``text`` (a library's error message about ``uri``) with the URI's password replaced by
    ``***`` wherever it appears, as written in the URI or decoded: MLflow's and requests'
    errors quote the URL they were given whole."""
    try:
        password = urlsplit(uri).password
    except ValueError:
        return text
    secrets = [*([password] if password else []), *query_secrets(uri).values()]
    if not secrets:
        return text
    forms = {form for secret in secrets for form in (secret, unquote(secret), quote(secret, safe=""))}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, "***")
    return text


class StoreError(AnalysisError):
    """A tracking URI that names no MLflow store (a missing or foreign database, folder …);
    ``uri`` is the URI as it may be shown (:func:`redact_uri`)."""

    def __init__(self, uri: str, expected: str) -> None:
        self.uri = redact_uri(uri)
        super().__init__(f"tracking URI: got {self.uri!r}, expected {expected}")
        self.expected = expected


# schemes of MLflow's own tracking stores; plugins add theirs (entry points)
_SCHEMES = frozenset({"", "file", "sqlite", "http", "https", "postgresql", "mysql", "mssql",
                      "databricks", "databricks-uc", "uc"})
_SQLITE_HEADER = b"SQLite format 3\x00"


SERVER_TIMEOUT_S = 5.0
"""How long a tracking server or database gets to accept a connection before it counts as
unreachable (``sublayer sweep`` before Ray starts, ``analyze``/``export``/``replay``)."""
_DEFAULT_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433}


def server_problem(uri: str, timeout: float = SERVER_TIMEOUT_S) -> str | None:
    """What a server URI (http(s), postgresql, mysql, mssql) should be when its server does not
    accept a connection within ``timeout`` s, or (http(s)) does not answer MLflow's REST API;
    None when it does, or for any other URI. The connection is not tried through a proxy the
    environment names for the host, nor on a Unix socket."""
    import socket
    import urllib.request

    parts = urlparse(uri)
    scheme = parts.scheme.split("+")[0].lower()
    if scheme not in _DEFAULT_PORTS:
        return None
    try:
        host, port = parts.hostname, parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:  # a port that is not a number or out of range
        return "SCHEME://HOST[:PORT]/… with a port from 1 to 65535"
    proxies = urllib.request.getproxies()
    if not host or (scheme in proxies and not urllib.request.proxy_bypass(host)):
        return None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        what = "MLflow server" if scheme.startswith("http") else "database server"
        return (f"a reachable {what} (no answer on {host}:{port} within {timeout:g} s: "
                f"{reason})")
    return _api_problem(uri, timeout) if scheme.startswith("http") else _database_problem(uri)


def _database_problem(uri: str) -> str | None:
    """What a database URI should be when this client cannot log in to it: a missing
    driver, a database that does not exist, a refused user or password (the server's own
    words; drivers do not repeat the password). Connects through SQLAlchemy, as MLflow
    does, and creates nothing."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    engine = None
    try:
        engine = sqlalchemy.create_engine(uri, poolclass=NullPool)
        with engine.connect():
            return None
    except ImportError as exc:  # the dialect's driver (psycopg, PyMySQL, pyodbc …)
        return f"a database whose driver is installed ({redact_text(str(exc), uri)})"
    except sqlalchemy.exc.DBAPIError as exc:
        said = redact_text(" ".join(str(exc.orig).split()), uri)
        return f"a database this client can log in to (the server says: {said[:300]})"
    except sqlalchemy.exc.SQLAlchemyError as exc:
        said = redact_text(" ".join(str(exc).split()), uri)
        return f"a database URI SQLAlchemy can open ({said[:300]})"
    finally:
        if engine is not None:
            engine.dispose()


def _api_problem(uri: str, timeout: float) -> str | None:
    """What an http(s) URI should be when the server on it does not answer MLflow's REST API
    (one experiment search, no retries, ``timeout`` s): another web server, a wrong path
    prefix, missing credentials, a broken store behind it. MLflow's own client makes the
    request, so its credentials and TLS settings from the environment apply."""
    import os
    import re

    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    quick = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
             "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, round(timeout)))}
    saved = {name: os.environ.get(name) for name in quick}
    os.environ.update(quick)
    status: int | None = None
    try:
        MlflowClient(tracking_uri=uri).search_experiments(max_results=1)
        return None
    except MlflowException as exc:
        text = " ".join(str(exc.message).split())
        found = re.search(r"error code (\d{3})", text)  # a reply that is not MLflow's JSON
        if found:
            status = int(found.group(1))
        elif type(exc).__name__ == "RestException":  # MLflow's JSON error: its own code
            status = exc.get_http_status_code()
    except Exception as exc:  # requests' connection errors and timeouts, a bad TLS setup …
        text = " ".join(f"{type(exc).__name__}: {exc}".split())
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    text = redact_text(text, uri)  # "API request to http://user:PASSWORD@host/… failed"
    if status in (401, 403):
        return (f"an MLflow server that accepts this client (it answered HTTP {status}: set "
                "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN)")
    if status is None:
        return f"an MLflow tracking server that answers (MLflow says: {text[:300]})"
    head, _, body = text.partition(" Response body: ")
    if body.lstrip("'\"").startswith("<"):  # a web page, not MLflow's JSON error
        text = f"{head} (a web page: not MLflow's API at this URI)"
    return f"an MLflow tracking server (it answered HTTP {status} to MLflow's REST API: {text[:300]})"


def store_uri(tracking_uri: str | None) -> str:
    """The URI MLflow uses for ``tracking_uri``: itself, else $MLFLOW_TRACKING_URI or the default."""
    if tracking_uri is not None:
        return tracking_uri
    import mlflow

    return str(mlflow.get_tracking_uri())


def _sqlite_problem(path: str) -> str | None:
    """Why ``path`` is not an MLflow SQLite database (None when it is one); reads only."""
    import sqlite3
    from urllib.parse import quote

    file = Path(path)
    if not file.exists():
        return f"an existing MLflow database (no MLflow database at {path})"
    if not file.is_file():
        return f"an MLflow database file ({path} is a folder)"
    try:
        with file.open("rb") as fh:
            header = fh.read(len(_SQLITE_HEADER))
        if header != _SQLITE_HEADER:
            return f"an MLflow database ({path} is not an SQLite database)"
        con = sqlite3.connect(f"file:{quote(str(file.absolute()))}?mode=ro", uri=True)
        try:
            tables = {row[0] for row in con.execute("SELECT name FROM sqlite_master "
                                                    "WHERE type = 'table'")}
        finally:
            con.close()
    except (OSError, sqlite3.Error) as exc:
        return f"a readable MLflow database ({path}: {exc})"
    if not {"experiments", "runs"} <= tables:
        return f"an MLflow database ({path} is an SQLite database without MLflow's tables)"
    return None


def check_store(tracking_uri: str | None) -> str:
    """The resolved URI of an existing MLflow store; :class:`StoreError` otherwise.

    MLflow makes a new, empty store at a database path or folder that does not exist (and
    adds its tables to any SQLite file), so that is checked first, reading only: nothing
    is created for a wrong URI. A server (http(s), postgresql, …) must accept a connection
    within a few seconds (:func:`server_problem`); databricks and plugins are not contacted.
    """
    from importlib.metadata import entry_points

    uri = store_uri(tracking_uri)
    if not uri.strip():
        raise StoreError(uri, "an MLflow tracking URI (e.g. sqlite:///mlflow.db or "
                              "http://127.0.0.1:5000)")
    parsed = urlparse(uri)
    scheme = parsed.scheme.split("+")[0].lower()
    known = _SCHEMES | {e.name for e in entry_points(group="mlflow.tracking_store")}
    problem = None
    if scheme not in known:
        problem = (f"a tracking URI MLflow can store runs at: sqlite:///PATH, http(s)://HOST:PORT, "
                   f"postgresql://…, mysql://… or a folder (scheme {parsed.scheme!r} is unknown)")
    elif scheme == "sqlite":
        path = unquote(uri[len("sqlite:///"):].split("?")[0]) if uri.startswith(
            "sqlite:///") else ""
        if path and path != ":memory:":
            problem = _sqlite_problem(path)
    elif scheme in _DEFAULT_PORTS:
        problem = server_problem(uri)
    elif scheme in ("", "file"):
        path = unquote(parsed.path) if scheme == "file" else uri
        if not Path(path).exists():
            problem = f"an existing MLflow store (no MLflow store at {path})"
        elif not Path(path).is_dir():
            problem = (f"an MLflow store folder ({path} is a file; a database is given as "
                       f"sqlite:///{path})")
    if problem:
        raise StoreError(uri, problem)
    return uri


def open_store(tracking_uri: str | None) -> MlflowClient:
    """A client of the existing MLflow store at ``tracking_uri``; :class:`StoreError` else."""
    uri = check_store(tracking_uri)
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    try:
        return MlflowClient(tracking_uri=uri)
    except MlflowException as exc:  # e.g. a file store, which MLflow 3 refuses by default
        text = redact_text(" ".join(str(exc.message).split()), uri)
        raise StoreError(uri, f"a store MLflow can open (MLflow says: {text[:800]})") from None
