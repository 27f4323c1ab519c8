// The page: layout (three panes on a wide screen, drawers on a narrow one),
// tabs, theme, the store and model-health indicators, and the routes
// (#/c/<session>, #/run/<run>).

import { $, el, plural, fmtInt, store, openDialog } from "./util.js";
import { api, authFetch } from "./api.js";
import { setupSettings } from "./settings.js";
import { state, refreshSessions, refreshRuns, openSession, openRun, newChat, updateCharCount, stop } from "./chat.js";
import { refreshDocuments, setupAdding, setOnIndexed, openDocument } from "./docs.js";
import { setDocumentOpener } from "./answer.js";

// ---------- theme ----------

const THEMES = ["system", "light", "dark"];
function applyTheme(t) {
  if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
  const b = $("theme-toggle");
  b.textContent = t === "light" ? "☀" : t === "dark" ? "☾" : "◐";
  b.setAttribute("aria-label", "Theme: " + t + " (change)");
  b.title = "Theme: " + t + (t === "system" ? " (follows the system)" : "");
}
$("theme-toggle").addEventListener("click", () => {
  const cur = store.get("theme", "system");
  const next = THEMES[(THEMES.indexOf(cur) + 1) % THEMES.length];
  store.set("theme", next);
  applyTheme(next);
});
applyTheme(store.get("theme", "system"));

// ---------- tabs ----------

function setupTabs(list) {
  const tabs = Array.from(list.querySelectorAll('[role="tab"]'));
  const select = (tab, focus) => {
    for (const t of tabs) {
      const on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      $(t.getAttribute("aria-controls")).hidden = !on;
    }
    if (focus) tab.focus();
    tab.dispatchEvent(new Event("tab-selected"));
  };
  for (const t of tabs) {
    t.addEventListener("click", () => select(t, false));
    t.addEventListener("keydown", (ev) => {
      const i = tabs.indexOf(t);
      let j = null;
      if (ev.key === "ArrowRight") j = (i + 1) % tabs.length;
      else if (ev.key === "ArrowLeft") j = (i - 1 + tabs.length) % tabs.length;
      else if (ev.key === "Home") j = 0;
      else if (ev.key === "End") j = tabs.length - 1;
      if (j !== null) { ev.preventDefault(); select(tabs[j], true); }
    });
  }
  return select;
}
const selectLeft = setupTabs($("left-tabs"));
const selectRight = setupTabs($("right-tabs"));
$("tab-runs").addEventListener("tab-selected", refreshRuns);
$("tab-docs").addEventListener("tab-selected", () => refreshDocuments(false));

// ---------- layout: panes or drawers ----------

const wide = window.matchMedia("(min-width: 1200px)");
const medium = window.matchMedia("(min-width: 800px)");
let drawer = null; // {panel, opener}

function isDrawer(panel) {
  return panel.id === "left" ? !medium.matches : !wide.matches;
}
function openDrawer(panel, opener) {
  if (drawer) closeDrawer();
  drawer = { panel, opener };
  panel.classList.add("open");
  $("scrim").hidden = false;
  opener.setAttribute("aria-expanded", "true");
  // Everything else is inert: focus stays in the drawer.
  for (const id of ["topbar", "chat", panel.id === "left" ? "right" : "left"]) $(id).inert = true;
  const first = panel.querySelector(".drawer-close");
  if (first) first.focus();
}
function closeDrawer() {
  if (!drawer) return;
  const { panel, opener } = drawer;
  drawer = null;
  panel.classList.remove("open");
  $("scrim").hidden = true;
  opener.setAttribute("aria-expanded", "false");
  for (const id of ["topbar", "chat", "left", "right"]) $(id).inert = false;
  if (opener.isConnected) opener.focus();
}
function layout() {
  if (drawer && !isDrawer(drawer.panel)) closeDrawer();
  document.body.classList.toggle("left-drawer", isDrawer($("left")));
  document.body.classList.toggle("right-drawer", isDrawer($("right")));
}
wide.addEventListener("change", layout);
medium.addEventListener("change", layout);
layout();

