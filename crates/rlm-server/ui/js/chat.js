// Conversations: sessions (list, open, rename, delete, a URL each), the
// thread of a session, asking (live steps, Stop), answers (copy,
// regenerate, steps), errors with Retry, and past runs reopened.

import { $, el, plural, fmtInt, fmtSecs, short, ago, announce, copyText, openDialog } from "./util.js";
import { api, readEvents, HttpError } from "./api.js";
import { renderAnswer, plainAnswer } from "./answer.js";
import { StepsView, emptySteps } from "./steps.js";
import { askOptions } from "./settings.js";

const SESSION_ID = /^[A-Za-z0-9._-]{1,64}$/;

export const state = {
  info: null,
  sessions: [],
  current: null,  // {id, title} of the open chat; id null for a new chat not yet asked
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
  const items = state.sessions.map((s) => {
    const id = s.id || s.name;
    const title = sessionTitle(s);
    const open = el("a", { class: "session-open", href: "#/c/" + encodeURIComponent(id), "aria-current": id === cur ? "page" : null },
      el("span", { class: "name", text: title }),
      el("span", { class: "meta", text: plural(s.turns ?? 0, "question") + (s.updated_at ? " · " + ago(s.updated_at) : "") }));
    const rename = el("button", { type: "button", class: "icon-btn rename", "aria-label": "Rename chat “" + title + "”", title: "Rename", text: "✎" });
    rename.addEventListener("click", () => renameSession(id, title));
    const del = el("button", { type: "button", class: "icon-btn delete", "aria-label": "Delete chat “" + title + "”", title: "Delete", text: "✕" });
    del.addEventListener("click", () => deleteSession(id, title));
    return el("li", { class: id === cur ? "active" : "", dataset: { session: id } }, open, rename, del);
  });
  if (!items.length) items.push(el("li", { class: "empty", text: "No chats yet: ask a question to start one." }));
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
  const known = state.sessions.find((s) => (s.id || s.name) === id);
  setChatTitle(known ? sessionTitle(known) : "…");
  renderSessions();
  $("messages").replaceChildren();
  emptySteps("Open an answer's steps, or ask a question.");
  let data;
  try {
    data = await api("GET", "/api/sessions/" + encodeURIComponent(id) + "?limit=50");
  } catch (e) {
    if (state.current.id !== id) return false;
    if (e.status === 404) {
      setChatTitle("Chat not found");
      $("messages").appendChild(errorCard({ headline: "There is no chat “" + id + "” on this server", detail: "It may have been deleted. Start a new chat or pick one from the list." }));
    } else {
      $("messages").appendChild(errorCard({ headline: "Could not open this chat", detail: e.message }, () => openSession(id)));
    }
    return false;
  }
  if (state.current.id !== id) return false;
  state.current.title = data.title || data.name || id;
  setChatTitle(state.current.title);
  if (data.first > 0) {
    $("messages").appendChild(el("p", { class: "muted older", text: plural(data.first, "earlier question") + " not shown" }));
  }
  const upgrades = [];
  for (const turn of data.history || []) {
    $("messages").appendChild(userBubble(turn.question || ""));
    const ans = { answer: turn.answer || "", partial: !!turn.partial, citations: Array.isArray(turn.citations) ? turn.citations : null };
    const card = answerCard(ans, { question: turn.question, runId: turn.run_id || null });
    $("messages").appendChild(card);
    if (turn.run_id) upgrades.push([card, turn]);
  }
  scrollThread();
  // The saved runs carry the claims and usage that the turns do not.
  for (const [card, turn] of upgrades.slice(-10)) {
    try {
      const view = await api("GET", "/api/runs/" + encodeURIComponent(turn.run_id));
      if (state.current.id !== id || !card.isConnected) return true;
      if (view && view.answer) card.replaceWith(answerCard(view.answer, { question: turn.question, runId: turn.run_id, view }));
    } catch (_) { /* run pruned (--keep-runs): the turn as saved stays */ }
  }
  return true;
}

