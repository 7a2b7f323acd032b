"""A real S3-compatible server for the object-storage tests: ``moto_server`` (PyPI
``moto[server]``), started as a subprocess on 127.0.0.1 and a free port, stopped by its id.

It is a separate process because Ray's trial workers and the sweep driver are other
processes that must reach it; moto accepts any credentials, so each test makes up its
own (the secrets test then searches everything for the secret key).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator
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
              timeout: float = 60.0) -> Iterator[S3Server]:
    """``moto_server`` on 127.0.0.1 (a free port), with ``buckets`` created."""
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
        yield server
    finally:
        stop(proc)
