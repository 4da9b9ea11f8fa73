"""Test mode's admin calls to an emulator (`ocigroup emulator clock`, `ocigroup emulator reset`): signed with this
state directory's owner proof (core/owner.py), sent as JSON, answered in one line when refused. The emulator asks
for the proof only of the state directory that started it; a web page can send none of this."""

from __future__ import annotations

import json
from typing import Any

from ocigroup_cli.client import emulator
from ocigroup_cli.core import owner
from ocigroup_cli.errors import AuthFailed, NotFound, OcigroupError, ServiceError, UsageError
from ocigroup_cli.ops import local


def call(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body` to `url` + /_emulator + `path`; the answer's JSON object."""
    data = json.dumps(body).encode()
    target = f"/_emulator{path}"
    headers = {"content-type": "application/json"}
    key = local.owner_key()
    if key is not None:
        headers[owner.HEADER] = owner.request(key, "POST", target, data)
    try:
        return emulator.admin_post(url, target, data, headers)
    except AuthFailed as exc:
        raise OcigroupError(
            f"the emulator at {url} refused: {exc.message or 'not its owner'}",
            "run this with the OCIGROUP_STATE_DIR of the command that started it",
        ) from None
    except NotFound as exc:
        raise UsageError(f"the emulator at {url} has no test clock or reset: {exc.message or 'not found'}",
                         "start it with: ocigroup emulator serve --test-mode") from None  # fmt: skip
    except ServiceError as exc:
        raise OcigroupError(f"the emulator at {url} answered {exc.status}: {exc.message}") from None
