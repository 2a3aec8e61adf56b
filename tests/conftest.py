import gc
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "data")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "slow: about 20 s or more on the 2-core machine (a real-MiniLM fine-tune or export, several "
        "training runs, a side venv); `make test` leaves it to `make test-slow`, which .ci/run runs after it",
    )
    config.addinivalue_line(
        "markers",
        "medium: in a module of NOT_FAST (set here, not in the module); `make test-fast` leaves it out",
    )


def _modules(*paths):
    """Test modules named from tests/ with "/", as paths relative to the repository."""
    return [os.path.join("tests", *path.split("/")) for path in paths]


# The three tiers (docs/checking.md, "The test suite"): `make test-fast` (about 5 minutes) runs
# what is neither slow nor medium, `make test` (about 15 minutes) what is not slow, and CI runs
# `make test` then `make test-slow`, so every test runs there. NOT_FAST are the modules whose
# tests that are not slow still add up to about 30 s or more of the 2-core machine each (they train,
# load the real MiniLM, convert to TFLite or start kbert processes; test_precision's fine-tune now
# serves slow tests only, its other tests convert the real MiniLM): test-fast leaves them out.
NOT_FAST = set(
    _modules(
        "checkpoints/test_model_garden.py",
        "commands/test_cli_errors.py",
        "commands/test_damaged_files.py",
        "commands/test_precision_auto.py",
        "commands/test_predict_in_memory.py",
        "commands/test_training_commands.py",
        "data/test_pretraining_example_builder.py",
        "data/test_pretraining_masker.py",
        "data/test_pretraining_records.py",
        "data_readers/test_classification_reader.py",
        "data_readers/test_squad_reader.py",
        "data_readers/test_tagging_reader.py",
        "data_readers/test_vocabulary_builder.py",
        "export/test_export_flags.py",
        "export/test_serve_error_bodies.py",
        "export/test_text_in_tflite.py",
        "huggingface/test_export_huggingface.py",
        "inference/test_precision.py",
        "backends/test_backend_edges.py",
        "checkpoints/test_transformers_checkpoints.py",
        "inspection/test_look_inside_cli.py",
        "inspection/test_sentence_encoder.py",
        "models/test_distiller.py",
        "models/test_distiller_general.py",
        "models/test_models.py",
        "models/test_quantized_layers.py",
        "pipelines/test_inference_pipeline.py",
        "pipelines/test_pretraining_pipeline.py",
        "test_docstring_examples.py",
        "tokenization/test_bert_preprocessor.py",
        "tokenization/test_reference_parity.py",
    )
)


# tryfirst: xdist's own hook turns the xdist_group marks into node ids, so the marks must be
# there before it runs (without it the groups were silently ignored).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Groups for pytest-xdist's --dist loadgroup (make test runs two workers): each module's
    tests stay on one worker, so a module-scoped fixture (a teacher run, a served model) is
    built once per run; what several modules share (the session's MiniLM export, the edge
    demos' set-up) is built once by tests/run_once.py whichever worker asks first. Which worker
    runs which module: pytest_xdist_make_scheduler below."""
    modules = {item: os.path.relpath(str(item.path), REPO) for item in items}
    missing = sorted(path for path in NOT_FAST if not os.path.exists(os.path.join(REPO, path)))
    if missing:
        raise pytest.UsageError(f"tests/conftest.py NOT_FAST names modules that do not exist: {missing}")
    for item in items:
        item.add_marker(pytest.mark.xdist_group(modules[item]))
        if modules[item] in NOT_FAST:
            item.add_marker(pytest.mark.medium)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under --dist loadgroup, tests/scheduling.py's scheduler: the longest modules first, by the
    seconds in tests/durations.json."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import LongestFirstScheduling

    return LongestFirstScheduling(config, log)


def pytest_collection_finish(session):
    """Collection imported TensorFlow, Keras and the package: about 420,000 objects that live for
    the whole run. Every test's `keras.backend.clear_session()` (below) runs a full
    `gc.collect()`, as Keras' quantize does per variable, and each walked all of them: 0.4 s
    and more per call on the 2-core machine, minutes of `make test`. Frozen, they are left out
    of every collection; what the tests make is still collected."""
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def _litert_cache(tmp_path_factory):
    """Converted LiteRT files (keras_bert_impl/inference/litert_cache.py) in a folder of this test
    run, shared by its workers and the kbert processes tests start: a test never reads a file an
    earlier run or the user's own `kbert` left in ~/.cache, and a model several tests convert
    (the trained MiniLM of test_precision, the served ones) is converted once per run."""
    from keras_bert_impl.inference.litert_cache import ENVIRONMENT_VARIABLE
    from tests.run_once import shared_root

    before = os.environ.get(ENVIRONMENT_VARIABLE)
    os.environ[ENVIRONMENT_VARIABLE] = str(shared_root(tmp_path_factory) / "kbert_cache")
    yield
    if before is None:
        os.environ.pop(ENVIRONMENT_VARIABLE, None)
    else:
        os.environ[ENVIRONMENT_VARIABLE] = before


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
    """The same model written by `kbert convert`, for tests that go through the CLI (once per
    test run, shared by the workers)."""
    from keras_bert_impl.cli import main
    from tests.run_once import once_per_run

    if not os.path.isdir(os.path.join(DATA, "minilm")):
        pytest.fail("data/ is missing: run `make data` (make test does it for you).")

    def build(folder):
        path = str(folder / "minilm.keras")
        assert (
            main(["convert", os.path.join(DATA, "minilm"), "--format", "huggingface", "--output", path]) == 0
        )
        return path

    return once_per_run(tmp_path_factory, "minilm_keras", build)
