// The open-file limit. Every robot holds a socket here and its peer in the server child, so the fleet size
// bounds what the limit must allow. Node already raises its soft limit to the hard one at startup (and the
// forked child inherits it); past the hard limit only root can help, so the bench says so up front instead
// of failing later with EMFILE in the middle of a boot.
import { readFileSync } from 'node:fs';

export function openFileLimit(): { soft: number; hard: number } | undefined {
  try {
    const line = readFileSync('/proc/self/limits', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const [soft, hard] = (line?.slice('Max open files'.length).trim().split(/\s+/) ?? []).map((v) =>
      v === 'unlimited' ? Number.POSITIVE_INFINITY : Number(v),
    );
    return soft !== undefined && hard !== undefined && soft > 0 ? { soft, hard } : undefined;
  } catch {
    return undefined; // no /proc: not Linux; nothing to check
  }
}

/** Prints the limit, and a warning when it is below the `needed` descriptors. */
export function checkOpenFiles(needed: number): void {
  const limit = openFileLimit();
  if (!limit) return;
  const note =
    limit.soft >= needed
      ? ''
      : ` — below the ~${needed} this run needs: expect EMFILE (raise the hard limit, e.g. ulimit -Hn as root)`;
  console.log(`open-file limit ${limit.soft} (hard ${limit.hard})${note}`);
}
