// The probe report as the server returns it (schema 1). Every field is optional on purpose:
// the report comes from another process and another release, and the view must render
// whatever subset it receives rather than fail on a missing or renamed field.

export interface ProbeInput {
  shape?: number[] | number[][] | string;
  dtype?: string;
  source?: string;
}

export interface ProbeParams {
  total?: number;
  trainable?: number;
}

export interface ProbeModuleRow {
  name?: string;
  type?: string;
  output_shape?: unknown;
  params?: number;
  forward_ms?: number | null;
  memory_bytes?: number | null;
  file?: string | null;
  line?: number | null;
}

export interface ProbeLatencyStats {
  median?: number;
  spread?: number;
}

export interface ProbeLatency {
  forward_ms?: ProbeLatencyStats;
  forward_backward_ms?: ProbeLatencyStats;
}

export interface ProbeFlops {
  forward?: number | null;
  forward_backward?: number | null;
}

export interface ProbeTopOp {
  name?: string;
  self_ms?: number;
  count?: number;
}

export interface ProbeHotLine {
  file?: string;
  line?: number;
  ms?: number;
  memory_bytes?: number | null;
}

export interface ProbeFinding {
  kind?: string;
  message?: string;
  file?: string | null;
  line?: number | null;
  severity?: string;
}

export interface ProbeRecommendation {
  strategy?: string;
  reason?: string;
  [detail: string]: unknown;
}

export interface ProbeReport {
  schema?: number;
  torch_version?: string;
  device?: string;
  input?: ProbeInput;
  params?: ProbeParams;
  param_bytes?: number;
  modules?: ProbeModuleRow[];
  latency?: ProbeLatency;
  peak_memory_bytes?: number | null;
  flops?: ProbeFlops;
  top_ops?: ProbeTopOp[];
  hot_lines?: ProbeHotLine[];
  findings?: ProbeFinding[];
  recommendation?: ProbeRecommendation;
}

/** What the client remembers about one class's last probe, for quick picks and status. */
export interface ProbeSummary {
  className: string;
  uri: string;
  paramsTotal?: number;
  forwardMs?: number;
  peakMemoryBytes?: number;
  device?: string;
  finishedAt: number;
}

/** Reduces a report to the few figures shown outside the report view. */
export function summarize(uri: string, className: string, report: ProbeReport): ProbeSummary {
  const summary: ProbeSummary = { uri, className, finishedAt: Date.now() };
  if (typeof report.params?.total === "number") {
    summary.paramsTotal = report.params.total;
  }
  const forward = report.latency?.forward_ms?.median;
  if (typeof forward === "number") {
    summary.forwardMs = forward;
  }
  if (typeof report.peak_memory_bytes === "number") {
    summary.peakMemoryBytes = report.peak_memory_bytes;
  }
  if (typeof report.device === "string") {
    summary.device = report.device;
  }
  return summary;
}
