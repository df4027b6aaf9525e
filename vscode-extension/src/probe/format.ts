// Number formatting shared by the extension and the report webview (no vscode imports).

export function formatCount(value: number): string {
  const abs = Math.abs(value);
  if (abs >= 1e9) {
    return `${trim(value / 1e9)} B`;
  }
  if (abs >= 1e6) {
    return `${trim(value / 1e6)} M`;
  }
  if (abs >= 1e3) {
    return `${trim(value / 1e3)} K`;
  }
  return String(value);
}

export function formatBytes(value: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let scaled = value;
  let unit = 0;
  while (Math.abs(scaled) >= 1024 && unit < units.length - 1) {
    scaled /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${trim(scaled)} ${units[unit] ?? ""}`;
}

export function formatMs(value: number): string {
  if (value >= 1000) {
    return `${trim(value / 1000)} s`;
  }
  if (value >= 10) {
    return `${value.toFixed(1)} ms`;
  }
  return `${value.toFixed(2)} ms`;
}

export function formatFlops(value: number): string {
  const units: [number, string][] = [
    [1e15, "PFLOP"],
    [1e12, "TFLOP"],
    [1e9, "GFLOP"],
    [1e6, "MFLOP"],
    [1e3, "KFLOP"],
  ];
  for (const [scale, unit] of units) {
    if (Math.abs(value) >= scale) {
      return `${trim(value / scale)} ${unit}`;
    }
  }
  return `${value} FLOP`;
}

/** "(8, 10)"; "()" for a scalar. Anything that is not a list of numbers gives "". */
export function formatShape(shape: unknown): string {
  if (!Array.isArray(shape) || !shape.every((dim) => typeof dim === "number")) {
    return "";
  }
  return `(${shape.join(", ")})`;
}

/** Several shapes, e.g. an LSTM's output, h and c: "(8, 16, 128), (2, 8, 64), (2, 8, 64)". */
export function formatShapes(shapes: unknown): string {
  if (!Array.isArray(shapes)) {
    return "";
  }
  return shapes
    .map(formatShape)
    .filter((text) => text !== "")
    .join(", ");
}

/** A fraction 0..1 as a percentage: "45.2%", and "<0.1%" for what would round to nothing. */
export function formatPercent(fraction: number): string {
  const percent = fraction * 100;
  if (percent > 0 && percent < 0.05) {
    return "<0.1%";
  }
  return `${percent >= 10 ? percent.toFixed(0) : percent.toFixed(1)}%`;
}

function trim(value: number): string {
  return value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2);
}
