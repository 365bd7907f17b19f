// kid_mode and smart_mode, owned by the bridge: persisted atomically under DATA_DIR with a last good copy (the
// voice server reads the same file at start and re-syncs the device's pips), composing freely, never switched
// by voice.
import { writeStateFile } from '../util/state-file.js';
import { readToggles, type Toggles, togglesPath } from '../voice/toggles.js';

export class TogglesStore {
  private current: Toggles;
  private writing: Promise<unknown> = Promise.resolve();

  /** `warn` reports a damaged toggles file (default: one line on stderr). */
  constructor(
    private readonly dataDir: string,
    warn?: (line: string) => void,
  ) {
    this.current = readToggles(dataDir, warn);
  }

  get(): Readonly<Toggles> {
    return this.current;
  }

  /** Persists first; the in-memory value changes only once the file is safely written. */
  async set(name: keyof Toggles, enabled: boolean): Promise<Toggles> {
    // The new value is computed inside the queue, from the value the previous write left: two changes at once
    // (kid mode and smart mode) both land.
    const write = this.writing.then(async () => {
      const next = { ...this.current, [name]: enabled };
      await writeStateFile(togglesPath(this.dataDir), next);
      this.current = next;
      return next;
    });
    this.writing = write.catch(() => undefined);
    return write;
  }
}
