import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

// package.json sits one level above src/ and two above dist/src/.
function findPackage(): { root: string; version: string } {
  for (const rel of ['../', '../../']) {
    try {
      const dir = new URL(rel, import.meta.url);
      const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8')) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === 'deskbot' && pkg.version) return { root: fileURLToPath(dir), version: pkg.version };
    } catch {
      // try the next location
    }
  }
  return { root: process.cwd(), version: '0.0.0' };
}

const found = findPackage();
export const VERSION = found.version;
/** The package's folder (where bin/, config/ and package.json are). */
export const PACKAGE_ROOT = found.root;
