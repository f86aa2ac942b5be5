"""The web UI, served by the API process under /ui (no separate server to run).

Why server-rendered pages (Jinja2 templates, one small vanilla script, SVG charts drawn
on the server) rather than an npm front-end toolchain: nothing to build (CI and the wheel
need no node step, the templates ship as package data), it works offline and behind the
same process and port as the API, and it stays small enough to read in one sitting.

How it meets the API's bearer tokens (peloton.api.auth), without ever putting a token in
a URL or a cookie:
- The page *shells* (`OPEN_PAGES`: /ui, /ui/login, /ui/jobs, ..., /ui/static/*) are open:
  they hold navigation, a container and the script, never data.
- /ui/login stores the pasted token in the tab's sessionStorage (gone when the tab
  closes) after checking it against /ui/f/whoami.
- The script fetches the page's content from /ui/f/<page>?<filters> with
  `Authorization: Bearer <token>`: these fragment routes are ordinary protected routes
  (the auth middleware answers 401 without a token; the script then goes to the login
  page) that render HTML on the server from the read model.
- Writes do not have routes of their own: submit and kill call the API's own POST
  /v1/jobs and POST /v1/jobs/{id}/kill from the script, so they pass exactly the API's
  validation and authorization; errors come back as the API's {"error", "details"} and
  are shown to the person (as are a fragment's errors: never a blank page).
- Task logs are fetched the same way from GET /v1/jobs/{id}/tasks/{i}/logs.

Fragment routes document no query parameters in the OpenAPI (the UI is not part of the
API's contract: `include_in_schema=False`), so they check their own: an unknown or
repeated parameter is 400, as for the API (`ui.pages`).
"""

from peloton.api.ui.pages import OPEN_PAGES, ui_router

__all__ = ["OPEN_PAGES", "ui_router"]
