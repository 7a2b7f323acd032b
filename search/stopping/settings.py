"""The experiment file's ``scheduler`` section: the settings of the rule ``type`` names
(each declared beside its rule, :mod:`~sublayer_search.search.stopping.rules`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sublayer_search.search.stopping.registry import scheduler_section
from sublayer_search.search.stopping.rules.fifo import FifoSettings

__all__ = ["FifoSettings", "SchedulerSection"]

if TYPE_CHECKING:  # what every member is, to a type checker
    from sublayer_search.search.stopping.rule import StoppingSettings as SchedulerSection
else:
    SchedulerSection = scheduler_section()
"""``fifo``, ``asha`` or ``curve`` settings (a union chosen by ``type``)."""
