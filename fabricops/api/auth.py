"""Bearer-token access for mutating calls.

Reads are open (the API listens on loopback by default); every call that
changes something (a decision on an action, a fault injection) needs
``Authorization: Bearer <token>``. An API configured without a token refuses
every mutation, so that an open port never means open control.

The check runs twice: as middleware before anything of a mutating request is
read (so a malformed body from a stranger gets 401, not a validation error),
and as a route dependency so that the OpenAPI document shows it.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from fabricops.api.context import ApiContext

_bearer = HTTPBearer(auto_error=False, description="The token fabricops up printed or "
                                                   "the one given with --token")


def context(request: Request) -> ApiContext:
    """The ApiContext of the app serving ``request``."""
    ctx: ApiContext = request.app.state.ctx
    return ctx


Ctx = Annotated[ApiContext, Depends(context)]


MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def refusal(ctx: ApiContext, authorization: str | None) -> HTTPException | None:
    """Why a mutating call with this Authorization header is refused, or None."""
    expected = ctx.config.token.get_secret_value()
    if not expected:
        return HTTPException(status.HTTP_403_FORBIDDEN,
                             "this API was started without a token: mutations are disabled")
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return HTTPException(status.HTTP_401_UNAUTHORIZED,
                             "this call changes something: send Authorization: Bearer <token>",
                             headers={"WWW-Authenticate": "Bearer"})
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
