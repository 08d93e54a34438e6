// Copy buttons: <button class="copy" data-copy="ELEMENT_ID"> copies that element's text.
// navigator.clipboard needs a secure context (https or localhost); plain http falls back to a selection.
"use strict";
document.addEventListener("click", async (event) => {
  const button = event.target.closest("button.copy");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = source.textContent;
  let ok = false;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      ok = true;
    }
  } catch (e) { ok = false; }
  if (!ok) {
    const area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.appendChild(area);
    area.select();
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
  }
  const label = button.textContent;
  button.textContent = ok ? "Copied" : "Select and copy";
  button.classList.toggle("done", ok);
  setTimeout(() => { button.textContent = label; button.classList.remove("done"); }, 1600);
});
// Filters apply as soon as a menu changes.
document.addEventListener("change", (event) => {
  const select = event.target.closest("form.filters select");
  if (select) select.form.requestSubmit();
});
