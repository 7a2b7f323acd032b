"""Where a sweep's credentials come from: S3's from the AWS chain, MLflow's from its variables.

Neither is ever read from the experiment file, and neither is kept in anything Ray saves
(``tuner.pkl``, the experiment state, the storage bucket): every process reads its own
environment when it needs them.

- **S3** (``ray.storage_path`` / ``tracking.artifact_location`` at ``s3://``): the AWS
  credential chain, as boto3 and pyarrow follow it: ``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN``); ``AWS_PROFILE`` in the shared
  credentials file (``AWS_SHARED_CREDENTIALS_FILE``, else ``~/.aws/credentials``) or the
  config file (``AWS_CONFIG_FILE``, else ``~/.aws/config``: assume-role, SSO,
  ``credential_process``); web identity (``AWS_ROLE_ARN`` + ``AWS_WEB_IDENTITY_TOKEN_FILE``,
  as EKS gives a pod); a container's or an instance's role. :func:`aws_source` says which
  one supplies them (botocore resolves the chain; without botocore, the environment is
  read and pyarrow resolves the rest itself).
- **MLflow**: ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` or
  ``MLFLOW_TRACKING_TOKEN`` for a server; ``PGPASSWORD`` or ``~/.pgpass`` for PostgreSQL.
  A tracking URI that embeds a password is refused (:func:`uri_password_problem`): the URI
  travels into the pickled tracking callback and plan, so into ``tuner.pkl`` and the bucket.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

__all__ = ["CredentialError", "aws_source", "uri_password_problem", "MLFLOW_CREDENTIALS_ENV",
           "AWS_CHAIN"]

MLFLOW_CREDENTIALS_ENV = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD",
                          "MLFLOW_TRACKING_TOKEN")
AWS_CHAIN = ("the AWS credential chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE "
             "with a shared credentials file, web identity (AWS_ROLE_ARN and "
             "AWS_WEB_IDENTITY_TOKEN_FILE) or an instance role")


class CredentialError(ValueError):
    """No usable credentials: ``expected`` says what was expected (for a :class:`Problem`)."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def _profile() -> str | None:
    return os.environ.get("AWS_PROFILE") or os.environ.get("AWS_DEFAULT_PROFILE") or None


def _files() -> tuple[str, str]:
    """(the shared credentials file, the config file) the chain reads."""
    return (os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or "~/.aws/credentials",
            os.environ.get("AWS_CONFIG_FILE") or "~/.aws/config")


def _profile_words(profile: str | None) -> str:
    return f"AWS_PROFILE={profile}" if profile else "the default profile"


def _described(method: str, profile: str | None) -> str:
    """What ``method`` (botocore's name for a link of the chain) means to a user."""
    shared, config = _files()
    who = _profile_words(profile)
    if method == "env":
        return "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the environment)"
    if method == "shared-credentials-file":
        return f"{who} (shared credentials file {shared})"
    if method == "config-file":
        return f"{who} (AWS config file {config})"
    if method == "assume-role":
        return f"the role that {who} assumes ({config})"
    if method == "assume-role-with-web-identity":
        arn = os.environ.get("AWS_ROLE_ARN")
        return f"web identity (AWS_ROLE_ARN={arn})" if arn else f"web identity of {who}"
    if method == "sso":
        return f"AWS SSO ({who})"
    if method == "custom-process":
        return f"the credential_process of {who} ({config})"
    if method == "container-role":
        return "the container's role (ECS task or EKS pod identity)"
    if method == "iam-role":
        return "the instance role (instance metadata)"
    return f"the AWS credential chain ({method})"


