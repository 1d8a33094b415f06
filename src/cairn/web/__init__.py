"""The web UI: server-rendered pages on the API's own app, with htmx and a little script.

`mount` adds the pages, their static files and page-shaped error answers to an app made by
`cairn.api.create_app`; every page acts through the API's use-case functions.
"""

from __future__ import annotations

from cairn.web.access import ForgeApp
from cairn.web.mounting import mount

__all__ = ["ForgeApp", "mount"]
