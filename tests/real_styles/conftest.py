"""The samples here are candidate answers written the way LLMs write them, not tests: never import them."""

collect_ignore_glob = ["*/*.py"]