def _without_botocore() -> str:
    """The link of the chain the environment names (pyarrow resolves it on every node)."""
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") or env.get("AWS_SECRET_ACCESS_KEY"):
        missing = [n for n in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if not env.get(n)]
        if missing:
            raise CredentialError(f"both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                                  f"environment ({missing[0]} is not set)")
        return _described("env", None)
    if _profile():
        return _described("shared-credentials-file", _profile())
    if env.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return _described("assume-role-with-web-identity", None)
    return "the AWS credential chain (a profile, web identity or an instance role)"


def aws_source() -> str:
    """Which link of the AWS chain supplies this process's credentials, in a user's words
    (``AWS_PROFILE=team (shared credentials file ~/.aws/credentials)``); credentials that
    are fetched (web identity, a role) are fetched once, so a refusal shows here.

    Raises :class:`CredentialError` when the chain gives none (or a broken link: a
    profile that does not exist, half a key pair, a token file that cannot be read).
    Nothing secret is in any text it returns or raises.
    """
    try:
        import botocore.session
        from botocore.exceptions import BotoCoreError, PartialCredentialsError, ProfileNotFound
    except ImportError:  # boto3 is optional: pyarrow follows the chain on its own
        return _without_botocore()
    profile = _profile()
    shared, config = _files()
    try:
        found = botocore.session.Session().get_credentials()
    except ProfileNotFound:
        raise CredentialError(f"a profile that exists (AWS_PROFILE={profile} is in neither the "
                              f"shared credentials file {shared} nor the config file "
                              f"{config})") from None
    except PartialCredentialsError as exc:
        var, provider = exc.kwargs.get("cred_var"), exc.kwargs.get("provider")
        if provider == "env":
            raise CredentialError(f"both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                                  f"environment ({var} is not set)") from None
        raise CredentialError(f"complete credentials ({var} is missing from "
                              f"{_described(str(provider), profile)})") from None
    except BotoCoreError as exc:  # an unreadable token file, a malformed config …
        raise CredentialError(f"credentials from {AWS_CHAIN} ({_short(exc)})") from None
    if found is None and os.environ.get("AWS_SECRET_ACCESS_KEY"):
        raise CredentialError("both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
                              "environment (AWS_ACCESS_KEY_ID is not set)")
    if found is None:
        raise CredentialError(f"credentials from {AWS_CHAIN} (none was found; they are never "
                              "read from the experiment file)")
    source = _described(str(found.method), profile)
    try:
        found.get_frozen_credentials()  # a role's or web identity's: fetched now, not mid-sweep
    except Exception as exc:  # botocore's and STS's refusals, a timeout  # noqa: BLE001
        raise CredentialError(f"credentials the AWS chain can obtain (those of {source} could "
                              f"not be obtained: {_short(exc)})") from None
    return source


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


def uri_password_problem(uri: str) -> str | None:
    """What a tracking URI that embeds a password or a token (``user:password@``, or a
    query parameter such as ``?password=`` or ``?token=``) should be instead (for a
    :class:`Problem`), or None. A user name alone is allowed; the secret is never part of
    the answer."""
    from sublayer_search.analysis.store.mlflow_store import query_secrets

    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:  # not a URL urllib can take apart
        return None
    in_query = sorted(query_secrets(uri))
    if not password and not in_query:
        return None
    scheme = parts.scheme.split("+")[0].lower()
    if scheme in ("http", "https") and not password and "token" in in_query[0].lower():
        instead = "set MLFLOW_TRACKING_TOKEN instead"
    elif scheme in ("http", "https"):
        instead = ("set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or "
                   "MLFLOW_TRACKING_TOKEN) instead")
    elif scheme == "postgresql":
        instead = "give it as PGPASSWORD or in ~/.pgpass (PGPASSFILE) instead"
    elif scheme == "mysql":
        instead = ("put it in an option file ([client] password=…) named by "
                   "?read_default_file=PATH instead")
    else:
        instead = "give it to the database driver through its own settings instead"
    if password:
        return (f"a URI without a password (a password in it would be saved with the sweep's "
                f"Ray state, tuner.pkl, and in the storage bucket): {instead}")
    return (f"a URI without ?{in_query[0]}= (a secret in its query would be saved with the "
            f"sweep's Ray state, tuner.pkl, and in the storage bucket): {instead}")
