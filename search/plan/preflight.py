"""Checks of where a sweep will write and run, made before Ray starts or MLflow is touched.

Each returns problems instead of raising, so the CLI reports them with every other
problem of the experiment file and exits with status 2, having created nothing.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.plan.credentials import uri_password_problem
from sublayer_search.search.plan.storage import (
    artifact_endpoint_env,
    is_object_store,
    object_store_problems,
)
from sublayer_search.spaces.registry import ALL_SPACES, SpaceSize

if TYPE_CHECKING:
    from sublayer_search.search.plan.experiment import Experiment

__all__ = ["place_problems", "address_problems", "storage_problems", "tracking_problems", "plan_size_problems",
           "secret_problems",
           "artifact_problems", "home_problems", "TRACKING_SCHEMES", "MAX_PLANNED_TRIALS",
           "MAX_PLANNED_SUBLAYERS"]

MAX_PLANNED_TRIALS = 100_000
"""No experiment file plans more trials (more than ``MAX_TRIALS`` already needs ``--yes``)."""
MAX_PLANNED_SUBLAYERS = 2_000_000
"""Nor more sublayers in all its orders: planning them would take minutes."""

TRACKING_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks",
                    "file")
"""MLflow store schemes a sweep accepts (``file`` only with ``MLFLOW_ALLOW_FILE_STORE``)."""
ADDRESS_TIMEOUT_S = 5.0


def _writable_folder(folder: Path) -> str | None:
    """Why files cannot be created under ``folder`` (which may not exist yet), or None."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            return f"{folder} cannot be created"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a folder"
    from sublayer_search.analysis.paths import write_refused

    refused = write_refused(probe)
    return f"{probe} is {refused}" if refused else None


def tracking_problems(uri: str, path: str = "tracking.uri") -> list[Problem]:
    """An MLflow tracking URI a sweep can write to (a server's: one that answers), without
    a password in it (credentials come from the environment: ``search/plan/credentials.py``)."""
    # one rule with analyze & co.; a password in the URI is never shown
    from sublayer_search.analysis.store.mlflow_store import redact_uri, server_problem

    shown = redact_uri(uri)
    if not uri:
        return [Problem(path, shown, "an MLflow tracking URI such as sqlite:///mlflow.db")]
    embedded = uri_password_problem(uri)
    if embedded:  # refused before anything connects with it
        return [Problem(path, shown, embedded)]
    scheme = urlparse(uri).scheme
    if scheme not in TRACKING_SCHEMES:
        return [Problem(path, shown, "an MLflow tracking URI with one of the schemes "
                        + ", ".join(f"{s}://" for s in TRACKING_SCHEMES))]
    if scheme == "file" and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        return [Problem(path, shown, "sqlite:///… or a server (MLflow 3 refuses the file store "
                        "unless MLFLOW_ALLOW_FILE_STORE=true)")]

    unreachable = server_problem(uri)  # None unless a server (http(s), postgresql, …)
    if unreachable:
        return [Problem(path, shown, unreachable)]
    if scheme == "sqlite":
        file = Path(uri.removeprefix("sqlite:///")).expanduser()
        if file.is_dir():
            return [Problem(path, shown, "a SQLite file, not a folder")]
        if file.is_file():
            with open(file, "rb") as handle:
                head = handle.read(16)
            if head and head != b"SQLite format 3\x00":
                return [Problem(path, shown, "a SQLite database (this file is something else)")]
            if not os.access(file, os.W_OK):
                return [Problem(path, shown, "a writable SQLite file")]
        else:
            why = _writable_folder(file.resolve().parent)
            if why:
                return [Problem(path, shown, f"a SQLite file in a writable folder ({why})")]
    return []


def _ray_token_in_home(local_ray: bool) -> bool:
    """Will a local Ray keep its auth token in ``$HOME/.ray`` (see ``search/run/local_ray.py``)?"""
    env = os.environ
    if not local_ray or env.get("RAY_AUTH_MODE", "token").lower() != "token":
        return False
    return not (env.get("RAY_AUTH_TOKEN") or env.get("RAY_AUTH_TOKEN_PATH"))


