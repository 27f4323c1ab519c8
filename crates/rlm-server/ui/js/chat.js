// Conversations: sessions (list, open, rename, delete, a URL each), the
// thread of a session, asking (live steps, Stop), answers (copy,
// regenerate, steps), errors with Retry, and past runs reopened.

import { $, el, plural, fmtInt, fmtSecs, short, ago, announce, copyText, openDialog, store } from "./util.js";
import { api, readEvents, HttpError } from "./api.js";
import { renderAnswer, plainAnswer } from "./answer.js";
import { StepsView, emptySteps } from "./steps.js";
import { askOptions } from "./settings.js";
import { AnswerStream } from "./stream.js";

const SESSION_ID = /^[A-Za-z0-9._-]{1,64}$/;

export const state = {
  info: null,
  sessions: [],
  current: null,  // {id, title} of the open chat; id null for a new chat not yet asked
  turns: [],      // the open chat's turns: {id, runId, parent, question, ans}
  choice: {},     // per parent turn id ("" for the first question): the version shown
  views: new Map(), // run id → RunView (claims and usage the turns do not keep)
  run: null,      // the question being answered
  showSteps: null, // set by the layout: reveals the Steps panel
};

// ---------- sessions ----------

export async function refreshSessions() {
  try {
    const data = await api("GET", "/api/sessions");
    state.sessions = (data && data.sessions) || [];
    $("sessions-error").textContent = "";
  } catch (e) {
    $("sessions-error").textContent = "Could not list the chats: " + e.message;
  }
  renderSessions();
}

function sessionTitle(s) { return (s && (s.title || s.name || s.id)) || "New chat"; }

function renderSessions() {
  const ul = $("sessions");
  // The list is redrawn: focus on one of its controls moves to the same control.
  const a = document.activeElement;
  const keep = a && ul.contains(a) ? { id: a.closest("li").dataset.session, cls: a.className } : null;
  const cur = state.current && state.current.id;
  const q = $("chat-search").value.trim().toLocaleLowerCase();
  const shown = q ? state.sessions.filter((s) => sessionTitle(s).toLocaleLowerCase().includes(q)) : state.sessions;
  $("chat-search-count").textContent = q ? plural(shown.length, "chat") + " of " + state.sessions.length : "";
  const items = shown.map((s) => {
    const id = s.id || s.name;
    const title = sessionTitle(s);
    const open = el("a", { class: "session-open", href: "#/c/" + encodeURIComponent(id), title, "aria-current": id === cur ? "page" : null },
      el("span", { class: "name", text: title }),
      el("span", { class: "meta", text: plural(s.turns ?? 0, "question") + (s.updated_at ? " · " + ago(s.updated_at) : "") }));
    const rename = el("button", { type: "button", class: "icon-btn rename", "aria-label": "Rename chat “" + title + "”", title: "Rename", text: "✎" });
    rename.addEventListener("click", () => renameSession(id, title));
    const del = el("button", { type: "button", class: "icon-btn delete", "aria-label": "Delete chat “" + title + "”", title: "Delete", text: "✕" });
    del.addEventListener("click", () => deleteSession(id, title));
    return el("li", { class: id === cur ? "active" : "", dataset: { session: id } }, open, rename, del);
  });
  if (!items.length) items.push(el("li", { class: "empty", text: q ? "No chat title matches." : "No chats yet: ask a question to start one." }));
  ul.replaceChildren(...items);
  if (keep) {
    const li = Array.from(ul.children).find((x) => x.dataset.session === keep.id);
    const target = li && Array.from(li.children).find((x) => x.className === keep.cls);
    if (target) target.focus();
  }
}

function setChatTitle(title) {
  $("chat-title").textContent = title || "New chat";
  document.title = (title ? short(title, 60) + " · " : "") + "rlm";
  $("rename-chat").hidden = !(state.current && state.current.id && state.sessions.some((s) => (s.id || s.name) === state.current.id));
}

/** Opens a session by id (from its URL or the list). */
export async function openSession(id) {
  if (state.run) { composerMsg("Stop the running question (or wait for it) before switching chats."); return false; }
  state.current = { id, title: null };
  state.turns = [];
  state.choice = store.get("branch." + id, {}) || {};
  const known = state.sessions.find((s) => (s.id || s.name) === id);
  setChatTitle(known ? sessionTitle(known) : "…");
  renderSessions();
  $("messages").replaceChildren();
  emptySteps("Open an answer's steps, or ask a question.");
  try {
    await loadTurns(id);
  } catch (e) {
    if (!state.current || state.current.id !== id) return false;
    if (e.status === 404) {
      setChatTitle("Chat not found");
      $("messages").appendChild(errorCard({ headline: "There is no chat “" + id + "” on this server", detail: "It may have been deleted. Start a new chat or pick one from the list." }));
    } else {
      $("messages").appendChild(errorCard({ headline: "Could not open this chat", detail: e.message }, () => openSession(id)));
    }
    return false;
  }
  if (!state.current || state.current.id !== id) return false;
  renderThread();
  scrollThread();
  await upgradeCards(id);
  return true;
}

