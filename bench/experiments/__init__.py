"""Quality studies (accuracy against references and baselines), one `make experiment-...` target each."""
