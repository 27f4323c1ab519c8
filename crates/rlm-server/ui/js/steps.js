// The steps of a run, live or replayed: agents nested by call-tree position,
// the model's replies (prose; their code is shown once, as the cell that
// ran it, highlighted), cell outputs collapsed, sub-calls, findings.

import { $, el, plural, fmtInt, fmtSecs, short } from "./util.js";

// ---------- Python highlighting (tokens as DOM text: nothing is parsed as HTML) ----------

const KEYWORDS = new Set(("False None True and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield match case").split(" "));
const BUILTINS = new Set(("print len range enumerate zip sorted min max sum any all list dict set tuple str int float bool open isinstance map filter reversed abs round FINAL FINAL_VAR llm_query llm_query_batched rlm_query context search show").split(" "));
const PY = /(#[^\n]*)|("""[\s\S]*?(?:"""|$)|'''[\s\S]*?(?:'''|$)|[rbfuRBFU]{0,2}"(?:[^"\\\n]|\\.)*"?|[rbfuRBFU]{0,2}'(?:[^'\\\n]|\\.)*'?)|(\b\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;

/** Python source as highlighted spans in a <pre><code>. */
export function highlight(code) {
  const codeEl = el("code", { class: "py" });
  let pos = 0;
  for (const m of code.matchAll(PY)) {
    if (m.index > pos) codeEl.appendChild(document.createTextNode(code.slice(pos, m.index)));
    let cls = null;
    if (m[1]) cls = "tok-com";
    else if (m[2]) cls = "tok-str";
    else if (m[3]) cls = "tok-num";
    else if (m[4]) cls = KEYWORDS.has(m[4]) ? "tok-kw" : BUILTINS.has(m[4]) ? "tok-fn" : null;
    codeEl.appendChild(cls ? el("span", { class: cls, text: m[0] }) : document.createTextNode(m[0]));
    pos = m.index + m[0].length;
  }
  if (pos < code.length) codeEl.appendChild(document.createTextNode(code.slice(pos)));
  return el("pre", { class: "code" }, codeEl);
}

/** A reply without its code blocks (each runs as a cell, shown there). */
function prose(text) {
  return String(text || "").replace(/```[a-zA-Z0-9_-]*\n[\s\S]*?(?:```|$)/g, "⟨code: see the cell below⟩").trim();
}

function fmtReason(r) {
  if (r == null) return "";
  if (typeof r === "string") return r;
  if (typeof r === "object") {
    const rest = Object.entries(r).filter(([k]) => k !== "kind").map(([k, v]) => k + "=" + v).join(", ");
    return (r.kind || "budget") + (rest ? " (" + rest + ")" : "");
  }
  return String(r);
}

/** One run's steps drawn into `container`; `handle(rec)` per trace record. */
export class StepsView {
  constructor(container, status) {
    this.root = el("div", { class: "run-steps" });
    container.replaceChildren(this.root);
    this.container = container;
    this.status = status;
    this.agents = new Map();
    this.lastSeq = -1;
    this.events = 0;
  }

  agent(id) {
    let a = this.agents.get(id);
    if (a) return a;
    const dot = id.lastIndexOf(".");
    const parent = dot > 0 ? this.agent(id.slice(0, dot)) : null;
    const meta = el("span", { class: "meta" });
    const details = el("details", { class: "agent", open: true, dataset: { agent: id } },
      el("summary", null, (id === "0" ? "root agent" : "sub-agent " + id) + " ", meta));
    const events = el("div", { class: "events" });
    details.appendChild(events);
    (parent ? parent.events : this.root).appendChild(details);
    a = { id, details, meta, events, live: null, liveText: null, attempt: 0 };
    this.agents.set(id, a);
    return a;
  }

  line(box, rec, cls, ...children) {
    const line = el("div", { class: "ev" + (cls ? " " + cls : "") },
      el("span", { class: "t", text: "+" + ((rec.t_ms || 0) / 1000).toFixed(1) + "s" }), ...children);
    box.appendChild(line);
    return line;
  }

  live(a, attempt) {
    const text = document.createTextNode("");
    const live = el("div", { class: "live" }, el("div", { class: "label", text: "writing…" }), el("div", { class: "live-text" }, text));
    a.events.appendChild(live);
    a.live = live;
    a.liveText = text;
    a.attempt = attempt || 0;
  }

