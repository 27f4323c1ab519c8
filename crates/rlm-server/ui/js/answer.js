// An answer as the user reads it: sanitized Markdown with numbered source
// markers, the sources under it (the passages that entail its claims) and
// apart the related passages (found, but not judged to state their claim),
// claims without support marked, a preview of a source on hover or focus,
// and the source viewer. Two checks are shown apart: the quote check (is
// the quote verbatim in its passage) and entailment (does the passage
// state the claim); only a passage that passes both is shown in green.

import { $, el, byteToIndex, openDialog, short, plural } from "./util.js";
import { api } from "./api.js";

// Private-use characters mark where markers and claim bounds go; they pass
// through Markdown and sanitizing as text and are replaced in the DOM.
const MARK = (n) => "\uE000" + n + "\uE001";
const CLAIM_START = (k) => "\uE002" + k + "\uE003";
const CLAIM_END = (k) => "\uE004" + k + "\uE005";
const TOKENS = /\uE000(\d+)\uE001|\uE002(\d+)\uE003|\uE004(\d+)\uE005/g;
const MARKER_RE = /\[\[\s*(chunk|doc)\s*:\s*([^\s\]"“]+)\s*(?:"((?:[^"\\]|\\.)*)"|“([^”]*)”)?\s*\]\]|\[DOCUMENT\s+(\d+)(?:\s*:\s*([^\]\n]+))?\]/g;

export const STATUS_TEXT = {
  verified: "verified: the quote is in the cited passage",
  id_only: "not verified: no quote to check",
  unknown_id: "not found: no such passage",
  quote_not_found: "not verified: the quote is not in the cited passage",
  path_mismatch: "not verified: the path is not that document's",
  unchecked: "not checked",
  counted: "counted: a line of this passage matched the scan",
};
const STATUS_ICON = { verified: "✓", id_only: "?", unchecked: "?", counted: "#" };
export function statusIcon(s) { return STATUS_ICON[s] || "✗"; }
function statusLabel(s) { return statusIcon(s) + " " + (s === "verified" ? "quote verified" : s.replace(/_/g, " ")); }

// Entailment, per claim `support` (apart from the quote check).
export const SUPPORT_TEXT = {
  supported: "entails its claim",
  related: "related: does not state its claim",
  contradicted: "contradicts its claim",
  unverified: "unverified: not checked whether it states its claim",
  unsupported: "no passage found",
};
const CLAIM_BADGE = {
  unsupported: ["unsupported", "No passage of the documents supports this"],
  related: ["not entailed", "A passage was found, but it was not judged to state this"],
  contradicted: ["contradicted", "Its passage states something that conflicts with this"],
  unverified: ["unverified", "A passage was found, but whether it states this could not be checked"],
};
// A claim backed by several passages takes the best outcome.
const SUPPORT_RANK = { supported: 4, contradicted: 3, related: 2, unverified: 1, unsupported: 0 };
/** True when a source may be shown as support: its quote verified and (when
 * the answer was grounded) its passage judged to entail its claim. */
export function entails(s) { return s.status === "verified" && (s.support === undefined || s.support === "supported"); }

// ---------- Markdown ----------

// Raw HTML in an answer is shown as text, except a few tags without
// attributes that carry no behaviour (a model's <br> in a table cell).
const HARMLESS_TAG = /^<\/?(?:br|sup|sub|kbd|b|i|em|strong|u|s|del|mark|small)\s*\/?>$/i;
function escapeHtml(t) { return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"); }

let purifyReady = false;
function purify() {
  const P = window.DOMPurify;
  if (!purifyReady && P && window.marked) {
    window.marked.use({ renderer: { html(token) { return HARMLESS_TAG.test(token.text.trim()) ? token.text : escapeHtml(token.text); } } });
    // Links open elsewhere and leak nothing; nothing else may load.
    P.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A") {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer nofollow");
      }
    });
    purifyReady = true;
  }
  return P;
}

/** Markdown → a sanitized DocumentFragment (raw HTML cannot run script). */
export function markdown(text) {
  const P = purify();
  if (!window.marked || !P) {
    // The vendored libraries did not load: plain text is still safe.
    const f = document.createDocumentFragment();
    f.appendChild(el("p", { class: "plain", text }));
    return f;
  }
  const html = window.marked.parse(text, { gfm: true, breaks: false, async: false });
  return P.sanitize(html, {
    RETURN_DOM_FRAGMENT: true,
    FORBID_TAGS: ["style", "img", "svg", "math", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "video", "audio", "picture", "source", "link", "meta", "base"],
    FORBID_ATTR: ["style", "id", "class", "srcset", "action", "formaction", "xlink:href"],
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i,
  });
}

