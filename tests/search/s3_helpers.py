"""A real S3-compatible server for the object-storage tests: ``moto_server`` (PyPI
``moto[server]``), started as a subprocess on 127.0.0.1 and a free port, stopped by its id.

It is a separate process because Ray's trial workers and the sweep driver are other
processes that must reach it. By default moto accepts any credentials, so each test makes
up its own (the secrets test then searches everything for the secret key). With
``authenticate=True`` the server checks them as S3 does: an IAM user with an ``s3:*``
policy and an access key are made first, then moto's ``/moto-api/reset-auth`` turns on
its authentication, so from then on an unknown key id is answered 403
InvalidAccessKeyId and a wrong secret 403 SignatureDoesNotMatch.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import VENV_BIN, free_port, start, stop, subprocess_env, tail

MOTO_SERVER = VENV_BIN / "moto_server"


@dataclass
class S3Server:
    endpoint: str
    env: dict[str, str]
    """What a client of this server needs: endpoint, region and made-up credentials."""
    log: Path

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"])

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object of ``bucket``, by key."""
        client = self.client()
        found: dict[str, bytes] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                found[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return found

    def saved_since(self, bucket: str, name: str, since: float) -> bool:
        """An object of ``bucket`` whose file name starts with ``name`` was written after
        ``since`` (a ``time.time()``; S3's whole-second times only make it later)."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return any(item["Key"].rsplit("/", 1)[-1].startswith(name)
                   and item["LastModified"].timestamp() > since
                   for page in pages for item in page.get("Contents", []))


KEY_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
"""The environment's link of the AWS chain: what a profile test takes out."""


def without_keys(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without :data:`KEY_ENV`."""
    return {k: v for k, v in env.items() if k not in KEY_ENV}


def profile_env(server: S3Server, credentials: Path, profile: str, *,
                secret: str | None = None) -> dict[str, str]:
    """The server's variables with its key in a shared credentials file instead of the
    environment: ``credentials`` is written with ``[profile]`` (and ``secret`` as the
    secret key when given, to be refused), ``AWS_PROFILE`` names it, and no
    ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` are set. ``AWS_CONFIG_FILE`` points
    beside it, so neither file of this machine's ``~/.aws`` is read. Merge it into an
    environment passed through :func:`without_keys`."""
    key_id = server.env["AWS_ACCESS_KEY_ID"]
    credentials.parent.mkdir(parents=True, exist_ok=True)
    credentials.write_text(f"[{profile}]\naws_access_key_id = {key_id}\n"
                           f"aws_secret_access_key = {secret or server.env['AWS_SECRET_ACCESS_KEY']}\n")
    credentials.chmod(0o600)
    return {**without_keys(server.env), "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
            "AWS_PROFILE": profile, "AWS_CONFIG_FILE": str(credentials.with_name("aws-config-none"))}


def _authenticate(server: S3Server) -> None:
    """An IAM user allowed ``s3:*`` with a new access key becomes the server's (``env``),
    then moto checks every request's signature against its keys."""
    import boto3

    iam = boto3.client("iam", endpoint_url=server.endpoint, region_name="us-east-1",
                       aws_access_key_id=server.env["AWS_ACCESS_KEY_ID"],
                       aws_secret_access_key=server.env["AWS_SECRET_ACCESS_KEY"])
    iam.create_user(UserName="sweeper")
    policy = iam.create_policy(PolicyName="s3-all", PolicyDocument=json.dumps({
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
    iam.attach_user_policy(UserName="sweeper", PolicyArn=policy["Policy"]["Arn"])
    key = iam.create_access_key(UserName="sweeper")["AccessKey"]
    server.env.update(AWS_ACCESS_KEY_ID=key["AccessKeyId"],
                      AWS_SECRET_ACCESS_KEY=key["SecretAccessKey"])
    request = urllib.request.Request(f"{server.endpoint}/moto-api/reset-auth", data=b"0",
                                     method="POST", headers={"Content-Type": "text/plain"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.load(answer)["status"] == "ok"


def s3_env(endpoint: str, secret: str | None = None) -> dict[str, str]:
    """The environment variables a sweep reads for S3 (credentials made up here)."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": f"AKIA{secrets.token_hex(8).upper()}",
        "AWS_SECRET_ACCESS_KEY": secret or f"s3secret-{secrets.token_hex(16)}",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }


@contextlib.contextmanager
def s3_server(folder: Path, *, buckets: tuple[str, ...] = (), secret: str | None = None,
              authenticate: bool = False, timeout: float = 60.0) -> Iterator[S3Server]:
    """``moto_server`` on 127.0.0.1 (a free port), with ``buckets`` created; with
    ``authenticate``, checking credentials (its ``env`` then holds the only key it takes,
    and ``secret`` is not used)."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = folder / "moto-server.log"
    proc = start([MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)],
                 env=subprocess_env(folder / "moto-home"), log=log, cwd=folder)
    server = S3Server(endpoint=endpoint, env=s3_env(endpoint, secret), log=log)
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None, f"moto_server exited ({proc.returncode}):\n{tail(log)}"
            try:
                server.client().list_buckets()
                break
            except Exception:  # not listening yet  # noqa: BLE001
                assert time.monotonic() < deadline, f"moto_server not ready:\n{tail(log)}"
                time.sleep(0.3)
        for bucket in buckets:
            server.client().create_bucket(Bucket=bucket)
        if authenticate:
            _authenticate(server)
        yield server
    finally:
        stop(proc)
