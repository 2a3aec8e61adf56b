"""gs:// inputs, models and outputs of the Beam commands, for real against a Cloud Storage
emulator on 127.0.0.1 (gcp-storage-emulator, a server of the JSON API that google-cloud-storage
and so Beam's GCSFileSystem talk to when STORAGE_EMULATOR_HOST is set). The files are put in and
read back with google-cloud-storage's own client, not through keras_bert_impl.file_paths."""

import json
import socket

import numpy as np
import pytest

from tests.pipelines.conftest import review_documents, write_text_shards
from tests.pipelines.helpers import kbert, records
from tests.pipelines.test_inference_pipeline import sentences_file, tiny_classifier  # noqa: F401 (fixture)
from tests.pipelines.test_pretraining_pipeline import pretrain_data

pytest.importorskip("google.cloud.storage", reason="the dev extra's google-cloud-storage (make install)")
pytest.importorskip("gcp_storage_emulator", reason="the dev extra's gcp-storage-emulator (make install)")

BUCKET = "kbert-test"


@pytest.fixture(scope="module")
def emulator():
    from gcp_storage_emulator.server import create_server

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(emulator, monkeypatch):
    """The emulator's bucket, emptied; the environment (which Beam's worker processes inherit)
    points google-cloud-storage at it, and google-auth's metadata-server probe at nothing; a
    look-up of any other host fails the test."""
    from google.cloud import storage

    from apache_beam.internal.gcp import auth

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator)
    # No credentials: Beam's client is then anonymous, which the emulator takes. Beam learns that
    # only after ~30 s of retried look-ups per process; this process is told at once. (A worker
    # process would retry on its own: these tests run Beam's workers in this process.)
    monkeypatch.setattr(auth._Credentials, "_credentials_init", True)
    monkeypatch.setattr(auth._Credentials, "_credentials", None)
    lookup = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"a look-up of {host!r}: these tests reach 127.0.0.1 only")
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    client = storage.Client.create_anonymous_client()
    bucket = client.bucket(BUCKET)
    for blob in list(client.list_blobs(BUCKET)):
        blob.delete()
    return bucket


def upload(bucket, local, name):
    bucket.blob(name).upload_from_filename(str(local))
    return f"gs://{BUCKET}/{name}"


def download(bucket, prefix, folder):
    """Every object under `prefix` into `folder`, by its name after the prefix."""
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for blob in bucket.client.list_blobs(BUCKET, prefix=prefix):
        name = blob.name[len(prefix) :]
        blob.download_to_filename(str(folder / name))
        names.append(name)
    return sorted(names)


def test_file_paths_on_gcs(bucket, tmp_path):
    from keras_bert_impl import file_paths

    for name in ("run/model.keras", "run/task.json", "run/checkpoints/ckpt-1", "in/a&b.txt", "in/c.txt"):
        bucket.blob(name).upload_from_string(name.encode())
    root = f"gs://{BUCKET}"
    assert file_paths.expand(f"{root}/in/*.txt") == [f"{root}/in/a&b.txt", f"{root}/in/c.txt"]
    assert file_paths.expand(f"{root}/in/a&b.txt") == [f"{root}/in/a&b.txt"]
    assert file_paths.expand(f"{root}/in/none-*.txt") == [] == file_paths.expand(f"{root}/in/none.txt")
    assert file_paths.is_folder(f"{root}/run") and not file_paths.is_folder(f"{root}/run/task.json")
    assert file_paths.listdir(f"{root}/run") == ["model.keras", "task.json"]
    assert file_paths.stamp(f"{root}/run/task.json")[0] == len(b"run/task.json")
    assert file_paths.stamp(f"{root}/run") is None
    # A run folder comes with the files in it, not its subfolders; a file with the .json beside it.
    local = file_paths.local_copy(f"{root}/run")
    assert sorted(p.name for p in __import__("pathlib").Path(local).iterdir()) == ["model.keras", "task.json"]
    model = file_paths.local_copy(f"{root}/run/model.keras")
    assert open(model, "rb").read() == b"run/model.keras" and model.endswith("model.keras")
    file_paths.replace(f"{root}/in/c.txt", f"{root}/in/d.txt")
    file_paths.replace(f"{root}/in/d.txt", f"{root}/in/a&b.txt")  # onto a file: replaces it
    assert [b.name for b in bucket.client.list_blobs(BUCKET, prefix="in/")] == ["in/a&b.txt"]
    assert bucket.blob("in/a&b.txt").download_as_bytes() == b"in/c.txt"
    file_paths.remove_tree(f"{root}/in")
    assert not list(bucket.client.list_blobs(BUCKET, prefix="in/"))


