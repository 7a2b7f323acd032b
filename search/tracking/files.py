"""Trial files the driver attaches to MLflow runs, wherever Ray keeps them.

With ``ray.storage_path: s3://…`` a trial's checkpoint is a set of objects in the
store, not a folder on the driver's disk: :func:`checkpoint_uri` names it as a URI
(a tracking op is plain JSON) and :func:`local_copy` downloads it for MLflow's
``log_artifacts``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sublayer_search.search.plan.storage import Storage, is_object_store

__all__ = ["checkpoint_uri", "local_copy"]


def checkpoint_uri(storage_path: str, path: str) -> str:
    """The checkpoint at ``path`` (as Ray's filesystem names it) as a folder or a URI."""
    if not is_object_store(storage_path):
        return str(path)
    return f"{storage_path.split('://', 1)[0]}://{str(path).lstrip('/')}"


@contextmanager
def local_copy(where: str) -> Iterator[Path | None]:
    """A local folder holding the files of ``where`` (a folder, or a URI downloaded into a
    temporary folder for the block); None when there are none."""
    if not is_object_store(where):
        yield Path(where) if Path(where).is_dir() else None
        return
    import pyarrow.fs

    storage = Storage(where.rstrip("/"))
    fs = storage.filesystem()
    if fs.get_file_info(storage.fs_path).type == pyarrow.fs.FileType.NotFound:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="sublayer-artifacts-") as tmp:
        pyarrow.fs.copy_files(storage.fs_path, tmp, source_filesystem=fs,
                              destination_filesystem=pyarrow.fs.LocalFileSystem())
        yield Path(tmp)