$("open-left").addEventListener("click", () => openDrawer($("left"), $("open-left")));
$("open-right").addEventListener("click", () => openDrawer($("right"), $("open-right")));
for (const b of document.querySelectorAll(".drawer-close")) b.addEventListener("click", closeDrawer);
$("scrim").addEventListener("click", closeDrawer);
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && drawer && !document.querySelector("dialog[open]")) { ev.preventDefault(); closeDrawer(); }
});
// Tab and Shift+Tab cycle inside an open dialog or drawer.
const FOCUSABLE = "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), summary, [tabindex]:not([tabindex='-1'])";
document.addEventListener("keydown", (ev) => {
  if (ev.key !== "Tab") return;
  const box = document.querySelector("dialog[open]") || (drawer && drawer.panel);
  if (!box) return;
  const items = Array.from(box.querySelectorAll(FOCUSABLE)).filter((e) => e.getClientRects().length && !e.closest("[hidden], [inert]"));
  if (!items.length) return;
  const first = items[0], last = items[items.length - 1];
  const inside = box.contains(document.activeElement);
  if (ev.shiftKey && (document.activeElement === first || !inside)) { ev.preventDefault(); last.focus(); }
  else if (!ev.shiftKey && (document.activeElement === last || !inside)) { ev.preventDefault(); first.focus(); }
});
// Following a link inside a drawer (a chat, a run) closes it.
for (const id of ["left", "right"]) {
  $(id).addEventListener("click", (ev) => {
    if (drawer && ev.target.closest("a[href^='#/']")) closeDrawer();
  });
}

state.stepsInView = () => !isDrawer($("right")) && !$("pane-steps").hidden;
state.showSteps = () => {
  selectRight($("tab-steps"), false);
  if (isDrawer($("right")) && !drawer) openDrawer($("right"), $("open-right"));
};

// ---------- store info and model health ----------

async function loadInfo() {
  try {
    const info = await api("GET", "/api/info");
    state.info = info;
    const st = info.store || {};
    const si = $("store-info");
    si.classList.remove("bad");
    si.textContent = plural(st.documents ?? 0, "document") + " · " + plural(st.chunks ?? 0, "passage");
    si.title = "store " + (st.path || "") + " · rlm " + (info.version || "");
    const m = info.models || {};
    $("models-info").textContent = "root model " + (m.root || "?") + " · sub-model " + (m.sub || "?") + " · rlm " + (info.version || "");
    setupSettings(info);
    setupAdding(info);
    updateCharCount();
    return true;
  } catch (e) {
    const si = $("store-info");
    si.textContent = "server unavailable (retrying)";
    si.title = e.message;
    si.classList.add("bad");
    setTimeout(loadInfo, 3000);
    return false;
  }
}

const HEALTH_TEXT = { ok: "model ready", degraded: "model degraded", down: "model down", unknown: "model unknown" };
let healthTimer = null;
async function checkHealth() {
  clearTimeout(healthTimer);
  const dot = $("health");
  let h = null;
  try {
    const res = await authFetch("/api/health");
    if (res.status === 404) { dot.hidden = true; return; }
    h = await res.json().catch(() => null);
  } catch (e) {
    h = { status: "down", model: { status: "unknown", message: "the server at " + location.host + " is not answering" }, server_gone: true };
  }
  dot.hidden = false;
  const model = (h && h.model) || {};
  const storeH = (h && h.store) || {};
  const status = h && h.server_gone ? "down" : model.status || (h && h.status) || "unknown";
  dot.dataset.state = status;
  $("health-text").textContent = h && h.server_gone ? "server gone" : HEALTH_TEXT[status] || status;
  const lines = [];
  if (h && h.server_gone) lines.push(model.message);
  else {
    lines.push("Model (" + (model.provider || "?") + (model.endpoint ? " at " + model.endpoint : "") + "): " + (model.status || "?") + (model.latency_ms != null ? ", " + fmtInt(model.latency_ms) + " ms" : "") + (model.message ? " — " + model.message : ""));
    lines.push("Store: " + (storeH.status || "?") + (storeH.message ? " — " + storeH.message : "") + (storeH.documents != null ? " (" + plural(storeH.documents, "document") + ")" : ""));
    if (h && h.indexing && h.indexing.running) lines.push("Indexing in progress");
    if (h && h.checked_at) lines.push("checked " + new Date(h.checked_at).toLocaleTimeString());
  }
  $("health-detail").replaceChildren(...lines.map((l) => el("div", { text: l })));
  dot.setAttribute("aria-label", $("health-text").textContent + ": " + lines[0]);
  clearTimeout(healthTimer);
  healthTimer = setTimeout(checkHealth, status === "ok" ? 30000 : 10000);
}
$("health").addEventListener("click", () => {
  const d = $("health-detail");
  d.hidden = !d.hidden;
  $("health").setAttribute("aria-expanded", d.hidden ? "false" : "true");
});
document.addEventListener("rlm:health", checkHealth);
// A request the server did not answer: the indicator says so at once.
document.addEventListener("rlm:unreachable", () => {
  const dot = $("health");
  if (dot.dataset.state === "down" && $("health-text").textContent === "server gone") return;
  dot.hidden = false;
  dot.dataset.state = "down";
  $("health-text").textContent = "server gone";
  const line = "the server at " + location.host + " is not answering";
  $("health-detail").replaceChildren(el("div", { text: line }));
  dot.setAttribute("aria-label", "server gone: " + line);
  clearTimeout(healthTimer);
  healthTimer = setTimeout(checkHealth, 10000);
});

