// The Orchestration settings: the RLM switch, flow, sandbox, inspector,
// citations, retrieval and budgets. They start from the server's defaults, persist per
// browser (localStorage), and only values that differ are sent.

import { $, el, store } from "./util.js";

const NUMBER_FIELDS = [
  ["max-llm-calls", "max_llm_calls", true],
  ["max-iterations", "max_iterations", true],
  ["max-depth", "max_depth", true],
  ["max-wall-secs", "max_wall_secs", true],
  ["max-cost", "max_cost_usd", false],
];
let defaults = {};
let rememberedFlow = null;

function flows() { return Array.from($("flow").options, (o) => o.value); }
function defaultRlmEnabled() {
  if (typeof defaults.rlm_enabled === "boolean") return defaults.rlm_enabled;
  return defaults.flow ? defaults.flow !== "rag" : true;
}
function defaultRlmFlow() {
  return [defaults.rlm_flow, defaults.flow, "repl"].find((f) => f && f !== "rag" && flows().includes(f)) || flows()[0];
}
function defText(key) { return defaults[key] === undefined || defaults[key] === null ? "" : String(defaults[key]); }

/** Fills the form from the server's `info` and this browser's saved values. */
export function setupSettings(info) {
  defaults = info.defaults || {};
  const fl = info.flows && info.flows.length ? info.flows : ["repl", "pipeline", "rag", "auto"];
  $("flow").replaceChildren(...fl.map((f) => el("option", { value: f, text: f })));
  const ins = info.inspectors && info.inspectors.length ? info.inspectors : ["iterative", "per-chunk", "hypothesis", "repl"];
  $("inspector").replaceChildren(...ins.map((f) => el("option", { value: f, text: f })));
  // A back-end the server cannot run is listed, disabled, with the reason.
  const sbx = Array.isArray(info.sandboxes) && info.sandboxes.length ? info.sandboxes : [{ name: "monty", available: true }];
  $("sandbox").replaceChildren(...sbx.map((s) => {
    const o = el("option", { value: s.name, text: s.available ? s.name : s.name + " (not available here)" });
    o.disabled = !s.available;
    if (s.reason) o.title = s.reason;
    return o;
  }));
  $("high-recall-row").hidden = $("high-recall-label").hidden = typeof defaults.high_recall !== "boolean";
  reset(false);
  const saved = store.get("settings", null);
  if (saved && typeof saved === "object") {
    if (typeof saved.rlm === "boolean") $("rlm-toggle").checked = saved.rlm;
    if (saved.flow && flows().includes(saved.flow)) { $("flow").value = saved.flow; if (saved.flow !== "rag") rememberedFlow = saved.flow; }
    if (saved.inspector && Array.from($("inspector").options).some((o) => o.value === saved.inspector)) $("inspector").value = saved.inspector;
    if (saved.citations) $("citations").value = saved.citations;
    if (saved.sandbox && Array.from($("sandbox").options).some((o) => o.value === saved.sandbox && !o.disabled)) $("sandbox").value = saved.sandbox;
    if (typeof saved.coverage === "boolean") $("coverage").checked = saved.coverage;
    if (typeof saved.high_recall === "boolean") $("high-recall").checked = saved.high_recall;
    for (const [id, key] of NUMBER_FIELDS) if (typeof saved[key] === "string") $(id).value = saved[key];
  }
  applyToggle();
  markChanged();
}

function reset(save) {
  rememberedFlow = defaultRlmFlow();
  $("rlm-toggle").checked = defaultRlmEnabled();
  $("flow").value = defaultRlmEnabled() && defaults.flow && defaults.flow !== "rag" && flows().includes(defaults.flow) ? defaults.flow : defaultRlmEnabled() ? defaultRlmFlow() : "rag";
  if (defaults.inspector) $("inspector").value = defaults.inspector;
  if (defaults.citations) $("citations").value = defaults.citations;
  $("sandbox").value = defaults.sandbox || "monty";
  $("coverage").checked = false;
  $("high-recall").checked = !!defaults.high_recall;
  for (const [id, key] of NUMBER_FIELDS) $(id).value = defText(key);
  applyToggle();
  markChanged();
  if (save) store.remove("settings");
}

function save() {
  const s = {
    rlm: $("rlm-toggle").checked, flow: $("flow").value, inspector: $("inspector").value,
    citations: $("citations").value, coverage: $("coverage").checked, high_recall: $("high-recall").checked,
    sandbox: $("sandbox").value,
  };
  for (const [id, key] of NUMBER_FIELDS) s[key] = $(id).value.trim();
  store.set("settings", s);
}

function applyToggle() {
  const on = $("rlm-toggle").checked;
  const sel = $("flow");
  $("rlm-state").textContent = on ? "on" : "off (rag)";
  if (on) {
    sel.disabled = false;
    if (sel.value === "rag" && rememberedFlow) sel.value = rememberedFlow;
  } else {
    if (sel.value !== "rag") rememberedFlow = sel.value;
    sel.value = "rag";
    sel.disabled = true;
  }
  applyFlow();
}
function applyFlow() {
  const pipeline = $("rlm-toggle").checked && $("flow").value === "pipeline";
  for (const e of document.querySelectorAll(".for-pipeline")) e.hidden = !pipeline;
}
function markChanged() {
  $("inspector").classList.toggle("changed", !!defaults.inspector && $("inspector").value !== defaults.inspector);
  $("citations").classList.toggle("changed", !!defaults.citations && $("citations").value !== defaults.citations);
  $("sandbox").classList.toggle("changed", $("sandbox").value !== (defaults.sandbox || "monty"));
  for (const [id, key] of NUMBER_FIELDS) $(id).classList.toggle("changed", $(id).value.trim() !== defText(key));
}

/** The AskBody settings; throws Error with a message for a bad field. */
export function askOptions() {
  const on = $("rlm-toggle").checked;
  const body = { use_rlm: on, flow: on ? $("flow").value : "rag" };
  if (on && body.flow === "pipeline") {
    const insp = $("inspector").value;
    if (insp && insp !== defaults.inspector) body.inspector = insp;
  }
  const cit = $("citations").value;
  if (cit && cit !== defaults.citations) body.citations = cit;
  const sbx = $("sandbox").value;
  if (sbx && sbx !== (defaults.sandbox || "monty")) body.sandbox = sbx;
  if ($("coverage").checked) body.coverage = true;
  if (!$("high-recall-row").hidden && $("high-recall").checked !== !!defaults.high_recall) body.high_recall = $("high-recall").checked;
  for (const [id, key, integer] of NUMBER_FIELDS) {
    const raw = $(id).value.trim();
    if (raw === defText(key) || raw === "") continue;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n))) {
      const label = document.querySelector('label[for="' + id + '"]');
      throw new Error((label ? label.textContent : key) + " must be a " + (integer ? "whole " : "") + "number of at least 0 (got “" + raw + "”); fix it in Settings");
    }
    body[key] = n;
  }
  return body;
}

$("rlm-toggle").addEventListener("change", () => { applyToggle(); save(); });
$("flow").addEventListener("change", () => { if ($("flow").value !== "rag") rememberedFlow = $("flow").value; applyFlow(); save(); });
for (const id of ["sandbox", "inspector", "citations", "coverage", "high-recall", ...NUMBER_FIELDS.map((f) => f[0])]) {
  $(id).addEventListener("input", () => { markChanged(); save(); });
  $(id).addEventListener("change", () => { markChanged(); save(); });
}
$("reset-settings").addEventListener("click", () => reset(true));
