"""What every layer of ``search/`` shares, importing none of them: validation problems
with YAML paths (``problems``), strict scalars, YAML input, the ``Variant`` and the
``Trial`` a plan is made of, a finished trial as a searcher hears of it (``observation``),
the guidance axis and fault injection."""
