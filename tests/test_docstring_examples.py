"""Every `>>>` example in keras_bert_impl's (and keras_bert_lite's) docstrings runs and prints
what it shows.

Examples are found with doctest over every module of the packages (pkgutil.walk_packages),
so a new module's examples are picked up without touching this file, and a plain text scan
of the sources checks that none is silently skipped. Each docstring runs as its own test,
named after the object, with:
- its module's globals plus `COMMON_NAMESPACE` (`np`, `tf`, `keras`, `ops`, `kb`), so an
  example may use those names without importing them;
- a fresh temporary working directory holding a `data` symlink to the repository's data/
  (paths such as "data/minilm/vocab.txt" work, and whatever an example writes stays in
  the temporary directory);
- the random seed 0 and the float32 policy of conftest.py.
Examples keep to tiny configs and tiny files of their own, so the whole file runs in under
a minute on the 2-core CI machine.
"""

import doctest
import importlib
import os
import pathlib
import pkgutil
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_impl as kb
import keras_bert_lite
from tests.conftest import DATA, REPO

PACKAGE_DIR = pathlib.Path(kb.__file__).parent
LITE_DIR = pathlib.Path(keras_bert_lite.__file__).parent
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
COMMON_NAMESPACE = {"np": np, "tf": tf, "keras": keras, "ops": keras.ops, "kb": kb}


def _package_modules():
    names = [
        name
        for package in (kb, keras_bert_lite)
        for name in [package.__name__]
        + [m.name for m in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}.")]
    ]
    return [importlib.import_module(name) for name in sorted(names)]


def _find_docstring_tests():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = {}
    for module in _package_modules():
        for test in finder.find(module):
            # A re-exported object is found once, under the module that defines it.
            if test.examples:
                tests.setdefault(test.name, test)
    return [tests[name] for name in sorted(tests)]


DOCSTRING_TESTS = _find_docstring_tests()


def test_every_example_in_the_sources_is_collected():
    # A `>>>` line holding only a comment is no example to doctest either.
    prompts = sum(
        len(re.findall(r"^\s*>>>(?!\s*(?:#|$))", path.read_text(encoding="utf-8"), flags=re.MULTILINE))
        for path in [*PACKAGE_DIR.rglob("*.py"), *LITE_DIR.rglob("*.py")]
    )
    collected = sum(len(test.examples) for test in DOCSTRING_TESTS)
    assert prompts > 0
    assert collected >= prompts, (
        f"doctest collected {collected} examples but the sources hold {prompts} `>>>` lines: "
        "an example sits where DocTestFinder does not look (a nested function, a decorated "
        "function, a string that is no docstring); move it into a module, class or function docstring"
    )


# Examples that take about 20 s or more each on the 2-core machine, so
# make test-slow runs them (the rest of this file stays in make test).
SLOW = {
    "keras_bert_impl.models.quantization_aware_classifier.QuantizationAwareClassifier": (
        "one fit and predict of a one-layer quantization-aware classifier: tracing its "
        "fake-quantized step and its integer forward is the time"
    )
}


def _params():
    """A param per docstring test, marked slow where SLOW names it."""
    missing = sorted(set(SLOW) - {test.name for test in DOCSTRING_TESTS})
    assert not missing, f"SLOW names docstrings that hold no example: {missing}"
    return [
        pytest.param(test, id=test.name, marks=[pytest.mark.slow] if test.name in SLOW else [])
        for test in DOCSTRING_TESTS
    ]


@pytest.mark.parametrize("test", _params())
def test_docstring_example(test, tmp_path, monkeypatch):
    (tmp_path / "data").symlink_to(DATA, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    test.globs = {**test.globs, **COMMON_NAMESPACE}
    report = []
    result = doctest.DocTestRunner(optionflags=OPTIONFLAGS).run(test, out=report.append, clear_globs=True)
    assert result.failed == 0, (
        f"{test.name} ({os.path.relpath(test.filename, REPO)}:{test.lineno + 1}):\n" + "".join(report)
    )
