"""Where a sweep keeps Ray Tune's files: a local folder or an object store (``s3://``).

``ray.storage_path`` is a folder (relative to where ``sublayer sweep`` runs) or
``s3://BUCKET/PREFIX``. For S3, the endpoint of an S3-compatible store (MinIO, Ceph,
…) comes from ``AWS_ENDPOINT_URL`` (none: AWS itself) and the credentials from the
standard AWS chain (the environment, ``AWS_PROFILE`` and the shared credentials file,
web identity, a container's or instance's role: ``search/plan/credentials.py``), never
from the experiment file. The filesystem handed to Ray carries the endpoint but no
credentials (every node follows the chain in its own environment), so Ray's saved
experiment state never holds a key.

:class:`Storage` reads and writes the sweep's own small files (the ``<name>.latest``
pointer) on either kind; :func:`object_store_problems` checks an ``s3://`` location
before a sweep starts, reading only (no test object is written).
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.plan.credentials import CredentialError, aws_source
from sublayer_search.spaces.problems import ProblemError

if TYPE_CHECKING:
    import pyarrow.fs

__all__ = ["Storage", "OBJECT_SCHEMES", "ENDPOINT_ENV", "ARTIFACT_ENDPOINT_ENV",
           "is_object_store", "uri_problem", "storage_uri", "artifact_uri", "artifact_endpoint_env",
           "object_store_problems", "shown", "LocationError"]

OBJECT_SCHEMES = ("s3",)
ENDPOINT_ENV = "AWS_ENDPOINT_URL"
"""The S3-compatible endpoint (``http://HOST:PORT``); boto3, the AWS CLI, pyarrow and
MLflow's S3 artifacts read the same variable."""
CONNECT_TIMEOUT_S = 5.0
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def is_object_store(path: str) -> bool:
    """``s3://…`` (or any ``scheme://``: :func:`uri_problem` refuses the others)."""
    return "://" in path


def uri_problem(value: str, *, local: bool = True) -> str | None:
    """Why ``value`` is neither a local folder (when ``local``) nor ``s3://BUCKET[/PREFIX]``
    (the expected form, for a :class:`Problem`), or None."""
    wanted = "a local folder or s3://BUCKET/PREFIX" if local else "s3://BUCKET/PREFIX"
    if not is_object_store(value):
        return None if local else wanted
    parsed = urlparse(value)
    if parsed.scheme not in OBJECT_SCHEMES:
        return f"{wanted} (the scheme {parsed.scheme}:// is not supported)"
    if "@" in parsed.netloc or parsed.query or parsed.fragment:
        return (f"{wanted} without credentials, query or fragment (credentials come from "
                "the AWS chain: the environment, AWS_PROFILE, web identity or a role)")
    if not parsed.netloc:
        return f"{wanted} with a bucket name"
    if not _BUCKET.match(parsed.netloc):
        return f"{wanted} with a valid bucket name (3-63 lower-case letters, digits, '.', '-')"
    return None


class LocationError(ProblemError):
    """A bad location, for pydantic: one problem with the ``value`` as shown (credentials in
    a URI masked)."""

    def __init__(self, field: str, value: str, expected: str) -> None:
        super().__init__([Problem(field, shown(value), expected)])
        self.args = (expected,)

    def __str__(self) -> str:
        return self.expected


def shown(uri: str) -> str:
    """``uri`` with any ``user:password@`` masked (it is refused, but never echoed)."""
    scheme, sep, rest = uri.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}***@{host.rpartition('@')[2]}{slash}{path}" if sep and "@" in host else uri


def storage_uri(value: str) -> str:
    """pydantic's check of ``ray.storage_path``: a folder or ``s3://BUCKET/PREFIX``."""
    why = uri_problem(value)
    if why:
        raise LocationError("storage_path", value, why)
    return value


def artifact_uri(value: str | None) -> str | None:
    """pydantic's check of ``tracking.artifact_location``: ``s3://BUCKET/PREFIX``."""
    why = None if value is None else uri_problem(value, local=False)
    if why:
        raise LocationError("artifact_location", str(value), why)
    return value


