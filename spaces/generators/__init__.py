"""The named spaces, one module each: ``permutations``, ``budgeted``, ``sandwich``,
``explicit``, ``iot_subsets`` and the peers' families (PAR, macaron); ``checks`` holds the
argument checks they share."""
