"""Tasks: what differs between kinds of sweep. See :mod:`.base` for the seam.

Built in: ``lm`` (:class:`.lm.LMTask`), ``translation``
(:class:`.translation.TranslationTask`) and ``mad`` (:class:`.mad.MadTask`, the MAD
proxy tasks); others register with :func:`register`.
"""

from sublayer_search.search.tasks.base import Task, obtain_corpus, validate_section
from sublayer_search.search.tasks.lm import LMTask
from sublayer_search.search.tasks.mad import MadTask
from sublayer_search.search.tasks.registry import (
    register,
    task_class,
    task_for,
    task_names,
    unregister,
)
from sublayer_search.search.tasks.translation import TranslationTask

__all__ = ["LMTask", "MadTask", "Task", "TranslationTask", "obtain_corpus", "register", "task_class", "task_for",
           "task_names", "unregister", "validate_section"]
