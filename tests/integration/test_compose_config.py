"""The docker-compose deployment: the file, its Prometheus config, its image, its commands.

There is no container engine here, so what ``docker compose up`` would do is
checked piece by piece: the file against the Compose Specification's JSON
schema and for what its services must agree on (addresses, credentials,
scrape targets); and each fabricops service's command parsed by the real CLI
with the environment the file gives it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import typer
import typer.core
import typer.main
import yaml
from sqlalchemy.engine import make_url

from fabricops.cli.main import app
from fabricops.core.actions import ActionMode
from fabricops.store.database import parse_url
from tests.conftest import require_program
from tests.integration.compose_file import (
    DOCKERFILE,
    REPO,
    Service,
    _option,
    build_context,
    fabricops_services,
    services,
)

SCHEMA = Path(__file__).parent / "fixtures" / "compose-spec.json"
FABRICOPS = {"sim", "collector", "pipeline", "rca", "remediation", "api"}
SECRETS = {"POSTGRES_PASSWORD": "pg-secret-1", "FABRICOPS_API_TOKEN": "api-secret-2",
           "GRAFANA_ADMIN_PASSWORD": "grafana-secret-3"}
"""A user's ``.env``."""


def _validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(json.loads(SCHEMA.read_text(encoding="utf-8")))


def _schema_errors(doc: Mapping[str, Any]) -> list[str]:
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}"
                  for e in _validator().iter_errors(doc))


def test_compose_file_follows_the_compose_specification(compose: dict[str, Any]) -> None:
    assert _schema_errors(compose) == []


@pytest.mark.parametrize(("path", "value"), [
    (("services", "api", "helthcheck"), {"test": ["CMD", "true"]}),
    (("services", "pipeline", "depends_on", "kafka", "condition"), "service_healty"),
    (("services", "api", "ports"), [{"target": "8080", "published": 8080, "bogus": 1}]),
])
def test_schema_check_catches_a_broken_file(compose: dict[str, Any], path: tuple[str, ...],
                                            value: object) -> None:
    broken = copy.deepcopy(compose)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert _schema_errors(broken)


def test_every_fabricops_service_runs_the_one_image(compose: dict[str, Any]) -> None:
    ours = fabricops_services(compose)
    assert set(ours) == FABRICOPS
    assert {s.spec["image"] for s in ours.values()} == {ours["api"].spec["image"]}
    assert all(s.spec["build"] == {"context": ".", "dockerfile": DOCKERFILE}
               for s in ours.values())
    assert not [name for name, s in ours.items() if "entrypoint" in s.spec]
    dockerfile = (REPO / DOCKERFILE).read_text(encoding="utf-8")
    entrypoint = re.findall(r"^ENTRYPOINT (.+)$", dockerfile, re.MULTILINE)
    assert [json.loads(e) for e in entrypoint] == [["fabricops"]]
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users, "the image must name its user"
    assert users[-1] not in ("root", "0"), "the services must not run as root"
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fabricops"] == "fabricops.cli.main:app"


def test_the_simulated_fabric_is_optional(compose: dict[str, Any]) -> None:
    every = services(compose)
    assert every["sim"].spec["profiles"] == ["sim"]
    assert not [name for name, s in every.items() if name != "sim" and "profiles" in s.spec]
    for name, service in every.items():
        needs = service.spec.get("depends_on", {})
        if "sim" in needs:
            assert needs["sim"] == {"condition": "service_healthy", "required": False}, name


def test_dependencies_volumes_and_mounts_exist(compose: dict[str, Any]) -> None:
    every = services(compose)
    declared = set(compose.get("volumes", {}))
    for name, service in every.items():
        for needed in service.spec.get("depends_on", {}):
            assert needed in every, f"{name} depends on {needed}, which is not a service"
        for mount in service.volumes:
            source = mount.split(":")[0]
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name} mounts {source}, which is missing"
            else:
                assert source in declared, f"{name} mounts volume {source}, not declared"


