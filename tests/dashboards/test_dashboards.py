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
    BUILD_DIRS,
    DASHBOARDS,
    METRIC_NAMES,
    METRICS,
    STORE_KINDS,
    StoreKind,
    build_all,
    dashboard_queries,
    dashboard_text,
)
from fabricops.dashboards.contract import label_names_in, metric_names_in
from fabricops.dashboards.provisioning import provisioning_files
from fabricops.dashboards.queries import resolve_promql, resolve_sql, resolve_sqlite

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "dashboards" / "json"
PROVISIONING = ROOT / "dashboards" / "provisioning"
BUILD = {"postgresql": "fabricops dashboards build",
         "sqlite": "fabricops dashboards build --store sqlite"}
GRID_WIDTH = 24
PROVISIONING_FILES = ["datasources/fabricops.yaml", "dashboards/fabricops.yaml"]


def rebuild(store: StoreKind) -> str:
    return f"out of date: run `{BUILD[store]}` from the repository's root and commit"


def panels(model: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in model["panels"] if p["type"] != "row"]


def test_building_twice_gives_the_same_bytes() -> None:
    first = {name: dashboard_text(m) for name, m in build_all().items()}
    second = {name: dashboard_text(m) for name, m in build_all().items()}
    assert first == second
    assert all(text.endswith("}\n") for text in first.values())


@pytest.mark.parametrize("store", STORE_KINDS)
@pytest.mark.parametrize("name", list(DASHBOARDS))
def test_the_committed_json_is_what_the_code_builds(store: StoreKind, name: str) -> None:
    path = ROOT / BUILD_DIRS[store][0] / name
    assert path.is_file(), f"{path} is missing: {rebuild(store)}"
    assert path.read_text(encoding="utf-8") == dashboard_text(build_all(store)[name]), \
        f"{path} is {rebuild(store)}"


@pytest.mark.parametrize("store", STORE_KINDS)
def test_no_stray_dashboard_files_are_committed(store: StoreKind) -> None:
    folder = ROOT / BUILD_DIRS[store][0]
    assert sorted(p.name for p in folder.glob("*.json")) == sorted(DASHBOARDS), rebuild(store)


@pytest.mark.parametrize("store", STORE_KINDS)
@pytest.mark.parametrize("name", PROVISIONING_FILES)
def test_the_committed_provisioning_is_what_the_code_writes(store: StoreKind, name: str) -> None:
    path = ROOT / BUILD_DIRS[store][1] / name
    assert path.is_file(), f"{path} is missing: {rebuild(store)}"
    assert path.read_text(encoding="utf-8") == provisioning_files(store)[name], \
        f"{path} is {rebuild(store)}"


def test_the_postgresql_set_is_where_the_deployment_mounts_it() -> None:
    assert ROOT / BUILD_DIRS["postgresql"][0] == COMMITTED
    assert ROOT / BUILD_DIRS["postgresql"][1] == PROVISIONING


def test_only_the_timeline_differs_between_store_kinds() -> None:
    postgresql, sqlite = build_all("postgresql"), build_all("sqlite")
    assert [n for n in DASHBOARDS if postgresql[n] != sqlite[n]] == [
        "rca-remediation-timeline.json"]


def provisioned_datasources(store: StoreKind = "postgresql") -> dict[str, dict[str, Any]]:
    path = ROOT / BUILD_DIRS[store][1] / "datasources" / "fabricops.yaml"
    document = yaml.safe_load(path.read_text())
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


def test_the_sqlite_data_source_opens_the_store_read_only_through_the_plugin() -> None:
    sources = provisioned_datasources("sqlite")
    assert sorted(sources) == ["fabricops-prometheus", "fabricops-sqlite"]
    sqlite = sources["fabricops-sqlite"]
    assert (sqlite["type"], sqlite["access"]) == ("frser-sqlite-datasource", "proxy")
    assert sqlite["jsonData"] == {"path": "${FABRICOPS_SQLITE_PATH}", "pathPrefix": "file:",
                                  "pathOptions": "mode=ro"}
    assert "url" not in sqlite
    assert "secureJsonData" not in sqlite
    assert sources["fabricops-prometheus"] == provisioned_datasources()["fabricops-prometheus"]


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


@pytest.mark.parametrize("store", STORE_KINDS)
@pytest.mark.parametrize("name", list(DASHBOARDS))
def test_every_panel_reads_a_provisioned_data_source(store: StoreKind, name: str) -> None:
    sources = provisioned_datasources(store)
    model = build_all(store)[name]
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