ARTIFACT_ENDPOINT_ENV = "MLFLOW_S3_ENDPOINT_URL"
"""MLflow's own endpoint variable for S3 artifacts; without it boto3 reads ``AWS_ENDPOINT_URL``."""


def artifact_endpoint_env() -> str:
    """The variable that names the endpoint of MLflow's S3 artifacts."""
    return ARTIFACT_ENDPOINT_ENV if os.environ.get(ARTIFACT_ENDPOINT_ENV) else ENDPOINT_ENV


def _endpoint(env: str = ENDPOINT_ENV) -> str | None:
    return os.environ.get(env) or None


def _filesystem(uri: str, env: str = ENDPOINT_ENV, **options: Any) -> Any:
    """pyarrow's S3 filesystem for ``uri``: the endpoint ``env`` names, no credentials of
    its own (pickled into Ray's state, it carries none)."""
    import pyarrow.fs

    endpoint = _endpoint(env)
    if endpoint is None:  # AWS: pyarrow finds the bucket's region
        return pyarrow.fs.FileSystem.from_uri(uri)[0]
    return pyarrow.fs.S3FileSystem(endpoint_override=endpoint, **options)


@dataclass(frozen=True)
class Storage:
    """The sweep's storage location: ``uri`` is an absolute folder or ``s3://BUCKET/PREFIX``."""

    uri: str

    @classmethod
    def of(cls, storage_path: str) -> Storage:
        if is_object_store(storage_path):
            return cls(storage_path.rstrip("/"))
        return cls(str(Path(storage_path).expanduser().resolve()))

    @property
    def remote(self) -> bool:
        return is_object_store(self.uri)

    @property
    def fs_path(self) -> str:
        """The location as the filesystem names it (``BUCKET/PREFIX`` for S3)."""
        return self.uri.split("://", 1)[1] if self.remote else self.uri

    def filesystem(self) -> pyarrow.fs.FileSystem:
        """A pyarrow filesystem for the location (the local one for a folder)."""
        if not self.remote:
            import pyarrow.fs

            return pyarrow.fs.LocalFileSystem()
        return _filesystem(self.uri)

    def path(self, *parts: str) -> str:
        """``parts`` under the location, as the filesystem names it."""
        return str(PurePosixPath(self.fs_path, *parts)) if self.remote \
            else str(Path(self.fs_path, *parts))

    def uri_of(self, *parts: str) -> str:
        """``parts`` under the location, as a user would name it (for messages)."""
        return "/".join([self.uri, *parts]) if self.remote else str(Path(self.uri, *parts))

    def ray_options(self) -> dict[str, Any]:
        """``storage_path`` (and ``storage_filesystem``) for Ray Tune's RunConfig."""
        if not self.remote:
            return {"storage_path": self.uri}
        return {"storage_path": self.fs_path, "storage_filesystem": self.filesystem()}

    def read_text(self, *parts: str) -> str | None:
        """The text of the file ``parts``, or None when there is none."""
        if not self.remote:
            file = Path(self.path(*parts))
            return file.read_text() if file.is_file() else None
        import pyarrow.fs

        fs = self.filesystem()
        if fs.get_file_info(self.path(*parts)).type != pyarrow.fs.FileType.File:
            return None
        with fs.open_input_stream(self.path(*parts)) as handle:
            return bytes(handle.read()).decode()

    def write_text(self, text: str, *parts: str) -> None:
        """Write (replace) the file ``parts``; a local folder is created as needed."""
        if not self.remote:
            file = Path(self.path(*parts))
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(text)
            return
        with self.filesystem().open_output_stream(self.path(*parts)) as handle:
            handle.write(text.encode())

    def driver_folder(self, *parts: str) -> Path:
        """A local folder for files only the driver reads (an MLflow outage's backlog, a
        one-shot supernet's checkpoint): the location itself when it is a folder, else
        one named after it under ``$SUBLAYER_CACHE_DIR`` (``~/.cache/sublayer-search``)."""
        if not self.remote:
            return Path(self.uri, *parts)
        cache = os.environ.get("SUBLAYER_CACHE_DIR") or "~/.cache/sublayer-search"
        return Path(cache).expanduser().resolve() / "object-store" / self.fs_path / Path(*parts)


