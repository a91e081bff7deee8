"""``fabricops dashboards push``: every dashboard lands in its folder; failures are named."""

from __future__ import annotations

import socket

import pytest
from typer.testing import CliRunner

from fabricops.cli.dashboards import app
from fabricops.dashboards import build_all
from tests.dashboards.fake_grafana import PASSWORD, TOKEN, USER, FakeGrafana

NO_GRAFANA_ENV = {"GRAFANA_URL": "", "GRAFANA_TOKEN": "", "GRAFANA_PASSWORD": ""}


def push(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Exit code, stdout and stderr (whitespace collapsed) of ``dashboards push ARGS``."""
    result = CliRunner().invoke(app, ["push", *args], env=NO_GRAFANA_ENV | (env or {}))
    return result.exit_code, result.stdout, " ".join(result.stderr.split())


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_every_dashboard_is_saved_in_a_new_folder_with_overwrite(grafana: FakeGrafana) -> None:
    code, out, err = push("--url", grafana.url, "--token", TOKEN)
    assert (code, err) == (0, "")
    built = build_all()
    assert grafana.folders == [{"id": 1, "uid": "fabricops", "title": "fabricops"}]
    assert [save["dashboard"] for save in grafana.saves] == list(built.values())
    assert all(save["overwrite"] is True and save["folderUid"] == "fabricops"
               for save in grafana.saves)
    for name, model in built.items():
        assert f"pushed {name}: {model['title']} (uid {model['uid']}, version 1) " \
               f"{grafana.url}/d/{model['uid']}/" in out
    assert f"4 dashboards pushed to {grafana.url}, folder 'fabricops'" in out


def test_an_existing_folder_is_reused_and_a_second_push_replaces(grafana: FakeGrafana) -> None:
    grafana.folders.append({"id": 7, "uid": "roce-abc", "title": "RoCE fabric"})
    env = {"GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": TOKEN}
    assert push("--folder", "RoCE fabric", env=env)[0] == 0
    code, out, _ = push("--folder", "RoCE fabric", env=env)
    assert code == 0
    assert len(grafana.folders) == 1
    assert {d["folderUid"] for d in grafana.dashboards.values()} == {"roce-abc"}
    assert {d["version"] for d in grafana.dashboards.values()} == {2}
    assert "version 2" in out


def test_the_general_folder_needs_no_folder(grafana: FakeGrafana) -> None:
    code, out, _ = push("--url", grafana.url, "--user", USER, "--password", PASSWORD,
                        "--folder", "")
    assert code == 0
    assert grafana.folders == []
    assert all("folderUid" not in save for save in grafana.saves)
    assert "the General folder" in out
    assert all(auth.startswith("Basic ") for _, _, auth in grafana.requests)


def test_no_overwrite_refuses_a_dashboard_that_exists(grafana: FakeGrafana) -> None:
    assert push("--url", grafana.url, "--token", TOKEN)[0] == 0
    code, out, err = push("--url", grafana.url, "--token", TOKEN, "--no-overwrite")
    assert code == 1
    assert grafana.saves[-1]["overwrite"] is False
    assert err == (f"error: Grafana at {grafana.url} refused dashboard fabricops-overview: 412 "
                   "A dashboard with the same uid already exists (push with --overwrite to "
                   "replace it)")
    assert "pushed" not in out


def test_a_wrong_token_is_named_as_such(grafana: FakeGrafana) -> None:
    code, _, err = push("--url", grafana.url, "--token", "wrong")
    assert code == 1
    assert err.startswith(f"error: Grafana at {grafana.url} refused the credentials "
                          "(401 Unauthorized)")
    assert grafana.saves == []


def test_an_unreachable_grafana_names_the_url_and_the_cause() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    code, _, err = push("--url", url, "--token", TOKEN, "--timeout-s", "2")
    assert (code, err) == (1, f"error: cannot reach Grafana at {url}: connection refused")


def test_credentials_in_the_url_are_used_and_never_printed(grafana: FakeGrafana) -> None:
    url = f"http://{USER}:{PASSWORD}@127.0.0.1:{grafana.port}"
    code, out, _ = push("--url", url)
    assert code == 0
    assert PASSWORD not in out
    assert len(grafana.dashboards) == 4


@pytest.mark.parametrize(("args", "message"), [
    ((), "error: no Grafana URL: give --url or set GRAFANA_URL"),
    (("--url", "grafana:3000", "--token", TOKEN),
     "error: Grafana URL 'grafana:3000' is not an http:// or https:// URL"),
    (("--url", "http://grafana:3000"),
     "error: no credentials for Grafana at http://grafana:3000: give a token, or a user and "
     "password"),
    (("--url", "http://grafana:3000", "--token", TOKEN, "--user", USER, "--password", "x"),
     "error: give either --token (or GRAFANA_TOKEN) or --user and --password, not both"),
    (("--url", "http://grafana:3000", "--user", USER),
     "error: a user needs a password and a password needs a user"),
])
def test_bad_input_exits_2_before_any_request(args: tuple[str, ...], message: str) -> None:
    code, out, err = push(*args)
    assert (code, err) == (2, message)
    assert out == ""
