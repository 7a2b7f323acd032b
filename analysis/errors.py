"""Errors raised by the analysis package."""

from __future__ import annotations

__all__ = ["AnalysisError"]


class AnalysisError(ValueError):
    """Bad analysis input: unknown experiment or metric, missing baseline, malformed frame.

    A ``ValueError``, so the ``sublayer`` CLI maps it to exit status 2.
    """
