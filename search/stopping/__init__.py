"""Stopping rules (``scheduler.type``): each declared in :mod:`.rules` with its settings,
checks, dry-run line and scheduler (``registry``, ``rule``); the Ray Tune schedulers a
sweep runs (FIFO and ASHA over the candidates, ``schedulers``; learning-curve stopping,
``curve``; comeback stopping, ``comeback``) and comeback's calibration from recorded
studies."""