// ---------- the conversation: turns, branches, versions ----------

/** Reads the session's turns and, from their runs, which turn each
 * question was asked after (a branch: an edit or a regenerated answer). */
async function loadTurns(id) {
  const [data, runs] = await Promise.all([
    api("GET", "/api/sessions/" + encodeURIComponent(id) + "?limit=100"),
    api("GET", "/api/runs?limit=500&session=" + encodeURIComponent(id)).catch(() => ({ runs: [] })),
  ]);
  if (!state.current || state.current.id !== id) return;
  state.current.title = data.title || data.name || id;
  setChatTitle(state.current.title);
  state.earlier = data.first || 0;
  const byRun = new Map(((runs && runs.runs) || []).map((r) => [r.id, r]));
  const turns = [];
  let prev = null;
  (data.history || []).forEach((t, i) => {
    const id = t.run_id || "t" + (state.earlier + i);
    const run = t.run_id ? byRun.get(t.run_id) : null;
    let parent = prev;
    if (run && Array.isArray(run.history_runs)) parent = run.history_runs.length ? run.history_runs[run.history_runs.length - 1] : null;
    turns.push({
      id, runId: t.run_id || null, parent, question: t.question || "",
      ans: { answer: t.answer || "", partial: !!t.partial, citations: Array.isArray(t.citations) ? t.citations : null },
    });
    prev = id;
  });
  const ids = new Set(turns.map((t) => t.id));
  for (const t of turns) if (t.parent !== null && !ids.has(t.parent)) t.parent = null;
  state.turns = turns;
}

function versionsOf(turn) { return state.turns.filter((t) => t.parent === turn.parent); }

/** The turns shown: from the first question, the chosen version of each
 * (the newest unless another was picked), up to `until` when given. */
function shownPath(until) {
  const path = [];
  let parent = null;
  for (;;) {
    if (until !== undefined && parent === until) break;
    const kids = state.turns.filter((t) => t.parent === parent);
    if (!kids.length) break;
    const t = kids.find((k) => k.id === state.choice[parent ?? ""]) || kids[kids.length - 1];
    path.push(t);
    parent = t.id;
  }
  return path;
}

/** The runs whose turns the model is given after `parent` (its ancestors),
 * or null when one of them has no run id (then the whole session is). */
function historyRuns(parent) {
  const byId = new Map(state.turns.map((t) => [t.id, t]));
  const runs = [];
  for (let t = byId.get(parent); t; t = byId.get(t.parent)) {
    if (!t.runId) return null;
    runs.unshift(t.runId);
  }
  return runs;
}

function choose(parent, id) {
  state.choice[parent ?? ""] = id;
  if (state.current && state.current.id) store.set("branch." + state.current.id, state.choice);
}

/** Draws the thread: the shown path (up to `until`, when a new version of
 * a later turn is being asked). */
function renderThread(until) {
  const box = $("messages");
  const nodes = [];
  if (state.earlier > 0) nodes.push(el("p", { class: "muted older", text: plural(state.earlier, "earlier question") + " not shown" }));
  for (const turn of shownPath(until)) {
    nodes.push(userBubble(turn.question, turn));
    const view = turn.runId ? state.views.get(turn.runId) : null;
    const ans = view && view.answer ? view.answer : turn.ans;
    nodes.push(answerCard(ans, { question: turn.question, runId: turn.runId, view, turn }));
  }
  box.replaceChildren(...nodes);
  $("export").hidden = !state.turns.length;
}

/** The saved runs carry the claims and usage that the turns do not. */
async function upgradeCards(id) {
  for (const turn of shownPath().slice(-10)) {
    if (!turn.runId || state.views.has(turn.runId)) continue;
    try {
      const view = await api("GET", "/api/runs/" + encodeURIComponent(turn.runId));
      if (!state.current || state.current.id !== id || state.run) return;
      state.views.set(turn.runId, view);
      const card = $("messages").querySelector('.msg.answer[data-turn="' + CSS.escape(turn.id) + '"]');
      if (card && view && view.answer) card.replaceWith(answerCard(view.answer, { question: turn.question, runId: turn.runId, view, turn }));
    } catch (_) { /* run pruned (--keep-runs): the turn as saved stays */ }
  }
}

