// A small parser for the Prometheus text exposition format, so tests read scraped metrics as data.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  /** Metric family name → its `# TYPE`. */
  types: Map<string, string>;
  samples: Sample[];
  /** Sum of the samples named `name` whose labels include `labels`. */
  value(name: string, labels?: Record<string, string>): number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parsePrometheus(text: string): Scrape {
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.trim()) continue;
    if (line.startsWith('#')) {
      const type = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (type) types.set(type[1]!, type[2]!);
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? '').matchAll(LABEL))
      labels[label[1]!] = label[2]!.replace(/\\(.)/g, '$1');
    const raw = match[3]!;
    const value = raw === '+Inf' ? Infinity : raw === '-Inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && raw !== 'NaN') throw new Error(`bad sample value in: ${line}`);
    samples.push({ name: match[1]!, labels, value });
  }
  return {
    types,
    samples,
    value(name, labels = {}) {
      return samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((sum, s) => sum + s.value, 0);
    },
  };
}

export async function scrape(url: string): Promise<Scrape> {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  if (!response.headers.get('content-type')?.startsWith('text/plain'))
    throw new Error(`GET ${url}: not text/plain but ${response.headers.get('content-type')}`);
  return parsePrometheus(await response.text());
}
