import pytest


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Overrides tests/conftest.py's per-test Keras reset: these tests build no Keras
    models or layers, and `clear_session` costs ~0.4 s per test (most of this folder's time)."""
    yield