/** A fresh, empty chat (its session is made with its first question). */
export function newChat() {
  if (state.run) { composerMsg("Stop the running question (or wait for it) before starting a new chat."); return; }
  state.current = { id: null, title: null };
  state.turns = [];
  state.choice = {};
  state.earlier = 0;
  $("export").hidden = true;
  setChatTitle(null);
  renderSessions();
  const welcome = el("div", { class: "welcome" }, el("p", { text: "Ask a question about the documents. Answers cite their sources; each chat keeps its history." }));
  $("messages").replaceChildren(welcome);
  examples(welcome);
  emptySteps("The steps of the next question appear here live.");
  if (location.hash && location.hash !== "#/") history.pushState(null, "", "#/");
  $("question").focus();
}

/** Example questions on an empty chat, about documents of the store. */
async function examples(box) {
  let docs = [];
  try { docs = ((await api("GET", "/api/documents?limit=20")) || {}).documents || []; } catch (_) { return; }
  // Documents spread over the store, by their titles (else file names).
  const picks = [];
  for (let i = 0; i < docs.length && picks.length < 3; i += Math.max(1, Math.floor(docs.length / 3))) picks.push(docs[i]);
  if (!picks.length || !box.isConnected) return;
  const list = el("ul", { class: "examples", "aria-label": "Example questions" });
  for (const d of picks) {
    const name = (d.title || d.path || "").split("/").pop();
    const q = "What does “" + name + "” say?";
    const b = el("button", { type: "button", class: "example", text: q });
    b.addEventListener("click", () => {
      const box = $("question");
      box.value = q;
      box.dispatchEvent(new Event("input"));
      box.focus();
    });
    list.appendChild(el("li", null, b));
  }
  box.append(el("p", { class: "hint", text: "For example, about documents of this store:" }), list);
}

function renameSession(id, title) {
  const dialog = $("rename-dialog");
  const input = $("rename-input");
  input.value = title || "";
  $("rename-error").textContent = "";
  const max = (state.info && state.info.limits && state.info.limits.max_title_chars) || 200;
  input.maxLength = max;
  const submit = async (ev) => {
    ev.preventDefault();
    const t = input.value.trim();
    if (!t) { $("rename-error").textContent = "Enter a title."; return; }
    try {
      await api("PATCH", "/api/sessions/" + encodeURIComponent(id), { title: t });
    } catch (e) {
      $("rename-error").textContent = "Could not rename: " + e.message;
      return;
    }
    cleanup();
    dialog.close();
    if (state.current && state.current.id === id) { state.current.title = t; setChatTitle(t); }
    announce("Chat renamed to " + t);
    await refreshSessions();
  };
  const cleanup = () => { $("rename-form").removeEventListener("submit", submit); dialog.removeEventListener("close", cleanup); };
  $("rename-form").addEventListener("submit", submit);
  dialog.addEventListener("close", cleanup);
  openDialog(dialog, input);
  input.select();
}

function deleteSession(id, title) {
  const dialog = $("confirm-dialog");
  $("confirm-text").textContent = "Delete the chat “" + title + "” with its history and findings? This cannot be undone.";
  const yes = async () => {
    cleanup();
    dialog.close();
    try {
      await api("DELETE", "/api/sessions/" + encodeURIComponent(id));
    } catch (e) {
      if (e.status !== 404) { composerMsg("Could not delete the chat: " + e.message); return; }
    }
    store.remove("branch." + id);
    announce("Chat deleted");
    if (state.current && state.current.id === id) newChat();
    await refreshSessions();
  };
  const cleanup = () => { $("confirm-yes").removeEventListener("click", yes); dialog.removeEventListener("close", cleanup); };
  $("confirm-yes").addEventListener("click", yes);
  dialog.addEventListener("close", cleanup);
  openDialog(dialog, $("confirm-no"));
}

$("rename-chat").addEventListener("click", () => {
  if (state.current && state.current.id) renameSession(state.current.id, state.current.title);
});
$("new-chat").addEventListener("click", newChat);

// ---------- the thread ----------

function scrollThread() { const m = $("messages"); m.scrollTop = m.scrollHeight; }
function composerMsg(text) { $("composer-msg").textContent = text || ""; }

function userBubble(text, turn) {
  const bubble = el("div", { class: "msg user" }, el("h3", { class: "sr-only", text: "You asked" }), el("div", { class: "user-text", text }));
  if (turn) {
    const edit = el("button", { type: "button", class: "small-btn edit", text: "Edit", "aria-label": "Edit this question and ask again" });
    edit.addEventListener("click", () => editQuestion(bubble, turn));
    bubble.appendChild(el("div", { class: "user-actions" }, edit));
  }
  return bubble;
}

