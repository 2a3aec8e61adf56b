"""Corpus preparation shared by the benches: the MR split (numpy only, for both venvs) and
the Austen novels (`make data-austen`)."""
