"""Small builders every fabricops dashboard shares, on top of grafana-foundation-sdk.

Panels read Prometheus (``PROMETHEUS``) or the store, through the data source
of its kind (``STORE_SOURCES``): Grafana's PostgreSQL data source, or the
SQLite data source plugin ``frser-sqlite-datasource``. Their uids are the ones
``provisioning.py`` writes. The SDK has no builder for either SQL target, so
``sql`` builds it as the raw model Grafana stores for that data source.
``render`` turns a dashboard builder into the JSON model with panel ids
numbered in order, the same on every run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog import variants as cogvariants
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.cog.runtime import UnknownDataquery
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as model
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

PROMETHEUS = model.DataSourceRef(type_val="prometheus", uid="fabricops-prometheus")
POSTGRES = model.DataSourceRef(type_val="grafana-postgresql-datasource", uid="fabricops-postgres")
SQLITE = model.DataSourceRef(type_val="frser-sqlite-datasource", uid="fabricops-sqlite")
TAG = "fabricops"
StoreKind = Literal["postgresql", "sqlite"]
"""The kind of database the store is; the dashboards are built for one kind."""
STORE_KINDS: Final[tuple[StoreKind, ...]] = ("postgresql", "sqlite")
STORE_SOURCES: Final[Mapping[StoreKind, model.DataSourceRef]] = MappingProxyType(
    {"postgresql": POSTGRES, "sqlite": SQLITE})
"""The data source each store kind is read through."""
PanelBuilder = cogbuilder.Builder[model.Panel]
Section = tuple[str, Sequence[PanelBuilder]]
"""A row's title and the panels under it, laid left to right, then top to bottom."""
Steps = Sequence[tuple[str, float | None]]
"""Threshold steps, lowest first: (colour, value from which it applies; None for the base)."""


class SqlQuery(cogbuilder.Builder[cogvariants.Dataquery]):
    """A raw-SQL target of the store's data source, as Grafana stores it.

    PostgreSQL: ``rawSql`` with ``format`` ``table`` or ``time_series``.
    SQLite (frser-sqlite-datasource): ``rawQueryText`` (the plugin's frontend
    interpolates it into ``queryText``), ``queryType`` ``table`` or
    ``time series``, and ``timeColumns``, the columns whose numbers (seconds
    since the epoch) the plugin turns into times.
    """

    def __init__(self, store: StoreKind, raw_sql: str, *, ref_id: str, time_series: bool,
                 time_columns: Sequence[str] = ()) -> None:
        source = STORE_SOURCES[store]
        text = " ".join(raw_sql.split())
        common_model: dict[str, object] = {
            "datasource": {"type": source.type_val, "uid": source.uid}, "refId": ref_id}
        if store == "postgresql":
            self._model = common_model | {
                "editorMode": "code", "format": "time_series" if time_series else "table",
                "rawQuery": True, "rawSql": text}
        else:
            self._model = common_model | {
                "queryText": text, "queryType": "time series" if time_series else "table",
                "rawQueryText": text, "timeColumns": list(time_columns)}

    def build(self) -> cogvariants.Dataquery:
        return UnknownDataquery(dict(self._model))


def prom(expr: str, legend: str = "", *, ref_id: str = "A", instant: bool = False,
         as_table: bool = False) -> prometheus.Dataquery:
    """A PromQL target; ``instant`` for the value at the end of the range only."""
    query = (prometheus.Dataquery().expr(" ".join(expr.split())).ref_id(ref_id)
             .datasource(PROMETHEUS))
    if legend:
        query = query.legend_format(legend)
    if instant:
        query = query.instant()
    if as_table:
        query = query.format(PromQueryFormat.TABLE)
    return query


def sql(store: StoreKind, raw_sql: str, *, ref_id: str = "A", time_series: bool = False,
        time_columns: Sequence[str] = ()) -> SqlQuery:
    """A target of the ``store`` data source; ``time_series`` wants columns ``time``,
    ``metric``, ``value``. ``time_columns`` name the SQLite columns that hold times."""
    return SqlQuery(store, raw_sql, ref_id=ref_id, time_series=time_series,
                    time_columns=time_columns)


def thresholds(steps: Steps) -> dashboard.ThresholdsConfig:
    return dashboard.ThresholdsConfig().mode(model.ThresholdsMode.ABSOLUTE).steps(
        [model.Threshold(value=value, color=colour) for colour, value in steps])


