"""The samples in this corpus are candidate answers, not tests: never import them (doctest collection would).

The ``cpp`` samples a run selects are built ahead with every other declared answer (``tests/hacks/samples.py``,
``answers_built_ahead`` in ``tests/conftest.py``).
"""

collect_ignore_glob = ["*/*.py"]
