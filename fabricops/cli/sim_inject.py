"""``fabricops sim inject``: a fault into the running simulated fabric, through its API."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from fabricops.cli.api_client import DEFAULT_API, ApiClient, ApiError, ApiToken, ApiUrl, read_token
from fabricops.cli.common import fail, parse_assignments, stdout_console
from fabricops.core.faults import FaultType, SettingFault

FAULTS = [f.value for f in FaultType] + [f.value for f in SettingFault]


def inject(
    fault: Annotated[str, typer.Argument(
        help=f"Fault type: {', '.join(FAULTS)}", show_default=False)],
    entity: Annotated[str, typer.Argument(
        help="Where: a link (a:ethX~b:ethY), switch, NIC (host:nicN) or host, by the fault "
             "type", show_default=False)],
    duration: Annotated[float | None, typer.Option(
        "--duration", min=0.001, help="Seconds of simulated time it lasts (default: until "
                                      "the run ends)")] = None,
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="Fault parameter key=value, repeatable (e.g. loss_rate=0.001)")]
    = None,
    api: ApiUrl = DEFAULT_API,
    token: ApiToken = "",
) -> None:
    """Inject a fault into the simulated fabric that fabricops up runs, starting now.

    Then watch fabricops find it: [bold]fabricops diagnose[/bold].

        fabricops sim inject gray_loss "leaf-3:eth56~spine-5:eth16" --param loss_rate=0.001
        fabricops sim inject pfc_storm host-012:nic3 --duration 120
        fabricops sim inject switch_down spine-2
        fabricops sim inject ecn_threshold leaf-1       # a wrong setting, see config check
    """
    if fault not in FAULTS:
        raise fail(f"unknown fault type {fault!r}; one of: {', '.join(FAULTS)}")
    try:
        params = parse_assignments(param or [], "--param")
    except ValueError as exc:
        raise fail(str(exc)) from None
    body = {"type": fault, "entity": entity, "duration_s": duration, "params": params}
    try:
        client = ApiClient(api, read_token(token))
        if not client.token:
            raise fail("no API token: pass --token, set FABRICOPS_API_TOKEN, or run where "
                       "fabricops up wrote fabricops-data/api.token")
        answer = client.post("/api/v1/sim/faults", body)
    except ApiError as exc:
        raise fail(str(exc)) from None
    lasting = f"for {duration:g} s" if duration else "until the run ends"
    shown = f" {json.dumps(params)}" if params else ""
    console = stdout_console()
    console.print(f"injected {fault}{shown} on {entity} at fabric t="
                  f"{answer.get('start_s', 0):.0f}s, {lasting} (fault #{answer.get('fault_id')})",
                  markup=False)
    console.print("now try: fabricops diagnose")
