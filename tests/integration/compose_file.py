"""The docker-compose deployment as the tests read it.

``load_compose`` parses ``docker-compose.yml`` (YAML anchors and merge keys
resolved, as Compose resolves them); ``interpolate`` applies Compose's
``${VAR:-default}`` rules for a given ``.env``; ``Loopback`` rewrites what a
fabricops service is given in its container (service host names, fixed ports,
``/shared``, the database URL) into what runs on this machine; ``build_context``
lists the files ``.dockerignore`` lets into the image's build context.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = "deploy/Dockerfile"

_VARIABLE = re.compile(
    r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\}")
_HOST_PORT = re.compile(r"(?<![\w.:-])(?P<host>[A-Za-z0-9_.-]+):(?P<port>\d{1,5})(?![\w])")


def load_compose(path: Path = COMPOSE_FILE) -> dict[str, Any]:
    """The compose document, anchors and ``<<`` merges resolved."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{path}: not a mapping"
    return doc


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """``text`` with Compose's variables substituted from ``env``.

    ``${VAR:-d}`` gives d when VAR is unset or empty, ``${VAR-d}`` only when it is
    unset, ``${VAR}`` gives "" when unset; ``$$`` is a literal ``$``.
    """
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, default = match.group("name", "op", "default")
        value = env.get(name)
        if op == ":-" and not value:
            return default
        if op == "-" and value is None:
            return default
        return value or ""

    return _VARIABLE.sub(one, text)


@dataclass(frozen=True)
class Service:
    """One compose service, with the variables of a ``.env`` applied."""

    name: str
    spec: Mapping[str, Any]
    dotenv: Mapping[str, str] = field(default_factory=dict)

    @property
    def command(self) -> list[str]:
        """The arguments given to the image's entrypoint (list form only)."""
        command = self.spec.get("command", [])
        assert isinstance(command, list), f"{self.name}: write command as a list"
        return [interpolate(str(arg), self.dotenv) for arg in command]

    @property
    def environment(self) -> dict[str, str]:
        """The container's environment as Compose passes it."""
        env = self.spec.get("environment", {})
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        return {k: interpolate("" if v is None else _scalar(v), self.dotenv)
                for k, v in env.items()}

    @property
    def volumes(self) -> list[str]:
        """Mounts in short syntax (``SOURCE:TARGET[:MODE]``), variables substituted."""
        return [interpolate(str(v), self.dotenv) for v in self.spec.get("volumes", [])]

    @property
    def healthcheck(self) -> list[str]:
        """The healthcheck as argv: ``["CMD", ...]`` as is, ``CMD-SHELL`` through sh."""
        test = self.spec.get("healthcheck", {}).get("test", [])
        assert isinstance(test, list), f"{self.name}: write the healthcheck test as a list"
        assert test, f"{self.name}: empty healthcheck test"
        words = [interpolate(str(word), self.dotenv) for word in test]
        if words[0] == "CMD-SHELL":
            return ["sh", "-c", " ".join(words[1:])]
        assert words[0] == "CMD", f"{self.name}: healthcheck must start with CMD or CMD-SHELL"
        return words[1:]


def _scalar(value: object) -> str:
    """A YAML scalar as Compose turns it into a string (booleans lower case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def services(doc: Mapping[str, Any], dotenv: Mapping[str, str] | None = None
             ) -> dict[str, Service]:
    """Every service of ``doc`` by name."""
    return {name: Service(name, spec, dict(dotenv or {}))
            for name, spec in doc["services"].items()}


def fabricops_services(doc: Mapping[str, Any], dotenv: Mapping[str, str] | None = None
                       ) -> dict[str, Service]:
    """The services that run the image built from ``deploy/Dockerfile``."""
    return {name: s for name, s in services(doc, dotenv).items()
            if isinstance(s.spec.get("build"), dict)
            and s.spec["build"].get("dockerfile") == DOCKERFILE}


def _option(service: Service, name: str) -> str:
    args = service.command
    return args[args.index(name) + 1]


@dataclass
class Loopback:
    """Maps what a container is given to this machine's loopback.

    ``hosts``: host names of ``host:port`` pairs (compose service names, ``0.0.0.0``)
    to local addresses; ``listen_hosts``: the same for a value that is a host name
    alone (``--listen 0.0.0.0``, ``--advertise sim``); ``ports``: fixed ports to
    local ones, new ones taken from ``allocate`` on first sight; ``paths``:
    container folders to local folders; ``values``: whole values replaced as they
    are (the database URL).
    """

    hosts: dict[str, str]
    listen_hosts: dict[str, str]
    ports: dict[int, int]
    paths: dict[str, str]
    values: dict[str, str]
    allocate: Callable[[], int]

    def port(self, port: int) -> int:
        if port not in self.ports:
            self.ports[port] = self.allocate()
        return self.ports[port]

    def text(self, text: str) -> str:
        """Host:port pairs, folders and whole values rewritten inside ``text``."""
        if text in self.values:
            return self.values[text]
        for inside, local in self.paths.items():
            text = re.sub(rf"(?<![\w/.]){re.escape(inside)}(?=/|\W|$)", local, text)

        def host_port(match: re.Match[str]) -> str:
            host = self.hosts.get(match.group("host"), match.group("host"))
            return f"{host}:{self.port(int(match.group('port')))}"

        return _HOST_PORT.sub(host_port, text)

    def value(self, text: str, *, is_port: bool) -> str:
        """An option or variable value: a bare host name or port is mapped too."""
        if is_port and text.isdigit():
            return str(self.port(int(text)))
        return self.listen_hosts.get(text) or self.text(text)

    def args(self, args: Sequence[str]) -> list[str]:
        """Command arguments: the values of options are mapped, command words kept."""
        out: list[str] = []
        option: str | None = None
        for arg in args:
            if option is not None:
                out.append(self.value(arg, is_port="port" in option))
                option = None
            elif arg.startswith("-") and "=" not in arg:
                out.append(arg)
                option = arg
            else:
                out.append(self.text(arg))
        return out

    def environment(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: self.value(v, is_port=k.endswith("_PORT")) for k, v in env.items()}

    def words(self, words: Sequence[str]) -> list[str]:
        """Every word of a healthcheck rewritten."""
        return [self.value(w, is_port=False) for w in words]


def build_context(root: Path = REPO) -> Iterator[Path]:
    """Files (relative to ``root``) that ``.dockerignore`` lets into the build context.

    Rules are matched as Docker matches them: against the path and each of its
    parent folders, ``*`` within one name, ``**`` across folders, ``!`` re-includes,
    and the last matching rule decides.
    """
    rules = []
    for line in (root / ".dockerignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        rules.append((include, _glob_regex(pattern)))
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if path.is_file() and _included(relative, rules):
            yield relative


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out = ""
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + pattern[i:end + 1], end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def _included(relative: Path, rules: Sequence[tuple[bool, re.Pattern[str]]]) -> bool:
    parts = relative.parts
    candidates = ["/".join(parts[:n]) for n in range(1, len(parts) + 1)]
    included = True
    for include, regex in rules:
        if any(regex.fullmatch(c) for c in candidates):
            included = include
    return included
