// The probe report as the server returns it (schema 1), field by field as documented in
// server/torchdoctor/probe/REPORT.md. Every field is optional on purpose: the report comes
// from another process and another release, and the view must render whatever subset it
// receives rather than fail on a missing or renamed field. Fields the server may send as
// `null` (JSON has no NaN: a measurement that does not exist is null) say so.

/** A tensor shape, outermost dimension first. */
export type ProbeShape = number[];

export interface ProbeDevice {
  /** "cpu" or "cuda". */
  kind?: string;
  /** The GPU's name, or the CPU model. */
  name?: string;
  index?: number | null;
  /** GPU memory, or physical RAM on CPU. */
  total_memory_bytes?: number | null;
  /** CUDA compute capability, e.g. "9.0". */
  capability?: string | null;
  threads?: number;
}

export interface ProbeInputTensor {
  /** Where the tensor is passed: "args[0]", "kwargs['mask']". */
  path?: string;
  shape?: ProbeShape;
  dtype?: string;
}

export interface ProbeInput {
  /** "argument", "example", "comment" or "inferred". */
  source?: string;
  detail?: string;
  /** The input in --input syntax, e.g. "(8, 128):int64"; null when not plain tensors. */
  spec?: string | null;
  tensors?: ProbeInputTensor[];
}

export interface ProbeParams {
  total?: number;
  trainable?: number;
  parameter_bytes?: number;
  buffer_bytes?: number;
}

export interface ProbeModuleRow {
  /** Qualified name; "" is the model itself. */
  name?: string;
  type?: string;
  depth?: number;
  /** Every tensor returned on the last call, tuples flattened; null when never called. */
  output_shapes?: ProbeShape[] | null;
  calls?: number;
  forward_ms?: number | null;
  params?: number;
  trainable_params?: number;
  flops?: number | null;
  file?: string | null;
  line?: number | null;
}

export interface ProbeTimingStats {
  iterations?: number;
  warmup?: number;
  median_ms?: number;
  min_ms?: number;
  max_ms?: number;
  /** Interquartile range (max - min below four samples). */
  iqr_ms?: number;
}

export interface ProbeLatency {
  /** "perf_counter" or "cuda_events". */
  method?: string;
  mode?: string;
  grad_enabled?: boolean;
  forward?: ProbeTimingStats | null;
  /** Null when no output requires grad. */
  forward_backward?: ProbeTimingStats | null;
}

export interface ProbeMemory {
  /** "cuda_allocator" or "profiler_allocations". */
  method?: string;
  baseline_bytes?: number;
  peak_bytes?: number;
  activation_bytes?: number;
  peak_reserved_bytes?: number | null;
}

export interface ProbeFlops {
  forward?: number | null;
  forward_backward?: number | null;
  counter?: string;
}

export interface ProbeTopOp {
  name?: string;
  calls?: number;
  self_ms?: number;
  total_ms?: number;
  self_device_ms?: number | null;
  /** Self time / the step's total self time, 0..1. */
  share?: number | null;
}

export interface ProbeLine {
  file?: string;
  line?: number;
  function?: string;
  /** The source text, stripped. */
  code?: string;
  calls?: number;
  forward_ms?: number;
  backward_ms?: number;
  self_ms?: number;
  device_ms?: number | null;
  net_alloc_bytes?: number;
  output_shape?: ProbeShape | null;
  /** Inclusive time / the step's attributed time, 0..1. */
  share?: number | null;
}

export interface ProbeFinding {
  /** "float64", "non_contiguous_view", "nan", "inf", "unused_parameter". */
  kind?: string;
  /** "error", "warning" or "information". */
  severity?: string;
  message?: string;
  file?: string | null;
  line?: number | null;
  count?: number;
  detail?: string;
}

export interface ProbeGraphBreak {
  reason?: string;
  file?: string | null;
  line?: number | null;
}

export interface ProbeGraphBreaks {
  graph_count?: number | null;
  graph_break_count?: number | null;
  breaks?: ProbeGraphBreak[];
  seconds?: number;
  /** Why explain failed. */
  error?: string | null;
}

export interface ProbeRecommendation {
  /** "ddp", "fsdp_shard_grad_op" or "fsdp_full_shard". */
  strategy?: string;
  reason?: string;
  bytes_per_trainable_param?: number;
  model_state_bytes?: number;
  activation_bytes?: number;
  total_bytes?: number;
  /** Null on CPU. */
  device_memory_bytes?: number | null;
  state_fraction?: number | null;
  total_fraction?: number | null;
  find_unused_parameters?: boolean;
  unused_parameters?: string[];
}

export interface ProbeReport {
  schema?: number;
  file?: string;
  target?: string;
  torch_version?: string;
  python_version?: string;
  device?: ProbeDevice;
  input?: ProbeInput;
  params?: ProbeParams;
  modules?: ProbeModuleRow[];
  latency?: ProbeLatency;
  memory?: ProbeMemory;
  flops?: ProbeFlops;
  top_ops?: ProbeTopOp[];
  lines?: ProbeLine[];
  profiled_step_ms?: number;
  op_total_ms?: number;
  findings?: ProbeFinding[];
  /** Only with --explain. */
  graph_breaks?: ProbeGraphBreaks | null;
  recommendation?: ProbeRecommendation;
  warnings?: string[];
  stage_seconds?: Record<string, number>;
}

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
