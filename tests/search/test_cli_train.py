"""``sublayer train`` picks torch's CPU threads: one per usable CPU, or ``--threads``."""

from __future__ import annotations

import os

import pytest
import torch

from sublayer_search.search.cli import train as train_cli
from sublayer_search.search.cli.main import main
from sublayer_search.spaces.exit_codes import ExitCode

RUN = ["train", "--order", "sfsf", "--data", "tinyshakespeare", "--preset", "debug",
       "--steps", "2", "--eval-every", "2", "--batch-size", "2"]


@pytest.fixture(autouse=True)
def _threads_back():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_threads_flag_sets_and_names_the_count(shared_data, capsys):
    assert main([*RUN, "--threads", "1"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "torch threads 1 (--threads)" in out
    assert torch.get_num_threads() == 1


def test_default_is_one_thread_per_usable_cpu(shared_data, capsys, monkeypatch):
    monkeypatch.setattr(train_cli, "usable_cpus", lambda: 2)
    assert main(RUN) == ExitCode.OK
    assert "torch threads 2 (one per CPU this command may use; --threads N to change)" \
        in capsys.readouterr().out
    assert torch.get_num_threads() == 2


def test_usable_cpus_is_within_the_affinity_set():
    assert 1 <= train_cli.usable_cpus() <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize("value", ["0", "-2", "many"])
def test_a_bad_thread_count_is_exit_2(value, capsys):
    assert main([*RUN, "--threads", value]) == ExitCode.BAD_INPUT
    assert "--threads" in capsys.readouterr().err


def test_help_says_how_threads_are_chosen(capsys):
    assert main(["train", "--help"]) == ExitCode.OK
    assert "one per CPU this command may use" in " ".join(capsys.readouterr().out.split())
