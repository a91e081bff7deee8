"""Settings: defaults, YAML file, environment, precedence and error messages."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from pydantic import BaseModel

from fabricops.core.settings import BusSettings, Settings, SettingsError, SimSettings, StoreSettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("FABRICOPS_"):
            monkeypatch.delenv(name)


def write(tmp_path: Path, text: str, name: str = "fabricops.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults() -> None:
    s = Settings.load()
    assert s.data_dir == Path("fabricops-data")
    assert s.log_level == "info"
    assert (s.sim.seed, s.sim.tick_s, s.sim.preset) == (0, 1.0, "demo")
    assert s.bus.kind == "memory"
    assert s.bus.topic_prefix == "fabricops."
    assert s.bus.bootstrap_servers == "127.0.0.1:9092"
    assert s.store.url == "sqlite:///fabricops-data/fabricops.db"
    assert s == Settings()


@pytest.mark.parametrize("model", [Settings, SimSettings, BusSettings, StoreSettings])
def test_every_field_is_described(model: type[BaseModel]) -> None:
    for name, info in model.model_fields.items():
        assert info.description, name


def test_settings_are_frozen() -> None:
    s = Settings.load()
    with pytest.raises(ValueError, match="frozen"):
        s.log_level = "debug"  # type: ignore[misc]
    with pytest.raises(ValueError, match="frozen"):
        s.sim.seed = 3  # type: ignore[misc]


def test_precedence_kwargs_over_env_over_yaml_over_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "log_level: debug\nsim:\n  seed: 3\n  tick_s: 2.5\n")
    from_yaml = Settings.load(path)
    assert (from_yaml.sim.seed, from_yaml.sim.tick_s, from_yaml.log_level) == (3, 2.5, "debug")
    assert from_yaml.sim.preset == "demo"

    monkeypatch.setenv("FABRICOPS_SIM__SEED", "7")
    with_env = Settings.load(path)
    assert (with_env.sim.seed, with_env.sim.tick_s) == (7, 2.5)

    with_kwargs = Settings.load(path, sim={"seed": 9}, log_level="error")
    got = (with_kwargs.sim.seed, with_kwargs.sim.tick_s, with_kwargs.log_level)
    assert got == (9, 2.5, "error")


def test_config_env_var_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICOPS_CONFIG", str(write(tmp_path, "bus:\n  kind: kafka\n")))
    assert Settings.load().bus.kind == "kafka"
    explicit = write(tmp_path, "bus:\n  kind: memory\n", "other.yaml")
    assert Settings.load(explicit).bus.kind == "memory"


def test_missing_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(SettingsError, match=f"{re.escape(str(missing))}.*does not exist"):
        Settings.load(missing)
    monkeypatch.setenv("FABRICOPS_CONFIG", str(missing))
    with pytest.raises(SettingsError, match=r"nope\.yaml.*FABRICOPS_CONFIG"):
        Settings.load()


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, "sim:\n  sed: 1\n")
    with pytest.raises(SettingsError, match=f"{re.escape(str(path))}.*'sim\\.sed'.*unknown key"):
        Settings.load(path)
    path = write(tmp_path, "colour: blue\n")
    with pytest.raises(SettingsError, match=f"{re.escape(str(path))}.*'colour'.*unknown key"):
        Settings.load(path)


def test_half_written_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "sim:\n  seed: [1,")
    with pytest.raises(SettingsError, match=re.escape(f"{path}: invalid YAML at line 2")):
        Settings.load(path)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_document(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=f"{re.escape(str(path))}.*must be a mapping"):
        Settings.load(path)


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    assert Settings.load(write(tmp_path, "")) == Settings()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("sim:\n  seed: abc\n", "'sim.seed'"),
        ("sim:\n  tick_s: 0\n", "'sim.tick_s'"),
        ("log_level: loud\n", "'log_level'"),
        ("bus:\n  kind: rabbitmq\n", "'bus.kind'"),
        ("store: 3\n", "'store'"),
    ],
)
def test_wrong_type_names_key_and_file(tmp_path: Path, text: str, key: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError, match=re.escape(f"{path}: key {key}")):
        Settings.load(path)


def test_wrong_type_from_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICOPS_SIM__TICK_S", "fast")
    with pytest.raises(SettingsError, match=re.escape("FABRICOPS_SIM__TICK_S: key 'sim.tick_s'")):
        Settings.load()


def test_wrong_type_from_arguments(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=re.escape("settings arguments: key 'sim.seed'")):
        Settings.load(sim={"seed": "x"})
