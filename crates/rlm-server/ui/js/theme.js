// Runs before the first paint (a plain script in <head>): the saved theme,
// if any, so a dark page never flashes light. Without one the page follows
// the system's light or dark setting (prefers-color-scheme).
(function () {
  try {
    var t = JSON.parse(localStorage.getItem("rlm.theme") || "null");
    if (t === "light" || t === "dark") document.documentElement.dataset.theme = t;
  } catch (e) { /* storage off: follow the system */ }
})();
