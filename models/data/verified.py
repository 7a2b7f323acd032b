"""Verified downloads: every downloaded file is checked against a known hash before use.

A download happens in a private staging folder under the cache root
(``<cache>/.staging-XXXXXXXX/``): pooch streams the file there and keeps it only when
its hash matches; archives are unpacked and ``.gz`` files decompressed (streamed, never
whole in memory) in the same folder. Finished files reach their cache folder with
``os.replace``. Whatever happens, the staging folder is removed, and when the download
fails, so is every folder it created that is still empty: a failed download leaves no
trace in the cache.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path

from sublayer_search.models.data.errors import DataError

__all__ = [
    "HASH_LENGTHS",
    "check_hash_form",
    "gunzip",
    "place",
    "retrieve",
    "staging",
    "verify_file",
]

HASH_LENGTHS = {"md5": 32, "sha1": 40, "sha256": 64}
"""Accepted algorithms of a ``"alg:hex"`` hash and the length of their hex digest."""

_CHUNK = 1 << 20  # bytes per read when decompressing


def check_hash_form(value: object, field: str) -> None:
    """DataError naming ``field`` unless ``value`` is ``"md5|sha1|sha256:<hex digest>"``."""
    alg, _, digest = value.partition(":") if isinstance(value, str) else ("", "", "")
    if alg not in HASH_LENGTHS or not re.fullmatch(f"[0-9a-f]{{{HASH_LENGTHS[alg]}}}", digest):
        raise DataError(
            f"{field}: got {value!r}, expected 'md5:', 'sha1:' or 'sha256:' "
            "followed by the lower-case hex digest"
        )


def verify_file(path: Path, known_hash: str, what: str) -> None:
    """DataError (naming ``what``, both digests) unless ``path`` has ``known_hash``."""
    import pooch

    alg, expected = known_hash.split(":", 1)
    got = pooch.file_hash(str(path), alg=alg)
    if got != expected:
        raise DataError(
            f"{what}: checksum mismatch ({alg} {got}, expected {expected}); "
            "the file was refused and not kept"
        )


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its ancestors that do not exist yet, outermost first."""
    missing: list[Path] = []
    for path in [folder, *folder.parents]:
        if path.exists():
            break
        missing.append(path)
    return missing[::-1]


@contextlib.contextmanager
def staging(root: Path) -> Iterator[Path]:
    """A private folder under ``root``; on failure, also the folders it made are removed."""
    created = _missing_folders(root)
    root.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
    ok = False
    try:
        yield folder
        ok = True
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if not ok:
            for path in reversed(created):  # innermost first; a folder in use is not empty
                with contextlib.suppress(OSError):
                    path.rmdir()


def retrieve(url: str, known_hash: str, *, folder: Path, fname: str, what: str) -> Path:
    """Download ``url`` into ``folder/fname``, kept only when it has ``known_hash``.

    Raises DataError naming ``what`` and the URL on HTTP errors, network failures and
    checksum mismatches (pooch has then already deleted the partial file).
    """
    import pooch
    import requests

    try:
        path = pooch.retrieve(
            url, known_hash, fname=fname, path=folder, progressbar=sys.stderr.isatty()
        )
    except requests.exceptions.HTTPError as exc:
        raise DataError(f"{what}: download of {url} failed: {exc}") from exc
    except requests.exceptions.RequestException as exc:
        raise DataError(
            f"{what}: download of {url} failed (offline?): {type(exc).__name__}"
        ) from exc
    except ValueError as exc:  # pooch: hash mismatch
        raise DataError(
            f"{what}: checksum mismatch for {url}; the file was refused and not kept ({exc})"
        ) from exc
    return Path(path)


def gunzip(src: Path, dst: Path, what: str) -> None:
    """Decompress ``src`` into ``dst`` in chunks of 1 MiB (never the whole file in memory)."""
    try:
        with gzip.open(src, "rb") as packed, open(dst, "wb") as out:
            shutil.copyfileobj(packed, out, _CHUNK)
    except (OSError, EOFError, zlib.error) as exc:
        with contextlib.suppress(OSError):
            os.remove(dst)
        raise DataError(f"{what}: not a readable gzip file ({exc})") from exc


def place(src: Path, folder: Path, name: str) -> Path:
    """Move a finished file into ``folder/name`` (atomic within one file system)."""
    folder.mkdir(parents=True, exist_ok=True)
    os.replace(src, folder / name)
    return folder / name