@pytest.mark.parametrize("store", STORE_KINDS)
def test_the_timeline_reads_the_stores_tables(store: StoreKind) -> None:
    sql = [q for q in dashboard_queries(store) if q.datasource != "prometheus"]
    assert {q.datasource for q in sql} == {"postgres" if store == "postgresql" else "sqlite"}
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
    on_sqlite = {(q.dashboard_uid, q.panel_title): q for q in dashboard_queries("sqlite")}
    assert on_sqlite["fabricops-rca-timeline", "Incident onsets per minute"].macros == (
        "$__from", "$__to", "$__unixEpochGroupSeconds")
    assert all(q.resolved().count("$") == 0 for q in on_sqlite.values())


def test_macros_resolve_as_grafana_expands_them() -> None:
    assert resolve_promql('rate(x{link=~"$link"}[$__rate_interval])',
                          variables={"link": "a|b"}) == 'rate(x{link=~"a|b"}[1m])'
    assert resolve_promql('x{switch=~"${switch}"}') == 'x{switch=~".*"}'
    assert resolve_sql("WHERE $__unixEpochNanoFilter(l.ts_ns) AND c <= $__unixEpochNanoTo()",
                       start_ns=5, end_ns=9) == "WHERE l.ts_ns >= 5 AND l.ts_ns <= 9 AND c <= 9"
    assert resolve_sql("WHERE $__timeFilter(t)", start_ns=0, end_ns=86_400 * 10**9) == \
        "WHERE t BETWEEN '1970-01-01T00:00:00Z' AND '1970-01-02T00:00:00Z'"
    assert resolve_sql("$__timeFilter(t)", start_ns=1_500_000_000, end_ns=2 * 10**9) == \
        "t BETWEEN '1970-01-01T00:00:01.5Z' AND '1970-01-01T00:00:02Z'"
    with pytest.raises(ValueError, match="__timeGroup"):
        resolve_sql("SELECT $__timeGroup(t, '1m')", start_ns=0, end_ns=1)
    with pytest.raises(ValueError, match="__interval"):
        resolve_promql("rate(x[$__interval])")


def test_sqlite_queries_resolve_as_grafana_and_the_plugin_expand_them() -> None:
    start, end = 1_700_000_000_123_456_789, 1_700_000_060_999_000_000
    assert resolve_sqlite("t >= $__from * 1000000 AND t <= ${__to}", start_ns=start,
                          end_ns=end) == "t >= 1700000000123 * 1000000 AND t <= 1700000060999"
    assert resolve_sqlite("s BETWEEN ${__from:date:seconds} AND ${__to:date:seconds}",
                          start_ns=start, end_ns=end) == "s BETWEEN 1700000000 AND 1700000060"
    assert resolve_sqlite("SELECT $__unixEpochGroupSeconds(ts_ns / 1000000000, 60) AS time",
                          start_ns=0, end_ns=1) == \
        "SELECT cast((ts_ns / 1000000000 / 60) as int) * 60 AS time"
    assert resolve_sqlite("$__unixEpochGroupSeconds(t, 10, NULL)", start_ns=0, end_ns=1) == \
        "cast((t / 10) as int) * 10"
    for unknown in ("WHERE $__unixEpochNanoFilter(t)", "WHERE $__timeFilter(t)",
                    "$__unixEpochGroupSeconds(t, 10, 0)", "WHERE d = '$device'",
                    "WHERE t > ${__from:date:iso}"):
        with pytest.raises(ValueError, match=r"resolution|gap filling"):
            resolve_sqlite(unknown, start_ns=0, end_ns=1)


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


def test_build_for_sqlite_writes_the_sqlite_set_where_the_repository_keeps_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["build", "--store", "sqlite"])
    assert result.exit_code == 0, result.output
    out, provisioning = BUILD_DIRS["sqlite"]
    for name, model in build_all("sqlite").items():
        assert json.loads((out / name).read_text()) == model
    for name, text in provisioning_files("sqlite").items():
        assert (provisioning / name).read_text() == text
    assert not Path("dashboards/json").exists()  # the PostgreSQL set is left alone


def test_build_into_a_file_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "json"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(app, ["build", "--out", str(blocker),
                                      "--provisioning", str(tmp_path / "p")])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {blocker}")
