// The JSON API: requests with the bearer token, the token prompt on 401,
// and server-sent events read over fetch (EventSource cannot send headers).

import { $, openDialog, short } from "./util.js";

/** An API or network failure; `status` 0 means the server did not answer. */
export class HttpError extends Error {
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body || null;
  }
}

// The token lives in sessionStorage (this tab, until it closes) unless the
// user ticks "remember on this device" (localStorage).
const TOKEN_KEY = "rlm.token";
function savedToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || ""; } catch (_) { return ""; }
}
function saveToken(token, remember) {
  try {
    sessionStorage.setItem(TOKEN_KEY, token);
    if (remember) localStorage.setItem(TOKEN_KEY, token); else localStorage.removeItem(TOKEN_KEY);
  } catch (_) { /* storage off: kept in memory only */ }
  memoryToken = token;
}
export function forgetToken() {
  try { sessionStorage.removeItem(TOKEN_KEY); localStorage.removeItem(TOKEN_KEY); } catch (_) { /* ignore */ }
  memoryToken = "";
}
let memoryToken = savedToken();

// One prompt at a time: requests refused together wait for the same answer.
let pendingPrompt = null;
function askToken(refused) {
  if (pendingPrompt) return pendingPrompt;
  pendingPrompt = new Promise((resolve) => {
    const dialog = $("token-dialog");
    const input = $("token-input");
    $("token-error").textContent = refused ? "The server refused that token. Check it and try again." : "";
    input.value = "";
    // Nothing works without the token: Escape does not dismiss the prompt.
    // (A browser closes a dialog on Escape anyway when the page had no click
    // since it opened; then it opens again.)
    const keep = (ev) => ev.preventDefault();
    const reopen = () => { if (!dialog.open) { dialog.showModal(); input.focus(); } };
    const done = (ev) => {
      ev.preventDefault();
      const token = input.value.trim();
      if (!token) { $("token-error").textContent = "Enter the token (rlm serve --token or RLM_SERVE_TOKEN)."; return; }
      $("token-form").removeEventListener("submit", done);
      dialog.removeEventListener("cancel", keep);
      dialog.removeEventListener("close", reopen);
      saveToken(token, $("token-remember").checked);
      dialog.close();
      pendingPrompt = null;
      resolve(token);
    };
    $("token-form").addEventListener("submit", done);
    dialog.addEventListener("cancel", keep);
    dialog.addEventListener("close", reopen);
    openDialog(dialog, input);
  });
  return pendingPrompt;
}

function headers(extra) {
  const h = Object.assign({ Accept: "application/json" }, extra || {});
  if (memoryToken) h.Authorization = "Bearer " + memoryToken;
  return h;
}

/** fetch with the token; a 401 asks for the token and tries again. */
export async function authFetch(path, opts) {
  for (let tries = 0; ; tries++) {
    const o = Object.assign({}, opts || {});
    o.headers = headers(o.headers);
    let res;
    try {
      res = await fetch(path, o);
    } catch (e) {
      if (e && e.name === "AbortError") throw e;
      document.dispatchEvent(new Event("rlm:unreachable"));
      throw new HttpError(0, "the server at " + location.host + " is not answering (" + (e && e.message ? e.message : e) + ")");
    }
    if (res.status !== 401 || tries >= 5) return res;
    const had = !!memoryToken;
    if (had) forgetToken();
    await askToken(had);
    if (o.signal && o.signal.aborted) throw new DOMException("stopped", "AbortError");
  }
}

/** A JSON request; throws HttpError with the server's one-line message. */
export async function api(method, path, body, signal) {
  const opts = { method, signal, headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await authFetch(path, opts);
  if (res.status === 204) return null;
  const text = await res.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch (_) { data = null; } }
  if (!res.ok) {
    const msg = data && data.error && data.error.message ? data.error.message : (text ? short(text, 300) : res.statusText || "request failed");
    throw new HttpError(res.status, msg, data);
  }
  return data;
}

/**
 * Reads a server-sent event stream: `onEvent({event, data, id})` per event.
 * Resolves when the stream ends; reconnects (with Last-Event-ID) after a
 * dropped connection, up to `retries` times in a row.
 */
export async function readEvents(url, onEvent, { signal, retries = 3 } = {}) {
  let lastId = null;
  let failures = 0;
  for (;;) {
    const h = { Accept: "text/event-stream" };
    if (lastId !== null) h["Last-Event-ID"] = lastId;
    let res;
    try {
      res = await authFetch(url, { headers: h, signal });
    } catch (e) {
      if (signal && signal.aborted) return;
      if (++failures > retries) throw e;
      await new Promise((r) => setTimeout(r, 500 * failures));
      continue;
    }
    if (!res.ok) {
      let msg = res.statusText;
      try { const d = await res.json(); if (d && d.error) msg = d.error.message; } catch (_) { /* keep status text */ }
      throw new HttpError(res.status, msg);
    }
    let ended = false;
    try {
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = "";
      let ev = { event: "message", data: [], id: null };
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += value;
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf.startsWith("\r\n", nl) ? 2 : 1));
          if (line === "") {
            if (ev.data.length) {
              if (ev.id !== null) lastId = ev.id;
              failures = 0;
              const out = { event: ev.event, data: ev.data.join("\n"), id: ev.id };
              if (out.event === "end") ended = true;
              onEvent(out);
            }
            ev = { event: "message", data: [], id: null };
            continue;
          }
          if (line.startsWith(":")) continue;
          const c = line.indexOf(":");
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? "" : line.slice(c + 1);
          if (v.startsWith(" ")) v = v.slice(1);
          if (field === "event") ev.event = v;
          else if (field === "data") ev.data.push(v);
          else if (field === "id") ev.id = v;
        }
      }
    } catch (e) {
      if (signal && signal.aborted) return;
      if (++failures > retries) throw new HttpError(0, "the event stream broke off (" + (e && e.message ? e.message : e) + ")");
      await new Promise((r) => setTimeout(r, 500 * failures));
      continue;
    }
    if (ended || (signal && signal.aborted)) return;
    // Closed without its `end` event: the server went away mid-stream.
    if (++failures > retries) throw new HttpError(0, "the server closed the event stream before the run ended");
    await new Promise((r) => setTimeout(r, 500 * failures));
  }
}
