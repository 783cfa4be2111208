() => {
  // Arrow keys press Next / Previous of "Explain this cycle" while its buttons are on screen.
  // Keys typed into a field (prompt, slider, number) are left alone.
  const KEYS = { ArrowRight: "sv-explain-next", ArrowLeft: "sv-explain-prev" };
  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    const tag = target && target.tagName ? target.tagName.toUpperCase() : "";
    if (["INPUT", "TEXTAREA", "SELECT"].includes(tag) || (target && target.isContentEditable)) return;
    const id = KEYS[event.key];
    const button = id && document.getElementById(id);
    if (!button || button.offsetParent === null) return; // hidden, e.g. another tab is open
    event.preventDefault();
    button.click();
  });
}
