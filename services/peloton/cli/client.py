"""A small synchronous client for the Peloton HTTP API (used by the `peloton` command).

Errors:
    ClientError(Exception)
        ApiUnreachable      no answer from the API (connection refused, DNS, timeout)
        ApiError            the API answered with an error status; carries its JSON
                            `error` message and `details`
Every method returns the API's parsed JSON (logs: the text). Requests carry
`Authorization: Bearer <token>`: the `token` given, else the one peloton.cli.config finds
for the API (env PELOTON_TOKEN, or the config file's for its own API).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from peloton.cli import config

__all__ = ["DEFAULT_API", "ClientError", "ApiUnreachable", "ApiError", "PelotonClient",
           "default_api"]

DEFAULT_API = config.DEFAULT_API


def default_api() -> str:
    """env PELOTON_API, else the config file's `api`, else DEFAULT_API."""
    return config.api_url()


class ClientError(Exception):
    pass


class ApiUnreachable(ClientError):
    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"cannot reach the Peloton API at {url}: {reason}")
        self.url = url
        self.reason = reason


class ApiError(ClientError):
    def __init__(self, status: int, error: str, details: list[Any]) -> None:
        super().__init__(f"{status}: {error}")
        self.status = status
        self.error = error
        self.details = details


class PelotonClient:
    def __init__(self, base_url: str | None = None, timeout: float = 10.0,
                 transport: httpx.BaseTransport | None = None,
                 token: str | None = None) -> None:
        self.base_url = (base_url or default_api()).rstrip("/")
        token = token if token is not None else config.token_for(self.base_url)
        headers = {"Authorization": f"Bearer {token}"} if token else None
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport,
                                  headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PelotonClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            resp = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise ApiUnreachable(self.base_url, str(exc) or type(exc).__name__) from exc
        if resp.status_code >= 400:
            raise _api_error(resp)
        return resp

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # ---- jobs ---------------------------------------------------------------------------
    def submit_job(self, text: str, job_id: str | None = None,
                   content_type: str = "application/yaml") -> dict[str, Any]:
        params = {"job_id": job_id} if job_id else {}
        return dict(self._json("POST", "/v1/jobs", content=text.encode(), params=params,
                               headers={"content-type": content_type}))

    def get_job(self, job_id: str, at: str | None = None) -> dict[str, Any]:
        """The job; with `at` (ms, ISO 8601 or relative like -1h), as of that instant."""
        return dict(self._json("GET", f"/v1/jobs/{job_id}", params=_given({"at": at})))

    def list_jobs(self, state: str | None = None, limit: int = 100,
                  label_selector: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if label_selector is not None:
            params["label_selector"] = label_selector
        if state:
            params["state"] = state
        return dict(self._json("GET", "/v1/jobs", params=params))

    def kill_job(self, job_id: str, instances: list[int] | None = None,
                 reason: str = "") -> dict[str, Any]:
        return dict(self._json("POST", f"/v1/jobs/{job_id}/kill",
                               json={"instances": instances or [], "reason": reason}))

    def start_job(self, job_id: str, requested_by: str = "",
                  instances: str | None = None) -> dict[str, Any]:
        return self._job_verb("start", job_id, requested_by, instances)

    def stop_job(self, job_id: str, requested_by: str = "",
                 instances: str | None = None) -> dict[str, Any]:
        return self._job_verb("stop", job_id, requested_by, instances)

    def _job_verb(self, verb: str, job_id: str, requested_by: str,
                  instances: str | None) -> dict[str, Any]:
        """POST /v1/jobs/{id}/{verb} with `requested_by` and `instances` when given."""
        params = {k: v for k, v in (("requested_by", requested_by),
                                    ("instances", instances)) if v}
        return dict(self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/{verb}",
                               params=params))

    # ---- updates ------------------------------------------------------------------------
    def update_job(self, job_id: str, text: str, params: dict[str, Any],
                   content_type: str = "application/yaml") -> dict[str, Any]:
        """POST /v1/jobs/{id}/update; `params`: the update's query parameters (None: left
        out)."""
        return dict(self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/update",
                               content=text.encode(), params=_given(params),
                               headers={"content-type": content_type}))

    def restart_job(self, job_id: str, params: dict[str, Any]) -> dict[str, Any]:
        return dict(self._json("POST", f"/v1/jobs/{quote(job_id, safe='')}/restart",
                               params=_given(params)))

    def job_updates(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/jobs/{quote(job_id, safe='')}/updates"))

    def get_update(self, update_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/updates/{quote(update_id, safe='')}"))

    def update_command(self, update_id: str, command: str,
                       requested_by: str = "") -> dict[str, Any]:
        params = {"requested_by": requested_by} if requested_by else {}
        return dict(self._json("POST", f"/v1/updates/{quote(update_id, safe='')}/"
                                       f"{quote(command, safe='')}", params=params))

    # ---- tasks --------------------------------------------------------------------------
    def tasks(self, job_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/jobs/{job_id}/tasks"))

    def task(self, job_id: str, instance: int) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/jobs/{job_id}/tasks/{instance}"))

    def logs(self, job_id: str, instance: int, stream: str = "stdout",
             run: int | None = None) -> str:
        params: dict[str, Any] = {"stream": stream}
        if run is not None:
            params["run"] = run
        return self._request("GET", f"/v1/jobs/{job_id}/tasks/{instance}/logs",
                             params=params).text

    # ---- cluster ------------------------------------------------------------------------
    def hosts(self) -> dict[str, Any]:
        return dict(self._json("GET", "/v1/hosts"))

    def host(self, host: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/hosts/{quote(host, safe='')}"))

    def host_maintenance(self, host: str, action: str, deadline: str | None = None,
                         requested_by: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"action": action}
        if deadline is not None:
            body["deadline"] = deadline
        if requested_by:
            body["requested_by"] = requested_by
        return dict(self._json("POST", f"/v1/hosts/{quote(host, safe='')}/maintenance",
                               json=body))

    def pools(self) -> dict[str, Any]:
        return dict(self._json("GET", "/v1/pools"))

    # ---- resource pools -----------------------------------------------------------------
    def pool(self, path: str) -> dict[str, Any]:
        return dict(self._json("GET", _pool_url(path)))

    def pool_history(self, path: str, frm: str | None = None, to: str | None = None,
                     step: int | None = None) -> dict[str, Any]:
        """Entitlement, allocation and demand per cycle (peloton.api.history)."""
        return dict(self._json("GET", _pool_url(path) + "/history",
                               params=_given({"from": frm, "to": to, "step": step})))

    def cluster(self, at: str | None = None) -> dict[str, Any]:
        """Job, task, pool and host states as of `at` (default now)."""
        return dict(self._json("GET", "/v1/cluster", params=_given({"at": at})))

    def create_pool(self, path: str, text: str,
                    content_type: str = "application/yaml") -> dict[str, Any]:
        return dict(self._json("POST", _pool_url(path), content=text.encode(),
                               headers={"content-type": content_type}))

    def update_pool(self, path: str, text: str,
                    content_type: str = "application/yaml") -> dict[str, Any]:
        return dict(self._json("PUT", _pool_url(path), content=text.encode(),
                               headers={"content-type": content_type}))

    def delete_pool(self, path: str) -> dict[str, Any]:
        return dict(self._json("DELETE", _pool_url(path)))

    def pool_request(self, request_id: str) -> dict[str, Any]:
        return dict(self._json("GET", f"/v1/pool-requests/{quote(request_id, safe='')}"))

    def preemptions(self, job_id: str | None = None, pool: str | None = None,
                    limit: int = 1000) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if job_id:
            params["job_id"] = job_id
        if pool:
            params["pool"] = pool
        return dict(self._json("GET", "/v1/preemptions", params=params))

    def dead_letters(self, limit: int = 100) -> dict[str, Any]:
        return dict(self._json("GET", "/v1/dead-letters", params={"limit": limit}))

    def health(self) -> dict[str, Any]:
        return dict(self._json("GET", "/healthz"))


def _token_hint() -> dict[str, str]:
    return {"field": "", "message": "the CLI sends env PELOTON_TOKEN, else the token of "
            f"{config.config_path()} (written by `peloton cluster up`) for its API"}


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters without the unset ones; booleans as the API reads them."""
    return {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in params.items()
            if v is not None}


def _pool_url(path: str) -> str:
    return "/v1/pools/" + quote(path.strip("/"), safe="/")


def _api_error(resp: httpx.Response) -> ApiError:
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and "error" in body:
        details = body.get("details") or []
        details = details if isinstance(details, list) else [details]
        if resp.status_code == 401:
            details = [*details, _token_hint()]
        return ApiError(resp.status_code, str(body["error"]), details)
    text = resp.text.strip().splitlines()[0][:200] if resp.text.strip() else resp.reason_phrase
    return ApiError(resp.status_code, text, [])
