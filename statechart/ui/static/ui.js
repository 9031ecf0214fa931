// The run inspector's few behaviours: the diagram, live updates, opening rows, decisions.
// Everything shown comes from the server already escaped; this file never writes HTML
// from data, only swaps in fragments the server rendered.
"use strict";

const params = new URLSearchParams(location.search);
if (params.get("token")) {
  sessionStorage.setItem("statechart-token", params.get("token"));
  params.delete("token");
  history.replaceState(null, "", location.pathname + (params.toString() ? "?" + params : ""));
}

function token() {
  return sessionStorage.getItem("statechart-token") || "";
}

async function post(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-Statechart-Token": token() },
    body: JSON.stringify(body),
  });
  let found = {};
  try { found = await response.json(); } catch (e) { found = { error: response.statusText }; }
  if (!response.ok) throw new Error(found.error || response.statusText);
  return found;
}

async function drawDiagram() {
  const node = document.getElementById("diagram");
  if (!node || !window.mermaid) return;
  window.mermaid.initialize({ startOnLoad: false, securityLevel: "strict", theme: "default" });
  await window.mermaid.run({ nodes: [node] });
  node.dataset.drawn = "yes";
}

async function fill(slot, url) {
  if (slot.dataset.loaded) return;
  const response = await fetch(url);
  slot.innerHTML = await response.text(); // a fragment the server rendered and escaped
  slot.dataset.loaded = "yes";
}

function runId() {
  return encodeURIComponent(document.getElementById("run").dataset.run);
}

function toggle(body, open) {
  const detail = body.querySelector("tr.detail");
  detail.hidden = !open;
  const slot = detail.querySelector(".context-slot");
  if (open && slot) fill(slot, slot.dataset.url);
}

function wire(root) {
  for (const button of root.querySelectorAll("button.open")) {
    button.addEventListener("click", () => {
      const body = button.closest("tbody");
      toggle(body, body.querySelector("tr.detail").hidden);
    });
  }
  for (const details of root.querySelectorAll("details.visit")) {
    details.addEventListener("toggle", () => {
      if (details.open) fill(details.querySelector(".slot"), details.dataset.url);
    });
  }
  for (const button of root.querySelectorAll("button.fork")) {
    button.addEventListener("click", async () => {
      try {
        const made = await post(`/decide/fork/${runId()}`, { at: Number(button.dataset.seq) });
        location.href = `/runs/${encodeURIComponent(made.run_id)}`;
      } catch (e) {
        alert(`fork refused: ${e.message}`);
      }
    });
  }
  for (const button of root.querySelectorAll("#decide button")) {
    button.addEventListener("click", () => decide(button.dataset.action));
  }
}

async function decide(action) {
  const error = document.getElementById("decide-error");
  error.textContent = "";
  const by = document.getElementById("by").value.trim();
  const note = document.getElementById("note").value;
  const body = {
    by,
    seq: Number(document.getElementById("run").dataset.seq),
    call: document.getElementById("decide").dataset.call || null,
  };
  let verb = action;
  if (action === "approve") body.note = note;
  if (action === "approve-edits") {
    verb = "approve";
    body.note = note;
    try {
      body.edits = JSON.parse(document.getElementById("edits").value);
    } catch (e) {
      error.textContent = `the arguments are not JSON: ${e.message}`;
      return;
    }
  }
  if (action === "reject" || action === "cancel") body.reason = note;
  try {
    await post(`/decide/${verb}/${runId()}`, body);
    document.getElementById("note").value = ""; // said; not to be said again
    await refresh();
  } catch (e) {
    error.textContent = e.message;
  }
}

async function refresh() {
  const response = await fetch(location.pathname);
  const page = new DOMParser().parseFromString(await response.text(), "text/html");
  const fresh = page.getElementById("run");
  const current = document.getElementById("run");
  if (!fresh || !current) return;
  // what the person had open or typed survives the swap
  const opened = [...current.querySelectorAll("tbody.event")]
    .filter((b) => !b.querySelector("tr.detail").hidden).map((b) => b.dataset.seq);
  const visits = [...current.querySelectorAll("details.visit[open]")].map((d) => d.dataset.visit);
  const typed = {};
  for (const id of ["by", "note"]) {
    const input = document.getElementById(id);
    if (input) typed[id] = input.value;
  }
  current.replaceWith(fresh);
  wire(fresh);
  for (const seq of opened) {
    const body = fresh.querySelector(`tbody.event[data-seq="${CSS.escape(seq)}"]`);
    if (body) toggle(body, true);
  }
  for (const visit of visits) {
    const details = fresh.querySelector(`details.visit[data-visit="${CSS.escape(visit)}"]`);
    if (details) details.open = true;
  }
  for (const [id, value] of Object.entries(typed)) {
    const input = document.getElementById(id);
    if (input) input.value = value;
  }
  await drawDiagram();
}

async function live() {
  const node = document.getElementById("run");
  if (!node) return;
  try {
    const response = await fetch(`/seq/${encodeURIComponent(node.dataset.run)}`);
    const now = await response.json();
    const shown = document.getElementById("run");
    if (String(now.seq) !== shown.dataset.seq || now.status !== shown.dataset.status) {
      await refresh();
    }
  } finally {
    setTimeout(live, 700);
  }
}

// What the driving process streams (server-sent events): the current call's text so far,
// shown as text only; a stored step replaces it with the page's fresh rendering. The
// polling above stays as the fallback (no EventSource, or a store with no live relay).
function showLive(message) {
  const shown = document.getElementById("run");
  if (!shown || Number(message.seq) <= Number(shown.dataset.seq)) return; // stored already
  const box = document.getElementById("live");
  box.hidden = false;
  const what = message.call === "model" ? `model ${message.name}` : `${message.call} ${message.name}`;
  document.getElementById("live-head").textContent =
    `${what} in ${message.path}, step ${message.seq}` +
    (message.again ? " (asked again: the process that asked first died)" : "");
  document.getElementById("live-text").textContent = message.text || "";
  const calls = Object.values(message.calls || {}).map(([tool, args]) => `→ ${tool} ${args}`);
  document.getElementById("live-calls").textContent = calls.join("\n");
  document.getElementById("live-progress").textContent = message.progress || "";
}

function stream() {
  const node = document.getElementById("run");
  if (!node || !window.EventSource) return;
  const source = new EventSource(`/live/${encodeURIComponent(node.dataset.run)}`);
  source.addEventListener("call", (event) => showLive(JSON.parse(event.data)));
  for (const kind of ["stored", "waiting", "ended"]) {
    source.addEventListener(kind, async (event) => {
      const said = JSON.parse(event.data);
      const shown = document.getElementById("run");
      if (shown && String(said.seq) !== shown.dataset.seq) await refresh();
    });
  }
}

document.addEventListener("DOMContentLoaded", async () => {
  wire(document);
  stream();
  await drawDiagram();
  if (document.getElementById("run")) setTimeout(live, 700);
});
