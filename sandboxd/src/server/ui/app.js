// The sandboxd web UI. It talks to the JSON API with the session cookie the
// sign-in opened; every API error is shown in #error.
"use strict";

const $ = (sel) => document.querySelector(sel);

function showError(text) {
  const el = $("#error");
  el.textContent = text || "";
  el.hidden = !text;
}

// Calls the API; answers the parsed JSON (or null), throws an Error whose
// message is what the user should read.
async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, opts);
  } catch (e) {
    throw new Error(`network: ${method} ${path} failed: ${e.message}`);
  }
  const text = await resp.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
  if (!resp.ok) {
    if (resp.status === 401) {
      document.body.dataset.view = "sign-in";
    }
    const err = json && json.error;
    throw new Error(err ? `${err.code}: ${err.message}` : `${resp.status}: ${text}`);
  }
  return json;
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

async function refresh() {
  const list = await api("GET", "/api/sandboxes?limit=1000");
  const body = $("#sandbox-list");
  body.replaceChildren();
  for (const sb of list.items) {
    const tr = el("tr", { "data-sandbox": sb.name });
    tr.append(el("td", { class: "name" }, sb.name));
    tr.append(el("td", { class: "state", "data-state": sb.state }, sb.state));
    tr.append(el("td", { class: "created" }, new Date(sb.created_at).toISOString()));
    const actions = el("td");
    const files = el("button", { type: "button", class: "show-files" }, "Files");
    files.addEventListener("click", () => run(() => showFiles(sb.name)));
    const del = el("button", { type: "button", class: "delete-sandbox" }, "Delete");
    del.addEventListener("click", () => run(async () => {
      await api("DELETE", `/api/sandboxes/${encodeURIComponent(sb.name)}`);
      await refresh();
    }));
    actions.append(files, del);
    tr.append(actions);
    body.append(tr);
  }
  $("#sandbox-empty").hidden = list.items.length > 0;
  // A deleting sandbox goes away by itself: look again until none is left.
  clearTimeout(refresh.again);
  if (list.items.some((sb) => sb.state === "deleting")) {
    refresh.again = setTimeout(() => refresh().catch((e) => showError(e.message)), 1000);
  }
}

async function showFiles(name) {
  const list = await api("GET", `/api/sandboxes/${encodeURIComponent(name)}/files`);
  $("#files").hidden = false;
  $("#files-sandbox").textContent = name;
  $("#file-view").textContent = "";
  const ul = $("#file-list");
  ul.replaceChildren();
  for (const f of list.items) {
    const li = el("li", { "data-path": f.path, "data-kind": f.kind },
      f.kind === "file" ? `${f.path} (${f.size} bytes)` : `${f.path} (${f.kind})`);
    if (f.kind === "file") {
      li.addEventListener("click", () => run(async () => {
        const path = f.path.split("/").map(encodeURIComponent).join("/");
        const resp = await fetch(`/api/sandboxes/${encodeURIComponent(name)}/files/${path}`,
          { credentials: "same-origin" });
        if (!resp.ok) {
          const j = await resp.json().catch(() => null);
          throw new Error(j && j.error ? `${j.error.code}: ${j.error.message}` : `${resp.status}`);
        }
        $("#file-view").textContent = await resp.text();
      }));
    }
    ul.append(li);
  }
  if (list.truncated) ul.append(el("li", {}, "(more not shown)"));
}

// Runs a UI action: clears the error first, shows it if the action fails.
async function run(action) {
  showError("");
  try {
    await action();
  } catch (e) {
    showError(e.message);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  if (document.body.dataset.view !== "app") return;
  $("#create-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    run(async () => {
      const name = $("#create-name").value.trim();
      await api("POST", "/api/sandboxes", { name });
      $("#create-name").value = "";
      await refresh();
    });
  });
  $("#refresh").addEventListener("click", () => run(refresh));
  run(refresh);
});
