"""Browser sessions: a random id in an HttpOnly cookie, the signed-in user and CSRF token here.

The cookie never carries the API token: signing in trades the token for a session id, and the
server keeps what the id stands for (in memory, so a restart signs everyone out, which is the
safe direction). A session is re-issued under a new id on sign-in, so an id planted before
sign-in is worth nothing after it.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import deque
from dataclasses import dataclass, field

COOKIE = "cairn_session"
IDLE_SECONDS = 8 * 3600.0
"""A session unused this long is forgotten."""
MAX_ANONYMOUS = 10_000
"""Sessions nobody signed in to (each sign-in page makes one); past this the oldest go."""
OAUTH_SECONDS = 600.0
"""How long an authorization at the forge may take before its state is forgotten."""
SIGN_IN_LIMIT = 10
SIGN_IN_WINDOW = 60.0
"""At most SIGN_IN_LIMIT sign-in attempts per client address in any SIGN_IN_WINDOW seconds."""


@dataclass
class Session:
    """One browser's session: who signed in (None before sign-in) and its CSRF token."""

    id: str
    csrf: str
    user_id: int | None = None
    seen: float = field(default_factory=time.monotonic)

    def csrf_matches(self, sent: str | None) -> bool:
        """Whether a form carried this session's CSRF token (compared in constant time)."""
        return bool(sent) and hmac.compare_digest(self.csrf.encode(), (sent or "").encode())


class Sessions:
    """The server's sessions, by id; thread-safe, since plain routes run in a threadpool."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS) -> None:
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._by_id: dict[str, Session] = {}

    def get(self, session_id: str | None) -> Session | None:
        """The live session of `session_id`, or None (unknown, malformed or expired)."""
        if not session_id or len(session_id) > 100:
            return None
        now = time.monotonic()
        with self._lock:
            found = self._by_id.get(session_id)
            if found is None or now - found.seen > self.idle_seconds:
                self._by_id.pop(session_id, None)
                return None
            found.seen = now
            return found

    def start(self, user_id: int | None = None) -> Session:
        """A new session under fresh random ids (anonymous until `user_id` is given)."""
        made = Session(
            id=secrets.token_urlsafe(32), csrf=secrets.token_urlsafe(32), user_id=user_id
        )
        with self._lock:
            self._forget_idle()
            anonymous = [k for k, s in self._by_id.items() if s.user_id is None]
            # Dicts keep insertion order: the first are the oldest.
            for key in anonymous[: max(0, len(anonymous) - MAX_ANONYMOUS + 1)]:
                del self._by_id[key]
            self._by_id[made.id] = made
        return made

    def end(self, session_id: str) -> None:
        """Forget a session (sign out)."""
        with self._lock:
            self._by_id.pop(session_id, None)

    def _forget_idle(self) -> None:
        now = time.monotonic()
        for key in [k for k, s in self._by_id.items() if now - s.seen > self.idle_seconds]:
            del self._by_id[key]


class SignInLimit:
    """A sliding-window count of sign-in attempts per client address."""

    def __init__(self, limit: int = SIGN_IN_LIMIT, window: float = SIGN_IN_WINDOW) -> None:
        self.limit = limit
        self.window = window
        self._lock = threading.Lock()
        self._attempts: dict[str, deque[float]] = {}

    def allow(self, address: str) -> bool:
        """Count one attempt from `address`; False once it is over the limit."""
        now = time.monotonic()
        with self._lock:
            for known in [a for a, q in self._attempts.items() if now - q[-1] > self.window]:
                del self._attempts[known]  # forgotten once their last attempt is out of the window
            seen = self._attempts.setdefault(address, deque())
            while seen and now - seen[0] > self.window:
                seen.popleft()
            if len(seen) >= self.limit:
                return False
            seen.append(now)
            return True


class OAuthStates:
    """The authorizations under way at the forge: state -> (session id, group id), expiring."""

    def __init__(self, lifetime: float = OAUTH_SECONDS) -> None:
        self.lifetime = lifetime
        self._lock = threading.Lock()
        self._by_state: dict[str, tuple[str, int, float]] = {}

    def begin(self, session_id: str, group_id: int) -> str:
        """A new unguessable state for one authorization of `group_id` from this session."""
        state = secrets.token_urlsafe(24)
        now = time.monotonic()
        with self._lock:
            for key in [k for k, v in self._by_state.items() if now - v[2] > self.lifetime]:
                del self._by_state[key]
            self._by_state[state] = (session_id, group_id, now)
        return state

    def finish(self, state: str, session_id: str) -> int | None:
        """The group the state was made for, once, and only for the session that made it."""
        with self._lock:
            found = self._by_state.pop(state, None)
        if found is None or time.monotonic() - found[2] > self.lifetime:
            return None
        return found[1] if hmac.compare_digest(found[0], session_id) else None