  nearBottom() { const s = this.container; return s.scrollHeight - s.scrollTop - s.clientHeight < 40; }

  handle(rec) {
    if (typeof rec.seq === "number") {
      if (rec.seq <= this.lastSeq) return; // replayed after a reconnect
      this.lastSeq = rec.seq;
    }
    this.events++;
    const near = this.nearBottom();
    const agentId = typeof rec.agent === "string" ? rec.agent : null;
    const a = agentId !== null ? this.agent(agentId) : null;
    const box = a ? a.events : this.root;
    switch (rec.type) {
      case "run_started":
        this.line(box, rec, "", "started · flow " + (rec.flow || "?") + " · models " + (rec.root_model || "?") + " / " + (rec.sub_model || "?") +
          (rec.documents != null ? " · " + plural(rec.documents, "document") : ""));
        break;
      case "llm_request":
        a.meta.textContent = "· depth " + (rec.depth ?? "?") + (rec.model ? " · " + rec.model : "");
        this.line(box, rec, "", "asks the model" + (rec.iteration ? " (turn " + rec.iteration + ")" : "") + (rec.purpose ? " · " + rec.purpose : ""));
        this.live(a, 0);
        break;
      case "llm_delta": {
        const attempt = rec.attempt || 1;
        if (!a.live || a.live.classList.contains("done")) this.live(a, attempt);
        else if (attempt > a.attempt) {
          if (a.attempt > 0) a.liveText.data = "";
          a.attempt = attempt;
        }
        a.live.firstChild.textContent = attempt > 1 ? "retrying: attempt " + attempt + "…" : "writing…";
        a.live.classList.toggle("retry", attempt > 1);
        a.liveText.appendData(rec.text || "");
        const lt = a.live.lastChild; lt.scrollTop = lt.scrollHeight;
        break;
      }
      case "llm_response": {
        if (!a.live || a.live.classList.contains("done")) this.live(a, 0);
        a.live.classList.add("done");
        a.live.classList.remove("retry");
        a.live.firstChild.textContent = "reply" + (a.attempt > 1 ? " after " + a.attempt + " attempts" : "") + " · " + fmtInt(rec.input_tokens) + " in / " + fmtInt(rec.output_tokens) + " out tokens · " + fmtSecs(rec.latency_ms || 0);
        a.liveText.data = prose(rec.text);
        break;
      }
      case "llm_retry":
        this.line(box, rec, "warn", "model call failed; retrying " + rec.attempt + "/" + rec.of + ": ", el("span", { class: "muted", text: short(rec.reason || "", 200) }));
        break;
      case "llm_error":
        this.line(box, rec, "err", "model call failed: " + (rec.message || ""));
        if (a.live && !a.live.classList.contains("done")) { a.live.classList.add("done"); a.live.firstChild.textContent = "no reply"; a.liveText.data = ""; }
        break;
      case "cell": {
        // Turn 0 is the engine's own look at the corpus before the model's first turn.
        const initial = !rec.iteration;
        const label = initial ? "inspection of the documents (by the engine)" : "code · turn " + rec.iteration + (rec.index ? " · block " + (rec.index + 1) : "");
        const d = el("details", { class: "cell", open: !initial }, el("summary", { text: label }), highlight(String(rec.code || "")));
        const line = this.line(box, rec, "cell", d);
        line.dataset.initial = initial ? "1" : "";
        line.dataset.turn = String(rec.iteration || 0);
        break;
      }
      case "cell_output": {
        const stdout = String(rec.stdout || "");
        const initial = !rec.iteration;
        const head = (rec.error ? "raised an error" : stdout ? "output · " + plural(stdout.split("\n").filter(Boolean).length, "line") : "no output") +
          " · " + fmtInt(rec.elapsed_ms ?? 0) + " ms" + (rec.host_calls ? " · " + plural(rec.host_calls, "host call") : "");
        const body = [];
        if (stdout) body.push(el("pre", { class: "stdout", text: stdout }));
        if (rec.error) body.push(el("pre", { class: "stderr", text: String(rec.error) }));
        const line = this.line(box, rec, "cell-output" + (rec.error ? " err" : ""));
        if (body.length) {
          // Collapsed by default (errors open): a preview of the first line.
          const preview = short((stdout || String(rec.error || "")).split("\n")[0], 90);
          line.appendChild(el("details", { open: !!rec.error && !initial }, el("summary", null, head + " ", el("span", { class: "muted", text: preview })), ...body));
        } else {
          line.appendChild(el("span", { class: "muted", text: head }));
        }
        break;
      }
      case "subcall_start":
        a.meta.textContent = "· " + (rec.kind || "sub-call") + " · depth " + (rec.depth ?? "?");
        this.line(a.events, rec, "", "started by " + (rec.parent || "?") + ": ", el("span", { class: "muted", text: short(rec.prompt_preview || "", 300) }));
        break;
      case "subcall_end": {
        if (!rec.ok) a.details.classList.add("failed");
        const line = this.line(a.events, rec, rec.ok ? "ok" : "err", (rec.ok ? "done" : "failed") + (rec.elapsed_ms != null ? " · " + fmtSecs(rec.elapsed_ms) : ""));
        if (rec.result) line.appendChild(el("details", null, el("summary", { text: "result (" + fmtInt(String(rec.result).length) + " chars)" }), el("pre", { text: String(rec.result) })));
        if (a.details.open && this.agents.size > 6) a.details.open = false;
        break;
      }
      case "finding":
        this.line(box, rec, "ok", "finding: " + (rec.text || "") + (rec.source ? " [" + rec.source + "]" : ""));
        break;
      case "final":
        this.line(box, rec, "ok final", "final answer (" + (rec.via || "?") + "): ", el("span", { class: "muted", text: short(rec.answer || "", 300) }));
        break;
      case "verification": {
        const r = rec.report || {};
        const n = Array.isArray(r.citations) ? r.citations.length : 0;
        const ok = n - (r.failed || 0);
        this.line(box, rec, n === 0 || r.failed ? "warn" : "ok", n === 0 ? "verification: the answer cites nothing" : "verification: " + ok + " of " + plural(n, "citation") + " verified");
        break;
      }
      case "budget_exhausted":
        this.line(box, rec, "warn", "budget exhausted: " + fmtReason(rec.reason));
        break;
      case "error":
        this.line(box, rec, "err", "error: " + (rec.message || ""));
        break;
      case "flow_step":
        this.line(box, rec, "", el("b", { text: (rec.step || "step") + " " }), String(rec.message || ""));
        break;
      case "fallback":
        this.line(box, rec, "warn", "fallback " + (rec.kind || "") + ": " + (rec.reason || ""));
        break;
      case "run_finished": {
        const u = rec.usage || {};
        this.line(this.root, rec, rec.partial ? "warn" : "ok", "finished" + (rec.partial ? " (partial" + (rec.reason ? ": " + fmtReason(rec.reason) : "") + ")" : "") +
          " · " + plural(u.calls ?? 0, "model call") + (typeof u.wall_ms === "number" ? " · " + fmtSecs(u.wall_ms) : ""));
        break;
      }
      default:
        this.line(box, rec, "", String(rec.type || "event") + (rec.message ? ": " + rec.message : ""));
    }
    if (this.status) this.status.textContent = plural(this.events, "step");
    if (near) this.container.scrollTop = this.container.scrollHeight;
  }

  /** Marks replies still being written as cut off; when the run (`view`)
   * failed, was stopped or is partial, its final step is not shown as a
   * success. */
  end(view) {
    for (const a of this.agents.values()) {
      if (a.live && !a.live.classList.contains("done")) {
        a.live.classList.add("done");
        a.live.firstChild.textContent = "no reply (the run ended)";
      }
    }
    const failed = !view || view.status === "failed" || view.status === "cancelled" || !view.answer || view.answer.partial;
    if (!failed) return;
    const outcome = !view ? "the run did not finish" : view.status === "failed" ? "the run failed" : view.status === "cancelled" ? "the run was stopped" : "the answer is partial";
    for (const line of this.root.querySelectorAll(".ev.final")) {
      line.classList.replace("ok", "warn");
      line.dataset.outcome = view ? view.status : "unknown";
      line.appendChild(el("span", { class: "outcome", text: " (" + outcome + ")" }));
    }
  }
}

/** The empty Steps panel. */
export function emptySteps(text) {
  $("steps").replaceChildren(el("p", { class: "empty", text }));
  $("steps-status").textContent = "";
}
