// kid_mode and smart_mode, owned by the bridge: persisted atomically under DATA_DIR (the voice server reads
// the same file at start and re-syncs the device's pips), composing freely, never switched by voice.
import { writeFileAtomic } from '../util/atomic-file.js';
import { readToggles, type Toggles, togglesPath } from '../voice/toggles.js';

export class TogglesStore {
  private current: Toggles;
  private writing: Promise<unknown> = Promise.resolve();

  constructor(private readonly dataDir: string) {
    this.current = readToggles(dataDir);
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
      await writeFileAtomic(togglesPath(this.dataDir), `${JSON.stringify(next, null, 2)}\n`);
      this.current = next;
      return next;
    });
    this.writing = write.catch(() => undefined);
    return write;
  }
}