def test_fabric_files_come_from_a_volume_or_a_folder_of_the_user(
        compose: dict[str, Any]) -> None:
    for dotenv, source in (({}, "shared"), ({"FABRICOPS_SHARED": "./my-fabric"}, "./my-fabric")):
        for name, service in fabricops_services(compose, dotenv).items():
            mode = "" if name == "sim" else ":ro"
            assert f"{source}:/shared{mode}" in service.volumes, (name, dotenv)
    for name, service in fabricops_services(compose).items():
        if name != "sim":
            env = service.environment
            assert {env["FABRICOPS_TOPOLOGY"], env["FABRICOPS_JOBS"],
                    env["FABRICOPS_INVENTORY"]} == {
                "/shared/topology.json", "/shared/jobs.yaml", "/shared/inventory.yaml"}, name
    sim = fabricops_services(compose)["sim"].command
    assert sim[sim.index("--out") + 1] == "/shared"


def test_ports_are_published_on_loopback_only(compose: dict[str, Any]) -> None:
    published = {name: s.spec.get("ports", []) for name, s in services(compose).items()}
    assert all(published[name] for name in ("api", "grafana", "prometheus"))
    for name, ports in published.items():
        for port in ports:
            assert str(port).startswith("127.0.0.1:"), (name, port)


