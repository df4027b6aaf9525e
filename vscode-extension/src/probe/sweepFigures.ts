// The batch-size sweep and the comparison with the previous probe of the same class, as the
// report view draws them. Pure: a report (and the remembered summary) in, rows out.
import type { ProbeReport, ProbeSummary } from "./reportTypes";

export interface SweepRow {
  batch: number;
  fits: boolean;
  latencyMs?: number;
  samplesPerS?: number;
  peakBytes?: number;
  reason?: string;
}

export interface SweepFigures {
  rows: SweepRow[];
  largestFittingBatch?: number;
  memoryLimitBytes?: number;
  stoppedBy?: string;
}

function finiteOrUndefined(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** The sweep's points in batch order; undefined when the report has no sweep. */
export function sweepFigures(report: ProbeReport): SweepFigures | undefined {
  const sweep = report.batch_sweep;
  if (sweep === undefined || sweep === null || !Array.isArray(sweep.points)) {
    return undefined;
  }
  const rows: SweepRow[] = [];
  for (const point of sweep.points) {
    const batch = finiteOrUndefined(point.batch);
    if (batch === undefined) {
      continue;
    }
    const row: SweepRow = { batch, fits: point.fits === true };
    const latency = finiteOrUndefined(point.latency_ms);
    if (latency !== undefined) {
      row.latencyMs = latency;
    }
    const rate = finiteOrUndefined(point.samples_per_s);
    if (rate !== undefined) {
      row.samplesPerS = rate;
    }
    const peak = finiteOrUndefined(point.peak_bytes);
    if (peak !== undefined) {
      row.peakBytes = peak;
    }
    if (typeof point.reason === "string" && point.reason !== "") {
      row.reason = point.reason;
    }
    rows.push(row);
  }
  rows.sort((a, b) => a.batch - b.batch);
  const figures: SweepFigures = { rows };
  const largest = finiteOrUndefined(sweep.largest_fitting_batch);
  if (largest !== undefined) {
    figures.largestFittingBatch = largest;
  }
  const limit = finiteOrUndefined(sweep.memory_limit_bytes);
  if (limit !== undefined) {
    figures.memoryLimitBytes = limit;
  }
  if (typeof sweep.stopped_by === "string") {
    figures.stoppedBy = sweep.stopped_by;
  }
  return figures;
}

export interface Change {
  what: "params" | "forward" | "peakMemory";
  before: number;
  after: number;
  /** after / before; undefined when before is 0. */
  ratio?: number;
}

/** What changed since the previous probe of the same class (only figures both runs have). */
export function changesSince(previous: ProbeSummary | undefined, current: ProbeSummary): Change[] {
  if (previous === undefined) {
    return [];
  }
  const pairs: [Change["what"], number | undefined, number | undefined][] = [
    ["params", previous.paramsTotal, current.paramsTotal],
    ["forward", previous.forwardMs, current.forwardMs],
    ["peakMemory", previous.peakMemoryBytes, current.peakMemoryBytes],
  ];
  const changes: Change[] = [];
  for (const [what, before, after] of pairs) {
    if (before === undefined || after === undefined) {
      continue;
    }
    const change: Change = { what, before, after };
    if (before !== 0) {
      change.ratio = after / before;
    }
    changes.push(change);
  }
  return changes;
}
