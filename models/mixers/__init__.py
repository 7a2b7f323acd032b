"""The hybrid sublayer kinds (:mod:`spaces.kinds`), one module each: sliding-window
attention (``w``), a gated linear recurrence (``r``) and a mixture-of-experts feedforward
(``e``). Each is built by :func:`models.blocks.build_sublayer` through its class method
``from_dims(dims, ...)`` and counts what :mod:`spaces.kinds` says it holds."""
