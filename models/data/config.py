"""DataConfig: which corpus to load and where to look for it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.data.errors import setting_error
from sublayer_search.models.data.registry import get_spec

__all__ = ["DataConfig", "check_paths"]

_TEXT_FILE_LEVELS = ("char", "word")


def check_paths(cfg: Any, names: Iterable[str]) -> None:
    """DataError unless each setting ``names`` of ``cfg`` is a non-empty string or None."""
    for name in names:
        value = getattr(cfg, name)
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise setting_error(name, value, "a non-empty path or null")


@dataclass(frozen=True, kw_only=True)
class DataConfig:
    """Corpus selection.

    Files are looked up in this order (first hit wins, per split):
    explicit ``train_path``/``valid_path``/``test_path`` -> ``path`` (a folder, or the file
    itself for single-file corpora; when given, nothing else is searched) ->
    ``data_dir`` (else env ``SUBLAYER_DATA_DIR``) / ``<name>/`` -> the cache folder
    (``cache_dir``, else env ``SUBLAYER_CACHE_DIR``, else ``~/.cache/sublayer-search``)
    / ``<name>/`` -> download into that cache folder when ``download`` is true.

    ``level`` is only for ``text-files`` ("char", the default, or "word").
    """

    name: str
    path: str | None = None
    train_path: str | None = None
    valid_path: str | None = None
    test_path: str | None = None
    data_dir: str | None = None
    cache_dir: str | None = None
    download: bool = True
    level: str | None = None

    def __post_init__(self) -> None:
        spec = get_spec(self.name)
        check_paths(self, ("path", "train_path", "valid_path", "test_path", "data_dir",
                           "cache_dir"))
        if not isinstance(self.download, bool):
            raise setting_error("download", self.download, "true or false")
        split_paths = [n for n in ("train_path", "valid_path", "test_path") if getattr(self, n)]
        if spec.single_file and split_paths:
            raise setting_error(split_paths[0], getattr(self, split_paths[0]), f"null ({self.name} "
                                "is one file split by position; use data.path)")
        if self.name == "text-files":
            if self.path is None and not (self.train_path and self.valid_path):
                raise setting_error("train_path", None, "a file path (text-files needs "
                                    "train_path and valid_path, or a folder in data.path "
                                    "with train.txt and valid.txt)")
            if self.level is not None and self.level not in _TEXT_FILE_LEVELS:
                raise setting_error("level", self.level,
                                    f"one of {', '.join(_TEXT_FILE_LEVELS)}")
        elif self.level is not None and self.level != spec.level:
            raise setting_error("level", self.level,
                                f"null or {spec.level!r} ({self.name} has a fixed level)")

    @property
    def resolved_level(self) -> str:
        """The tokenisation level: ``level`` for text-files, the corpus's own otherwise."""
        return self.level or get_spec(self.name).level
