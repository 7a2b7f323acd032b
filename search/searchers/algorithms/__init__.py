"""One module per ``search.algorithm``: its declaration (a registered
:class:`~sublayer_search.search.searchers.registry.SearchAlgorithm`: what it can do, how
its Ray Tune searcher is built). The registry imports every module here on its first
lookup, so a new searcher is a new module, nothing else. Keep them light (planning and
``--dry-run`` import them): import the searcher itself inside ``make``."""
