"""Finding a corpus's files: explicit paths, data folder, cache folder, then download.

Downloads are verified (see :mod:`.verified`): the file is streamed into a private
staging folder under the cache root and kept only when its hash matches the registry's;
archive members with a known hash (enwik8, text8) are checked again after extraction.
Only finished, verified files are moved into ``<cache>/<name>/`` (``os.replace``); a
failed download leaves no file and no empty folder behind.

``SUBLAYER_DOWNLOAD_BASE`` replaces everything before the file name of a download URL
(``$SUBLAYER_DOWNLOAD_BASE/input.txt``), for mirrors and tests.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path
from typing import Protocol

from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.data.errors import DataError, setting_error
from sublayer_search.models.data.registry import ALL, SPLITS, CorpusSpec
from sublayer_search.models.data.verified import place, retrieve, staging, verify_file

__all__ = [
    "ENV_CACHE_DIR",
    "ENV_DATA_DIR",
    "ENV_DOWNLOAD_BASE",
    "cache_root",
    "data_root",
    "default_cache_dir",
    "download_url",
    "fetch",
    "rebase_url",
    "resolve_files",
]

ENV_DATA_DIR = "SUBLAYER_DATA_DIR"
ENV_CACHE_DIR = "SUBLAYER_CACHE_DIR"
ENV_DOWNLOAD_BASE = "SUBLAYER_DOWNLOAD_BASE"


def default_cache_dir() -> Path:
    """``$SUBLAYER_CACHE_DIR``, else ``~/.cache/sublayer-search``."""
    env = os.environ.get(ENV_CACHE_DIR)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sublayer-search"


class Folders(Protocol):
    """The folder settings of a data config (:class:`DataConfig`, the parallel one)."""

    @property
    def data_dir(self) -> str | None: ...

    @property
    def cache_dir(self) -> str | None: ...


def cache_root(cfg: Folders) -> Path:
    """The cache folder for this config (``cfg.cache_dir`` overrides the default)."""
    return Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()


def data_root(cfg: Folders) -> Path | None:
    """The data folder (``cfg.data_dir``, else ``$SUBLAYER_DATA_DIR``), or None."""
    value = cfg.data_dir or os.environ.get(ENV_DATA_DIR)
    return Path(value).expanduser() if value else None


def download_url(spec: CorpusSpec, base: str | None = None) -> str:
    """The URL to fetch ``spec`` from, honouring ``SUBLAYER_DOWNLOAD_BASE``."""
    if spec.url is None or spec.archive_name is None:
        raise DataError(f"{spec.name}: this corpus cannot be downloaded; give its files")
    return rebase_url(spec.url, base)


def rebase_url(url: str, base: str | None = None) -> str:
    """``url`` with everything before its file name replaced by ``base`` (else
    ``$SUBLAYER_DOWNLOAD_BASE``); unchanged when neither is set."""
    base = base if base is not None else os.environ.get(ENV_DOWNLOAD_BASE)
    return f"{base.rstrip('/')}/{url.rsplit('/', 1)[-1]}" if base else url


def fetch(spec: CorpusSpec, dest: Path, *, url: str | None = None) -> list[Path]:
    """Download ``spec``'s files into ``dest``, each verified against its known hash.

    Returns the paths of the placed files. Raises DataError (naming the URL) on HTTP
    errors, network failures, checksum mismatches and malformed archives.
    """
    url = url or download_url(spec)
    if spec.known_hash is None:  # CorpusSpec refuses a URL without one; for the type checker
        raise DataError(f"{spec.name}: refusing to download {url} without a known hash")
    with staging(dest.parent) as tmp:
        fname = spec.archive_name if spec.members else next(iter(spec.files.values()))[0]
        assert fname is not None
        path = retrieve(url, spec.known_hash, folder=tmp, fname=fname, what=spec.name)
        if not spec.members:
            return [place(path, dest, fname)]
        return _unpack(spec, path, tmp / "extract", dest, url)


def _unpack(spec: CorpusSpec, archive: Path, scratch: Path, dest: Path, url: str) -> list[Path]:
    import pooch

    unzip = pooch.Unzip(members=list(spec.members.values()), extract_dir=str(scratch))
    try:
        unzip(str(archive), "download", None)
    except (KeyError, zipfile.BadZipFile) as exc:
        raise DataError(f"{spec.name}: archive from {url} is unusable: {exc}") from exc
    os.remove(archive)  # before the members are checked: less disk at the peak
    found = []
    for canonical, member in spec.members.items():
        src = scratch / member
        if not src.is_file():
            raise DataError(f"{spec.name}: archive from {url} has no member {member!r}")
        size = src.stat().st_size
        if spec.expected_size is not None and size != spec.expected_size:
            raise DataError(
                f"{spec.name}: {member} from {url} has {size} bytes, expected "
                f"{spec.expected_size}; refused"
            )
        if canonical in spec.member_hashes:
            verify_file(src, spec.member_hashes[canonical], f"{spec.name}: {member} from {url}")
        found.append((src, canonical))
    return [place(src, dest, canonical) for src, canonical in found]


def _search_folders(cfg: DataConfig, spec: CorpusSpec) -> list[Path]:
    if cfg.path is not None:
        return [Path(cfg.path).expanduser()]
    if spec.name == "text-files":
        return []
    folders = []
    root = data_root(cfg)
    if root is not None:
        folders += [root / spec.name] + [root / extra for extra in spec.extra_dirs]
    folders.append(cache_root(cfg) / spec.name)
    return folders


def _find(folders: list[Path], names: tuple[str, ...]) -> Path | None:
    for folder in folders:
        for name in names:
            if (folder / name).is_file():
                return folder / name
    return None


def _required(spec: CorpusSpec) -> list[str]:
    # text-files may omit the test split
    return [k for k in spec.files if not (spec.name == "text-files" and k == "test")]


def resolve_files(cfg: DataConfig, spec: CorpusSpec) -> dict[str, Path]:
    """Map each split (``"all"`` for single-file corpora) to a readable file.

    Order per split: explicit ``*_path`` -> ``cfg.path`` (exclusive when set) ->
    ``<data dir>/<name>/`` (and, for wikitext-2, ``<data dir>/wikitext-2-eval/``) ->
    ``<cache>/<name>/`` -> download into ``<cache>/<name>/``.
    """
    found: dict[str, Path] = {}
    for split in SPLITS:
        value = getattr(cfg, f"{split}_path")
        if value is not None and split in spec.files:
            path = Path(value).expanduser()
            if not path.is_file():
                raise setting_error(f"{split}_path", value, "an existing file")
            found[split] = path
    if cfg.path is not None and spec.single_file and Path(cfg.path).expanduser().is_file():
        return {ALL: Path(cfg.path).expanduser()}
    folders = _search_folders(cfg, spec)

    def search() -> None:
        for split, names in spec.files.items():
            if split not in found and (hit := _find(folders, names)) is not None:
                found[split] = hit

    search()
    missing = [k for k in _required(spec) if k not in found]
    failure = None
    if missing and cfg.path is None and spec.url is not None and cfg.download:
        try:
            fetch(spec, cache_root(cfg) / spec.name)
        except DataError as exc:
            failure = str(exc)
        search()
        missing = [k for k in _required(spec) if k not in found]
    if missing:
        raise DataError(_missing_message(cfg, spec, missing, folders, found, failure))
    return found


def _missing_message(
    cfg: DataConfig,
    spec: CorpusSpec,
    missing: list[str],
    folders: list[Path],
    found: dict[str, Path],
    failure: str | None,
) -> str:
    wanted = "; ".join(
        " or ".join(spec.files[k]) + ("" if k == ALL else f" ({k} split)") for k in missing
    )
    looked = ", ".join(str(f) for f in folders) or "(no folder: give the file paths)"
    parts = [f"{spec.name}: cannot find {wanted}. Looked in: {looked}."]
    if spec.name == "text-files":
        parts.append("Set data.train_path/valid_path/test_path or data.path (a folder).")
    elif cfg.path is not None:
        parts.append(f"Place the file(s) in {cfg.path} (data.path) or unset data.path.")
    else:
        where = data_root(cfg)
        target = f"{where / spec.name}" if where else f"<data dir>/{spec.name}"
        parts.append(
            f"Place the file(s) in {target} (the data dir is data.data_dir, else "
            f"${ENV_DATA_DIR}{'' if where else ', which is not set'}) or in "
            f"{cache_root(cfg) / spec.name} (the cache)."
        )
        if failure is not None:
            parts.append(f"Download failed: {failure.rstrip('.')}.")
        elif spec.url is not None and not cfg.download:
            parts.append(f"Downloads are off (data.download=false); the source is {spec.url}.")
    if "train" in missing and found:
        have = ", ".join(f"{k}={p}" for k, p in sorted(found.items()))
        parts.append(
            f"Found only {have}: the vocabulary is built from the train split. For a "
            "split-only parse use models.data.read_wikitext_tokens(path)."
        )
    return " ".join(parts)
