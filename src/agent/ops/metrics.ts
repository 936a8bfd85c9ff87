/**
 * Prometheus metrics, in the text exposition format (version 0.0.4), without a client library:
 * counters and histograms keyed by label values, and gauges read when scraped.
 */

type Labels = Record<string, string>;

function labelText(labels: Labels): string {
  const parts = Object.entries(labels).map(
    ([k, v]) => `${k}="${v.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`))}"`,
  );
  return parts.length === 0 ? '' : `{${parts.join(',')}}`;
}

export class Counter {
  readonly #values = new Map<string, { labels: Labels; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}

  inc(labels: Labels = {}, by = 1): void {
    const key = labelText(labels);
    const cur = this.#values.get(key);
    if (cur) cur.value += by;
    else this.#values.set(key, { labels, value: by });
  }

  get(labels: Labels = {}): number {
    return this.#values.get(labelText(labels))?.value ?? 0;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, value } of this.#values.values())
      lines.push(`${this.name}${labelText(labels)} ${value}`);
    return lines.join('\n');
  }
}

export class Histogram {
  readonly #series = new Map<string, { labels: Labels; counts: number[]; sum: number; count: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    /** Upper bounds, ascending, in the metric's unit. */
    readonly buckets: readonly number[],
  ) {}

  observe(labels: Labels, value: number): void {
    const key = labelText(labels);
    let s = this.#series.get(key);
    if (!s) {
      s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 };
      this.#series.set(key, s);
    }
    this.buckets.forEach((b, i) => {
      if (value <= b && s) s.counts[i] = (s.counts[i] ?? 0) + 1;
    });
    s.sum += value;
    s.count++;
  }

  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.#series.values()) {
      this.buckets.forEach((b, i) => {
        lines.push(`${this.name}_bucket${labelText({ ...s.labels, le: String(b) })} ${s.counts[i]}`);
      });
      lines.push(`${this.name}_bucket${labelText({ ...s.labels, le: '+Inf' })} ${s.count}`);
      lines.push(`${this.name}_sum${labelText(s.labels)} ${s.sum}`);
      lines.push(`${this.name}_count${labelText(s.labels)} ${s.count}`);
    }
    return lines.join('\n');
  }
}

/**
 * A metric whose samples are read from the agent when scraped (a gauge, or a counter kept elsewhere).
 * A bigint value is printed exactly: an IPv6 range's size is past 2^53, where a number is rounded
 * (a /64 printed as 18446744073709552000, not the CLI's 18446744073709551614).
 */
export interface Sampled {
  name: string;
  help: string;
  type: 'gauge' | 'counter';
  read(): SampleList | Promise<SampleList>;
}

type SampleList = Array<{ labels: Labels; value: number | bigint }>;

export async function renderSampled(g: Sampled): Promise<string> {
  const lines = [`# HELP ${g.name} ${g.help}`, `# TYPE ${g.name} ${g.type}`];
  for (const { labels, value } of await g.read()) lines.push(`${g.name}${labelText(labels)} ${value}`);
  return lines.join('\n');
}

/** The CNI call metrics the dispatcher records. */
export class CniMetrics {
  readonly requests = new Counter(
    'podwire_cni_requests_total',
    'CNI calls answered, by command and result code.',
  );
  readonly duration = new Histogram(
    'podwire_cni_request_duration_seconds',
    'Time from a CNI call reaching the agent to its answer, by command and result.',
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );

  record(command: string, code: number, seconds: number): void {
    const labels = { command, result: code === 0 ? 'ok' : String(code) };
    this.requests.inc(labels);
    this.duration.observe(labels, seconds);
  }
}
