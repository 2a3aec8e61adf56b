"""docs/benchmarks.md's speed tables and chart (bench/charts/speed_chart.py) say what the
results files hold: the page's tables are the ones the script makes from bench/results/ now,
a figure changed in a results file makes the check fail, and the chart has one panel per CPU
kind of cpu_peers.json."""

import json
import os
import shutil

from bench.charts import speed_chart
from tests.conftest import REPO


def _marked_tables(text):
    return text.split(speed_chart.BEGIN, 1)[1].split(speed_chart.END, 1)[0]


def test_the_page_tables_are_the_results_files():
    with open(speed_chart.PAGE, encoding="utf-8") as f:
        page = f.read()
    made = speed_chart.tables_markdown(speed_chart.load_records(), speed_chart.load_gpu_records())
    assert _marked_tables(page) == "\n" + made, (
        "docs/benchmarks.md's speed tables are out of date: make bench-chart"
    )
    assert speed_chart.main(["--check"]) == 0


def test_a_changed_figure_fails_the_check(tmp_path, capsys):
    results = tmp_path / "results"
    shutil.copytree(speed_chart.RESULTS, results)
    with open(results / "cpu_peers.json", encoding="utf-8") as f:
        peers = json.load(f)
    run = next(iter(peers["runs"].values()))
    run["runtimes"]["ours_fp32"]["sentences_per_second_summary"]["median"] *= 1.5
    with open(results / "cpu_peers.json", "w", encoding="utf-8") as f:
        json.dump(peers, f)
    assert speed_chart.main(["--check", "--results", str(results)]) == 1
    assert "docs/benchmarks.md: its speed tables differ" in capsys.readouterr().err


def test_every_table_figure_is_read_from_a_results_file():
    """Each row names the results file it was read from, and every CPU kind a results file
    records has its table (a kind's heading is the CPU's own description)."""
    records = speed_chart.load_records()
    tables = speed_chart.cpu_tables(records)
    kinds = {speed_chart.cpu_kind(record) for name, record in records if name[:-5] in speed_chart.ROWS}
    assert kinds - {None} <= set(tables)
    for rows in tables.values():
        for *_, name in rows:
            assert os.path.exists(os.path.join(speed_chart.RESULTS, name))
    assert len([name for name, _ in records if name == "cpu_peers.json"]) >= 3


def test_the_chart_has_a_panel_per_cpu_kind(tmp_path):
    records = speed_chart.load_records()
    figure = speed_chart.draw_chart(records, str(tmp_path / "chart.png"))
    kinds = [speed_chart.cpu_kind(record) for name, record in records if name == "cpu_peers.json"]
    titles = [ax.get_title(loc="left") for ax in figure.axes]
    assert len(titles) == len(kinds) and all(any(t.startswith(k) for t in titles) for k in kinds)
    with open(tmp_path / "chart.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert os.path.relpath(speed_chart.CHART, REPO) == os.path.join("docs", "images", "speed_by_cpu.png")


def test_a_page_without_the_markers_is_refused_in_one_line(tmp_path, capsys):
    page = tmp_path / "benchmarks.md"
    page.write_text("# Benchmarks\n\nno markers here\n", encoding="utf-8")
    assert speed_chart.main(["--check", "--page", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--page {page}" in err and speed_chart.BEGIN in err
    assert page.read_text(encoding="utf-8") == "# Benchmarks\n\nno markers here\n"
