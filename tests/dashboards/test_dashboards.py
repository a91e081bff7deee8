"""The dashboards as Grafana loads them: committed files current, data sources provisioned,
only contract metrics, panels laid out on the grid, and ``fabricops dashboards build``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from fabricops.cli.dashboards import app
from fabricops.dashboards import (
    DASHBOARDS,
    METRIC_NAMES,
    METRICS,
    build_all,
    dashboard_queries,
    dashboard_text,
)
from fabricops.dashboards.contract import label_names_in, metric_names_in
from fabricops.dashboards.provisioning import provisioning_files
from fabricops.dashboards.queries import resolve_promql, resolve_sql

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "dashboards" / "json"
PROVISIONING = ROOT / "dashboards" / "provisioning"
REBUILD = "out of date: run `fabricops dashboards build` from the repository's root and commit"
GRID_WIDTH = 24


def panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in model["panels"] if p["type"] != "row"]


def test_building_twice_gives_the_same_bytes() -> None:
    first = {name: dashboard_text(m) for name, m in build_all().items()}
    second = {name: dashboard_text(m) for name, m in build_all().items()}
    assert first == second
    assert all(text.endswith("}\n") for text in first.values())


@pytest.mark.parametrize("name", list(DASHBOARDS))
def test_the_committed_json_is_what_the_code_builds(name: str) -> None:
    path = COMMITTED / name
    assert path.is_file(), f"{path} is missing: {REBUILD}"
    assert path.read_text(encoding="utf-8") == dashboard_text(build_all()[name]), \
        f"{path} is {REBUILD}"


def test_no_stray_dashboard_files_are_committed() -> None:
    assert sorted(p.name for p in COMMITTED.glob("*.json")) == sorted(DASHBOARDS), REBUILD


@pytest.mark.parametrize("name", ["datasources/fabricops.yaml", "dashboards/fabricops.yaml"])
def test_the_committed_provisioning_is_what_the_code_writes(name: str) -> None:
    path = PROVISIONING / name
    assert path.is_file(), f"{path} is missing: {REBUILD}"
    assert path.read_text(encoding="utf-8") == provisioning_files()[name], f"{path} is {REBUILD}"


def provisioned_datasources() -> dict[str, dict[str, Any]]:
    document = yaml.safe_load((PROVISIONING / "datasources" / "fabricops.yaml").read_text())
    return {source["uid"]: source for source in document["datasources"]}


def test_the_data_sources_are_provisioned_as_the_deployment_expects() -> None:
    sources = provisioned_datasources()
    prometheus, postgres = sources["fabricops-prometheus"], sources["fabricops-postgres"]
    assert (prometheus["type"], prometheus["url"]) == ("prometheus", "http://prometheus:9090")
    assert postgres["url"] == "postgres:5432"
    assert postgres["user"] == "fabricops"
    assert postgres["jsonData"]["database"] == "fabricops"
    assert postgres["secureJsonData"]["password"] == "${POSTGRES_PASSWORD}"
    assert "password" not in postgres


def test_the_dashboard_provider_reads_the_mounted_json_folder() -> None:
    document = yaml.safe_load((PROVISIONING / "dashboards" / "fabricops.yaml").read_text())
    [provider] = document["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"


def test_every_dashboard_has_its_own_uid_and_title() -> None:
    models = list(build_all().values())
    uids = [m["uid"] for m in models]
    titles = [m["title"] for m in models]
    assert len(set(uids)) == len(uids) == 4
    assert len(set(titles)) == len(titles)
    assert all(8 <= len(uid) <= 40 for uid in uids)


@pytest.mark.parametrize("name", list(DASHBOARDS))
def test_every_panel_reads_a_provisioned_data_source(name: str) -> None:
    sources = provisioned_datasources()
    model = build_all()[name]
    for panel in panels(model):
        assert panel["targets"], f"{name}: panel {panel['title']!r} has no query"
        for ref in [panel["datasource"], *(t["datasource"] for t in panel["targets"])]:
            assert ref["uid"] in sources, f"{name}: {panel['title']!r} reads {ref}"
            assert ref["type"] == sources[ref["uid"]]["type"]
    for variable in model["templating"]["list"]:
        assert variable["datasource"]["uid"] in sources


@pytest.mark.parametrize("name", list(DASHBOARDS))
def test_panels_have_unique_ids_and_titles_and_sit_on_the_grid(name: str) -> None:
    model = build_all()[name]
    ids = [p["id"] for p in model["panels"]]
    titles = [p["title"] for p in panels(model)]
    assert len(set(ids)) == len(ids)
    assert len(set(titles)) == len(titles), f"{name}: two panels share a title"
    cells: set[tuple[int, int]] = set()
    for panel in model["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] + pos["w"] <= GRID_WIDTH, f"{name}: {panel['title']!r} overflows"
        covered = {(x, y) for x in range(pos["x"], pos["x"] + pos["w"])
                   for y in range(pos["y"], pos["y"] + pos["h"])}
        assert not covered & cells, f"{name}: {panel['title']!r} overlaps another panel"
        cells |= covered


def test_queries_use_only_contract_metrics_and_their_labels() -> None:
    queries = [q for q in dashboard_queries() if q.datasource == "prometheus"]
    assert queries
    for query in queries:
        names = metric_names_in(query.expression)
        where = f"{query.dashboard_uid} / {query.panel_title}: {query.expression}"
        assert names, f"{where} reads no fabricops metric"
        assert names <= METRIC_NAMES, f"{where} reads {sorted(names - METRIC_NAMES)}"
        labels = {label for metric in names for label in METRICS[metric]}
        assert label_names_in(query.expression) <= labels, f"{where}: unknown label"


def test_variables_and_legends_use_contract_metrics_and_labels() -> None:
    for model in build_all().values():
        for variable in model["templating"]["list"]:
            [metric] = metric_names_in(variable["query"])
            assert metric in METRIC_NAMES
            assert variable["query"] == f"label_values({metric}, {variable['name']})"
            assert variable["name"] in METRICS[metric]
        for panel in panels(model):
            for target in panel["targets"]:
                legend = target.get("legendFormat", "")
                used = set(legend.replace("}}", "{{").split("{{")[1::2])
                labels = {label for m in metric_names_in(target.get("expr", ""))
                          for label in METRICS[m]}
                assert used <= labels, f"{panel['title']!r}: legend {legend!r}"


def test_every_contract_metric_is_on_some_dashboard() -> None:
    used = set().union(*(metric_names_in(q.expression) for q in dashboard_queries()))
    assert sorted(METRIC_NAMES - used) == []


def test_the_timeline_reads_the_stores_tables() -> None:
    sql = [q for q in dashboard_queries() if q.datasource == "postgres"]
    assert {q.dashboard_uid for q in sql} == {"fabricops-rca-timeline"}
    text = " ".join(q.expression for q in sql)
    for table in ("diagnoses", "actions", "action_log"):
        assert f"FROM {table}" in text


def test_queries_name_the_macros_they_contain() -> None:
    by_title = {(q.dashboard_uid, q.panel_title): q for q in dashboard_queries()}
    assert by_title["fabricops-link-health", "Utilization"].macros == ("$link",)
    assert by_title["fabricops-overview", "Ingest rate"].macros == ("$__rate_interval",)
    assert by_title["fabricops-rca-timeline", "Actions"].macros == (
        "$__unixEpochNanoFrom", "$__unixEpochNanoTo")
    assert all(q.resolved().count("$") == 0 for q in by_title.values())


def test_macros_resolve_as_grafana_expands_them() -> None:
    assert resolve_promql('rate(x{link=~"$link"}[$__rate_interval])',
                          variables={"link": "a|b"}) == 'rate(x{link=~"a|b"}[1m])'
    assert resolve_promql('x{switch=~"${switch}"}') == 'x{switch=~".*"}'
    assert resolve_sql("WHERE $__unixEpochNanoFilter(l.ts_ns) AND c <= $__unixEpochNanoTo()",
                       start_ns=5, end_ns=9) == "WHERE l.ts_ns >= 5 AND l.ts_ns <= 9 AND c <= 9"
    assert resolve_sql("WHERE $__timeFilter(t)", start_ns=0, end_ns=86_400 * 10**9) == \
        "WHERE t BETWEEN '1970-01-01T00:00:00Z' AND '1970-01-02T00:00:00Z'"
    with pytest.raises(ValueError, match="__timeGroup"):
        resolve_sql("SELECT $__timeGroup(t, '1m')", start_ns=0, end_ns=1)
    with pytest.raises(ValueError, match="__interval"):
        resolve_promql("rate(x[$__interval])")


def test_build_writes_every_file_and_says_so(tmp_path: Path) -> None:
    out, provisioning = tmp_path / "json", tmp_path / "provisioning"
    result = CliRunner().invoke(app, ["build", "--out", str(out),
                                      "--provisioning", str(provisioning)])
    assert result.exit_code == 0, result.output
    for name, model in build_all().items():
        assert json.loads((out / name).read_text()) == model
        assert f"wrote {out / name}" in result.stdout
    for name, text in provisioning_files().items():
        assert (provisioning / name).read_text() == text
        assert f"wrote {provisioning / name}" in result.stdout


def test_build_into_a_file_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "json"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(app, ["build", "--out", str(blocker),
                                      "--provisioning", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {blocker}")