def test_pretrain_data_from_gcs_to_gcs_equals_the_local_command(bucket, vocab_path, tmp_path):
    """Text shards and the vocabulary in the bucket, the TFRecord shards written there: the
    examples of the one-process command on the same files here, byte for byte."""
    files = write_text_shards(tmp_path / "in", review_documents(40), files=2)
    for path in sorted((tmp_path / "in").iterdir()):
        upload(bucket, path, f"corpus/{path.name}")
    vocab = upload(bucket, vocab_path, "vocab/vocab.txt")
    local = tmp_path / "local"
    assert pretrain_data(files, vocab_path, local, "--randomness", "keyed") == 0
    out = f"gs://{BUCKET}/pretraining"
    assert pretrain_data(f"gs://{BUCKET}/corpus/shard-*.txt", vocab, out, "--runner", "direct") == 0
    names = download(bucket, "pretraining/", tmp_path / "back")
    assert names == sorted(p.name for p in local.iterdir())  # no staging folder or temporary file left
    expected = records(local)
    assert sum(expected.values()) > 300 and records(tmp_path / "back") == expected
    metadata = json.loads((tmp_path / "back" / "pretraining.json").read_text())
    assert metadata["examples"] == sum(expected.values())


@pytest.mark.slow  # ~26 s
def test_embed_and_predict_from_gcs(bucket, tiny_classifier, tmp_path, capsys):  # noqa: F811 (fixture)
    """The model, the text and the output folder in the bucket; `kbert embed` and `kbert predict
    --file` on the DirectRunner, whose worker copies the model from the bucket: the vectors and
    rows of the one-process commands on local copies."""
    texts = sentences_file(tmp_path, 120)
    text = upload(bucket, texts, "text/mr.txt")
    model = upload(bucket, tiny_classifier, "model/classifier.keras")
    flags = ("--seq-len", 64)
    assert kbert("embed", texts, "--model", tiny_classifier, *flags, "--output", tmp_path / "one.npy") == 0
    runner = ("--runner", "direct", "--lines-per-shard", 50)
    out = f"gs://{BUCKET}/embeddings"
    assert kbert("embed", text, "--model", model, *flags, "--output", out, *runner) == 0
    download(bucket, "embeddings/", tmp_path / "embeddings")
    manifest = json.loads((tmp_path / "embeddings" / "manifest.json").read_text())
    assert [s["input"] for s in manifest["shards"]] == [text] * 3
    vectors = np.concatenate([np.load(tmp_path / "embeddings" / s["file"]) for s in manifest["shards"]])
    np.testing.assert_allclose(vectors, np.load(tmp_path / "one.npy"), rtol=0, atol=1e-5)

    # kbert index of those shards where they lie, and of the text in the bucket in one process:
    # the index of the local text, with the model copied down from the bucket.
    assert kbert("index", texts, "--model", tiny_classifier, *flags, "--output", tmp_path / "local") == 0
    for source, name in ((out, "shards"), (text, "text")):
        assert kbert("index", source, "--model", model, *flags, "--output", tmp_path / name) == 0
        got = np.load(tmp_path / name / "vectors.npy")
        np.testing.assert_allclose(got, np.load(tmp_path / "local" / "vectors.npy"), rtol=0, atol=1e-5)
        assert (tmp_path / name / "texts.jsonl").read_text() == (
            tmp_path / "local" / "texts.jsonl"
        ).read_text()
        assert json.loads((tmp_path / name / "manifest.json").read_text())["encoder"]["model"] == model
    # kbert embed in one process of the text and model in the bucket; its output stays here.
    assert kbert("embed", text, "--model", model, *flags, "--output", tmp_path / "in_one.npy") == 0
    np.testing.assert_allclose(
        np.load(tmp_path / "in_one.npy"), np.load(tmp_path / "one.npy"), rtol=0, atol=0
    )
    capsys.readouterr()
    for command, source in (("index", out), ("embed", text)):
        target = f"gs://{BUCKET}/{command}.npy"
        assert kbert(command, source, "--model", model, *flags, "--output", target) == 2
        err = capsys.readouterr().err
        assert f"--output '{target}' is a cloud path" in err and len(err.strip().splitlines()) == 1, err

    capsys.readouterr()  # kbert embed's report
    assert kbert("predict", "--model", tiny_classifier, "--file", texts, *flags, "--json") == 0
    expected = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    out = f"gs://{BUCKET}/predictions"
    assert kbert("predict", "--model", model, "--file", text, *flags, "--output", out, *runner) == 0
    folder = tmp_path / "predictions"
    names = download(bucket, "predictions/", folder)
    assert names == ["manifest.json"] + [f"predictions-{i:05d}-of-00003.jsonl" for i in range(3)]
    text_of = {name: (folder / name).read_text(encoding="utf-8") for name in names[1:]}
    rows = [json.loads(line) for name in names[1:] for line in text_of[name].split("\n")[:-1]]
    assert [r["label"] for r in rows] == [r["label"] for r in expected]
    got = np.array([r["probability"] or 0 for r in rows])
    np.testing.assert_allclose(got, [r["probability"] or 0 for r in expected], rtol=0, atol=1e-5)


