// Messages between the extension and the report webview, and the state the webview keeps
// with setState so a reloaded window can draw the same report again.
import type { BuildArguments } from "./buildArguments";
import type { ProbeReport, ProbeSummary } from "./reportTypes";

export interface ProbeTarget {
  uri: string;
  className: string;
  /** File name shown in the title, e.g. "train.py". */
  fileLabel: string;
  input?: string;
  /** Constructor arguments and precision pinned for the class. */
  build?: BuildArguments;
  /** Run the batch-size sweep too (the report view's button). */
  batchSweep?: boolean;
}

export type ReportViewState =
  | { kind: "idle" }
  | { kind: "running"; target: ProbeTarget; message: string; percent?: number }
  | { kind: "report"; target: ProbeTarget; report: ProbeReport; previous?: ProbeSummary }
  | { kind: "error"; target: ProbeTarget; message: string }
  | { kind: "cancelled"; target: ProbeTarget };

/** Extension → webview. */
export interface ShowStateMessage {
  type: "state";
  state: ReportViewState;
  /** Localized UI strings, sent along so the webview needs no l10n machinery of its own. */
  strings: Record<string, string>;
}

/** Webview → extension. */
export type WebviewMessage =
  | { type: "ready" }
  | { type: "cancel" }
  | { type: "rerun"; target: ProbeTarget }
  | { type: "changeInput"; target: ProbeTarget }
  | { type: "reveal"; file: string; line: number; uri?: string };
