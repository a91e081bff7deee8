"""Bearer-token access for mutating calls.

Reads are open (the API listens on loopback by default); every call that
changes something (a decision on an action, a fault injection) needs
``Authorization: Bearer <token>``. An API configured without a token refuses
every mutation, so that an open port never means open control.

The check runs twice: as middleware before anything of a mutating request that a
route takes is read (so a malformed body from a stranger gets 401, not a
validation error; a path or method no route takes is a 404 or 405 for anyone),
and as a route dependency so that the OpenAPI document shows it. ``REFUSALS``
declares both answers in the document.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from fabricops.api.context import ApiContext
from fabricops.api.problems import problems

_bearer = HTTPBearer(auto_error=False, description="The token fabricops up printed or "
                                                   "the one given with --token")


def context(request: Request) -> ApiContext:
    """The ApiContext of the app serving ``request``."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


Ctx = Annotated[ApiContext, Depends(context)]


MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def refusal(ctx: ApiContext, authorization: str | None) -> HTTPException | None:
    """Why a mutating call with this Authorization header is refused, or None: 401
    without bearer credentials or with ones that are not the token, 403 with
    credentials when the API has no token (no credentials could ever do)."""
    expected = ctx.config.token.get_secret_value()
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return HTTPException(status.HTTP_401_UNAUTHORIZED,
                             "this call changes something: send Authorization: Bearer <token>",
                             headers={"WWW-Authenticate": "Bearer"})
    if not expected:
        return HTTPException(status.HTTP_403_FORBIDDEN,
                             "this API was started without a token: mutations are disabled")
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        return HTTPException(status.HTTP_401_UNAUTHORIZED, "the bearer token is not valid",
                             headers={"WWW-Authenticate": "Bearer"})
    return None


def require_token(ctx: Ctx, creds: Annotated[HTTPAuthorizationCredentials | None,
                                             Depends(_bearer)]) -> None:
    """Refuse the call unless it carries the configured bearer token."""
    header = f"{creds.scheme} {creds.credentials}" if creds is not None else None
    refused = refusal(ctx, header)
    if refused is not None:
        raise refused


Authorized = Depends(require_token)

#: The ``responses=`` a route with ``Authorized`` adds: 401 and 403.
REFUSALS = problems(status.HTTP_401_UNAUTHORIZED, status.HTTP_403_FORBIDDEN)
