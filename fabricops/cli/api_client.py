"""A thin client of a running fabricops API, for the commands that talk to it.

The URL comes from ``--api`` or ``$FABRICOPS_API_URL`` (default
http://127.0.0.1:8080, where ``fabricops up`` listens). The token for calls
that change something comes from ``--token``, ``$FABRICOPS_API_TOKEN``, or
the file ``fabricops up`` writes (``fabricops-data/api.token``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:  # imported by the call: a command that reads a store never needs it
    import httpx

DEFAULT_API = "http://127.0.0.1:8080"
TOKEN_FILE = Path("fabricops-data") / "api.token"

ApiUrl = Annotated[str, typer.Option(
    "--api", envvar="FABRICOPS_API_URL", help="URL of the running fabricops API")]
ApiToken = Annotated[str, typer.Option(
    "--token", envvar="FABRICOPS_API_TOKEN", show_default=False,
    help=f"Bearer token for calls that change something (default: read {TOKEN_FILE})")]


class ApiError(RuntimeError):
    """The API could not be asked, or refused; the message names the URL and the cause.
    ``status`` is the HTTP status (0: no answer at all), ``detail`` the API's own
    words for a refusal."""

    def __init__(self, message: str, status: int = 0, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail or message


def read_token(given: str, token_file: Path = TOKEN_FILE) -> str:
    """``given`` if set, else the token file's content, else ''."""
    if given:
        return given
    try:
        return token_file.read_text(encoding="utf-8").strip()
    except OSError:
        return ""


class ApiClient:
    """GET and POST JSON against ``base_url``; every failure is an ApiError."""

    def __init__(self, base_url: str, token: str = "", timeout_s: float = 10.0) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ApiError(f"--api {base_url!r} must start with http:// or https://")
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def get(self, path: str, **params: Any) -> Any:
        return self._call("GET", path, params=params)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return self._call("POST", path, json=body, headers=headers)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        import httpx

        url = f"{self.base_url}{path}"
        try:
            response = httpx.request(method, url, timeout=self.timeout_s, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"cannot reach the fabricops API at {self.base_url}: {exc} (is "
                           f"fabricops up running? point --api or FABRICOPS_API_URL at "
                           f"it)") from None
        if response.status_code >= 400:
            detail = _detail(response)
            raise ApiError(f"{method} {url}: HTTP {response.status_code}: {detail}",
                           response.status_code, detail)
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"{method} {url}: the answer is not JSON") from None


def _detail(response: httpx.Response) -> str:
    """The API's words for a refusal, on one line: the ``detail`` of its problem details
    (RFC 9457), else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(detail, list):  # an API from before problem details: where and what
        detail = "; ".join(f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg')}"
                           for d in detail if isinstance(d, dict))
    return " ".join(str(detail if detail else response.text[:300]).split())
