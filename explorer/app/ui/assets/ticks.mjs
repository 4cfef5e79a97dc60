// Tick labels and annotations that fit a drawn plot, measured as drawn: the page's plot component
// (components/plot_view) tidies each plot after it is drawn. It reads the plot's SVG through the DOM
// alone (no field of Plotly's).

// An axis whose labels would overlap sets them smaller, down to SMALLEST_TICK_PX, and hides only
// those that overlap still: at a few dozen tokens every label fits, a little smaller (Plotly has
// already turned them upright where they would not fit across).
export const SMALLEST_TICK_PX = 9;

export function tidyTicks(gd) {
  // Writes and reads in batches, every axis at once: the page is laid out once a batch, not once
  // per axis (a read after a write lays it out again).
  const axes = [...gd.querySelectorAll(".xaxislayer-above, .yaxislayer-above, .colorbar .cbaxis")];
  const labels = axes.map((axis) => [...axis.querySelectorAll("text")]);
  const notes = [...gd.querySelectorAll(".annotation")];
  for (const text of labels.flat()) {
    if (text.style.visibility) text.style.visibility = "";
    if (text.dataset.fontSize) text.style.fontSize = text.dataset.fontSize; // as Plotly set it
  }
  for (const note of notes) if (note.style.visibility) note.style.visibility = "";
  const frame = gd.getBoundingClientRect();
  // Annotations sit where the figure puts them, whatever size the tick labels are: measured with them.
  const noteBoxes = notes.map((note) => ({ note, box: note.getBoundingClientRect() }));
  const inside = (box) =>
    box.left >= frame.left - 1 && box.right <= frame.right + 1 && box.top >= frame.top - 1 && box.bottom <= frame.bottom + 1;
  const overlap = (a, b) => a.left < b.right + 1 && a.right > b.left - 1 && a.top < b.bottom + 1 && a.bottom > b.top - 1;
  const placedOf = (texts) => {
    const placed = texts.map((text) => ({ text, box: text.getBoundingClientRect() })).filter(({ box }) => box.width > 0 && box.height > 0);
    const spread = (key) => Math.max(...placed.map((p) => p.box[key])) - Math.min(...placed.map((p) => p.box[key]));
    const along = spread("left") > spread("top") ? "left" : "top"; // ticks run across or down
    return placed.sort((a, b) => a.box[along] - b.box[along]);
  };
  const crowded = (placed) => placed.some((p, i) => i > 0 && overlap(placed[i - 1].box, p.box));
  let measured = labels.map(placedOf);
  let tight = labels.filter((_, i) => crowded(measured[i]));
  const size = (text) => parseFloat(text.dataset.fontSize || text.style.fontSize) || 12;
  for (let px = Math.max(0, ...tight.flat().map(size)) - 1; tight.length && px >= SMALLEST_TICK_PX; px--) {
    for (const text of tight.flat()) {
      if (!text.dataset.fontSize) text.dataset.fontSize = text.style.fontSize;
      if (size(text) > px) text.style.fontSize = `${px}px`;
    }
    const remeasured = tight.map(placedOf);
    measured = labels.map((texts) => remeasured[tight.indexOf(texts)] || measured[labels.indexOf(texts)]);
    tight = tight.filter((_, i) => crowded(remeasured[i]));
  }
  for (const placed of measured) {
    let last = null;
    for (const { text, box } of placed) {
      if ((last && overlap(last, box)) || !inside(box)) text.style.visibility = "hidden";
      else last = box;
    }
  }
  // Annotations (panel titles, the thumbnails' first and last keys, the flow's named routes): one that
  // would overlap an earlier one shown is hidden.
  const covers = (a, b) =>
    Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const shownNotes = [];
  for (const { note, box } of noteBoxes) {
    if (box.width === 0 || box.height === 0) continue;
    if (shownNotes.some((other) => covers(other, box))) note.style.visibility = "hidden";
    else shownNotes.push(box);
  }
}
