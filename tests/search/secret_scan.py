"""Searching files for secrets, the way the secrets tests do: each secret as written, in
base64 (alone and in a basic-auth header) and URL-encoded; a thread that rereads a folder
that lives only while a sweep runs (Ray's temp folder)."""

from __future__ import annotations

import base64
import threading
import urllib.parse
from collections.abc import Mapping
from pathlib import Path


def secret_forms(secret: str, user: str = "admin") -> dict[str, bytes]:
    """The ways ``secret`` could be written: as is (a pickle keeps a str as UTF-8),
    base64 alone and in a basic-auth header, URL-encoded."""
    return {"raw": secret.encode(), "base64": base64.b64encode(secret.encode()),
            "basic-auth": base64.b64encode(f"{user}:{secret}".encode()),
            "url-encoded": urllib.parse.quote(secret, safe="").encode()}


def secret_patterns(secrets_: dict[str, str], user: str = "admin") -> dict[str, bytes]:
    """``{"the MLflow password (base64)": b"…", …}``: every form of every secret."""
    return {f"{name} ({form})": pattern for name, value in secrets_.items()
            for form, pattern in secret_forms(value, user).items()}


class TempWatch(threading.Thread):
    """Reads every file under ``root`` again whenever it changed, until stopped (Ray's temp
    folder lives only while the sweep runs), and notes where ``patterns`` were found."""

    def __init__(self, root: Path, patterns: dict[str, bytes]) -> None:
        super().__init__(daemon=True)
        self.root, self.patterns, self.stop = root, patterns, threading.Event()
        self.last: dict[Path, tuple[int, int]] = {}
        self.files: set[str] = set()  # every file read
        self.leaks: set[str] = set()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.scan()

    def scan(self) -> None:
        for path in list(self.root.rglob("*")):
            try:
                if path.is_symlink() or not path.is_file():
                    continue
                info = path.stat()
                if self.last.get(path) == (info.st_size, info.st_mtime_ns):
                    continue
                self.last[path] = (info.st_size, info.st_mtime_ns)
                blob = path.read_bytes()
            except OSError:  # removed meanwhile (the sweep ends, Ray rotates a file)
                continue
            where = str(path.relative_to(self.root))
            self.files.add(where)
            self.leaks.update(f"{name} in Ray's temp folder: {where}"
                              for name, pattern in self.patterns.items() if pattern in blob)


def leaks_in(blobs: Mapping[str, bytes], patterns: Mapping[str, bytes]) -> list[str]:
    """``"<secret> (<form>) in <where>"`` for every pattern found in a blob."""
    return [f"{name} in {where}" for name, pattern in patterns.items()
            for where, blob in blobs.items() if pattern in blob]
