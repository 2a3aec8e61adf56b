"""Packaging for keras_bert_impl.

Runtime pins follow ../shared/STACK.md: TensorFlow 2.20 with its matching
tensorflow-text, Keras 3 on the TensorFlow backend. tf-models-official is a
runtime dependency only because the Model Garden importer reads its encoders;
our model code never imports it (or tf_keras).
"""

from setuptools import find_packages, setup

setup(
    name="keras_bert_impl",
    version="0.1.0",
    description="BERT built from its parts as Keras 3 layers, with verified checkpoint import",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.11,<3.14",
    # The export wing lives in the top-level export/ folder (the product card's layout) and
    # installs under a namespaced name, never as a generic top-level `export` module.
    # keras_bert_lite (an export folder's classifier without TensorFlow) lives beside it.
    packages=find_packages(include=["keras_bert_impl", "keras_bert_impl.*"])
    + find_packages(
        "export",
        include=[
            "keras_bert_impl_export",
            "keras_bert_impl_export.*",
            "keras_bert_lite",
            "keras_bert_lite.*",
        ],
    ),
    package_dir={
        "keras_bert_impl_export": "export/keras_bert_impl_export",
        "keras_bert_lite": "export/keras_bert_lite",
    },
    package_data={"keras_bert_lite": ["bert_unicode.txt"]},
    install_requires=[
        "tensorflow==2.20.0",
        "tensorflow-text==2.20.1",
        "keras==3.15.1",
        "tf-models-official==2.20.0",
        "ai-edge-litert==2.3.0",
        "safetensors==0.8.0",
        # `kbert export --formats huggingface` writes tokenizer.json with Hugging Face's own library.
        "tokenizers==0.23.3",
        "numpy<2.3",
        # TensorFlow asks for ml_dtypes>=0.5.1,<1; 0.7.0 spends about 1 CPU-second of every process's
        # start registering its types' NumPy loops (PyUFunc_AddLoop scans the loops already there, so
        # the cost grows with their square): `import ml_dtypes` 1.03 s user against 0.11 s for 0.6.0
        # on the 2-core AVX2 EPYC, and every `kbert` command and test process imports it.
        "ml_dtypes==0.6.0",
        # The export wing: TF Serving's PredictionLog protos for the warm-up requests, and
        # the report's chart (both already in tf-models-official's tree; pinned here).
        "tensorflow-serving-api==2.20.0",
        "matplotlib==3.11.2",
        # The TFLite metadata writer builds its flatbuffer directly (TensorFlow brings it too).
        "flatbuffers==25.12.19",
        # `kbert index`'s approximate search (HNSW) for large sets: Meta's faiss, CPU wheels.
        "faiss-cpu==1.15.1",
        # `kbert serve`: TF Serving's REST API on Starlette's routing and uvicorn's HTTP/1.1
        # server (graceful shutdown), with Prometheus' own client for the metrics page.
        "starlette==1.10.0",
        "uvicorn==0.54.0",
        # uvicorn's fast pair (its "standard" extra): HTTP parsed by llhttp in C, the event loop on
        # libuv; the one-client overhead of `kbert serve` (bench/perf/serve_overhead.py).
        "httptools==0.9.0",
        "uvloop==0.23.0; sys_platform != 'win32'",
        "prometheus-client==0.26.0",
        # `--runner` of `kbert pretrain-data`, `kbert predict --file` and `kbert embed`: Apache Beam
        # runs the same algorithm on the DirectRunner here or on Dataflow, Flink or Spark. A runtime
        # dependency because those flags are part of the installed CLI; it is imported only when
        # a --runner other than the default one-process path is asked for.
        "apache-beam==2.77.0",
    ],
    extras_require={
        "dev": [
            "pytest==8.4.2",
            # make test runs on both cores (-n 2): about half the wall time on the 2-core CI machine.
            "pytest-xdist==3.8.0",
            "hypothesis==6.155.2",
            # Lint and format (ruff.toml); make test runs both checks.
            "ruff==0.17.6",
            # Google's original modeling.py, the source model of the TF1 checkpoint test.
            "bert-tensorflow==1.0.4",
            "tf-slim==1.1.0",
            # gs:// paths of the Beam commands, tested for real (tests/pipelines/test_cloud_paths.py):
            # Google's Cloud Storage client, which Beam's GCSFileSystem is built on (a user of gs://
            # installs it too, or apache-beam[gcp]), and a Cloud Storage emulator that serves its
            # JSON API on 127.0.0.1 (STORAGE_EMULATOR_HOST).
            "google-cloud-storage==3.17.1",
            "gcp-storage-emulator==2026.7.19",
        ],
        # Peers measured by bench/; kept out of the runtime install.
        "bench": [
            "keras-hub==0.32.0",
            # Reads R's serialization: the Jane Austen novels of r-cran-janeaustenr
            # (bench/corpora/austen_corpus.py).
            "rdata==1.1.0",
        ],
    },
    entry_points={"console_scripts": ["kbert=keras_bert_impl.cli:main"]},
)