def timeseries_panel(title: str, description: str, *targets: cogbuilder.Builder[
                         cogvariants.Dataquery],
                     unit: str = "short", width: int = 12, height: int = 8,
                     stacked: bool = False, bars: bool = False, min_value: float | None = 0,
                     max_value: float | None = None,
                     steps: Steps = (("green", None),),
                     datasource: model.DataSourceRef = PROMETHEUS,
                     display_name: str | None = None) -> timeseries.Panel:
    """A time series panel with a table legend (last and max) and a shared tooltip;
    ``display_name`` names each series (Grafana's field display name template)."""
    panel = (timeseries.Panel().title(title).description(description).datasource(datasource)
             .targets(list(targets)).unit(unit).span(width).height(height)
             .fill_opacity(60 if bars else 10).thresholds(thresholds(steps))
             .legend(common_builders.VizLegendOptions().show_legend(True)
                     .display_mode(common.LegendDisplayMode.TABLE)
                     .placement(common.LegendPlacement.BOTTOM).calcs(["lastNotNull", "max"]))
             .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
                      .sort(common.SortOrder.DESCENDING)))
    if display_name is not None:
        panel = panel.display_name(display_name)
    if bars:
        panel = panel.draw_style(common.GraphDrawStyle.BARS)
    if stacked:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    if min_value is not None:
        panel = panel.min(min_value)
    if max_value is not None:
        panel = panel.max(max_value)
    return panel


def stat_panel(title: str, description: str, expr: str, *, legend: str = "",
               unit: str = "short", width: int = 4, height: int = 4,
               steps: Steps = (("green", None),), graph: bool = False) -> stat.Panel:
    """The last value of ``expr``, coloured by ``steps``; ``graph`` adds a sparkline of the
    range (else the query is instant)."""
    return (stat.Panel().title(title).description(description).datasource(PROMETHEUS)
            .with_target(prom(expr, legend, instant=not graph)).unit(unit).span(width)
            .height(height).thresholds(thresholds(steps))
            .color_mode(common.BigValueColorMode.BACKGROUND)
            .graph_mode(common.BigValueGraphMode.AREA if graph else common.BigValueGraphMode.NONE)
            .text_mode(common.BigValueTextMode.AUTO)
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"])
                            .values(False)))


def table_panel(title: str, description: str, target: cogbuilder.Builder[cogvariants.Dataquery],
                *, datasource: model.DataSourceRef, unit: str = "short", width: int = 24,
                height: int = 8, sort_by: str | None = None,
                descending: bool = True) -> table.Panel:
    """A table of the target's rows, sorted by the column ``sort_by`` if given."""
    panel = (table.Panel().title(title).description(description).datasource(datasource)
             .with_target(target).unit(unit).span(width).height(height).show_header(True)
             .cell_height(common.TableCellHeight.SM))
    if sort_by:
        panel = panel.sort_by([common_builders.TableSortByFieldState().display_name(sort_by)
                               .desc(descending)])
    return panel


def new_dashboard(uid: str, title: str, description: str, sections: Sequence[Section],
                  variables: Sequence[dashboard.QueryVariable] = (),
                  time_from: str = "now-1h") -> dashboard.Dashboard:
    """A dashboard with fabricops' defaults (``time_from`` to now, 30 s refresh, links to
    its siblings), its template variables and one expanded row per section."""
    board = (dashboard.Dashboard(title).uid(uid).description(description).tags([TAG])
             .time(time_from, "now").refresh("30s").timezone("browser")
             .tooltip(model.DashboardCursorSync.CROSSHAIR)
             .link(dashboard.DashboardLink("fabricops").type(model.DashboardLinkType.DASHBOARDS)
                   .tags([TAG]).as_dropdown(True).include_vars(False).keep_time(True)))
    for variable in variables:
        board = board.with_variable(variable)
    for title_of_row, panels in sections:
        board = board.with_row(dashboard.Row(title_of_row).collapsed(False))
        for panel in panels:
            board = board.with_panel(panel)
    return board


def query_variable(name: str, label: str, query: str) -> dashboard.QueryVariable:
    """A multi-value Prometheus variable with "All" meaning every value (regex ``.*``)."""
    return (dashboard.QueryVariable(name).label(label).datasource(PROMETHEUS).query(query)
            .refresh(model.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(model.VariableSort.ALPHABETICAL_ASC).multi(True).include_all(True)
            .all_value(".*")
            .current(model.VariableOption(selected=True, text=["All"], value=["$__all"])))


def render(board: dashboard.Dashboard) -> dict[str, Any]:
    """The dashboard's JSON model, panels numbered 1, 2, ... in layout order."""
    rendered: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    for listing in ("annotations", "templating"):
        rendered[listing] = rendered.get(listing) or {}
        rendered[listing].setdefault("list", [])
    for number, panel in enumerate(rendered.get("panels", []), start=1):
        panel["id"] = number
    return rendered
