// Small helpers for the bench report: percentiles and a plain-text table.

export interface Summary {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of already sorted values. */
function rank(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index]!;
}

export function summarize(values: number[]): Summary {
  const sorted = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  const sum = sorted.reduce((s, v) => s + v, 0);
  return {
    n: sorted.length,
    p50: rank(sorted, 50),
    p99: rank(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1]! : Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

export function fmt(value: number, digits = 1): string {
  if (!Number.isFinite(value)) return '–';
  return value.toFixed(digits);
}

/** One table row for a distribution: label, p50, p99, max, mean, n, then an optional note. */
export function summaryRow(label: string, values: number[], note = '', digits = 1): string[] {
  const s = summarize(values);
  return [
    label,
    fmt(s.p50, digits),
    fmt(s.p99, digits),
    fmt(s.max, digits),
    fmt(s.mean, digits),
    String(s.n),
    note,
  ];
}

/** Prints rows as aligned columns; the first row is the header. Numeric-looking cells align right. */
export function printTable(rows: string[][]): void {
  const widths: number[] = [];
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length);
  }
  const numeric = /^[-+]?[\d.,–]+( ?[%a-zA-Z/]*)?$/;
  rows.forEach((row, r) => {
    const line = row
      .map((cell, i) => {
        const width = widths[i]!;
        if (i === row.length - 1) return cell;
        return i > 0 && numeric.test(cell) ? cell.padStart(width) : cell.padEnd(width);
      })
      .join('  ');
    console.log(`  ${line.trimEnd()}`);
    if (r === 0) console.log(`  ${widths.map((w) => '-'.repeat(w)).join('  ')}`);
  });
}

/** Label/value lines (no header). */
export function printPairs(pairs: Array<[string, string]>): void {
  const width = Math.max(...pairs.map(([label]) => label.length));
  for (const [label, value] of pairs) console.log(`  ${label.padEnd(width)}  ${value}`);
}

export function heading(title: string): void {
  console.log(`\n${title}\n${'='.repeat(title.length)}`);
}

export const MB = 1024 * 1024;