def test_services_agree_on_addresses_and_secrets(compose: dict[str, Any]) -> None:
    every = services(compose, SECRETS)
    postgres = every["postgres"].environment
    for name, service in fabricops_services(compose, SECRETS).items():
        env = service.environment
        if name != "sim":
            url = make_url(env["FABRICOPS_STORE__URL"])
            assert (url.username, url.password, url.host, url.port, url.database) == (
                postgres["POSTGRES_USER"], SECRETS["POSTGRES_PASSWORD"], "postgres", 5432,
                postgres["POSTGRES_DB"]), name
            assert parse_url(env["FABRICOPS_STORE__URL"]).drivername == "postgresql+psycopg"
            assert env["FABRICOPS_BUS__BOOTSTRAP_SERVERS"] == _kafka_listener(every["kafka"])
        if name in ("api", "sim"):
            assert env["FABRICOPS_API_TOKEN"] == SECRETS["FABRICOPS_API_TOKEN"]
    grafana = every["grafana"].environment
    assert grafana["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]
    assert grafana["GF_SECURITY_ADMIN_PASSWORD"] == SECRETS["GRAFANA_ADMIN_PASSWORD"]


def test_secrets_default_to_values_marked_for_a_demo(compose: dict[str, Any]) -> None:
    every = services(compose)
    for service, key in (("postgres", "POSTGRES_PASSWORD"), ("api", "FABRICOPS_API_TOKEN"),
                         ("grafana", "GF_SECURITY_ADMIN_PASSWORD")):
        assert "demo" in every[service].environment[key], (service, key)


def _kafka_listener(kafka: Service) -> str:
    """host:port of the broker's listener for other containers (inter-broker one)."""
    env = kafka.environment
    listeners = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    return listeners[env["KAFKA_INTER_BROKER_LISTENER_NAME"]]


def test_prometheus_scrapes_every_metrics_port(compose: dict[str, Any]) -> None:
    ours = fabricops_services(compose)
    expected = {f"{name}:{_option(s, '--metrics-port')}"
                for name, s in ours.items() if "--metrics-port" in s.command}
    expected |= {f"api:{_option(ours['api'], '--port')}", "localhost:9090"}
    config = yaml.safe_load((REPO / "deploy" / "prometheus.yml").read_text(encoding="utf-8"))
    targets = {t for job in config["scrape_configs"] for sc in job["static_configs"]
               for t in sc["targets"]}
    assert targets == expected
    assert config["global"]["scrape_interval"] == "5s"
    prometheus = services(compose)["prometheus"]
    assert "./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus.volumes


def test_grafana_is_provisioned_with_the_dashboards(compose: dict[str, Any]) -> None:
    grafana = services(compose)["grafana"]
    assert "./dashboards/provisioning:/etc/grafana/provisioning:ro" in grafana.volumes
    assert "./dashboards/json:/var/lib/grafana/dashboards:ro" in grafana.volumes
    sources = yaml.safe_load((REPO / "dashboards/provisioning/datasources/fabricops.yaml")
                             .read_text(encoding="utf-8"))["datasources"]
    urls = {s["type"]: s["url"] for s in sources}
    assert urls["prometheus"] == "http://prometheus:9090"
    assert urls["grafana-postgresql-datasource"] == "postgres:5432"


def test_build_context_holds_what_pip_install_reads() -> None:
    context = {p.as_posix() for p in build_context()}
    sources = {p.relative_to(REPO).as_posix() for p in (REPO / "fabricops").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert {"pyproject.toml", "README.md"} <= context
    assert sources - context == set()
    assert not [p for p in context if p.split("/")[0] in ("tests", ".git", "fabricops-data")]
    dockerfile = (REPO / DOCKERFILE).read_text(encoding="utf-8")
    for line in re.findall(r"^COPY (?!--from)(.+)$", dockerfile, re.MULTILINE):
        for source in line.split()[:-1]:
            assert any(p == source or p.startswith(f"{source}/") for p in context), source


@pytest.mark.integration
def test_promtool_accepts_the_prometheus_config() -> None:
    promtool = require_program("promtool", "to check deploy/prometheus.yml")
    done = subprocess.run([promtool, "check", "config", str(REPO / "deploy/prometheus.yml")],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def _parse_command(args: list[str]) -> dict[str, Any]:
    """The option values ``fabricops ARGS`` runs with, environment variables included.

    An unknown command fails an assertion; an unknown option, a bad value or a
    missing required option raises the CLI's own usage error (a TyperException).
    """
    command = typer.main.get_command(app)
    path = ["fabricops"]
    while isinstance(command, typer.core.TyperGroup):
        assert args, f"{' '.join(path)} needs a subcommand"
        name, args = args[0], args[1:]
        sub = command.get_command(typer.Context(command), name)
        assert sub is not None, f"{' '.join(path)} has no command {name!r}"
        command, path = sub, [*path, name]
    params: dict[str, Any] = command.make_context(" ".join(path), list(args)).params
    return params


DB = f"postgresql+psycopg://fabricops:{SECRETS['POSTGRES_PASSWORD']}@postgres:5432/fabricops"
KAFKA = {"bus_kind": "kafka", "bootstrap": "kafka:9092"}
SHARED = {"topology": Path("/shared/topology.json"), "jobs": Path("/shared/jobs.yaml")}
EXPECTED_OPTIONS: dict[str, dict[str, Any]] = {
    "sim": {"preset": "demo", "out": Path("/shared"), "token": SECRETS["FABRICOPS_API_TOKEN"],
            "int_collector": "collector:32766", "advertise": "sim"},
    "collector": {"inventory": Path("/shared/inventory.yaml"), **KAFKA},
    "pipeline": {"topology": SHARED["topology"], "db": DB, "metrics_port": 9101, **KAFKA},
    "rca": {"db": DB, "metrics_port": 9102, **SHARED, **KAFKA},
    "remediation": {"db": DB, "metrics_port": 9103, "mode": ActionMode.APPROVE,
                    "inventory": Path("/shared/inventory.yaml"), **SHARED, **KAFKA},
    "api": {"topology": SHARED["topology"], "db": DB, "host": "0.0.0.0", "port": 8080,
            "token": SECRETS["FABRICOPS_API_TOKEN"]},
}
"""What each service must run with, given the ``.env`` SECRETS."""


@pytest.mark.parametrize("name", sorted(FABRICOPS))
def test_service_command_runs_with_the_intended_options(
        compose: dict[str, Any], name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    service = fabricops_services(compose, SECRETS)[name]
    for key in [k for k in os.environ if k.startswith("FABRICOPS_")]:
        monkeypatch.delenv(key)
    for key, value in service.environment.items():
        monkeypatch.setenv(key, value)
    options = _parse_command(service.command)
    assert {k: options[k] for k in EXPECTED_OPTIONS[name]} == EXPECTED_OPTIONS[name]


@pytest.mark.parametrize(("args", "env"), [
    (["serve", "pipline"], {"FABRICOPS_TOPOLOGY": "t.json"}),
    (["serve", "pipeline", "--metric-port", "9101"], {"FABRICOPS_TOPOLOGY": "t.json"}),
    (["serve", "pipeline", "--metrics-port", "9101"], {}),
    (["serve", "remediation"], {"FABRICOPS_TOPOLOGY": "t.json",
                                "FABRICOPS_REMEDIATION_MODE": "sometimes"}),
])
def test_command_check_catches_a_wrong_command(args: list[str], env: dict[str, str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("FABRICOPS_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises((typer.TyperException, AssertionError)):
        _parse_command(args)
