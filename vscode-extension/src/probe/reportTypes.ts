// The probe report as the server returns it. The types come from the report's one definition
// (server/torchdoctor/probe/schema.py, generated into reportSchema.ts); here every field is made
// optional on purpose: the report comes from another process and another release, and the view
// must render whatever subset it receives rather than fail on a missing or renamed field.
// Fields the server may send as `null` (a measurement that does not exist) say so.
import type * as Schema from "./reportSchema";

/** A schema type as received: every field, at every depth, may be missing (a dictionary's
 * entries are its keys: those present have values). */
export type Received<T> = T extends (infer Item)[]
  ? Received<Item>[]
  : T extends object
    ? string extends keyof T
      ? { [Key in keyof T]: Received<T[Key]> }
      : { [Key in keyof T]?: Received<T[Key]> }
    : T;

/** A tensor shape, outermost dimension first. */
export type ProbeShape = number[];

export type ProbeReport = Received<Schema.ProbeReport>;
export type ProbeDevice = Received<Schema.DeviceInfo>;
export type ProbeInputTensor = Received<Schema.InputTensor>;
export type ProbeInput = Received<Schema.InputInfo>;
export type ProbeParams = Received<Schema.ParamInfo>;
export type ProbeModuleRow = Received<Schema.ModuleRow>;
export type ProbeTimingStats = Received<Schema.TimingStats>;
export type ProbeLatency = Received<Schema.LatencyInfo>;
export type ProbeMemory = Received<Schema.MemoryInfo>;
export type ProbeFlops = Received<Schema.FlopsInfo>;
export type ProbeTopOp = Received<Schema.OpRow>;
export type ProbeLine = Received<Schema.LineRow>;
export type ProbeFinding = Received<Schema.RuntimeFinding>;
export type ProbeGraphBreak = Received<Schema.GraphBreak>;
export type ProbeGraphBreaks = Received<Schema.GraphBreakInfo>;
export type ProbeRecommendation = Received<Schema.Recommendation>;
export type ProbeBatchPoint = Received<Schema.BatchPoint>;
export type ProbeBatchSweep = Received<Schema.BatchSweepInfo>;

/** What the client remembers about one class's last probe, for quick picks and status. */
export interface ProbeSummary {
  className: string;
  uri: string;
  paramsTotal?: number;
  forwardMs?: number;
  peakMemoryBytes?: number;
  /** The device's name, e.g. "NVIDIA H100 80GB HBM3", or its kind when unnamed. */
  device?: string;
  finishedAt: number;
}

/** Reduces a report to the few figures shown outside the report view. */
export function summarize(uri: string, className: string, report: ProbeReport): ProbeSummary {
  const summary: ProbeSummary = { uri, className, finishedAt: Date.now() };
  const paramsTotal = finiteNumber(report.params?.total);
  if (paramsTotal !== undefined) {
    summary.paramsTotal = paramsTotal;
  }
  const forwardMs = finiteNumber(report.latency?.forward?.median_ms);
  if (forwardMs !== undefined) {
    summary.forwardMs = forwardMs;
  }
  const peakMemoryBytes = finiteNumber(report.memory?.peak_bytes);
  if (peakMemoryBytes !== undefined) {
    summary.peakMemoryBytes = peakMemoryBytes;
  }
  const device = deviceLabel(report.device);
  if (device !== undefined) {
    summary.device = device;
  }
  return summary;
}

/** The device in a few words: its name, else its kind. Tolerates anything the server sends. */
export function deviceLabel(device: unknown): string | undefined {
  if (typeof device === "string") {
    return device === "" ? undefined : device;
  }
  if (typeof device !== "object" || device === null) {
    return undefined;
  }
  const { name, kind } = device as ProbeDevice;
  if (typeof name === "string" && name !== "") {
    return name;
  }
  return typeof kind === "string" && kind !== "" ? kind : undefined;
}

function finiteNumber(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
