// Horizontal bar charts in plain HTML/CSS: one row per item, bar width proportional to the
// largest value. Widths are set through the CSSOM, which the view's CSP allows (inline
// style attributes are not).
import { el } from "./dom";

export interface Bar {
  label: string;
  /** Shown after the label in a quieter style, e.g. the source text of a line. */
  detail?: string;
  value: number;
  valueText: string;
  /** Rendered as a link when given (reveals a source line). */
  onClick?: () => void;
  title?: string;
}

export function barChart(title: string, bars: Bar[], emptyText: string, maxBars = 15): HTMLElement {
  const section = el("section", { class: "chart" }, el("h3", {}, title));
  const shown = bars
    .filter((bar) => Number.isFinite(bar.value) && bar.value >= 0)
    .sort((a, b) => b.value - a.value)
    .slice(0, maxBars);
  if (shown.length === 0) {
    section.append(el("p", { class: "muted" }, emptyText));
    return section;
  }
  const largest = Math.max(...shown.map((bar) => bar.value), Number.MIN_VALUE);
  const list = el("div", { class: "bars", role: "list" });
  for (const bar of shown) {
    const text: (string | HTMLElement)[] = [bar.label];
    if (bar.detail !== undefined && bar.detail !== "") {
      text.push(el("span", { class: "bar-detail" }, bar.detail));
    }
    const label = bar.onClick
      ? el("a", { href: "#", class: "bar-label", title: bar.title ?? bar.label }, ...text)
      : el("span", { class: "bar-label", title: bar.title ?? bar.label }, ...text);
    if (bar.onClick) {
      const onClick = bar.onClick;
      label.addEventListener("click", (event) => {
        event.preventDefault();
        onClick();
      });
    }
    const fill = el("div", { class: "bar-fill" });
    fill.style.width = `${Math.max(0.5, (bar.value / largest) * 100).toFixed(2)}%`;
    list.append(
      el(
        "div",
        { class: "bar-row", role: "listitem" },
        label,
        el("div", { class: "bar-track" }, fill),
        el("span", { class: "bar-value" }, bar.valueText),
      ),
    );
  }
  section.append(list);
  return section;
}
