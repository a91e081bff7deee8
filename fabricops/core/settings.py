"""Process settings: defaults, an optional YAML file, the environment, and overrides.

Precedence, highest first: keyword overrides given to ``Settings.load`` (or to
``Settings(...)``), environment variables (``FABRICOPS_`` prefix, ``__`` between
nested keys, e.g. ``FABRICOPS_SIM__SEED=7``), the YAML file, the defaults.
``Settings.load`` reads the YAML file it is given, else the one named by
``FABRICOPS_CONFIG``; plain ``Settings()`` reads no file. Every problem raises
``SettingsError`` naming the file (or environment variable) and the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)
from pydantic_settings import SettingsError as _PydanticSettingsError

ENV_PREFIX = "FABRICOPS_"
ENV_NESTED_DELIMITER = "__"
CONFIG_ENV_VAR = "FABRICOPS_CONFIG"

# The YAML document of the ``Settings.load`` call in progress, with its path.
_YAML_DOC: ContextVar[tuple[Path, dict[str, Any]] | None] = ContextVar(
    "fabricops_settings_yaml", default=None
)


class SettingsError(ValueError):
    """Settings that cannot be used; the message names the file or variable and the key."""


class SimSettings(BaseModel):
    """The fabric simulator."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seed: int = Field(default=0, description="Random seed; the same seed gives the same run")
    tick_s: float = Field(default=1.0, gt=0, description="Simulated seconds per collection tick")
    preset: str = Field(default="demo", description="Name of the scenario preset to run")


class BusSettings(BaseModel):
    """The message bus that carries frames between components."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["memory", "kafka"] = Field(
        default="memory", description="In-process queue, or a Kafka cluster"
    )
    topic_prefix: str = Field(default="fabricops.", description="Prefix of every topic name")
    bootstrap_servers: str = Field(
        default="127.0.0.1:9092", description="Kafka bootstrap servers, host:port[,host:port]"
    )


class StoreSettings(BaseModel):
    """The store for derived records (baselines, incidents, actions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str = Field(
        default="sqlite:///fabricops-data/fabricops.db", description="Database URL"
    )


class Settings(BaseSettings):
    """All settings of a fabricops process (see the module docstring for sources)."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter=ENV_NESTED_DELIMITER,
        extra="forbid",
        frozen=True,
    )

    data_dir: Path = Field(
        default=Path("fabricops-data"), description="Directory for run files and the store"
    )
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        default="info", description="Lowest log level written"
    )
    sim: SimSettings = Field(default_factory=SimSettings, description="Simulator settings")
    bus: BusSettings = Field(default_factory=BusSettings, description="Message bus settings")
    store: StoreSettings = Field(default_factory=StoreSettings, description="Store settings")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Overrides, then environment, then the YAML file of ``load`` (if any)."""
        loaded = _YAML_DOC.get()
        if loaded is None:
            return init_settings, env_settings
        return init_settings, env_settings, InitSettingsSource(settings_cls, loaded[1])

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Settings:
        """Settings from ``path`` (else ``$FABRICOPS_CONFIG``, else no file) and the rest.

        Raises SettingsError naming the file or variable and the key at fault.
        """
        via = ""
        if path is None and os.environ.get(CONFIG_ENV_VAR):
            path, via = os.environ[CONFIG_ENV_VAR], f" (named by {CONFIG_ENV_VAR})"
        doc = None
        if path is not None:
            file = Path(path)
            doc = (file, read_yaml_mapping(file, f"settings file {file}{via}"))
        with _yaml_doc(doc):
            try:
                return cls(**overrides)
            except ValidationError as exc:
                raise SettingsError(_describe(exc, doc, overrides)) from None
            except _PydanticSettingsError as exc:
                raise SettingsError(f"environment: {exc}") from None


def read_yaml_mapping(path: Path, origin: str | None = None) -> dict[str, Any]:
    """Parse a YAML file whose top level is a mapping (an empty file is ``{}``)."""
    what = origin or f"settings file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SettingsError(f"{what} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{what} cannot be read: {exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"{what}: invalid YAML{_yaml_where(exc)}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise SettingsError(f"{what}: the document must be a mapping of keys to values, "
                            f"not a {type(doc).__name__}")
    return doc


def _yaml_where(exc: yaml.YAMLError) -> str:
    """' at line L, column C: problem' for errors that carry a position."""
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return f": {exc}"
    mark = exc.problem_mark
    return f" at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"


@contextmanager
def _yaml_doc(doc: tuple[Path, dict[str, Any]] | None) -> Iterator[None]:
    token = _YAML_DOC.set(doc)
    try:
        yield
    finally:
        _YAML_DOC.reset(token)


def _describe(
    exc: ValidationError, doc: tuple[Path, dict[str, Any]] | None, overrides: Mapping[str, Any]
) -> str:
    """One line per error: where the value came from, the dotted key, the problem."""
    lines = []
    for err in exc.errors():
        loc = tuple(str(part) for part in err["loc"])
        key = ".".join(loc)
        problem = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{_origin(loc, doc, overrides)}: key {key!r}: {problem}")
    return "; ".join(lines)


def _origin(
    loc: tuple[str, ...], doc: tuple[Path, dict[str, Any]] | None, overrides: Mapping[str, Any]
) -> str:
    """Which source supplied the value at ``loc``: overrides, environment or the file."""
    if _has_path(overrides, loc):
        return "settings arguments"
    env_names = {name.upper() for name in os.environ}
    for depth in range(len(loc), 0, -1):
        candidate = ENV_PREFIX + ENV_NESTED_DELIMITER.join(loc[:depth])
        if candidate.upper() in env_names:
            return f"environment variable {candidate.upper()}"
    if doc is not None and _has_path(doc[1], loc):
        return f"settings file {doc[0]}"
    return "settings"


def _has_path(tree: Mapping[str, Any], loc: tuple[str, ...]) -> bool:
    node: Any = tree
    for part in loc:
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True