/** The question in a box to change and send again: a new version beside
 * the old one (which is kept). */
function editQuestion(bubble, turn) {
  if (state.run) { composerMsg("A question is already running: Stop it or wait."); return; }
  const box = el("textarea", { class: "edit-box", rows: "3", "aria-label": "Edited question" });
  box.value = turn.question;
  const send = el("button", { type: "submit", class: "primary", text: "Send" });
  const cancel = el("button", { type: "button", text: "Cancel" });
  const form = el("form", { class: "edit-form" }, box, el("div", { class: "edit-buttons" }, cancel, send));
  const old = Array.from(bubble.childNodes);
  bubble.replaceChildren(form);
  const restore = () => { bubble.replaceChildren(...old); bubble.querySelector(".edit").focus(); };
  cancel.addEventListener("click", restore);
  box.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape") { ev.preventDefault(); ev.stopPropagation(); restore(); }
    if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); form.requestSubmit(); }
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = box.value.trim();
    if (!q) { box.focus(); return; }
    ask(q, { parent: turn.parent });
  });
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

/** ‹ 1/2 ›: the versions of a turn (regenerated answers, edited questions). */
function versionNav(turn) {
  const all = versionsOf(turn);
  if (all.length < 2) return null;
  const i = all.indexOf(turn);
  const go = (j) => () => {
    choose(turn.parent, all[j].id);
    renderThread();
    // Steps shown beside the thread follow the version shown.
    if (all[j].runId && state.stepsInView && state.stepsInView()) showRunSteps(all[j].runId, false);
    const card = $("messages").querySelector('.msg.answer[data-turn="' + CSS.escape(all[j].id) + '"]');
    if (card) { const b = card.querySelector(j < i ? ".prev-version" : ".next-version"); (b && !b.disabled ? b : card.querySelector(".versions-text")).focus(); }
    upgradeCards(state.current && state.current.id);
  };
  const prev = el("button", { type: "button", class: "icon-btn prev-version", "aria-label": "Previous version", text: "‹", disabled: i === 0 });
  const next = el("button", { type: "button", class: "icon-btn next-version", "aria-label": "Next version", text: "›", disabled: i === all.length - 1 });
  if (i > 0) prev.addEventListener("click", go(i - 1));
  if (i < all.length - 1) next.addEventListener("click", go(i + 1));
  return el("span", { class: "versions", role: "group", "aria-label": "Versions" }, prev,
    el("span", { class: "versions-text", tabindex: "-1", text: (i + 1) + "/" + all.length, "aria-label": "version " + (i + 1) + " of " + all.length }), next);
}

