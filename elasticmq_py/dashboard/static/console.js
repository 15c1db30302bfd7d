// The console's bar, on every dashboard page: read-only, a login form, or who is logged in.
// The session cookie is HttpOnly (this script never sees it); the CSRF token it is given at login
// (or by GET /ui/api/session after a reload) goes with each action in the X-CSRF-Token header.
"use strict";
window.elasticmqConsole = (function () {
  const state = { writable: false, logged_in: false, csrf: null, allowed: false, reason: "", note: "" };
  const listeners = [];
  const $ = (id) => document.getElementById(id);

  function changed() { render(); for (const f of listeners) f(state); }

  async function post(path, body) {
    const headers = { "Content-Type": "application/json" };
    if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
    const r = await fetch(path, { method: "POST", headers, body: JSON.stringify(body || {}), cache: "no-store",
                                  credentials: "same-origin" });
    let out = {};
    try { out = await r.json(); } catch (e) { /* not JSON */ }
    if (r.status === 401 && path !== "/ui/api/login") {   // the session expired: log in again
      state.logged_in = false; state.csrf = null; state.note = "the session ended: log in again"; changed();
    }
    return { status: r.status, body: out };
  }

  async function refresh() {
    try {
      const r = await fetch("/ui/api/session", { cache: "no-store", credentials: "same-origin" });
      const s = await r.json();
      Object.assign(state, { writable: s.writable, logged_in: s.logged_in, csrf: s.csrf, allowed: s.allowed,
                             reason: s.read_only_reason || (s.allowed ? "" : "actions are not accepted from " + s.peer + " (admin-from)") });
    } catch (e) { state.reason = "the console's state is unknown: " + e.message; }
    changed();
  }

  function render() {
    const bar = $("console");
    if (!bar) return;
    const parts = [];
    if (!state.writable) {
      parts.push(Object.assign(document.createElement("span"), { className: "muted", id: "console-state", textContent: "read-only: " + state.reason }));
    } else if (state.logged_in) {
      parts.push(Object.assign(document.createElement("span"), { id: "console-state", textContent: "console: logged in" }));
      const out = Object.assign(document.createElement("button"), { id: "logout", type: "button", textContent: "log out" });
      out.addEventListener("click", async () => {
        await post("/ui/api/logout");
        state.logged_in = false; state.csrf = null; changed();
      });
      parts.push(out);
    } else {
      const form = document.createElement("form");
      form.id = "login";
      const secret = Object.assign(document.createElement("input"), { id: "secret", type: "password", placeholder: "admin secret",
                                                                      autocomplete: "current-password" });
      const go = Object.assign(document.createElement("button"), { id: "login-button", type: "submit", textContent: "log in to act" });
      const msg = Object.assign(document.createElement("span"), { id: "console-state", className: "muted",
                                                                  textContent: state.note || state.reason });
      form.append(secret, go, msg);
      form.addEventListener("submit", async (ev) => {
        ev.preventDefault();
        const r = await post("/ui/api/login", { secret: secret.value });
        if (r.status === 200) { state.logged_in = true; state.csrf = r.body.csrf; state.note = ""; }
        else state.note = (r.body.error || {}).message || ("login failed: " + r.status);
        changed();
      });
      parts.push(form);
    }
    bar.replaceChildren(...parts);
  }

  // An action on a queue ({region, account, name}); resolves to {status, body} with SQS's answer.
  function act(action, queue, params) { return post("/ui/api/actions/" + action, { queue, params: params || {} }); }

  refresh();
  return { state, act, refresh, onChange: (f) => listeners.push(f) };
})();
