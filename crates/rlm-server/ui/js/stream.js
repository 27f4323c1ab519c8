// The answer as it is written: the root agent's replies streamed into the
// thread (prose as Markdown, each code block one line that links to its
// step, the answer committed so far), from the run's trace events. Replies
// come as text (```repl blocks, FINAL(…)) or as one JSON document per turn
// ({"thought", "step": {"code" | "answer": [{"text"}] | "not_found"}}),
// read here while it is still incomplete. Nothing depends on the words of
// a reply.

import { el } from "./util.js";
import { markdown, withoutMarkers } from "./answer.js";

/** The value of the JSON string that starts at `i` (after its quote), as
 * far as it has arrived, and where it ends (-1: not yet closed). */
function jsonString(s, i) {
  let out = "";
  for (; i < s.length; i++) {
    const c = s[i];
    if (c === "\"") return [out, i + 1];
    if (c !== "\\") { out += c; continue; }
    if (i + 1 >= s.length) break;
    const e = s[++i];
    if (e === "u") {
      if (i + 4 >= s.length) break;
      out += String.fromCharCode(parseInt(s.slice(i + 1, i + 5), 16) || 0xfffd);
      i += 4;
    } else out += { n: "\n", t: "\t", r: "", b: "", f: "" }[e] ?? e;
  }
  return [out, -1];
}

/** Every string value of `key` in a JSON text cut anywhere, in order. */
function fieldValues(s, key) {
  const out = [];
  const re = new RegExp("\"" + key + "\"\\s*:\\s*\"", "g");
  let m;
  while ((m = re.exec(s))) {
    const [v, end] = jsonString(s, m.index + m[0].length);
    out.push(v);
    if (end < 0) break;
    re.lastIndex = end;
  }
  return out;
}

/** A reply read into parts: [{kind: "prose"|"code"|"answer", text}]. */
export function replyParts(raw) {
  const text = String(raw || "");
  if (/^\s*\{/.test(text)) {
    const parts = [];
    for (const t of fieldValues(text, "thought")) if (t.trim()) parts.push({ kind: "prose", text: t });
    for (const c of fieldValues(text, "code")) parts.push({ kind: "code", text: c });
    const answer = fieldValues(text, "text").join(" ");
    if (answer.trim()) parts.push({ kind: "answer", text: answer });
    for (const n of fieldValues(text, "not_found")) if (n.trim()) parts.push({ kind: "answer", text: n });
    return parts;
  }
  const parts = [];
  const fence = /```[^\n`]*\n([\s\S]*?)(?:```|$)/g;
  let pos = 0, m;
  const prose = (t) => {
    // FINAL(…) holds the answer; the closing parenthesis ends the reply.
    const f = /\bFINAL\(/.exec(t);
    if (!f) { if (t.trim()) parts.push({ kind: "prose", text: t }); return; }
    if (t.slice(0, f.index).trim()) parts.push({ kind: "prose", text: t.slice(0, f.index) });
    const body = t.slice(f.index + 6).replace(/\)\s*$/, "");
    if (body.trim()) parts.push({ kind: "answer", text: body });
  };
  while ((m = fence.exec(text))) {
    prose(text.slice(pos, m.index));
    parts.push({ kind: "code", text: m[1] });
    pos = m.index + m[0].length;
  }
  prose(text.slice(pos));
  return parts;
}

/** The live view of a run's answer being written (`node`), fed trace records. */
export class AnswerStream {
  constructor({ openStep, onDraw }) {
    this.node = el("div", { class: "stream" });
    this.openStep = openStep;
    this.onDraw = onDraw || (() => {});
    this.reply = null; // {box, raw, attempt, turn}
    this.final = null;
    this.pending = false;
  }

  /** True once the model wrote something. */
  get written() { return Array.from(this.node.querySelectorAll(".reply")).some((r) => r.textContent.trim()); }

  /** What the model wrote, without an answer the run did not give. */
  replies() {
    if (this.final) { this.final.remove(); this.final = null; }
    return this.node;
  }

  handle(rec) {
    if (rec.agent !== "0") return;
    switch (rec.type) {
      case "llm_request":
        this.start(rec.iteration || 0);
        break;
      case "llm_delta": {
        if (!this.reply) this.start(0);
        const attempt = rec.attempt || 1;
        if (attempt !== this.reply.attempt) { this.reply.raw = ""; this.reply.attempt = attempt; }
        this.reply.raw += rec.text || "";
        this.schedule();
        break;
      }
      case "llm_response":
        if (!this.reply) this.start(0);
        this.reply.raw = String(rec.text || "");
        this.draw();
        break;
      case "llm_error":
        if (this.reply && !this.reply.raw) { this.reply.box.remove(); this.reply = null; }
        break;
      case "final":
        this.showFinal(String(rec.answer || ""));
        break;
      default:
    }
  }

  start(turn) {
    if (this.reply && !this.reply.raw.trim()) this.reply.box.remove();
    const box = el("div", { class: "reply", dataset: { turn: String(turn) } });
    this.node.appendChild(box);
    this.reply = { box, raw: "", attempt: 1, turn };
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  draw() {
    const r = this.reply;
    if (!r) return;
    const nodes = [];
    let block = 0;
    for (const p of replyParts(r.raw)) {
      if (p.kind === "code") {
        const first = p.text.split("\n").find((l) => l.trim()) || "";
        const b = el("button", { type: "button", class: "code-line", title: "Show this code in the steps" },
          el("span", { class: "code-tag", text: "code" }), el("code", { text: first.trim() || "…" }));
        const turn = r.turn, index = block++;
        b.addEventListener("click", () => this.openStep(turn, index));
        nodes.push(b);
      } else {
        const box = el("div", { class: p.kind === "answer" ? "md stream-answer" : "md stream-prose" });
        box.appendChild(markdown(withoutMarkers(p.text)));
        nodes.push(box);
      }
    }
    r.box.replaceChildren(...nodes);
    this.onDraw();
  }

  showFinal(text) {
    if (!text.trim()) return;
    // The committed answer replaces the answer read from the reply.
    for (const a of this.node.querySelectorAll(".reply .stream-answer")) a.remove();
    if (!this.final) {
      this.final = el("div", { class: "md stream-answer stream-final" });
      this.node.appendChild(this.final);
    }
    this.final.replaceChildren(markdown(withoutMarkers(text)));
    this.onDraw();
  }
}
