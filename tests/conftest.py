import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: takes more than ~30 s on the 2-core CI machine")


# Modules outside tests/export/ that run `make edge-setup` (apt-get, npm ci: one at a time).
EDGE_SETUP_USERS = {os.path.join("tests", "inspection", "test_attention.py")}


# tryfirst: xdist's own hook turns the xdist_group marks into node ids, so the marks must be
# there before it runs (without it the groups were silently ignored and two workers raced to
# build .venv-mediapipe).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's --dist loadgroup (make test runs two workers): each module's
    tests stay on one worker, so a module-scoped fixture (a teacher run, a served model) is
    built once; every test under tests/export/ shares one worker, as they share the session's
    MiniLM export and the edge demos' set-up (minutes each, make targets that must not run
    twice at once, and files in android_demo/ and web_demo/), and so does
    tests/inspection/test_attention.py, which runs the same `make edge-setup`."""
    export = os.path.join(REPO, "tests", "export") + os.sep
    for item in items:
        path = str(item.path)
        relative = os.path.relpath(path, REPO)
        group = "export" if path.startswith(export) or relative in EDGE_SETUP_USERS else relative
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    keras.utils.set_random_seed(0)
    keras.config.set_dtype_policy("float32")
    yield
    keras.config.set_dtype_policy("float32")
    keras.backend.clear_session()


@pytest.fixture
def data_dir():
    if not os.path.isdir(os.path.join(DATA, "minilm")):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    return DATA


@pytest.fixture(scope="session")
def minilm():
    """The real all-MiniLM-L6-v2 as a BertBackbone carrying its vocabulary, converted once per
    session (shared by the export and inspection tests; none of them trains it)."""
    from keras_bert_impl.checkpoints import convert_checkpoint

    if not os.path.isdir(os.path.join(DATA, "minilm")):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    backbone, _ = convert_checkpoint(os.path.join(DATA, "minilm"), "huggingface", with_heads=False)
    return backbone


@pytest.fixture(scope="session")
def minilm_keras(tmp_path_factory):
    """The same model written by `kbert convert`, for tests that go through the CLI."""
    from keras_bert_impl.cli import main

    if not os.path.isdir(os.path.join(DATA, "minilm")):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")
    path = str(tmp_path_factory.mktemp("minilm") / "minilm.keras")
    assert main(["convert", os.path.join(DATA, "minilm"), "--format", "huggingface", "--output", path]) == 0
    return path