def test_bad_gcs_inputs_are_one_line_before_any_worker(bucket, tiny_classifier, tmp_path, capsys):  # noqa: F811 (fixture)
    """A glob matching no object, a model that is not there, an output folder already holding
    shards: one line each, exit 2, and nothing written."""
    text = upload(bucket, sentences_file(tmp_path, 10), "text/mr.txt")
    model = upload(bucket, tiny_classifier, "model/classifier.keras")
    bucket.blob("done/manifest.json").upload_from_string(b"{}")
    root = f"gs://{BUCKET}"
    runner = ("--seq-len", 64, "--runner", "direct")
    cases = [
        (
            ("embed", f"{root}/text/none-*.txt", "--model", model),
            "out",
            f"FILE '{root}/text/none-*.txt' matches",
        ),
        (
            ("embed", f"{root}/text/none.txt", "--model", model),
            "out",
            f"FILE '{root}/text/none.txt': no such",
        ),
        (("embed", text, "--model", f"{root}/no-model"), "out", f"{root}/no-model"),
        (("predict", "--file", text, "--model", f"{root}/no-run"), "out", f"{root}/no-run"),
        (("predict", "--file", text, "--model", model), "done", "already holds shards"),
        (
            ("pretrain-data", f"{root}/corpus/none-*.txt", "--vocab", tmp_path / "v.txt"),
            "out",
            f"Input file(s) not found: ['{root}/corpus/none-*.txt']",
        ),
    ]
    for argv, output, message in cases:
        extra = runner[2:] if argv[0] == "pretrain-data" else runner
        code = kbert(*argv, *extra, "--output", f"{root}/{output}")
        err = capsys.readouterr().err
        assert code == 2 and message in err and len(err.strip().splitlines()) == 1, (argv, err)
    assert [b.name for b in bucket.client.list_blobs(BUCKET)] == [
        "done/manifest.json",
        "model/classifier.keras",
        "text/mr.txt",
    ]
