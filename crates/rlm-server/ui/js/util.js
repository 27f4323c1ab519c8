// Small DOM and formatting helpers shared by the page's modules.

export const $ = (id) => document.getElementById(id);

/** `el("div", {class, text, dataset, onclick, ...attrs}, ...children)`. */
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "dataset") Object.assign(e.dataset, v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}

export function plural(n, word) { return n + " " + word + (n === 1 ? "" : "s"); }
export function fmtInt(n) { return typeof n === "number" ? n.toLocaleString("en-US") : "?"; }
export function fmtSecs(ms) { return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + " s"; }
export function short(s, n) { s = String(s == null ? "" : s); return s.length > n ? s.slice(0, n) + "…" : s; }

/** "3 min ago", "yesterday", or a date, for an RFC 3339 time. */
export function ago(iso) {
  const t = Date.parse(iso || "");
  if (!Number.isFinite(t)) return "";
  const s = (Date.now() - t) / 1000;
  if (s < 60) return "just now";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  if (s < 2 * 86400) return "yesterday";
  return new Date(t).toLocaleDateString();
}

/** Settings and UI state kept per browser (localStorage; never throws). */
export const store = {
  get(key, fallback) {
    try {
      const v = localStorage.getItem("rlm." + key);
      return v === null ? fallback : JSON.parse(v);
    } catch (_) { return fallback; }
  },
  set(key, value) {
    try { localStorage.setItem("rlm." + key, JSON.stringify(value)); } catch (_) { /* private mode, full */ }
  },
  remove(key) { try { localStorage.removeItem("rlm." + key); } catch (_) { /* ignore */ } },
};

/** Announces `text` to screen readers (one polite live region for results). */
export function announce(text) {
  const r = $("announce");
  r.textContent = "";
  // A fresh text node after a tick is announced even when it repeats.
  setTimeout(() => { r.textContent = text; }, 50);
}

/** Converts byte offsets into a UTF-8 string to indices of the JS string. */
export function byteToIndex(text, offsets) {
  const wanted = Array.from(new Set(offsets.filter((o) => typeof o === "number" && o >= 0))).sort((a, b) => a - b);
  const out = new Map();
  let bytes = 0, k = 0;
  for (let i = 0; i <= text.length && k < wanted.length;) {
    while (k < wanted.length && wanted[k] <= bytes) { out.set(wanted[k], i); k++; }
    if (i === text.length) break;
    const cp = text.codePointAt(i);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += cp > 0xffff ? 2 : 1;
  }
  for (; k < wanted.length; k++) out.set(wanted[k], text.length);
  return out;
}

/** Copies text to the clipboard (the async API, else a hidden textarea). */
export async function copyText(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (_) {
    const t = el("textarea", { class: "sr-only", "aria-hidden": "true" });
    t.value = text;
    document.body.appendChild(t);
    t.select();
    let ok = false;
    try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
    t.remove();
    return ok;
  }
}

/**
 * Opens a modal <dialog>: the page behind is inert (focus stays inside),
 * Escape closes it, and focus returns to what had it before.
 */
export function openDialog(dialog, focusFirst) {
  const opener = document.activeElement;
  if (!dialog.open) dialog.showModal();
  const onClose = () => {
    dialog.removeEventListener("close", onClose);
    if (opener && opener.isConnected && typeof opener.focus === "function") opener.focus();
  };
  dialog.addEventListener("close", onClose);
  const target = focusFirst || dialog.querySelector("[autofocus], input, textarea, select, button");
  if (target) target.focus();
}
