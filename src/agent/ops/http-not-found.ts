/** The first words of a 404 on the agent's HTTP ports: the request as asked, cut to a readable length. */
export function notFound(method: string | undefined, url: string | undefined): string {
  const path = url ?? '';
  return `not found: ${method ?? '?'} ${JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}...` : path)}`;
}
