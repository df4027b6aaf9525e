// The probe report view. Draws the state the extension sends (running, report, error,
// cancelled) and saves it with setState, so after a window reload the panel shows the same
// report before the extension has said anything.
import type { ProbeTarget, ReportViewState, ShowStateMessage, WebviewMessage } from "../probe/messages";
import type { ProbeSummary } from "../probe/reportTypes";
import { button, el } from "./dom";
import { reportSections, type ReportContext } from "./report";

interface SavedState {
  state: ReportViewState;
  strings: Record<string, string>;
}

interface VsCodeApi {
  postMessage(message: WebviewMessage): void;
  getState(): SavedState | undefined;
  setState(state: SavedState): void;
}

declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const root = document.getElementById("root") ?? document.body;
let strings: Record<string, string> = {};

function t(key: string, ...args: string[]): string {
  const template = strings[key] ?? key;
  return template.replace(/\{(\d+)\}/g, (_, index: string) => args[Number(index)] ?? "");
}

function post(message: WebviewMessage): void {
  vscode.postMessage(message);
}

function reveal(file: string | null | undefined, line: number | null | undefined, target: ProbeTarget): void {
  post({ type: "reveal", file: file ?? "", line: line ?? 1, uri: target.uri });
}

function render(saved: SavedState): void {
  strings = saved.strings;
  const state = saved.state;
  root.replaceChildren();
  root.dataset.state = state.kind;
  switch (state.kind) {
    case "idle":
      root.append(el("p", { class: "muted" }, t("idle")));
      return;
    case "running":
      root.append(header(state.target, false), running(state.target, state.message, state.percent));
      return;
    case "cancelled":
      root.append(header(state.target, true), el("p", { class: "muted" }, t("cancelled", state.target.className)));
      return;
    case "error":
      root.append(header(state.target, true), errorView(state.target, state.message));
      return;
    case "report":
      root.append(header(state.target, true), ...reportSections(state.report, reportContext(state.target, state.previous)));
      return;
  }
}

/** What the report's sections need from the view: its strings, and links back to the editor. */
function reportContext(target: ProbeTarget, previous?: ProbeSummary): ReportContext {
  return {
    ...(previous !== undefined ? { previous } : {}),
    t,
    reveal: (file, line) => {
      reveal(file, line, target);
    },
  };
}

function header(target: ProbeTarget, actions: boolean): HTMLElement {
  const title = el("h1", {}, target.className, el("span", { class: "file" }, ` — ${target.fileLabel}`));
  const bar = el("div", { class: "actions" });
  if (actions) {
    bar.append(
      button(t("rerun"), () => {
        post({ type: "rerun", target: { ...target, batchSweep: false } }); // the sweep only on request
      }),
      button(t("changeInput"), () => {
        post({ type: "changeInput", target });
      }, { class: "secondary" }),
      button(t("sweepRun"), () => {
        post({ type: "rerun", target: { ...target, batchSweep: true } });
      }, { class: "secondary", id: "batch-sweep-button" }),
    );
  }
  return el("header", {}, title, bar);
}

function running(target: ProbeTarget, message: string, percent: number | undefined): HTMLElement {
  const progress = el("progress", { max: "100", "aria-label": t("running", target.className) });
  if (percent !== undefined) {
    progress.value = percent;
  }
  return el(
    "section",
    { class: "running" },
    el("p", {}, t("running", target.className)),
    progress,
    el("p", { class: "muted", id: "progress-message" }, message),
    button(t("cancel"), () => {
      post({ type: "cancel" });
    }, { id: "cancel", class: "secondary" }),
  );
}

/** Error messages name the user's file and line ("…/model.py:42" or "File "…", line 42"): link them. */
function errorView(target: ProbeTarget, message: string): HTMLElement {
  const section = el("section", { class: "error" }, el("h2", {}, t("failed", target.className)));
  const location = /([^\s"'()]+\.py)"?(?::|,\s*line\s+)(\d+)/.exec(message);
  const text = el("pre", { class: "error-text" }, message);
  section.append(text);
  if (location !== null) {
    const file = location[1];
    const line = Number(location[2]);
    const link = el("a", { href: "#" }, `${file}:${line}`);
    link.addEventListener("click", (event) => {
      event.preventDefault();
      reveal(file, line, target);
    });
    section.append(el("p", {}, t("source"), ": ", link));
  }
  return section;
}

function isStateMessage(data: unknown): data is ShowStateMessage {
  return typeof data === "object" && data !== null && (data as { type?: unknown }).type === "state";
}

window.addEventListener("message", (event: MessageEvent<unknown>) => {
  const message = event.data;
  if (!isStateMessage(message)) {
    return;
  }
  const saved: SavedState = { state: message.state, strings: message.strings };
  vscode.setState(saved);
  render(saved);
});

const restored = vscode.getState();
if (restored !== undefined) {
  render(restored);
}
post({ type: "ready" });
