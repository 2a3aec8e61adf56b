"""Benchmarks and quality studies of keras_bert_impl, run as modules from the repository
root (`python -m bench.perf.backbone_forward`, or the make targets in bench/README.md).

    common.py      paths, machine_info, write_report (the results files' common header)
    perf/          speed and memory benchmarks: what `make bench` runs
    experiments/   quality studies, one `make experiment-...` target each
    corpora/       corpus preparation shared by both: the MR split, the Austen novels
    reference/     the PyTorch reference, run in its own venv (.venv-torch)
    results/       the committed results files

bench imports only keras_bert_impl's public API.
"""
