"""``sublayer fetch CONFIG...``: put every corpus the sweeps need on disk, before they run.

Meant for a login node with internet when compute nodes have none: each file's corpus is
found where it is, else downloaded (verified, as a sweep would: ``models/data``) into the
data folder the nodes read (``data.data_dir``, else ``$SUBLAYER_DATA_DIR``), else into
the cache (``$SUBLAYER_CACHE_DIR``, else ``~/.cache/sublayer-search``).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["add_fetch", "cmd_fetch"]

DESCRIPTION = """\
Put the corpus of every experiment file on disk where the sweep's nodes read it: found
where it already is, else downloaded (checksums verified) into data.data_dir or
$SUBLAYER_DATA_DIR when set (a folder the nodes share), else into the cache
($SUBLAYER_CACHE_DIR, else ~/.cache/sublayer-search). Run it on a login node with
internet before a sweep on nodes without it, with the SUBLAYER_DATA_DIR the nodes get:

  export SUBLAYER_DATA_DIR=/shared/corpora
  sublayer fetch configs/press2020_sandwich.yaml configs/iot_iwslt14.yaml

Exit status 0 when every corpus is on disk, 1 when one could not be downloaded, 2 for a
file with problems."""


def add_fetch(sub: Any) -> None:
    p = sub.add_parser("fetch", help="download the corpora of experiment files (on a login node)",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="CONFIG", help="experiment YAML files")
    p.set_defaults(func=cmd_fetch)


def _where(files: list[Any]) -> str:
    folders = sorted({str(f.parent) for f in files})
    return ", ".join(folders) if folders else "(no files)"


def cmd_fetch(args: argparse.Namespace) -> int:
    """Every file checked first (bad input: exit 2, nothing fetched), then each corpus."""
    from sublayer_search.models.data.errors import DataError
    from sublayer_search.search.cli.output import bad
    from sublayer_search.search.core.problems import ExperimentError
    from sublayer_search.search.plan.experiment import load_experiment

    experiments = []
    for path in args.files:
        try:
            experiments.append((path, load_experiment(path)))
        except ExperimentError as exc:
            return bad(str(exc))
    failed = 0
    done: set[str] = set()
    for path, exp in experiments:
        task, data = exp.new_task(), exp.data
        key = repr(data)
        if key in done:  # two files on one corpus: fetched once
            continue
        done.add(key)
        name = getattr(data, "name", exp.task)
        try:
            files = task.fetch_corpus(data)
        except DataError as exc:
            print(f"sublayer: {path}: data.name: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(f"{path}: {name} on disk in {_where(files)}")
    if not os.environ.get("SUBLAYER_DATA_DIR"):
        print("sublayer: note: SUBLAYER_DATA_DIR is not set: the corpora are in this user's "
              "cache, which other nodes read only if they share this home folder; set it to "
              "a shared folder, here and on the nodes", file=sys.stderr)
    return ExitCode.FAILED if failed else ExitCode.OK
