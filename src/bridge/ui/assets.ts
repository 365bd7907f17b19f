// The dashboard's static files and the browser copy of the robot's LED contract (src/robot/led.ts).
// Only names in a fixed table are served, so no request path ever reaches the file system.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';

export interface StaticFile {
  file: string;
  contentType: string;
}

const HTML = 'text/html; charset=utf-8';
const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

/** URL path → file under ui/. */
export const UI_PAGES: Readonly<Record<string, StaticFile>> = {
  '/ui': { file: 'index.html', contentType: HTML },
  '/ui/led-ring-mirror': { file: 'led-ring-mirror.html', contentType: HTML },
};

/** /ui/assets/<name> → file under ui/. */
export const UI_ASSETS: Readonly<Record<string, StaticFile>> = {
  'common.js': { file: 'common.js', contentType: JS },
  'dashboard.js': { file: 'dashboard.js', contentType: JS },
  'mirror.js': { file: 'mirror.js', contentType: JS },
  'style.css': { file: 'style.css', contentType: CSS },
};

/** Own-origin scripts, styles and connections only; never framed (the controls must not be clickjacked). */
export const UI_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'cache-control': 'no-cache',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
};

export function lookupAsset(name: string): StaticFile | undefined {
  return Object.hasOwn(UI_ASSETS, name) ? UI_ASSETS[name] : undefined;
}

export async function readUiFile(root: string, entry: StaticFile): Promise<Buffer> {
  return readFile(join(root, 'ui', entry.file));
}

/** The compiled module must stand alone in the browser: any runtime import would 404 there. */
export function assertSelfContained(js: string): void {
  if (/^\s*import[\s{*'"]/m.test(js) || /^\s*export\s+(\*|\{[^}]*\})\s*from\s/m.test(js)) {
    throw new Error('the compiled LED module imports other modules; the browser cannot load it alone');
  }
}

type Transpile = (source: string) => Promise<string>;

const transpileWithTypeScript: Transpile = async (source) => {
  // A devDependency: only reached when no fresh build exists (a checkout run through tsx).
  const ts = (await import('typescript')).default;
  return ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
  }).outputText;
};

async function mtimeMs(path: string): Promise<number | null> {
  try {
    return (await stat(path)).mtimeMs;
  } catch {
    return null;
  }
}

/**
 * src/robot/led.ts as browser JavaScript: the build's dist/src/robot/led.js when it is at least as new as
 * the source, else the source transpiled here. Cached until either file changes.
 */
export class LedModule {
  private cache: { key: string; js: string } | undefined;

  constructor(
    private readonly root: string,
    private readonly transpile: Transpile = transpileWithTypeScript,
  ) {}

  get sourcePath(): string {
    return join(this.root, 'src', 'robot', 'led.ts');
  }

  get builtPath(): string {
    return join(this.root, 'dist', 'src', 'robot', 'led.js');
  }

  async js(): Promise<string> {
    const [sourceMs, builtMs] = await Promise.all([mtimeMs(this.sourcePath), mtimeMs(this.builtPath)]);
    const useBuilt = builtMs !== null && (sourceMs === null || builtMs >= sourceMs);
    if (!useBuilt && sourceMs === null) throw new Error('neither src/robot/led.ts nor its build was found');
    const key = useBuilt ? `built:${builtMs}` : `source:${sourceMs}`;
    if (this.cache?.key === key) return this.cache.js;
    const js = useBuilt
      ? await readFile(this.builtPath, 'utf8')
      : await this.transpile(await readFile(this.sourcePath, 'utf8'));
    // The source map is not served; without this line the browser asks for it and logs a 404.
    const cleaned = js.replace(/^\/\/# sourceMappingURL=.*$/m, '');
    assertSelfContained(cleaned);
    this.cache = { key, js: cleaned };
    return cleaned;
  }
}
