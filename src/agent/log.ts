/** JSON-lines logger on stderr: one line per event, with the request ID when there is one. */

export type Fields = Record<string, unknown>;

export interface Logger {
  info(msg: string, fields?: Fields): void;
  warn(msg: string, fields?: Fields): void;
  error(msg: string, fields?: Fields): void;
  /** A logger whose every line also carries `fields` (e.g. the request ID). */
  child(fields: Fields): Logger;
}

export function jsonLogger(
  write: (line: string) => void = (l) => process.stderr.write(l),
  base: Fields = {},
): Logger {
  const emit = (level: string, msg: string, fields?: Fields): void => {
    write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...base, ...fields })}\n`);
  };
  return {
    info: (msg, fields) => emit('info', msg, fields),
    warn: (msg, fields) => emit('warn', msg, fields),
    error: (msg, fields) => emit('error', msg, fields),
    child: (fields) => jsonLogger(write, { ...base, ...fields }),
  };
}

/** A logger that drops everything, for unit tests of callers. */
export const silentLogger: Logger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  child: () => silentLogger,
};
