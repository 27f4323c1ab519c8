// The store's documents: search, open one (its extracted text, a page at a
// time), and add documents (upload, or a path on the server) with the
// indexing job's progress, when the server allows it.

import { $, el, plural, fmtInt, short, announce, openDialog, byteToIndex } from "./util.js";
import { api, authFetch } from "./api.js";
import { findQuote } from "./answer.js";

const PAGE = 50;
let query = "";
let offset = 0;
let searchTimer = null;
let onIndexed = () => {};

/** Called after an indexing job ends (to refresh the store's counts). */
export function setOnIndexed(fn) { onIndexed = fn; }

function fmtBytes(n) {
  if (typeof n !== "number") return "";
  if (n < 1024) return n + " B";
  if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KiB";
  return (n / 1024 / 1024).toFixed(1) + " MiB";
}

export async function refreshDocuments(more) {
  if (!more) offset = 0;
  const q = query ? "&q=" + encodeURIComponent(query) : "";
  const list = $("documents");
  try {
    const data = await api("GET", "/api/documents?limit=" + PAGE + "&offset=" + offset + q);
    const docs = (data && data.documents) || [];
    const items = docs.map((d) => {
      const b = el("button", { type: "button", class: "doc-open" },
        el("span", { class: "name", text: d.title && d.title !== d.path ? d.title : d.path }),
        el("span", { class: "meta", text: (d.title && d.title !== d.path ? d.path + " · " : "") + (d.kind || "") + " · " + fmtBytes(d.size_bytes) + " · " + plural(d.chunk_count ?? 0, "passage") }));
      b.addEventListener("click", () => openDocument(d));
      const li = el("li", { dataset: { doc: d.id } }, b);
      if (d.snippet) li.appendChild(el("div", { class: "snippet", text: short(d.snippet, 200) }));
      return li;
    });
    if (more) {
      const old = list.querySelector(".more");
      if (old) old.remove();
      list.append(...items);
    } else {
      list.replaceChildren(...items);
    }
    offset += docs.length;
    const total = data.total ?? offset;
    $("documents-count").textContent = query ? plural(total, "document") + (total === 1 ? " matches “" : " match “") + short(query, 40) + "”" : plural(total, "document");
    if (!docs.length && !more) list.appendChild(el("li", { class: "empty", text: query ? "No document matches." : "The store has no documents yet." }));
    if (offset < total) {
      const b = el("button", { type: "button", class: "small-btn", text: "Show more (" + fmtInt(total - offset) + " left)" });
      b.addEventListener("click", () => refreshDocuments(true));
      list.appendChild(el("li", { class: "more" }, b));
    }
    $("documents-error").textContent = "";
  } catch (e) {
    $("documents-error").textContent = e.status === 404 ? "This server cannot list documents." : "Could not list the documents: " + e.message;
  }
}

/** The address of a document, at a cited passage (and its quote). */
export function documentUrl(docId, chunkId, quote) {
  return "#/doc/" + encodeURIComponent(docId) + (chunkId ? "/" + encodeURIComponent(chunkId) : "") +
    (quote ? "?q=" + encodeURIComponent(short(quote, 300)) : "");
}

// Where the page was before a document was opened: its address again when
// the document closes.
let docReturn = null;
$("doc-dialog").addEventListener("close", () => {
  if (docReturn !== null && /^#\/doc\//.test(location.hash)) history.replaceState(null, "", docReturn);
  docReturn = null;
});

/**
 * Opens a document (`d.id`) at its address: its metadata and extracted
 * text, 64 KiB a page; with `d.chunk`, from a little before that passage,
 * scrolled to it, the quote `d.quote` (else the passage) highlighted, and
 * the passage's lines and page named.
 */
export async function openDocument(d) {
  const dialog = $("doc-dialog");
  const url = documentUrl(d.id, d.chunk, d.quote);
  if (docReturn === null) docReturn = location.hash !== url ? location.hash || "#/" : "#/";
  if (location.hash !== url) history.pushState(null, "", url);
  $("doc-title").textContent = d.title || d.path || d.id;
  $("doc-meta").textContent = "loading…";
  const pre = $("doc-text");
  pre.replaceChildren();
  $("doc-more").hidden = true;
  $("doc-start").hidden = true;
  openDialog(dialog, $("doc-close"));
  let chunk = null;
  if (d.chunk) {
    try { chunk = await api("GET", "/api/chunks/" + encodeURIComponent(d.chunk)); } catch (_) { chunk = null; }
  }
  // Text before the passage, for its context.
  let next = chunk && chunk.byte_start > 2048 ? chunk.byte_start - 1024 : 0;
  let marked = false;
  const load = async () => {
    try {
      const data = await api("GET", "/api/documents/" + encodeURIComponent(d.id) + "?offset=" + next);
      $("doc-title").textContent = data.title || data.path;
      const at = [];
      if (chunk) {
        if (chunk.location) at.push(chunk.location);
        else if (chunk.page != null) at.push("page " + chunk.page);
        if (chunk.line_start != null) at.push("lines " + chunk.line_start + (chunk.line_end != null && chunk.line_end !== chunk.line_start ? "–" + chunk.line_end : ""));
      }
      $("doc-meta").textContent = [data.path !== data.title ? data.path : null, data.kind, fmtBytes(data.size_bytes), plural(data.chunk_count ?? 0, "passage"), at.length ? "cited: " + at.join(", ") : null].filter(Boolean).join(" · ");
      const t = data.text || {};
      const content = t.content || "";
      $("doc-start").hidden = !(t.offset > 0) || pre.childNodes.length > 0;
      if (chunk && !marked && chunk.byte_start >= (t.offset || 0) && chunk.byte_start < (t.end ?? Infinity)) {
        marked = true;
        appendMarked(pre, content, t.offset || 0, chunk, d.quote);
      } else {
        pre.appendChild(document.createTextNode(content));
      }
      next = t.next_offset;
      $("doc-more").hidden = next === null || next === undefined;
      if (!$("doc-more").hidden) $("doc-more").textContent = "Load more (" + fmtBytes(t.total_bytes - next) + " left)";
    } catch (e) {
      $("doc-meta").textContent = "";
      pre.appendChild(document.createTextNode("Could not load the document: " + e.message));
      $("doc-more").hidden = true;
    }
  };
  $("doc-more").onclick = load;
  $("doc-start").onclick = () => { dialog.close(); openDocument({ id: d.id, title: d.title, path: d.path }); };
  await load();
  const mark = pre.querySelector("mark");
  if (mark) mark.scrollIntoView({ block: "center" });
}

/** `content` (from byte `offset` of the text) with the cited passage
 * marked: the quote within it when found there, else the whole passage. */
function appendMarked(pre, content, offset, chunk, quote) {
  const at = byteToIndex(content, [chunk.byte_start - offset, chunk.byte_end - offset]);
  const s = at.get(chunk.byte_start - offset), e = at.get(chunk.byte_end - offset);
  let from = s, to = e;
  const hit = quote ? findQuote(content.slice(s, e), quote) || findQuote(content, quote) : null;
  if (hit) {
    const base = findQuote(content.slice(s, e), quote) ? s : 0;
    from = base + hit[0];
    to = base + hit[1];
  }
  pre.append(document.createTextNode(content.slice(0, from)),
    el("mark", { class: hit ? "quote-mark" : "passage-mark", text: content.slice(from, to) }),
    document.createTextNode(content.slice(to)));
}

$("doc-search").addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => { query = $("doc-search").value.trim(); refreshDocuments(false); }, 250);
});
$("doc-search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  clearTimeout(searchTimer);
  query = $("doc-search").value.trim();
  refreshDocuments(false);
});

