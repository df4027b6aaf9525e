// Number formatting shared by the extension and the report webview (no vscode imports).
// The spec is the server's (server/torchdoctor/probe/units.py): at most three significant
// digits without trailing zeros, binary byte units, SI prefixes for counts and FLOPs, µs below
// 1 ms and s from 1000 ms, shapes as torch's tuples. tests/fixtures/format_cases.json holds the
// cases both implementations are tested against.

const BYTE_UNITS = ["KiB", "MiB", "GiB", "TiB"] as const;
const SI_PREFIXES: readonly (readonly [number, string])[] = [
  [1e12, "T"],
  [1e9, "G"],
  [1e6, "M"],
  [1e3, "K"],
];

/** At most three significant digits, trailing zeros dropped: 8.314 → "8.31", 5 → "5". */
export function significant(value: number): string {
  const magnitude = Math.abs(value);
  const decimals = magnitude < 10 ? 2 : magnitude < 100 ? 1 : 0;
  let text = value.toFixed(decimals);
  if (text.includes(".")) {
    text = text.replace(/0+$/, "").replace(/\.$/, "");
  }
  return text === "-0" ? "0" : text;
}

export function formatBytes(value: number): string {
  if (Math.abs(value) < 1024) {
    return `${value.toFixed(0)} B`;
  }
  let amount = value / 1024;
  let unit = 0;
  while (Math.abs(amount) >= 1024 && unit < BYTE_UNITS.length - 1) {
    amount /= 1024;
    unit += 1;
  }
  return `${significant(amount)} ${BYTE_UNITS[unit] ?? ""}`;
}

function withPrefix(value: number, unit: string): string {
  for (const [scale, prefix] of SI_PREFIXES) {
    if (Math.abs(value) >= scale) {
      return `${significant(value / scale)} ${prefix}${unit}`;
    }
  }
  return unit ? `${significant(value)} ${unit}` : significant(value);
}

export function formatCount(value: number): string {
  return withPrefix(value, "");
}

export function formatFlops(value: number): string {
  return withPrefix(value, "FLOP");
}

/** A duration given in milliseconds. */
export function formatMs(value: number): string {
  if (Math.abs(value) >= 1000) {
    return `${significant(value / 1000)} s`;
  }
  if (Math.abs(value) >= 1 || value === 0) {
    return `${significant(value)} ms`;
  }
  return `${significant(value * 1000)} µs`;
}

/** "(8, 10)", "(8,)", "()". Anything that is not a list of numbers gives "". */
export function formatShape(shape: unknown): string {
  if (!Array.isArray(shape) || !shape.every((dim) => typeof dim === "number")) {
    return "";
  }
  return shape.length === 1 ? `(${String(shape[0])},)` : `(${shape.join(", ")})`;
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

/** A fraction 0..1 as a percentage: "45%", "2.1%", and "<0.1%" for what would round to nothing. */
export function formatPercent(fraction: number): string {
  const percent = fraction * 100;
  if (percent > 0 && percent < 0.05) {
    return "<0.1%";
  }
  return `${percent >= 10 ? percent.toFixed(0) : percent.toFixed(1)}%`;
}
