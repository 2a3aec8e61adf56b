"""Each measured figure is stated once, in its results file, and cited elsewhere (issue 29):
the export report page is its JSON rendered, the full-int8 table of bench/README.md is
bench/results/full_int8_denylist.json at the precision shown, and the README cites the
report instead of copying its table."""

import json
import os

from keras_bert_impl_export.report import report_markdown

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _read(*parts):
    with open(os.path.join(REPO, *parts), encoding="utf-8") as f:
        return f.read()


def test_the_export_report_page_is_its_json_rendered():
    report = json.loads(_read("docs", "export_report.json"))
    assert report_markdown(report) == _read("docs", "export_report.md")
    assert "| tflite_int8_mixed |" not in _read("README.md")  # cited (docs/export_report.md), not copied


def test_the_int8_mixed_table_is_the_results_file():
    variants = json.loads(_read("bench", "results", "full_int8_denylist.json"))["variants"]
    lines = _read("bench", "README.md").split("\n")
    header = lines.index(
        "| variant | MB | agreement with Keras | accuracy | max abs logit diff | batch-1 p50 ms "
        "| ratio to float32 |"
    )
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[header + 2 : header + 10]]
    # The table's rows, in order, are these variants of the results file.
    names = (
        "float32",
        "dynamic_int8",
        "all_int8",
        "fc_bmm_gather",
        "fc_gather",
        "fc_gather_ffn_out_float",
        "fc_gather_ffn_attn_float",
        "default",
    )
    for name, row in zip(names, rows, strict=True):
        v = variants[name]
        assert row[1:4] == [
            f"{v['size_bytes'] / 1e6:.1f}",
            f"{v['top_label_agreement']:.4f}",
            f"{v['accuracy']:.4f}",
        ], (name, row)
        difference = v["max_abs_logit_difference"]
        assert row[4] == (f"{difference:.0e}" if difference < 1e-3 else f"{difference:.3f}"), (name, row)
        assert row[5:] == [
            f"{v['batch1_p50_ms']:.1f}",
            f"{v['batch1_paired_median_ratio_to_float32']:.2f}",
        ], (name, row)
