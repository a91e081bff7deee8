"""Upload dashboards to a running Grafana through its HTTP API (grafana-client).

The folder is looked up by title and created if missing; each dashboard is
saved with ``POST /api/dashboards/db``. Every failure raises ``PushError``
naming the Grafana URL (without credentials) and the cause: unreachable,
credentials refused, or a dashboard refused (for example a newer version is
there and ``overwrite`` is off).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from grafana_client import GrafanaApi
from grafana_client.client import (
    GrafanaClientError,
    GrafanaException,
    GrafanaTimeoutError,
    GrafanaUnauthorizedError,
)
from pydantic import BaseModel, ConfigDict, Field, model_validator

_CAUSES = (re.compile(r"\[Errno -?\d+\] ([^'\")\]]+)"),
           re.compile(r"Failed to resolve '[^']*' \(([^:)]+)"),
           re.compile(r"(timed out)"))
_PUSH_MESSAGE = "fabricops dashboards push"


class PushConfig(BaseModel):
    """Where Grafana is, how to sign in, and where the dashboards go.

    Credentials are a token (service account or API key) or a user and
    password, or a user and password in ``url``. ``folder`` is the folder's
    title ("" for Grafana's General folder).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    url: str
    token: str | None = None
    user: str | None = None
    password: str | None = None
    folder: str = "fabricops"
    overwrite: bool = True
    timeout_s: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _check(self) -> PushConfig:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"Grafana URL {self.url!r} is not an http:// or https:// URL")
        if self.token and (self.user or self.password):
            raise ValueError("give either a token or a user and password, not both")
        if bool(self.user) != bool(self.password):
            raise ValueError("a user needs a password and a password needs a user")
        if not (self.token or self.user or parts.password):
            raise ValueError(f"no credentials for Grafana at {display_url(self.url)}: give a "
                             "token, or a user and password")
        return self

    def credential(self) -> str | tuple[str, str] | None:
        if self.token:
            return self.token
        if self.user and self.password:
            return (self.user, self.password)
        return None


class PushError(Exception):
    """Grafana was unreachable or refused a call; the message names the URL and the cause."""


@dataclass(frozen=True)
class Pushed:
    """One dashboard Grafana saved: where it is and which version it now has."""

    file_name: str
    uid: str
    title: str
    version: int
    url: str


def display_url(url: str) -> str:
    """``url`` without user and password."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class DashboardPusher:
    """Pushes dashboards to one Grafana, through ``api`` if given, else a client built from
    the config when ``push`` is called."""

    def __init__(self, config: PushConfig, *, api: GrafanaApi | None = None) -> None:
        self.config = config
        self.where = display_url(config.url)
        self._api = api

    def push(self, dashboards: Mapping[str, Mapping[str, Any]],
             on_pushed: Callable[[Pushed], None] | None = None) -> list[Pushed]:
        """Save every dashboard (file name -> JSON model) in the configured folder."""
        api = self._api or GrafanaApi.from_url(self.config.url, credential=self.config.credential(),
                                               timeout=self.config.timeout_s)
        folder_uid = self.folder_uid(api)
        pushed = []
        for file_name, model in dashboards.items():
            done = self._save(api, file_name, model, folder_uid)
            if on_pushed is not None:
                on_pushed(done)
            pushed.append(done)
        return pushed

    def folder_uid(self, api: GrafanaApi) -> str | None:
        """The uid of the folder titled ``config.folder``, created if missing (None: General)."""
        title = self.config.folder
        if not title:
            return None
        with self._refusals("listing folders"):
            folders = self._expect(api.folder.get_all_folders(), list)
        for folder in folders:
            if isinstance(folder, dict) and folder.get("title") == title:
                return str(folder["uid"])
        what = f"creating folder {title!r}"
        with self._refusals(what):
            created = self._expect(api.folder.create_folder(title, uid=_folder_uid(title)),
                                   dict)
        return str(created.get("uid", _folder_uid(title)))

    def _save(self, api: GrafanaApi, file_name: str, model: Mapping[str, Any],
              folder_uid: str | None) -> Pushed:
        uid = str(model.get("uid", ""))
        payload: dict[str, Any] = {"dashboard": dict(model), "overwrite": self.config.overwrite,
                                   "message": _PUSH_MESSAGE}
        if folder_uid is not None:
            payload["folderUid"] = folder_uid
        hint = "" if self.config.overwrite else " (push with --overwrite to replace it)"
        what = f"dashboard {uid or file_name}"
        with self._refusals(what, hint):
            answer = self._expect(api.dashboard.update_dashboard(payload), dict)
        return Pushed(file_name=file_name, uid=str(answer.get("uid", uid)),
                      title=str(model.get("title", "")), version=int(answer.get("version", 0)),
                      url=_origin(self.where) + str(answer.get("url", f"/d/{uid}")))

    @staticmethod
    def _expect(answer: Any, kind: type[Any]) -> Any:
        if not isinstance(answer, kind):
            raise ValueError(f"expected a JSON {kind.__name__}, got {str(answer)[:80]!r}")
        return answer

    @contextmanager
    def _refusals(self, what: str, hint: str = "") -> Iterator[None]:
        """Turn grafana-client and network failures into PushError naming URL and cause."""
        where = f"Grafana at {self.where}"
        try:
            yield
        except GrafanaUnauthorizedError:
            raise PushError(f"{where} refused the credentials (401 Unauthorized) while "
                            f"{what}: check the token, or the user and password") from None
        except GrafanaTimeoutError:
            raise PushError(f"{where} did not answer within {self.config.timeout_s:g} s "
                            f"({what})") from None
        except GrafanaClientError as exc:
            raise PushError(f"{where} refused {what}: {exc.status_code} "
                            f"{_said(exc.response)}{hint}") from None
        except GrafanaException as exc:
            raise PushError(f"{where} failed on {what}: {exc.message}") from None
        except ValueError as exc:
            raise PushError(f"{where} answered {what} with something that is not Grafana's "
                            f"JSON: {str(exc)[:200]}") from None
        except OSError as exc:
            raise PushError(f"cannot reach {where}: {_cause(exc)}") from None


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, "", "", ""))


def _said(response: object) -> str:
    if isinstance(response, dict) and "message" in response:
        return str(response["message"])
    return str(response)[:200]


def _cause(exc: OSError) -> str:
    for pattern in _CAUSES:
        found: list[str] = pattern.findall(str(exc))
        if found:
            return found[-1].strip().lower()
    return f"{type(exc).__name__}: {exc}"[:200]


def _folder_uid(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return (slug or "fabricops")[:40]