// ---------- adding documents ----------

/** Shows the ways to add documents that the server's `features` allow. */
export function setupAdding(info) {
  const f = info.features || {};
  $("upload-form").hidden = !f.upload;
  $("path-form").hidden = !f.index_paths;
  $("reindex").hidden = !f.reindex;
  $("add-docs").hidden = !(f.upload || f.index_paths || f.reindex);
}

function progress(job) {
  const box = $("index-progress");
  box.hidden = false;
  const bar = $("index-bar");
  if (job.total_bytes) { bar.max = job.total_bytes; bar.value = job.done_bytes || 0; } else bar.removeAttribute("value");
  const pct = job.total_bytes ? " · " + Math.floor(100 * (job.done_bytes || 0) / job.total_bytes) + "%" : "";
  $("index-phase").textContent = "Indexing (" + job.kind + "): " + job.phase + (job.files_found ? " · " + plural(job.files_found, "file") : "") + pct;
}

async function follow(job) {
  for (;;) {
    progress(job);
    if (job.status === "done" || job.status === "failed") break;
    await new Promise((r) => setTimeout(r, 500));
    job = await api("GET", "/api/index/jobs/" + encodeURIComponent(job.id));
  }
  const r = job.report || {};
  const errors = Array.isArray(r.errors) ? r.errors : [];
  const text = job.status === "done"
    ? "Indexed: " + (r.added ?? 0) + " added, " + (r.updated ?? 0) + " updated, " + (r.unchanged ?? 0) + " unchanged, " + (r.removed ?? 0) + " removed" + (job.documents != null ? " · " + plural(job.documents, "document") + " in the store" : "") + (errors.length ? " · " + plural(errors.length, "file") + " failed: " + errors.map((e) => e[0] + " (" + e[1] + ")").join("; ") : "")
    : "Indexing failed: " + (job.error || "unknown error");
  $("index-phase").textContent = text;
  $("index-bar").hidden = true;
  announce(text);
  onIndexed();
  refreshDocuments(false);
  return job;
}

async function run(what, start) {
  const msg = $("add-error");
  msg.textContent = "";
  $("index-bar").hidden = false;
  for (const b of document.querySelectorAll("#add-docs button")) b.disabled = true;
  try {
    const started = await start();
    await follow(started.job);
  } catch (e) {
    msg.textContent = what + " failed: " + e.message;
    $("index-progress").hidden = true;
  } finally {
    for (const b of document.querySelectorAll("#add-docs button")) b.disabled = false;
  }
}

$("upload-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const files = Array.from($("upload-files").files || []);
  if (!files.length) { $("add-error").textContent = "Choose one or more files first."; return; }
  run("Upload", async () => {
    // One indexing job at a time: each file is saved, then indexed.
    let last = null;
    for (let i = 0; i < files.length; i++) {
      const file = files[i];
      $("index-progress").hidden = false;
      $("index-phase").textContent = "Uploading " + file.name + " (" + (i + 1) + " of " + files.length + ")…";
      const res = await authFetch("/api/uploads?name=" + encodeURIComponent(file.name), { method: "POST", body: file, headers: { "Content-Type": "application/octet-stream" } });
      const data = await res.json().catch(() => null);
      if (!res.ok) throw new Error(file.name + ": " + (data && data.error ? data.error.message : "HTTP " + res.status));
      last = data;
      if (i < files.length - 1) await follow(data.job);
    }
    return last;
  });
});
$("path-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const path = $("index-path").value.trim();
  if (!path.startsWith("/")) { $("add-error").textContent = "Give an absolute path on the server (it starts with /)."; return; }
  run("Indexing " + path, () => api("POST", "/api/index", { path }));
});
$("reindex").addEventListener("click", () => run("Re-indexing", () => api("POST", "/api/reindex", {})));
