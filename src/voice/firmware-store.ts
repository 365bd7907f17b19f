// Firmware images under DATA_DIR/firmware, found either through manifest.json
// ({"images":[{"board":"<type>|*","version":"1.2.3","file":"x.bin"}]}) or by file name "<board>_<version>.bin".
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { compareVersions, parseVersion } from '../protocol/index.js';
import { fileInsideSync } from '../util/data-dir.js';

export interface FirmwareImage {
  board: string;
  version: string;
  file: string;
}

/** File names we serve: plain names only, so a request can never leave the folder. */
export const SAFE_FIRMWARE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.bin$/;

export class FirmwareStore {
  constructor(readonly dir: string) {}

  list(): FirmwareImage[] {
    if (!existsSync(this.dir)) return [];
    const images: FirmwareImage[] = [];
    const manifestPath = fileInsideSync(this.dir, 'manifest.json')?.path;
    if (manifestPath) {
      try {
        const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { images?: unknown };
        for (const entry of Array.isArray(manifest.images) ? manifest.images : []) {
          const { board, version, file } = (entry ?? {}) as Record<string, unknown>;
          if (typeof board === 'string' && typeof version === 'string' && typeof file === 'string') {
            if (parseVersion(version) && SAFE_FIRMWARE_NAME.test(file)) images.push({ board, version, file });
          }
        }
      } catch {
        // A broken manifest must not break boot for every device; file names still work.
      }
    }
    for (const file of readdirSync(this.dir)) {
      const match = /^(.+)_v?(\d+(?:\.\d+)*)\.bin$/.exec(file);
      if (match && SAFE_FIRMWARE_NAME.test(file)) images.push({ board: match[1]!, version: match[2]!, file });
    }
    return images.filter((image) => this.sizeOf(image.file) > 0);
  }

  /** The newest image for a board (exact board name, or "*" in the manifest). */
  latestFor(board: string): FirmwareImage | undefined {
    let best: FirmwareImage | undefined;
    for (const image of this.list()) {
      if (image.board !== board && image.board !== '*') continue;
      if (!best || (compareVersions(image.version, best.version) ?? 0) > 0) best = image;
    }
    return best;
  }

  /**
   * Absolute path of a servable image (symlinks resolved), or undefined for unsafe or missing names and for
   * symlinks that lead out of the folder.
   */
  pathOf(file: string): string | undefined {
    if (!SAFE_FIRMWARE_NAME.test(file)) return undefined;
    return this.sizeOf(file) > 0 ? fileInsideSync(this.dir, file)?.path : undefined;
  }

  private sizeOf(file: string): number {
    return fileInsideSync(this.dir, file)?.bytes ?? 0;
  }
}

export type FirmwareDecision = { offer: false } | { offer: true; image: FirmwareImage; force: boolean };

/** Offer when the image is newer, or — with force configured — when it differs at all (a pinned version). */
export function decideFirmware(
  current: string | undefined,
  image: FirmwareImage | undefined,
  force: boolean,
): FirmwareDecision {
  if (!image) return { offer: false };
  const order = current ? compareVersions(image.version, current) : 1;
  if (order === null) return { offer: false };
  if (order > 0) return { offer: true, image, force: false };
  if (force && order !== 0) return { offer: true, image, force: true };
  return { offer: false };
}