function answerCard(ans, { question, runId, view, turn }) {
  const data = {};
  if (runId) data.run = runId;
  if (turn) data.turn = turn.id;
  const card = el("article", { class: "msg answer", "aria-label": "Answer", dataset: data });
  if (ans.partial) {
    card.appendChild(el("p", { class: "badge partial", text: "Partial answer" + (ans.partial_reason ? ": " + ans.partial_reason : "") }));
  }
  const r = renderAnswer(ans);
  card.appendChild(r.node);
  const foot = el("div", { class: "foot" });
  const stats = [];
  stats.push(r.verified ? plural(r.verified, "verified source") : "no verified source");
  if (r.related) stats.push(plural(r.related, "related passage"));
  if (ans.grounded && typeof ans.grounded.claims === "number") stats.push(ans.grounded.supported + "/" + ans.grounded.claims + " claims entailed by their passage");
  const u = ans.usage;
  if (u) {
    stats.push(plural(u.calls ?? 0, "model call"));
    stats.push(fmtInt(u.input_tokens) + " in / " + fmtInt(u.output_tokens) + " out tokens");
    if (u.cost_usd != null) stats.push("$" + Number(u.cost_usd).toFixed(4));
    if (typeof u.wall_ms === "number") stats.push(fmtSecs(u.wall_ms));
  }
  if (view && view.flow) stats.push(view.flow);
  foot.appendChild(el("span", { class: "stats" + (r.verified ? "" : " warn"), text: stats.join(" · ") }));
  const actions = el("span", { class: "actions" });
  const nav = turn ? versionNav(turn) : null;
  if (nav) actions.appendChild(nav);
  const copy = el("button", { type: "button", class: "small-btn copy", text: "Copy" });
  copy.addEventListener("click", async () => {
    const ok = await copyText(plainAnswer(ans));
    copy.textContent = ok ? "Copied" : "Copy failed";
    announce(ok ? "Answer copied" : "Could not copy the answer");
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  actions.appendChild(copy);
  if (question && turn) {
    // A new version in place of this one; the rerun does not see it.
    const regen = el("button", { type: "button", class: "small-btn regenerate", text: "Regenerate" });
    regen.addEventListener("click", () => ask(question, { parent: turn.parent }));
    actions.appendChild(regen);
  }
  if (runId) {
    const steps = el("button", { type: "button", class: "small-btn steps-btn", text: "Steps" });
    steps.addEventListener("click", () => showRunSteps(runId));
    actions.appendChild(steps);
  }
  foot.appendChild(actions);
  card.appendChild(foot);
  return card;
}

/** An error: a headline naming what failed, details on demand, Retry. */
function errorCard(f, retry) {
  const card = el("div", { class: "msg error", role: "group", "aria-label": "Error" },
    el("p", { class: "err-head", text: f.headline }));
  if (f.detail && f.detail !== f.headline) {
    card.appendChild(el("details", { class: "err-detail" }, el("summary", { text: "Details" }), el("pre", { text: f.detail })));
  }
  if (retry) {
    const b = el("button", { type: "button", class: "primary retry", text: "Retry" });
    b.addEventListener("click", retry);
    card.appendChild(b);
  }
  return card;
}

/** What failed, in words a user acts on. */
export function describeFailure(err, view, traceErrors) {
  const detail = [err && err.message, view && view.error, view && view.answer && view.answer.partial_reason, ...(traceErrors || [])].filter(Boolean).join("\n");
  if (err) {
    if (err.status === 0) return { headline: "Server unreachable: rlm serve at " + location.host + " is not answering", detail };
    if (err.status === 429) return { headline: "Server busy: all " + ((state.info && state.info.limits && state.info.limits.max_concurrent_runs) || "its") + " run slots are taken; retry in a moment", detail };
    if (err.status === 413) return { headline: "Question too long for the server", detail };
    if (err.status === 400) return { headline: "The server refused the question: " + short(err.message, 160), detail };
    if (err.status === 403) return { headline: "The server refused the request (403)", detail };
    if (err.status === 507) return { headline: "Answered, but the server could not save it (disk full?)", detail };
    return { headline: "The request failed (HTTP " + err.status + ")", detail };
  }
  const text = detail;
  let m;
  if ((m = /cannot reach (\S+): /.exec(text))) return { headline: "Model unreachable at " + m[1], detail };
  if ((m = /no answer from (\S+) within/.exec(text))) return { headline: "Model did not answer in time at " + m[1], detail };
  if (/rejected the API key/.test(text)) return { headline: "The model provider refused the API key", detail };
  if (/rate limiting/.test(text)) return { headline: "The model provider is rate limiting", detail };
  if (view && view.status === "cancelled") return { headline: "Stopped: the question was cancelled", detail };
  if (/^interrupted/m.test(text)) return { headline: "The server stopped while this question ran", detail };
  if (/budget|max_llm_calls|iterations|wall|cost|deadline/i.test(text)) {
    const reason = ((view && view.answer && view.answer.partial_reason) || text.split("\n")[0]).replace(/\s*budget exhausted\s*/i, " ").trim();
    return { headline: "Budget exhausted: " + short(reason, 140), detail };
  }
  return { headline: "The question failed: " + short(text.split("\n")[0] || (view && view.status) || "no answer", 160), detail };
}

// ---------- asking ----------

function newSessionId() {
  const rand = new Uint8Array(4);
  crypto.getRandomValues(rand);
  return "s" + Date.now().toString(16) + "-" + Array.from(rand, (b) => b.toString(16).padStart(2, "0")).join("");
}

function setRunning(on) {
  $("send").disabled = on;
  $("stop").disabled = !on;
  $("stop").hidden = !on;
}

/** Asks `question` in the open chat (making its session on the first);
 * `parent`: the turn it follows (a new version of a later turn), else the
 * last turn shown. */
export async function ask(question, { parent } = {}) {
  if (state.run) { composerMsg("A question is already running: Stop it or wait."); return; }
  const q = String(question || "").trim();
  if (!q) { composerMsg("Type a question first."); $("question").focus(); return; }
  const max = state.info && state.info.limits && state.info.limits.max_question_chars;
  if (max && q.length > max) { composerMsg("The question is " + fmtInt(q.length) + " characters; the server takes at most " + fmtInt(max) + "."); return; }
  let opts;
  try { opts = askOptions(); } catch (e) { composerMsg(e.message); return; }
  composerMsg("");
  if (!state.current || !state.current.id) {
    // A new chat starts clean (not below a past run's page).
    const id = newSessionId();
    state.current = { id, title: q };
    state.turns = [];
    state.choice = {};
    state.earlier = 0;
    $("messages").replaceChildren();
    history.pushState(null, "", "#/c/" + id);
    setChatTitle(q);
  }
  const path = shownPath();
  const after = parent !== undefined ? parent : path.length ? path[path.length - 1].id : null;
  // A new version of a later turn: the thread shows the turns before it.
  if (parent !== undefined) renderThread(after);
  const sessionId = state.current.id;
  const welcome = $("messages").querySelector(".welcome");
  if (welcome) welcome.remove();
  const bubble = userBubble(q);
  const stream = new AnswerStream({ openStep: (turn, index) => showStep(turn, index), onDraw: () => { if (follow) scrollThread(); } });
  const status = el("span", { class: "pending-text", text: "Sending…" });
  const pending = el("div", { class: "msg pending live", "aria-busy": "true" },
    el("div", { class: "live-head" }, el("span", { class: "spinner", "aria-hidden": "true" }), status), stream.node);
  $("messages").append(bubble, pending);
  scrollThread();
  const steps = new StepsView($("steps"), $("steps-status"));
  const run = { id: null, question: q, sessionId, pending, bubble, steps, started: Date.now(), ctrl: new AbortController(), traceErrors: [] };
  state.run = run;
  setRunning(true);
  const tick = () => {
    const secs = Math.round((Date.now() - run.started) / 1000);
    status.textContent = (run.id ? "Working" : "Sending") + "… " + secs + " s · " + plural(steps.events, "step") + (run.retrying ? " · model retrying " + run.retrying : "");
  };
  run.timer = setInterval(tick, 1000);

  let view = null;
  let failure = null;
  const body = Object.assign({ question: q, session: sessionId }, opts);
  const runs = historyRuns(after);
  if (runs) body.history_runs = runs;
  try {
    const started = await api("POST", "/api/runs", body, run.ctrl.signal);
    run.id = started.id;
    tick();
    const url = started.events || "/api/runs/" + encodeURIComponent(started.id) + "/events";
    await readEvents(url, (ev) => {
      if (ev.event === "trace") {
        let rec;
        try { rec = JSON.parse(ev.data); } catch (_) { return; }
        if (rec.type === "llm_error" && rec.message) run.traceErrors.push(rec.message);
        // The root's retries show in the status line ("model retrying 2/5").
        if (rec.type === "llm_retry" && rec.agent === "0") run.retrying = rec.attempt + "/" + rec.of;
        else if (rec.type === "llm_response" && rec.agent === "0") run.retrying = null;
        try { steps.handle(rec); } catch (e) { console.error("step", rec, e); }
        tick();
        try { stream.handle(rec); } catch (e) { console.error("stream", rec, e); }
      } else if (ev.event === "end") {
        try { view = JSON.parse(ev.data); } catch (_) { view = null; }
      }
    }, { signal: run.ctrl.signal });
    if (!view) view = await api("GET", "/api/runs/" + encodeURIComponent(run.id));
  } catch (e) {
    if (run.ctrl.signal.aborted && !run.id) failure = { stoppedEarly: true };
    else failure = e instanceof HttpError ? e : new HttpError(0, String(e && e.message || e));
  }
  clearInterval(run.timer);
  steps.end(view);
  state.run = null;
  setRunning(false);
  await finish(run, { q, view, failure, stream, after });
}

/** The outcome of a question in the thread: its answer (a new version in
 * place), or what failed, with what was written before kept. */
async function finish(run, { q, view, failure, stream, after }) {
  const { pending, bubble, sessionId } = run;
  let errCard = null;
  const retry = () => {
    if (errCard) errCard.remove();
    bubble.remove();
    ask(q, { parent: after });
  };
  const kept = () => stream.written ? el("details", { class: "stream-kept", open: true },
    el("summary", { text: "Written before it stopped" }), stream.replies()) : null;
  const ans = view && view.answer;
  const failedRun = !failure && (!ans || view.status === "failed" || (ans.partial && !String(ans.answer || "").trim()));
  if (failure && failure.stoppedEarly) {
    errCard = errorCard({ headline: "Stopped before the server started answering" }, retry);
    pending.replaceWith(errCard);
    if (!$("question").value.trim()) $("question").value = q;
    announce("Stopped");
    $("question").focus();
    return;
  }
  if (failure || failedRun) {
    const f = describeFailure(failure, view, run.traceErrors);
    errCard = errorCard(f, retry);
    const k = kept();
    if (k) errCard.appendChild(k);
    pending.replaceWith(errCard);
    if (!$("question").value.trim()) $("question").value = q;
    composerMsg("");
    announce("Question failed: " + f.headline);
    // What the page saw is what the health indicator says.
    document.dispatchEvent(new Event("rlm:health"));
    $("question").focus();
    scrollThread();
    return;
  }
  state.views.set(view.id, view);
  if ($("question").value.trim() === q) { $("question").value = ""; $("question").dispatchEvent(new Event("input")); }
  // The model answered: a health dot still saying otherwise is re-checked.
  if ($("health").dataset.state !== "ok") document.dispatchEvent(new Event("rlm:health"));
  announce((ans.partial ? "Partial answer: " : "Answer ready: ") + short(String(ans.answer || "").replace(/\[\[[^\]]*\]\]/g, ""), 200));
  const shown = await refreshTurns(sessionId, view.id, after);
  let card = shown;
  if (!card) {
    // The turn could not be read back (not saved): the answer stays shown.
    card = answerCard(ans, { question: q, runId: view.id, view });
    pending.replaceWith(card);
  }
  if (ans.partial) {
    const f = describeFailure(null, view, run.traceErrors);
    card.prepend(el("p", { class: "partial-head", text: f.headline }));
    const k = kept();
    if (k) card.appendChild(k);
  }
  showAnswerTop(card);
  await refreshSessions();
  const s = state.sessions.find((x) => (x.id || x.name) === sessionId);
  if (s && state.current && state.current.id === sessionId) { state.current.title = sessionTitle(s); setChatTitle(state.current.title); }
}

/** Reads the chat's turns again after run `runId` answered and shows its
 * version; the card of its answer, or null when it is not in the chat. */
async function refreshTurns(sessionId, runId, after) {
  if (!state.current || state.current.id !== sessionId || state.run) return null;
  try { await loadTurns(sessionId); } catch (_) { return null; }
  const turn = state.turns.find((t) => t.runId === runId);
  if (!turn) return null;
  choose(after, turn.id);
  renderThread();
  return $("messages").querySelector('.msg.answer[data-turn="' + CSS.escape(turn.id) + '"]');
}

/** A finished answer is read from its top: the thread scrolls to its start
 * when it is taller than the view, else to the end. */
function showAnswerTop(card) {
  const m = $("messages");
  const bubble = card.previousElementSibling;
  const top = (bubble && bubble.classList.contains("user") ? bubble : card).offsetTop - m.offsetTop;
  if (m.scrollHeight - top > m.clientHeight) m.scrollTop = Math.max(0, top - 8);
  else scrollThread();
}

// The thread follows the text being written while its end is in view.
let follow = true;
$("messages").addEventListener("scroll", () => {
  const m = $("messages");
  follow = m.scrollHeight - m.scrollTop - m.clientHeight < 60;
}, { passive: true });

/** Shows the code of the root agent's turn `turn` (its `index`-th block) in the Steps panel. */
function showStep(turn, index) {
  if (state.showSteps) state.showSteps();
  const cells = Array.from($("steps").querySelectorAll('[data-agent="0"] > .events > .ev.cell[data-turn="' + turn + '"]'));
  const cell = cells[index] || cells[0];
  if (!cell) return;
  const d = cell.querySelector("details");
  if (d) d.open = true;
  cell.scrollIntoView({ block: "center" });
  const s = cell.querySelector("summary");
  if (s) s.focus();
}

export async function stop() {
  const run = state.run;
  if (!run) return;
  if (!run.id) {
    // Not started on the server yet: the request is given up.
    run.ctrl.abort();
    return;
  }
  $("stop").disabled = true;
  try {
    await api("DELETE", "/api/runs/" + encodeURIComponent(run.id));
    // The event stream brings the end with the partial answer.
  } catch (e) {
    if (e.status === 409) return;
    composerMsg("Could not stop: " + e.message);
    if (state.run === run) $("stop").disabled = false;
  }
}

// ---------- past runs ----------

/** Replays a finished (or running) run's steps into the Steps panel
 * (revealing it, unless `reveal` is false). */
export async function showRunSteps(runId, reveal = true) {
  const steps = new StepsView($("steps"), $("steps-status"));
  if (reveal && state.showSteps) state.showSteps();
  try {
    let view = null;
    await readEvents("/api/runs/" + encodeURIComponent(runId) + "/events", (ev) => {
      if (ev.event === "end") { try { view = JSON.parse(ev.data); } catch (_) { view = null; } return; }
      if (ev.event !== "trace") return;
      try { steps.handle(JSON.parse(ev.data)); } catch (_) { /* a bad line is skipped */ }
    });
    steps.end(view);
  } catch (e) {
    $("steps").appendChild(el("p", { class: "error-text", text: "Could not load the steps: " + e.message }));
  }
}

export async function refreshRuns() {
  try {
    const data = await api("GET", "/api/runs?limit=100");
    const runs = (data && data.runs) || [];
    const items = runs.map((r) => {
      const a = el("a", { class: "run-open", href: "#/run/" + encodeURIComponent(r.id) },
        el("span", { class: "name", text: short(r.question, 120) }),
        el("span", { class: "meta", text: r.status + (r.partial ? " (partial)" : "") + " · " + (r.flow || "") + " · " + ago(r.started_at) }));
      return el("li", { dataset: { run: r.id, status: r.status } }, a);
    });
    if (!items.length) items.push(el("li", { class: "empty", text: "No runs yet." }));
    $("runs").replaceChildren(...items);
    $("runs-error").textContent = "";
  } catch (e) {
    $("runs-error").textContent = "Could not list the runs: " + e.message;
  }
}

/** Opens a past run: its question and answer, and its steps. */
export async function openRun(id) {
  if (state.run) { composerMsg("Stop the running question (or wait for it) before opening another run."); return; }
  state.current = null;
  state.turns = [];
  $("export").hidden = true;
  renderSessions();
  $("messages").replaceChildren();
  let view;
  try {
    view = await api("GET", "/api/runs/" + encodeURIComponent(id));
  } catch (e) {
    setChatTitle("Run not found");
    $("messages").appendChild(errorCard({ headline: e.status === 404 ? "There is no run “" + id + "” on this server" : "Could not open the run", detail: e.message }));
    return;
  }
  setChatTitle("Run: " + short(view.question, 80));
  const head = el("p", { class: "muted run-head" }, "Run " + view.id + " · " + view.status + " · " + ago(view.started_at));
  if (view.session) head.append(" · ", el("a", { href: "#/c/" + encodeURIComponent(view.session), text: "open its chat" }));
  $("messages").append(head, userBubble(view.question || ""));
  if (view.answer && (view.status !== "failed")) $("messages").appendChild(answerCard(view.answer, { question: null, runId: view.id, view }));
  else $("messages").appendChild(errorCard(describeFailure(null, view, [])));
  showRunSteps(id);
}

// ---------- composer ----------

export function updateCharCount() {
  const max = state.info && state.info.limits ? state.info.limits.max_question_chars : null;
  const n = $("question").value.length;
  const cc = $("char-count");
  cc.textContent = max && n > max * 0.8 ? fmtInt(n) + " / " + fmtInt(max) : "";
  cc.classList.toggle("over", !!max && n > max);
}

$("composer").addEventListener("submit", (ev) => { ev.preventDefault(); ask($("question").value); });
$("stop").addEventListener("click", stop);
$("question").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); ask($("question").value); }
});
$("question").addEventListener("input", () => {
  if ($("question").value.trim()) composerMsg("");
  updateCharCount();
  const q = $("question");
  q.style.height = "auto";
  q.style.height = Math.min(220, Math.max(48, q.scrollHeight + 2)) + "px";
});