def home_problems(data: Any | None, *, local_ray: bool) -> list[Problem]:
    """``$HOME``, where this command keeps files under it: an existing folder it can write in.

    A local Ray with token auth keeps its token in ``$HOME/.ray/auth_token`` (unless
    ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or another ``RAY_AUTH_MODE``), and the
    corpora's cache of ``data`` (a data config) is ``$HOME/.cache/sublayer-search`` unless
    ``SUBLAYER_CACHE_DIR`` or its ``cache_dir`` moves it. A missing ``$HOME`` is named (exit
    status 2), never created: a home folder (its owner, its mode) is the system's to make,
    and a missing one means a misconfigured environment (a service account's
    ``/nonexistent``, ``sudo``, a container's user) that creating one would hide.
    """
    try:
        home = Path.home()
    except RuntimeError:  # no $HOME and no entry in the password database
        return [Problem("HOME", None, "an existing, writable folder: set HOME to one")]
    uses: list[tuple[str, Path]] = []
    if _ray_token_in_home(local_ray):
        uses.append(("Ray's auth token", home / ".ray"))
    if data is not None and hasattr(data, "cache_dir"):  # a task's own data may keep no cache
        from sublayer_search.models.data.download import cache_root

        cache = cache_root(data).resolve()
        if cache.is_relative_to(home.resolve()):
            uses.append(("the corpus cache", cache))
    if not uses:
        return []
    value = os.environ.get("HOME", f"{home} (HOME unset: the password database's)")
    kept = " and ".join(what for what, _ in uses)
    if not home.is_dir():
        why = "does not exist" if not home.exists() else "is a file, not a folder"
        verb = "go" if len(uses) > 1 else "goes"
        return [Problem("HOME", value, f"an existing, writable folder ({home} {why}; {kept} "
                        f"{verb} under it): create it, or set HOME to one")]
    for what, folder in uses:
        refused = _writable_folder(folder)
        if refused:
            return [Problem("HOME", value, f"a folder this user can write in ({refused}; "
                            f"{what} goes under it): set HOME to one")]
    return []


def storage_problems(storage_path: str, name: str) -> list[Problem]:
    """Ray's storage folder: a folder (or creatable), where ``<name>-<timestamp>`` fits; or
    an object store (``s3://``) whose bucket these credentials can read (nothing written)."""
    if is_object_store(storage_path):
        return object_store_problems("ray.storage_path", storage_path)
    folder = Path(storage_path).expanduser().resolve()
    if folder.exists() and not folder.is_dir():
        return [Problem("ray.storage_path", storage_path, "a folder (this is a file)")]
    why = _writable_folder(folder)
    if why:
        return [Problem("ray.storage_path", storage_path, f"a writable folder ({why})")]
    try:
        longest = os.pathconf(str(folder if folder.exists() else folder.parent), "PC_NAME_MAX")
    except (OSError, ValueError):
        longest = 255
    run_name = f"{name}-YYYYmmdd-HHMMSS"
    if len(run_name) > longest:
        return [Problem("name", name, f"a name of at most {longest - 16} characters (it names "
                        f"the folder {run_name})")]
    return []


def artifact_problems(location: str | None) -> list[Problem]:
    """``tracking.artifact_location`` (``s3://``): boto3 installed (MLflow writes S3 with it)
    and the bucket readable with the environment's credentials (nothing written)."""
    if location is None:
        return []
    import importlib.util

    if importlib.util.find_spec("boto3") is None:
        return [Problem("tracking.artifact_location", location, "boto3 installed (MLflow "
                        "writes S3 artifacts with it: pip install boto3)")]
    return object_store_problems("tracking.artifact_location", location, artifact_endpoint_env())