/** A fresh, empty chat (its session is made with its first question). */
export function newChat() {
  if (state.run) { composerMsg("Stop the running question (or wait for it) before starting a new chat."); return; }
  state.current = { id: null, title: null };
  setChatTitle(null);
  renderSessions();
  $("messages").replaceChildren(el("p", { class: "welcome", text: "Ask a question about the documents. Answers cite their sources; each chat keeps its history." }));
  emptySteps("The steps of the next question appear here live.");
  if (location.hash && location.hash !== "#/") history.pushState(null, "", "#/");
  $("question").focus();
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

function userBubble(text) {
  return el("div", { class: "msg user" }, el("h3", { class: "sr-only", text: "You asked" }), el("div", { class: "user-text", text }));
}

function answerCard(ans, { question, runId, view }) {
  const card = el("article", { class: "msg answer", "aria-label": "Answer", dataset: runId ? { run: runId } : {} });
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
  const copy = el("button", { type: "button", class: "small-btn copy", text: "Copy" });
  copy.addEventListener("click", async () => {
    const ok = await copyText(plainAnswer(ans));
    copy.textContent = ok ? "Copied" : "Copy failed";
    announce(ok ? "Answer copied" : "Could not copy the answer");
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  });
  actions.appendChild(copy);
  if (question) {
    const regen = el("button", { type: "button", class: "small-btn regenerate", text: "Regenerate" });
    regen.addEventListener("click", () => ask(question));
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

/** Asks `question` in the open chat (making its session on the first). */
export async function ask(question) {
  if (state.run) { composerMsg("A question is already running: Stop it or wait."); return; }
  const q = String(question || "").trim();
  if (!q) { composerMsg("Type a question first."); $("question").focus(); return; }
  const max = state.info && state.info.limits && state.info.limits.max_question_chars;
  if (max && q.length > max) { composerMsg("The question is " + fmtInt(q.length) + " characters; the server takes at most " + fmtInt(max) + "."); return; }
  let opts;
  try { opts = askOptions(); } catch (e) { composerMsg(e.message); return; }
  composerMsg("");
  if (!state.current || !state.current.id) {
    const id = newSessionId();
    state.current = { id, title: q };
    history.pushState(null, "", "#/c/" + id);
    setChatTitle(q);
  }
  const sessionId = state.current.id;
  const welcome = $("messages").querySelector(".welcome");
  if (welcome) welcome.remove();
  const bubble = userBubble(q);
  const pending = el("div", { class: "msg pending" }, el("span", { class: "spinner", "aria-hidden": "true" }), el("span", { class: "pending-text", text: "Sending…" }));
  $("messages").append(bubble, pending);
  scrollThread();
  const steps = new StepsView($("steps"), $("steps-status"));
  const run = { id: null, question: q, sessionId, pending, bubble, steps, started: Date.now(), ctrl: new AbortController(), traceErrors: [] };
  state.run = run;
  setRunning(true);
  const tick = () => {
    const t = pending.querySelector(".pending-text");
    const secs = Math.round((Date.now() - run.started) / 1000);
    if (t) t.textContent = (run.id ? "Working" : "Sending") + "… " + secs + " s · " + plural(steps.events, "step") + (run.retrying ? " · model retrying" : "");
  };
  run.timer = setInterval(tick, 1000);

  let view = null;
  let failure = null;
  try {
    const started = await api("POST", "/api/runs", Object.assign({ question: q, session: sessionId }, opts));
    run.id = started.id;
    tick();
    const url = started.events || "/api/runs/" + encodeURIComponent(started.id) + "/events";
    await readEvents(url, (ev) => {
      if (ev.event === "trace") {
        let rec;
        try { rec = JSON.parse(ev.data); } catch (_) { return; }
        if (rec.type === "llm_error" && rec.message) run.traceErrors.push(rec.message);
        if (rec.type === "llm_delta") run.retrying = (rec.attempt || 1) > 1;
        try { steps.handle(rec); } catch (e) { console.error("step", rec, e); }
      } else if (ev.event === "end") {
        try { view = JSON.parse(ev.data); } catch (_) { view = null; }
      }
    }, { signal: run.ctrl.signal });
    if (!view) view = await api("GET", "/api/runs/" + encodeURIComponent(run.id));
  } catch (e) {
    failure = e instanceof HttpError ? e : new HttpError(0, String(e && e.message || e));
  }
  clearInterval(run.timer);
  steps.end();
  state.run = null;
  setRunning(false);

  let errCard = null;
  const retry = () => {
    if (errCard) errCard.remove();
    bubble.remove();
    ask(q);
  };
  const ans = view && view.answer;
  const failedRun = !failure && (!ans || view.status === "failed" || (ans.partial && !String(ans.answer || "").trim()));
  if (failure || failedRun) {
    const f = describeFailure(failure, view, run.traceErrors);
    errCard = errorCard(f, retry);
    pending.replaceWith(errCard);
    if (!$("question").value.trim()) $("question").value = q;
    composerMsg("");
    announce("Question failed: " + f.headline);
    if (f.headline.startsWith("Model")) document.dispatchEvent(new Event("rlm:health"));
    $("question").focus();
  } else {
    const card = answerCard(ans, { question: q, runId: view.id, view });
    if (ans.partial) {
      const f = describeFailure(null, view, run.traceErrors);
      card.prepend(el("p", { class: "partial-head", text: f.headline }));
    }
    pending.replaceWith(card);
    if ($("question").value.trim() === q) { $("question").value = ""; $("question").dispatchEvent(new Event("input")); }
    // The model answered: a health dot still saying otherwise is re-checked.
    if ($("health").dataset.state !== "ok") document.dispatchEvent(new Event("rlm:health"));
    announce((ans.partial ? "Partial answer: " : "Answer ready: ") + short(String(ans.answer || "").replace(/\[\[[^\]]*\]\]/g, ""), 200));
  }
  scrollThread();
  await refreshSessions();
  const s = state.sessions.find((x) => (x.id || x.name) === sessionId);
  if (s && state.current && state.current.id === sessionId) { state.current.title = sessionTitle(s); setChatTitle(state.current.title); }
}

export async function stop() {
  const run = state.run;
  if (!run || !run.id) return;
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

/** Replays a finished (or running) run's steps into the Steps panel. */
export async function showRunSteps(runId) {
  const steps = new StepsView($("steps"), $("steps-status"));
  if (state.showSteps) state.showSteps();
  try {
    await readEvents("/api/runs/" + encodeURIComponent(runId) + "/events", (ev) => {
      if (ev.event !== "trace") return;
      try { steps.handle(JSON.parse(ev.data)); } catch (_) { /* a bad line is skipped */ }
    });
    steps.end();
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

export { SESSION_ID };
