/** Reading a node agent's Prometheus endpoint from inside its namespace (it listens on the node's loopback). */
import { run } from './exec.js';

export async function scrapeMetrics(nodeNs: string, port: number): Promise<string> {
  const r = await run('ip', ['netns', 'exec', nodeNs, 'curl', '-sf', `http://127.0.0.1:${port}/metrics`]);
  if (r.code !== 0) throw new Error(`scrape of 127.0.0.1:${port} in ${nodeNs} failed: ${r.stderr}`);
  return r.stdout;
}

/** The value of one series (name with labels, exactly as exposed), or undefined. */
export function metricSample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}
