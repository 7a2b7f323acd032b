"""One module per stopping rule (``scheduler.type``), each registered with
:func:`~sublayer_search.search.stopping.registry.register_rule`: light declarations,
Ray is imported only when a rule builds its scheduler."""