// ---------- sources ----------

function sourceKey(c) {
  return (c.chunk_id || c.doc_id || c.path || c.id || "") + "|" + (c.quote || "");
}

// One source per passage: citations of the same passage (the model's and
// the engine's) with the same check outcome share a number; each origin
// and quote is kept.
function passageKey(c) {
  return c.chunk_id ? "chunk:" + c.chunk_id + "|" + (c.status || "unchecked") : null;
}
function addOrigin(src, c) {
  const origin = c.origin === "engine" ? "engine" : "model";
  if (!src.origins.includes(origin)) src.origins.push(origin);
  if (c.quote && !src.quotes.includes(c.quote)) src.quotes.push(c.quote);
}

// Where the Markdown that starts the line holding `pos` ends: indentation,
// list markers, quote marks, a table's first pipe, a heading's hashes.
const LINE_LEAD = /^[ \t]*(?:(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)[ \t]*|>[ \t]*|\|[ \t]*|#{1,6}(?=[ \t]|$)[ \t]*)*/;
function leadEnd(text, pos) {
  const start = text.lastIndexOf("\n", pos - 1) + 1;
  return start + LINE_LEAD.exec(text.slice(start, text.indexOf("\n", start) < 0 ? text.length : text.indexOf("\n", start)))[0].length;
}

// Line starts of the lines that are structure, not statements: fenced code
// (with its fences), a table's header row and its rule.
function structureLines(text) {
  const out = new Set();
  const lines = [];
  let at = 0;
  for (const l of text.split("\n")) { lines.push([at, l.trim()]); at += l.length + 1; }
  let fence = null;
  lines.forEach(([start, t], k) => {
    if (fence) { out.add(start); if (t.startsWith(fence) && !t.slice(3).replace(/[`~]/g, "").trim()) fence = null; return; }
    if (/^(```|~~~)/.test(t)) { fence = t.slice(0, 3); out.add(start); return; }
    if (t.includes("|") && t.includes("-") && /^[|\-: \t]+$/.test(t)) {
      out.add(start);
      if (k > 0 && lines[k - 1][1].includes("|")) out.add(lines[k - 1][0]);
    }
  });
  return out;
}

/**
 * The numbered sources of an answer and where their markers go: the
 * model's markers (resolved by `citations`, else parsed), the citations
 * the engine attached to claims, and the spans of unsupported claims.
 */
export function analyse(ans) {
  const text = String(ans.answer || "");
  const cits = Array.isArray(ans.citations) ? ans.citations : null;
  const claims = Array.isArray(ans.claims) ? ans.claims : [];
  const offsets = [];
  for (const c of cits || []) offsets.push(c.answer_offset);
  for (const c of claims) offsets.push(c.start, c.end);
  const at = byteToIndex(text, offsets);

  const edits = []; // {start, end, prio, insert: (numbers) => string, cit}
  const taken = [];
  const overlaps = (s, e) => taken.some(([a, b]) => s < b && e > a);
  for (const c of cits || []) {
    if (!c || !c.marker || c.origin === "engine") continue;
    let s = at.get(c.answer_offset);
    if (s === undefined || !text.startsWith(c.marker, s)) s = text.indexOf(c.marker);
    if (s < 0 || overlaps(s, s + c.marker.length)) continue;
    taken.push([s, s + c.marker.length]);
    edits.push({ start: s, end: s + c.marker.length, prio: 1, cit: c });
  }
  for (const m of text.matchAll(MARKER_RE)) {
    const s = m.index, e = s + m[0].length;
    if (overlaps(s, e)) continue;
    taken.push([s, e]);
    const doc = m[5] !== undefined;
    edits.push({
      start: s, end: e, prio: 1,
      cit: {
        marker: m[0], kind: doc ? "document_header" : m[1], id: doc ? m[5] : m[2],
        quote: m[3] !== undefined ? m[3].replace(/\\(.)/g, "$1") : (m[4] !== undefined ? m[4] : null),
        chunk_id: m[1] === "chunk" ? m[2] : null, path: doc ? (m[6] || "").trim() : null,
        status: cits ? "unchecked" : "unchecked",
        detail: cits ? "the server did not report this citation" : "not checked here",
      },
    });
  }
  const unsupported = [];
  const structure = structureLines(text);
  claims.forEach((claim, k) => {
    let e = at.get(claim.end);
    if (e === undefined) return;
    // Nothing goes into the Markdown that starts a line (a list's number,
    // a quote mark, a table's pipe): the structure stays as written.
    e = Math.max(e, leadEnd(text, e));
    let s = at.get(claim.start);
    s = Math.max(s, leadEnd(text, s));
    // Before the pipe that ends a table row (a marker after it is lost).
    while (e > s && /[\s|]/.test(text[e - 1])) e--;
    for (const c of claim.citations || []) {
      if (c.origin === "engine") edits.push({ start: e, end: e, prio: 1, cit: c });
    }
    // Only what states something is marked: not a number alone, a table's
    // header, code.
    const said = text.slice(s, e).replace(MARKER_RE, "");
    const marks = /\p{L}/u.test(said) && !structure.has(text.lastIndexOf("\n", s - 1) + 1);
    if (marks && e > s && CLAIM_BADGE[claim.support]) {
      unsupported.push({ k, claim });
      edits.push({ start: s, end: s, prio: 2, claimStart: k });
      edits.push({ start: e, end: e, prio: 0, claimEnd: k });
    }
  });
  // An insertion inside a replaced marker goes after it.
  for (const ed of edits) {
    if (ed.start !== ed.end) continue;
    for (const [a, b] of taken) if (ed.start > a && ed.start < b) { ed.start = b; ed.end = b; }
  }
  edits.sort((a, b) => a.start - b.start || a.prio - b.prio);

  // Sources numbered by first appearance; one number per passage (or per
  // place and quote when the passage is not known).
  const sources = [];
  const byKey = new Map();
  for (const ed of edits) {
    if (!ed.cit) continue;
    const key = sourceKey(ed.cit);
    const pkey = passageKey(ed.cit);
    let src = byKey.get(key) || (pkey && byKey.get(pkey));
    if (!src) {
      src = Object.assign({}, ed.cit, { n: sources.length + 1, origins: [], quotes: [] });
      sources.push(src);
    } else if (src.status !== "verified" && ed.cit.status === "verified") {
      Object.assign(src, ed.cit, { n: src.n, origins: src.origins, quotes: src.quotes });
    }
    // The model's own quote is the one shown first.
    if (ed.cit.origin !== "engine" && src.origin === "engine") Object.assign(src, { quote: ed.cit.quote, origin: ed.cit.origin });
    addOrigin(src, ed.cit);
    byKey.set(key, src);
    if (pkey) byKey.set(pkey, src);
    ed.n = src.n;
  }
  // Each source's entailment: the best support of the claims it backs
  // (none when the answer was not grounded).
  if (ans.grounded) {
    const best = new Map();
    for (const claim of claims) {
      for (const c of claim.citations || []) {
        if (c.status !== "verified") continue;
        const src = byKey.get(sourceKey(c)) || (passageKey(c) && byKey.get(passageKey(c)));
        if (!src) continue;
        const prev = best.get(src.n);
        if (prev === undefined || SUPPORT_RANK[claim.support] > SUPPORT_RANK[prev]) best.set(src.n, claim.support);
      }
    }
    for (const src of sources) src.support = best.get(src.n) || "unsupported";
  }
  let out = "";
  let pos = 0;
  for (const ed of edits) {
    if (ed.start < pos) continue;
    out += text.slice(pos, ed.start);
    if (ed.cit) out += MARK(ed.n);
    else if (ed.claimStart !== undefined) out += CLAIM_START(ed.claimStart);
    else if (ed.claimEnd !== undefined) out += CLAIM_END(ed.claimEnd);
    pos = ed.end;
  }
  out += text.slice(pos);
  return { marked: out, sources, unsupported };
}

/** Text without its citation markers (an answer still being written). */
export function withoutMarkers(t) {
  return String(t || "").replace(MARKER_RE, "").replace(/[ \t]+([.,;!?])/g, "$1");
}

/** The answer as Markdown for the clipboard: markers as [n], sources listed. */
export function plainAnswer(ans) {
  const { marked: m, sources } = analyse(ans);
  let text = m.replace(TOKENS, (_, n) => (n ? "[" + n + "]" : ""));
  if (sources.length) {
    text += "\n\nSources:\n" + sources.map((s) => "[" + s.n + "] " + place(s) + (s.quote ? " “" + s.quote + "”" : "")
      + (s.status === "verified" ? "" : " (" + (s.status || "unchecked") + ")")
      + (s.support && s.support !== "supported" ? " (" + SUPPORT_TEXT[s.support] + ")" : "")).join("\n");
  }
  return text;
}

export function place(s) {
  const path = s.path || (s.kind === "doc" ? "document " + s.id : s.chunk_id || s.id || "?");
  // The place a person finds in the original (slide, sheet rows, page)
  // before a line of the extracted text.
  return path + (s.location ? ", " + s.location : s.line ? ", line " + s.line : s.page ? ", page " + s.page : "");
}

/** The rendered answer body, its sources list and warnings. */
export function renderAnswer(ans, opts) {
  const { marked: m, sources, unsupported } = analyse(ans);
  const body = el("div", { class: "md" });
  body.appendChild(markdown(m));
  replaceTokens(body, sources, unsupported);
  // Wide code and tables scroll sideways: focusable, so the keyboard can too.
  for (const e of body.querySelectorAll("pre, table")) e.setAttribute("tabindex", "0");
  const box = el("div", { class: "answer-body" }, body);

  const verified = sources.filter(entails);
  const related = sources.filter((s) => !entails(s) && s.status === "verified");
  if (!verified.length) {
    const n = sources.length;
    box.appendChild(el("div", { class: "warn-box", role: "note" },
      el("strong", { text: "⚠ No verified sources. " }),
      related.length ? "Passages were found, but none was judged to state this answer's claims; treat it as unsupported."
        : n ? "None of this answer's " + plural(n, "citation") + " could be checked against the documents; treat it as unsupported."
          : "The answer cites no passage of the documents; check it before relying on it."));
  }
  const lists = [
    ["Sources", sources.filter((s) => !related.includes(s))],
    ["Related passages (found, but not judged to state their claim)", related],
  ];
  for (const [title, items] of lists) {
    if (!items.length) continue;
    const list = el("ol", { class: "sources" + (title === "Sources" ? "" : " related"), "aria-label": title });
    for (const s of items) list.appendChild(sourceItem(s, opts));
    box.appendChild(el("h3", { class: "sources-title", text: title }));
    box.appendChild(list);
  }
  const cov = ans.grounded && ans.grounded.coverage;
  if (cov && Array.isArray(cov.uncited) && cov.uncited.length) {
    box.appendChild(el("h3", { class: "sources-title", text: "Matching the question, not cited (" + cov.cited + " of " + cov.matching + " cited)" }));
    const list = el("ul", { class: "uncited" });
    for (const p of cov.uncited.slice(0, 20)) list.appendChild(el("li", { text: p }));
    if (cov.uncited.length > 20) list.appendChild(el("li", { text: "… and " + (cov.uncited.length - 20) + " more" }));
    box.appendChild(list);
  }
  const counted = countedSets(ans, opts);
  if (counted) box.appendChild(counted);
  const groups = [
    ["Not supported by any passage found", unsupported.filter(({ claim }) => claim.support === "unsupported")],
    ["Not stated by the passage found", unsupported.filter(({ claim }) => claim.support !== "unsupported")],
  ];
  for (const [title, flagged] of groups) {
    const items = [];
    for (const { claim } of flagged) {
      const li = el("li", null, inlineMarkdown(stripMarkers(claim.text)));
      if (!li.textContent.trim()) continue; // nothing left once sanitized (raw HTML)
      if (claim.support !== "unsupported") li.append(" (" + SUPPORT_TEXT[claim.support].replace(/ its claim$/, " it") + ")");
      items.push(li);
    }
    if (!items.length) continue;
    box.appendChild(el("h3", { class: "sources-title unsupported-title", text: title }));
    // A long list (a partial answer's gathered output) shows its first lines.
    box.appendChild(el("ul", { class: "unsupported-list" }, ...items.slice(0, 8)));
    if (items.length > 8) {
      box.appendChild(el("details", { class: "more-claims" }, el("summary", { text: "Show " + (items.length - 8) + " more" }),
        el("ul", { class: "unsupported-list" }, ...items.slice(8))));
    }
  }
  return { node: box, sources, verified: verified.length, related: related.length, unsupported: unsupported.length };
}

// The sets the run's code counted over (grep and tally scans), each counted again
// when the answer was checked, with its first passages to open.
function countedSets(ans, opts) {
  const sets = Array.isArray(ans.counted) ? ans.counted : [];
  if (!sets.length) return null;
  const list = el("ul", { class: "counted" });
  for (const c of sets) {
    const again = c.recounted === true ? "counted again: same" : c.recounted === false ? "counted again: DIFFERENT" : "not counted again";
    const li = el("li", null,
      el("code", { text: c.call || "grep(" + JSON.stringify(c.pattern) + ")" }),
      (c.by_engine ? " (the engine's count of a word of the question)" : "") + ": " + plural(c.lines, "line") + " in " + plural(c.documents, "document") +
      (typeof c.sum === "number" ? ", sum " + c.sum : "") + " · " + again +
      (c.count_in_answer ? " · the answer states this count" : ""));
    const ids = (c.chunk_ids || []).slice(0, 5);
    if (ids.length) {
      const links = el("span", { class: "counted-chunks" }, " · passages: ");
      ids.forEach((id, i) => {
        const b = el("button", { type: "button", text: String(i + 1), title: "open passage " + id });
        b.onclick = () => openSource({ chunk_id: id, status: "counted" }, opts);
        links.append(i ? ", " : "", b);
      });
      if ((c.chunk_ids || []).length > ids.length) links.append(" …");
      li.appendChild(links);
    }
    list.appendChild(li);
  }
  return el("div", null, el("h3", { class: "sources-title", text: "Counted over" }), list);
}

// A claim's text without its markers and the Markdown that starts its line.
function stripMarkers(t) {
  return String(t || "").replace(MARKER_RE, "").replace(/\s+([.,;!?])/g, "$1").trim()
    .replace(/^(?:(?:[-*+]|\d+[.)])\s+|>\s*|\|\s*)+/, "").replace(/\s*\|$/, "");
}

/** One line of Markdown (bold, code, links), sanitized, as a fragment. */
function inlineMarkdown(text) {
  const P = purify();
  if (!window.marked || !P) return document.createTextNode(text);
  return P.sanitize(window.marked.parseInline(text), { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ["strong", "em", "code", "a", "del", "b", "i"], ALLOWED_ATTR: ["href"], ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|#)/i });
}

/** The entailment of a source, as a badge (nothing when not grounded). */
function supportBadge(s) {
  if (!s.support) return "";
  return el("span", { class: "entail", dataset: { support: s.support }, text: (s.support === "supported" ? "✓ " : "") + SUPPORT_TEXT[s.support] });
}

/** Who cited a source: the model, the engine (for a claim without one), both. */
function originText(s) {
  const o = s.origins || [s.origin === "engine" ? "engine" : "model"];
  if (o.includes("engine") && o.includes("model")) return "cited by the model and found by the engine";
  return o.includes("engine") ? "found by the engine" : "";
}

function sourceItem(s, opts) {
  const status = s.status || "unchecked";
  const li = el("li", { class: "source", value: String(s.n), dataset: Object.assign({ n: s.n, status }, s.support ? { support: s.support } : {}) });
  const open = el("button", { type: "button", class: "source-open", "aria-label": "Open source " + s.n + ": " + place(s) },
    el("span", { class: "path", text: place(s) }));
  open.addEventListener("click", () => openSource(s, opts));
  li.appendChild(open);
  li.appendChild(el("span", { class: "cit-status", dataset: { status }, text: statusLabel(status) }));
  const badge = supportBadge(s);
  if (badge) li.appendChild(badge);
  const origin = originText(s);
  if (origin) li.appendChild(el("span", { class: "muted small origin", text: " " + origin }));
  const quotes = s.quotes && s.quotes.length ? s.quotes : s.quote ? [s.quote] : [];
  for (const q of quotes.slice(0, 3)) li.appendChild(el("blockquote", { class: "quote", text: "“" + short(q, 400) + "”" }));
  if (status !== "verified" && s.detail) li.appendChild(el("div", { class: "muted small", text: s.detail }));
  return li;
}

function replaceTokens(root, sources, unsupported) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) if (/[\uE000\uE002\uE004]/.test(walker.currentNode.data)) nodes.push(walker.currentNode);
  for (const node of nodes) {
    const frag = document.createDocumentFragment();
    let pos = 0;
    const data = node.data;
    for (const m of data.matchAll(TOKENS)) {
      if (m.index > pos) frag.appendChild(document.createTextNode(data.slice(pos, m.index)));
      if (m[1]) frag.appendChild(markerButton(sources[Number(m[1]) - 1]));
      else if (m[2]) frag.appendChild(el("span", { dataset: { claimStart: m[2] } }));
      else frag.appendChild(el("span", { dataset: { claimEnd: m[3] } }));
      pos = m.index + m[0].length;
    }
    if (pos < data.length) frag.appendChild(document.createTextNode(data.slice(pos)));
    node.replaceWith(frag);
  }
  for (const { k, claim } of unsupported) {
    const s = root.querySelector('[data-claim-start="' + k + '"]');
    const e = root.querySelector('[data-claim-end="' + k + '"]');
    if (s && e) {
      // Every text node between the bounds is wrapped (a claim may span
      // bold text or links); markers inside stay as they are.
      const w = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
      w.currentNode = s;
      const inside = [];
      while (w.nextNode()) {
        const n = w.currentNode;
        if (e.compareDocumentPosition(n) & Node.DOCUMENT_POSITION_FOLLOWING) break;
        if (n.parentElement && n.parentElement.closest(".cite")) continue;
        if (n.data.trim()) inside.push(n);
      }
      for (const n of inside) {
        const wrap = el("span", { class: "claim-unsupported" });
        n.replaceWith(wrap);
        wrap.appendChild(n);
      }
      const [label, title] = CLAIM_BADGE[claim.support] || CLAIM_BADGE.unsupported;
      if (inside.length) e.after(el("span", { class: "badge-unsupported", dataset: { support: claim.support }, title, text: label }));
    }
    if (s) s.remove();
    if (e) e.remove();
  }
}

function markerButton(s) {
  if (!s) return document.createTextNode("");
  const status = s.status || "unchecked";
  const b = el("button", {
    type: "button", class: "cite", dataset: Object.assign({ n: s.n, status }, s.support ? { support: s.support } : {}),
    "aria-label": "Source " + s.n + " (" + (status === "verified" ? "quote verified" : "quote not verified")
      + (s.support ? "; " + SUPPORT_TEXT[s.support] : "") + "): " + place(s),
  }, String(s.n));
  b.addEventListener("click", () => openSource(s));
  b.addEventListener("mouseenter", () => showTip(b, s));
  b.addEventListener("focus", () => showTip(b, s));
  b.addEventListener("mouseleave", hideTip);
  b.addEventListener("blur", hideTip);
  return b;
}

// ---------- preview ----------

function showTip(anchor, s) {
  const tip = $("cite-tip");
  const status = s.status || "unchecked";
  tip.replaceChildren(
    el("div", { class: "tip-path", text: s.n + ". " + place(s) }),
    el("div", { class: "cit-status", dataset: { status }, text: statusIcon(status) + " " + (STATUS_TEXT[status] || status) }),
    s.support ? el("div", null, supportBadge(s)) : "",
    s.quote ? el("div", { class: "tip-quote", text: "“" + short(s.quote, 300) + "”" }) : el("div", { class: "muted", text: "no quote" }),
    el("div", { class: "muted small", text: "Enter or click opens the passage" }));
  tip.hidden = false;
  anchor.setAttribute("aria-describedby", "cite-tip");
  const r = anchor.getBoundingClientRect();
  const w = Math.min(360, window.innerWidth - 16);
  tip.style.width = w + "px";
  tip.style.left = Math.max(8, Math.min(r.left, window.innerWidth - w - 8)) + "px";
  const below = r.bottom + 6;
  const h = tip.offsetHeight;
  tip.style.top = (below + h > window.innerHeight && r.top - h - 6 > 0 ? r.top - h - 6 : below) + "px";
}
function hideTip() {
  const tip = $("cite-tip");
  tip.hidden = true;
  for (const a of document.querySelectorAll('[aria-describedby="cite-tip"]')) a.removeAttribute("aria-describedby");
}
document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") hideTip(); });
window.addEventListener("scroll", hideTip, true);

// ---------- source viewer ----------

function normWithMap(s) {
  // Lowercased text with whitespace runs collapsed, and for each code unit
  // of it the index in `s`.
  let out = "";
  const map = [];
  let inWs = false;
  for (let i = 0; i < s.length;) {
    const ch = String.fromCodePoint(s.codePointAt(i));
    if (/\s/.test(ch)) {
      if (!inWs) { out += " "; map.push(i); inWs = true; }
    } else {
      inWs = false;
      const lc = ch.toLowerCase();
      for (let k = 0; k < lc.length; k++) { out += lc[k]; map.push(i); }
    }
    i += ch.length;
  }
  map.push(s.length);
  return { out, map };
}
export function findQuote(text, quote) {
  const q = String(quote || "").replace(/\s+/g, " ").trim().toLowerCase();
  if (!q) return null;
  const { out, map } = normWithMap(text);
  const idx = out.indexOf(q);
  if (idx < 0) return null;
  const last = map[idx + q.length - 1];
  return [map[idx], last + String.fromCodePoint(text.codePointAt(last)).length];
}

let openDocument = null;
/** Lets the document list offer "open the whole document" from a source. */
export function setDocumentOpener(fn) { openDocument = fn; }

/** Opens a source: its passage with the quote marked, path, lines, status. */
export async function openSource(s) {
  hideTip();
  const dialog = $("source-dialog");
  const status = s.status || "unchecked";
  $("source-title").textContent = (s.n ? s.n + ". " : "") + (s.path || (s.kind === "doc" ? "document " + s.id : s.chunk_id || s.id || "source"));
  $("source-meta").textContent = s.chunk_id ? "loading passage " + s.chunk_id + "…" : "";
  $("source-status").replaceChildren(
    el("span", { class: "cit-status", dataset: { status }, text: statusIcon(status) + " " + (STATUS_TEXT[status] || status) }),
    supportBadge(s),
    originText(s) ? el("span", { class: "muted", text: " · " + originText(s) }) : "",
    s.detail && status !== "verified" ? el("div", { class: "muted", text: s.detail }) : "");
  const pre = $("source-text");
  pre.replaceChildren();
  const docBtn = $("source-open-doc");
  docBtn.hidden = true;
  openDialog(dialog, $("source-close"));
  if (!s.chunk_id) {
    pre.textContent = "This citation does not point at a passage of the store" + (s.quote ? "; it quotes: “" + s.quote + "”" : ".");
    return;
  }
  try {
    const ch = await api("GET", "/api/chunks/" + encodeURIComponent(s.chunk_id));
    $("source-title").textContent = (s.n ? s.n + ". " : "") + (ch.path || s.path || "");
    const meta = [];
    const where = ch.location || (ch.page != null ? "page " + ch.page : null);
    if (where) meta.push(where);
    if (ch.line_start != null) meta.push("lines " + ch.line_start + (ch.line_end != null && ch.line_end !== ch.line_start ? "–" + ch.line_end : ""));
    if (ch.heading) meta.push("§ " + ch.heading);
    meta.push("passage " + (ch.ordinal ?? "?") + " (" + ch.id + ")");
    $("source-meta").textContent = meta.join(" · ");
    const text = String(ch.text || "");
    const hit = findQuote(text, s.quote);
    if (hit) {
      const mark = el("mark", { text: text.slice(hit[0], hit[1]) });
      pre.replaceChildren(document.createTextNode(text.slice(0, hit[0])), mark, document.createTextNode(text.slice(hit[1])));
      mark.scrollIntoView({ block: "center" });
    } else {
      pre.replaceChildren(document.createTextNode(text));
      if (s.quote) $("source-status").appendChild(el("div", { class: "muted", text: "The quote is not in this passage: “" + short(s.quote, 200) + "”" }));
    }
    if (openDocument && ch.doc_id) {
      docBtn.hidden = false;
      docBtn.onclick = () => { dialog.close(); openDocument({ id: ch.doc_id, path: ch.path, chunk: ch.id, quote: hit ? s.quote : null }); };
    }
  } catch (e) {
    $("source-meta").textContent = "";
    pre.textContent = "Could not load the passage: " + e.message;
  }
}
