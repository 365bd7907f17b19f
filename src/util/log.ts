import { type Logger, pino } from 'pino';

export type { Logger };

export function createLogger(name: string, level = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({ name, level, base: { pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime });
}

/** A logger that discards everything, for tests and library use. */
export const silentLogger: Logger = pino({ level: 'silent' });

/**
 * Logs at most `limit` lines per window, then one summary of how many were suppressed, so a
 * misbehaving device cannot flood the log (10,000 bad frames must not mean 10,000 lines).
 */
export class ThrottledLog {
  private windowStart = 0;
  private count = 0;
  private suppressed = 0;

  constructor(
    private readonly logger: Logger,
    private readonly limit = 10,
    private readonly windowMs = 10_000,
    private readonly now: () => number = Date.now,
  ) {}

  warn(fields: Record<string, unknown>, message: string): void {
    const t = this.now();
    if (t - this.windowStart >= this.windowMs) {
      if (this.suppressed > 0) {
        this.logger.warn({ ...fields, suppressed: this.suppressed }, 'similar warnings suppressed');
      }
      this.windowStart = t;
      this.count = 0;
      this.suppressed = 0;
    }
    if (this.count < this.limit) {
      this.count++;
      this.logger.warn(fields, message);
    } else {
      this.suppressed++;
    }
  }
}