def address_problems(address: str | None, in_file: str | None = None) -> list[Problem]:
    """A cluster address that answers within a few seconds (``auto`` is not checked).

    ``address`` is ``--address``'s; else the file's ``ray.address`` (``in_file``), else
    ``$RAY_ADDRESS`` is checked, and the problem names the one that was used.
    """
    field = "--address"
    if not address:
        address, field = (in_file, "ray.address") if in_file else (
            os.environ.get("RAY_ADDRESS"), "RAY_ADDRESS")
    if not address or address in ("auto", "local"):
        return []
    target = address.removeprefix("ray://")
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return [Problem(field, address, "HOST:PORT, ray://HOST:PORT or auto")]
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=ADDRESS_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return [Problem(field, address, f"a reachable Ray cluster (no answer within "
                        f"{ADDRESS_TIMEOUT_S:g} s: {reason})")]
    return []


def _space_size(space: Any) -> SpaceSize:
    """(the argument that sets the size, orders, sublayers of the longest) of one space, as
    the space declares it (:attr:`~sublayer_search.spaces.registry.SpaceInfo.size`)."""
    size = ALL_SPACES[space.type].size
    return size(space.args) if size is not None else ("", 0, 0)


def plan_size_problems(exp: Experiment) -> list[Problem]:
    """Spaces that would plan more than :data:`MAX_PLANNED_TRIALS` trials or
    :data:`MAX_PLANNED_SUBLAYERS` sublayers in all: refused from their arguments alone,
    before a single order is drawn (a few lines of YAML can ask for 10^8 sublayers)."""
    spaces = exp.space if isinstance(exp.space, list) else [exp.space]
    sweep_seeds = len(exp.seed_list) if hasattr(exp, "seed_list") else 1
    trials = sublayers = 0
    worst: tuple[int, str, Any, int, int] | None = None
    for i, space in enumerate(spaces):
        key, orders, length = _space_size(space)
        seeds = len(space.seed_list) if space.seed_list is not None else sweep_seeds
        trials += orders * seeds
        sublayers += orders * seeds * length
        if key and (worst is None or orders * seeds * length > worst[3] * worst[4]):
            where = f"space[{i}].{key}" if isinstance(exp.space, list) else f"space.{key}"
            worst = (i, where, space.args.get(key), orders * seeds, length)
    if trials <= MAX_PLANNED_TRIALS and sublayers <= MAX_PLANNED_SUBLAYERS or worst is None:
        return []
    _, where, value, n, length = worst
    return [Problem(where, value, f"a plan of at most {MAX_PLANNED_TRIALS:,} trials and "
                    f"{MAX_PLANNED_SUBLAYERS:,} sublayers in all (this file asks for {trials:,} "
                    f"trials, {sublayers:,} sublayers; this space {n:,} orders of up to {length:,})")]


def secret_problems(exp: Experiment, tracking_uri: str | None) -> list[Problem]:
    """The refusals of :func:`place_problems` that need no I/O and that a dry run makes too:
    a tracking URI with a password or token in it (``--dry-run`` refuses what a sweep
    refuses, so a cluster's pre-check catches it)."""
    from sublayer_search.analysis.store.mlflow_store import redact_uri

    uri = tracking_uri or exp.tracking.uri
    embedded = uri_password_problem(uri) if uri else None
    path = "--tracking-uri" if tracking_uri else "tracking.uri"
    return [Problem(path, redact_uri(uri), embedded)] if embedded else []


def place_problems(exp: Experiment, data: Any | None, *, address: str | None,
                   tracking_uri: str | None) -> list[Problem]:
    """Where a real sweep will run and write: the cluster's resources (this machine's
    without ``address``), the tracking store, Ray's storage, the artifact location, the
    address, and the home folder (Ray's token, the corpus cache)."""
    from sublayer_search.search.plan.resources import resource_problems

    uri = tracking_uri or exp.tracking.uri
    local = not (address or exp.ray.address or os.environ.get("RAY_ADDRESS"))
    return [*resource_problems(exp, address),
            *tracking_problems(uri, "--tracking-uri" if tracking_uri else "tracking.uri"),
            *storage_problems(exp.ray.storage_path, exp.name),
            *artifact_problems(exp.tracking.artifact_location),
            *address_problems(address, exp.ray.address),  # names the one used
            *home_problems(data, local_ray=local)]