_REFUSALS = {  # pyarrow's words for the store's answer -> what it means
    "INVALID_ACCESS_KEY_ID": "403 InvalidAccessKeyId: the store knows no such access key id",
    "SIGNATURE_DOES_NOT_MATCH": "403 SignatureDoesNotMatch: the secret key does not belong to "
                                "the access key id",
    "EXPIRED_TOKEN": "400 ExpiredToken: the session token has expired",
    "INVALID_TOKEN": "400 InvalidToken: the session token is not valid",
    "ACCESS_DENIED": "403 AccessDenied: these credentials may not list the bucket",
}


def _refusal(text: str) -> str | None:
    """What the store's refusal in pyarrow's error ``text`` means, or None if none."""
    for code, meaning in _REFUSALS.items():
        if f"AWS Error {code}" in text or code.replace("_", "").lower() in text.lower():
            return meaning
    return "403 Forbidden" if " 403" in text else None


def _check_bucket(fs: Any, bucket: str) -> tuple[Any, str | None]:
    """(the bucket's file type, None) or (None, the store's refusal or error)."""
    import pyarrow.fs

    try:
        return fs.get_file_info(bucket).type, None
    except OSError as exc:
        text = str(exc)
        first = _first_line(exc)
    refused = _refusal(text)
    if refused and refused.startswith("403 AccessDenied"):
        try:  # HeadBucket's answer has no body: a listing says which refusal it was
            fs.get_file_info(pyarrow.fs.FileSelector(bucket, recursive=False))
        except OSError as exc:
            refused = _refusal(str(exc)) or refused
    return None, refused or first


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0][:200] if text else type(exc).__name__


def object_store_problems(field: str, uri: str, env: str = ENDPOINT_ENV) -> list[Problem]:
    """An ``s3://`` location a sweep can use: credentials from the AWS chain, the endpoint
    (variable ``env``) answering, the bucket there and readable with them. Reads only:
    nothing is written. A refusal names the link of the chain whose credentials were
    refused, never a key."""
    try:
        source = aws_source()
    except CredentialError as exc:
        return [Problem(field, uri, exc.expected)]
    endpoint = _endpoint(env)
    if endpoint is not None:
        parsed = urlparse(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            return [Problem(env, endpoint, "an endpoint URL such as http://HOST:PORT")]
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            with socket.create_connection((parsed.hostname, port), timeout=CONNECT_TIMEOUT_S):
                pass
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            return [Problem(field, uri, f"a reachable object store ({env}={endpoint} "
                            f"did not answer within {CONNECT_TIMEOUT_S:g} s: {reason})")]
    import pyarrow.fs

    bucket = urlparse(uri).netloc
    where = f"at {endpoint}" if endpoint else "on AWS S3"
    found: Any = None
    why: str | None
    try:
        fs = _filesystem(uri, env, connect_timeout=CONNECT_TIMEOUT_S, request_timeout=CONNECT_TIMEOUT_S,
                         retry_strategy=pyarrow.fs.AwsStandardS3RetryStrategy(max_attempts=1))
    except OSError as exc:  # pyarrow could not ask AWS for the bucket's region
        why = _refusal(str(exc)) or _first_line(exc)
    else:
        found, why = _check_bucket(fs, bucket)
    if why is not None and why[:3] in ("403", "400"):
        return [Problem(field, uri, f"credentials that can read the bucket {where} (the "
                        f"credentials from {source} were refused: {why})")]
    if why is not None:
        return [Problem(field, uri, f"a bucket the credentials from {source} can read {where} "
                        f"({why})")]
    if found == pyarrow.fs.FileType.NotFound:
        return [Problem(field, uri, f"an existing bucket {where} (no bucket {bucket!r}; "
                        "a sweep never creates one)")]
    return []
