// Peloton web UI: the page shells' only script (see peloton/api/ui/__init__.py).
// The bearer token lives in sessionStorage and travels in the Authorization header only.
"use strict";
(function () {
  const KEY = "peloton.token";
  const token = () => sessionStorage.getItem(KEY);
  const $ = (sel) => document.querySelector(sel);

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
      '"': "&quot;", "'": "&#39;"}[c]));
  }

  // an API error body {"error", "details": [{"field", "message"}]} as HTML
  function errorHtml(status, body) {
    let msg = `HTTP ${status}`;
    let items = "";
    if (body && typeof body === "object" && body.error) {
      msg = `${status}: ${body.error}`;
      items = (body.details || []).map((d) => typeof d === "object" && d !== null
        ? `<li>${d.field ? `<code>${esc(d.field)}</code>: ` : ""}${esc(d.message ?? JSON.stringify(d))}</li>`
        : `<li>${esc(d)}</li>`).join("");
    } else if (typeof body === "string" && body) {
      items = `<li>${esc(body.slice(0, 500))}</li>`;
    }
    return `<strong>${esc(msg)}</strong>${items ? `<ul>${items}</ul>` : ""}`;
  }

  function showError(html) {
    const box = $("#error");
    box.innerHTML = html;
    box.hidden = !html;
  }

  function toLogin() {
    sessionStorage.removeItem(KEY);
    location.assign("/ui/login?next=" + encodeURIComponent(location.pathname + location.search));
  }

  async function api(path, opts = {}) {
    const headers = Object.assign({}, opts.headers || {}, {Authorization: `Bearer ${token()}`});
    const resp = await fetch(path, Object.assign({}, opts, {headers, cache: "no-store"}));
    if (resp.status === 401) { toLogin(); throw new Error("not logged in"); }
    return resp;
  }

  async function body(resp) {
    const text = await resp.text();
    try { return JSON.parse(text); } catch (e) { return text; }
  }

  // ---- fragments ----------------------------------------------------------------------
  let busy = false;
  async function load(first) {
    const main = $("#content");
    if (busy || !main) return;
    busy = true;
    try {
      const page = document.body.dataset.page;
      const resp = await api(`/ui/f/${page}${location.search}`);
      if (!resp.ok) {
        showError(errorHtml(resp.status, await body(resp)));
        if (first) main.innerHTML = "";
        return;
      }
      const html = await resp.text();
      showError("");
      const live = main.querySelector("#live");
      if (!first && live) {
        const tmp = document.createElement("div");
        tmp.innerHTML = html;
        const fresh = tmp.querySelector("#live");
        if (fresh) { keepOpen(live, fresh); live.replaceWith(fresh); return; }
      }
      main.innerHTML = html;
      main.dataset.loaded = "1";
    } catch (e) {
      if (String(e.message) !== "not logged in") showError(`<strong>${esc(e.message)}</strong> (is the API up?)`);
    } finally {
      busy = false;
    }
  }

  // keep the state-history <details> that were open across a refresh
  function keepOpen(old, fresh) {
    const open = [...old.querySelectorAll("details")].map((d) => d.open);
    fresh.querySelectorAll("details").forEach((d, i) => { if (open[i]) d.open = true; });
  }

  // ---- actions ------------------------------------------------------------------------
  async function submitJob(ev) {
    ev.preventDefault();
    const out = $("#submit-result");
    out.innerHTML = "<p class='muted'>Submitting…</p>";
    const resp = await api("/v1/jobs", {method: "POST", body: $("#job-yaml").value,
                                        headers: {"Content-Type": "application/yaml"}});
    const data = await body(resp);
    if (resp.status === 202) {
      const warnings = (data.warnings || []).map((w) => `<li><code>${esc(w.code)}</code>: ${esc(w.message)}</li>`).join("");
      out.innerHTML = `<p class="ok">Accepted: job <a id="submitted-job" href="/ui/job?id=${encodeURIComponent(data.job_id)}">${esc(data.job_id)}</a></p>` +
        (warnings ? `<div class="error" id="submit-warnings"><strong>It can never run as the cluster is configured:</strong><ul>${warnings}</ul></div>` : "");
      // with warnings the person reads them first (and follows the link)
      if (!warnings) setTimeout(() => location.assign(`/ui/job?id=${encodeURIComponent(data.job_id)}`), 800);
    } else {
      out.innerHTML = `<div class="error">${errorHtml(resp.status, data)}</div>`;
    }
  }

  async function killJob(id) {
    if (!confirm(`Kill job ${id}?`)) return;
    const resp = await api(`/v1/jobs/${encodeURIComponent(id)}/kill`, {method: "POST",
      headers: {"Content-Type": "application/json"}, body: JSON.stringify({reason: "killed from the web UI"})});
    if (resp.status === 202) { showError(""); load(false); }
    else showError(errorHtml(resp.status, await body(resp)));
  }

  async function showLogs(btn) {
    const {logs: id, instance, stream} = btn.dataset;
    const box = $("#logs");
    box.hidden = false;
    $("#logs-title").textContent = `${id}/${instance} ${stream}`;
    const text = $("#logs-text");
    text.textContent = "loading…";
    const resp = await api(`/v1/jobs/${encodeURIComponent(id)}/tasks/${instance}/logs?stream=${stream}`);
    if (resp.ok) text.textContent = (await resp.text()) || "(empty)";
    else text.innerHTML = `<span class="error">${errorHtml(resp.status, await body(resp))}</span>`;
  }

  // ---- login --------------------------------------------------------------------------
  async function login(ev) {
    ev.preventDefault();
    const t = $("#token").value.trim();
    const resp = await fetch("/ui/f/whoami", {headers: {Authorization: `Bearer ${t}`}, cache: "no-store"});
    if (!resp.ok) { showError(errorHtml(resp.status, await body(resp))); return; }
    sessionStorage.setItem(KEY, t);
    const next = new URLSearchParams(location.search).get("next") || "/ui/jobs";
    location.assign(next.startsWith("/ui/") ? next : "/ui/jobs");
  }

  document.addEventListener("DOMContentLoaded", async () => {
    const page = document.body.dataset.page;
    if (page === "login") { $("#login-form").addEventListener("submit", login); return; }
    if (!token()) { toLogin(); return; }
    const out = $("#logout");
    out.hidden = false;
    out.addEventListener("click", () => { sessionStorage.removeItem(KEY); location.assign("/ui/login"); });
    api("/ui/f/whoami").then(async (r) => {
      if (r.ok) { const w = await r.json(); $("#who").textContent = w.user + (w.admin ? " (admin)" : ""); }
    }).catch(() => {});
    document.addEventListener("click", (ev) => {
      const t = ev.target;
      if (t.dataset && t.dataset.kill) killJob(t.dataset.kill);
      if (t.dataset && t.dataset.logs) showLogs(t);
    });
    document.addEventListener("submit", (ev) => { if (ev.target.id === "submit-form") submitJob(ev); });
    await load(true);
    const every = Number($("#content").dataset.live || 0);
    if (every > 0) setInterval(() => { if (!document.hidden) load(false); }, every);
  });
})();
