"""The samples in this corpus are candidate answers, not tests: never import them (doctest collection would)."""

collect_ignore_glob = ["*/*.py"]
