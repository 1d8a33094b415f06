"""Every error cairn raises on purpose.

CairnError                     each message says what happened and what to fix; what to
│                              run next is in `next_actions`, rendered by the front end
├── UsageError                 bad input from a person (exit code 2)
├── NotFound                   no such job, room, user or group
├── NotAllowed                 the actor may not make this decision
├── InvalidState               the job is not at a point where this makes sense
├── ScriptError                a script agent's YAML is malformed (exit code 2)
├── WorkspaceError             git or the workspace refused something
│   └── BoundaryError          a path would leave the workspace
├── ForgeError                 a forge (GitHub, GitLab) refused or did not answer
│   └── ForgeAccessDenied      the credential lacks a permission (named in the message)
└── StoreError                 the store cannot be opened or migrated
    ├── LeaseLost              this runner's fencing token is no longer current
    └── ContextConflict        a conversation step was not the next one of its job
"""

from __future__ import annotations

from collections.abc import Iterable

from cairn.next_action import NextAction


class CairnError(Exception):
    """Root of every error cairn raises on purpose."""

    exit_code = 1
    next_actions: tuple[NextAction, ...] = ()

    def __init__(self, *args: object, next_actions: Iterable[NextAction] = ()) -> None:
        super().__init__(*args)
        steps = tuple(next_actions)
        if steps:  # else the class's own default (none, or what every such error asks)
            self.next_actions = steps


class UsageError(CairnError):
    exit_code = 2


class NotFound(CairnError):
    pass


class NotAllowed(CairnError):
    pass


class InvalidState(CairnError):
    pass


class ScriptError(CairnError):
    exit_code = 2  # a malformed script is bad input, like a missing one


class WorkspaceError(CairnError):
    pass


class BoundaryError(WorkspaceError):
    pass


class ForgeError(CairnError):
    """A forge's API refused a call or did not answer; the message never holds a credential."""


class ForgeAccessDenied(ForgeError):
    """The forge refused the credential, or it lacks the permission the message names."""


class StoreError(CairnError):
    pass


class LeaseLost(StoreError):
    """Raised when a write carries a fencing token that another claim has superseded."""


class ContextConflict(StoreError):
    """Raised when a conversation step is saved out of order: another writer saved one first."""