// ---------- search and export ----------

$("chat-search").addEventListener("input", renderSessions);
$("chat-search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const first = $("sessions").querySelector(".session-open");
  if (first) first.click();
});

/** The shown thread as Markdown (each answer with its numbered sources). */
export function chatMarkdown() {
  const title = (state.current && state.current.title) || "Chat";
  let out = "# " + title + "\n";
  for (const turn of shownPath()) {
    const view = turn.runId ? state.views.get(turn.runId) : null;
    const ans = view && view.answer ? view.answer : turn.ans;
    out += "\n## " + turn.question.replace(/\s+/g, " ").trim() + "\n\n" + plainAnswer(ans).trim() + "\n";
    if (ans.partial) out += "\n_(partial answer)_\n";
  }
  return out;
}

/** The shown thread as JSON: each turn's question, answer, citations, run. */
export function chatJson() {
  return {
    session: state.current && state.current.id,
    title: state.current && state.current.title,
    exported_at: new Date().toISOString(),
    turns: shownPath().map((turn) => {
      const view = turn.runId ? state.views.get(turn.runId) : null;
      const ans = view && view.answer ? view.answer : turn.ans;
      return { question: turn.question, answer: ans.answer, partial: !!ans.partial, citations: ans.citations || [], run_id: turn.runId, versions: versionsOf(turn).length };
    }),
  };
}

function download(name, type, text) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = el("a", { href: url, download: name, class: "sr-only" });
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
  $("export").open = false;
  announce("Exported " + name);
}
const fileBase = () => "rlm-chat-" + ((state.current && state.current.id) || "new");
$("export-md").addEventListener("click", () => download(fileBase() + ".md", "text/markdown", chatMarkdown()));
$("export-json").addEventListener("click", () => download(fileBase() + ".json", "application/json", JSON.stringify(chatJson(), null, 2)));

export { SESSION_ID };