// ---------- dialogs ----------

for (const id of ["source-close", "doc-close", "rename-cancel", "confirm-no", "help-close"]) {
  $(id).addEventListener("click", () => $(id).closest("dialog").close());
}
// A click on the backdrop (outside the dialog's box) closes it, as Escape does.
for (const d of document.querySelectorAll("dialog")) {
  if (d.id === "token-dialog") continue;
  d.addEventListener("click", (ev) => {
    if (ev.target !== d) return;
    const r = d.getBoundingClientRect();
    if (ev.clientX < r.left || ev.clientX > r.right || ev.clientY < r.top || ev.clientY > r.bottom) d.close();
  });
}

// ---------- keyboard shortcuts ----------

function typing(t) { return t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName)); }
$("help-open").addEventListener("click", () => openDialog($("help-dialog"), $("help-close")));
document.addEventListener("keydown", (ev) => {
  if (ev.defaultPrevented || document.querySelector("dialog[open]")) return;
  const k = ev.key;
  if ((ev.ctrlKey || ev.metaKey) && !ev.altKey && k.toLowerCase() === "k") {
    ev.preventDefault();
    if (isDrawer($("left")) && !drawer) openDrawer($("left"), $("open-left"));
    selectLeft($("tab-chats"), false);
    $("chat-search").focus();
  } else if (ev.altKey && !ev.ctrlKey && !ev.metaKey && ev.code === "KeyN") {
    ev.preventDefault();
    if (drawer) closeDrawer();
    newChat();
  } else if (ev.altKey && !ev.ctrlKey && !ev.metaKey && ev.code === "Period") {
    ev.preventDefault();
    stop();
  } else if (!typing(ev.target) && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
    if (k === "/") { ev.preventDefault(); if (drawer) closeDrawer(); $("question").focus(); }
    else if (k === "?") { ev.preventDefault(); openDialog($("help-dialog"), $("help-close")); }
  }
});

// ---------- routes ----------

async function route() {
  const h = location.hash;
  let m;
  if ((m = /^#\/c\/([^/]+)$/.exec(h))) {
    const id = decodeURIComponent(m[1]);
    if (!state.current || state.current.id !== id) await openSession(id);
  } else if ((m = /^#\/run\/([^/]+)$/.exec(h))) {
    await openRun(decodeURIComponent(m[1]));
  } else if ((m = /^#\/doc\/([^/?]+)(?:\/([^/?]+))?(?:\?q=(.*))?$/.exec(h))) {
    if (!state.current) newChat();
    const d = { id: decodeURIComponent(m[1]), chunk: m[2] ? decodeURIComponent(m[2]) : null, quote: m[3] ? decodeURIComponent(m[3]) : null };
    if (!$("doc-dialog").open) openDocument(d);
  } else {
    newChat();
  }
}
window.addEventListener("hashchange", route);

setDocumentOpener(openDocument);
setOnIndexed(() => { loadInfo(); refreshDocuments(false); });
selectLeft($("tab-chats"), false);
selectRight($("tab-steps"), false);

(async () => {
  await loadInfo();
  checkHealth();
  await refreshSessions();
  await route();
  if (!matchMedia("(pointer: coarse)").matches) $("question").focus();
  document.body.dataset.ready = "1";
})();
