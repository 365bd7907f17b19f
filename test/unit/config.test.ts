// loadConfig: defaults < YAML file < environment < overrides, with errors that name the key and what is allowed.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

let dir: string;
let n = 0;
function yaml(text: string): string {
  const file = join(dir, `voice-${n++}.yaml`);
  writeFileSync(file, text);
  return file;
}

function configError(fn: () => unknown): ConfigError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return error as ConfigError;
  }
  throw new Error('expected a ConfigError, but nothing was thrown');
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-config-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('defaults', () => {
  it.each([
    ['an empty file', ''],
    ['a comment-only file', '# nothing set here\n'],
  ])('with %s', (_name, text) => {
    const config = loadConfig({ env: {}, file: yaml(text) });
    expect(config).toMatchObject({
      data_dir: './data',
      log_level: 'info',
      server: { bind_host: '0.0.0.0', ws_port: 8000, http_port: 8003, websocket: '', ws_protocol_version: 0 },
      auth: { enabled: false, secret: '', token_ttl_sec: 30 * 24 * 3600 },
      firmware: { force: false },
      activation: { hmac_key: '', timeout_ms: 30_000 },
      mcp: { timeout_ms: 30_000 },
    });
    expect(config.server.timezone_offset_min).toBeNull();
  });
});

describe('YAML and environment', () => {
  const file = () =>
    yaml(
      [
        'data_dir: /srv/yaml',
        'log_level: debug',
        'server:',
        '  ws_port: 9000',
        '  ws_protocol_version: 3',
        'auth:',
        '  enabled: false',
        '  secret: from-yaml',
        'firmware:',
        '  force: true',
      ].join('\n'),
    );

  it('reads YAML values and keeps defaults for the rest of a section', () => {
    const config = loadConfig({ env: {}, file: file() });
    expect(config.data_dir).toBe('/srv/yaml');
    expect(config.log_level).toBe('debug');
    expect(config.server).toMatchObject({ ws_port: 9000, ws_protocol_version: 3, http_port: 8003 });
    expect(config.auth).toMatchObject({ enabled: false, secret: 'from-yaml' });
    expect(config.firmware.force).toBe(true);
  });

  it('finds the file through VOICE_CONFIG', () => {
    expect(loadConfig({ env: { VOICE_CONFIG: file() } }).server.ws_port).toBe(9000);
  });

  it('environment wins over YAML', () => {
    const config = loadConfig({
      file: file(),
      env: {
        VOICE_WS_PORT: '9100',
        VOICE_HTTP_PORT: '9103',
        DATA_DIR: '/srv/env',
        WS_AUTH: 'true',
        LOG_LEVEL: 'warn',
      },
    });
    expect(config.server.ws_port).toBe(9100);
    expect(config.server.http_port).toBe(9103);
    expect(config.data_dir).toBe('/srv/env');
    expect(config.auth.enabled).toBe(true);
    expect(config.auth.secret).toBe('from-yaml');
    expect(config.log_level).toBe('warn');
  });

  it('an empty env value does not override', () => {
    expect(loadConfig({ file: file(), env: { VOICE_WS_PORT: '', DATA_DIR: '' } })).toMatchObject({
      data_dir: '/srv/yaml',
      server: { ws_port: 9000 },
    });
  });

  it('overrides win over the environment', () => {
    const config = loadConfig({
      file: file(),
      env: { VOICE_WS_PORT: '9100' },
      overrides: { server: { ws_port: 0 } },
    });
    expect(config.server).toMatchObject({ ws_port: 0, ws_protocol_version: 3 });
  });

  it.each([
    ['true', true],
    ['TRUE', true],
    ['1', true],
    ['yes', true],
    ['on', true],
    ['false', false],
    ['0', false],
    ['no', false],
    ['Off', false],
  ])('WS_AUTH=%s → %s', (value, enabled) => {
    expect(loadConfig({ file: yaml('auth: {enabled: true}'), env: { WS_AUTH: value } }).auth.enabled).toBe(
      enabled === true,
    );
  });
});

describe('errors', () => {
  it.each([
    ['log_level: loud', 'log_level', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']],
    ['server: {ws_protocol_version: 4}', 'server.ws_protocol_version', ['0', '1', '2', '3']],
  ])('a bad value (%s) names the key and the allowed values', (text, key, allowed) => {
    const error = configError(() => loadConfig({ env: {}, file: yaml(text) }));
    expect(error.message).toContain(`"${key}"`);
    expect(error.message).toMatch(/allowed/);
    for (const value of allowed) expect(error.message).toContain(value);
  });

  it.each([
    ['server: {ws_port: 70000}', 'server.ws_port'],
    ['server: {ws_port: "8000"}', 'server.ws_port'],
    ['auth: {enabled: "sometimes"}', 'auth.enabled'],
    ['server: 5', 'server'],
  ])('a bad YAML value (%s) names %s', (text, key) => {
    expect(configError(() => loadConfig({ env: {}, file: yaml(text) })).message).toContain(`"${key}"`);
  });

  it.each(['abc', '80.5', '-1', '8000abc', '0x1F40'])(
    'VOICE_WS_PORT=%s is a ConfigError naming the variable',
    (value) => {
      const error = configError(() => loadConfig({ env: { VOICE_WS_PORT: value }, file: yaml('') }));
      expect(error.message).toContain('VOICE_WS_PORT');
    },
  );

  it('a whole-number port out of range names the config key', () => {
    const error = configError(() => loadConfig({ env: { VOICE_HTTP_PORT: '70000' }, file: yaml('') }));
    expect(error.message).toContain('"server.http_port"');
  });

  it('WS_AUTH=maybe names the variable and the allowed values', () => {
    const error = configError(() => loadConfig({ env: { WS_AUTH: 'maybe' }, file: yaml('') }));
    expect(error.message).toContain('WS_AUTH');
    expect(error.message).toMatch(/true.*false/);
  });

  it('an explicit config file that does not exist is an error (option or VOICE_CONFIG)', () => {
    const missing = join(dir, 'missing.yaml');
    expect(configError(() => loadConfig({ env: {}, file: missing })).message).toContain(missing);
    expect(configError(() => loadConfig({ env: { VOICE_CONFIG: missing } })).message).toContain(missing);
  });

  it.each([
    ['unclosed flow sequence', 'server: [1, 2'],
    ['bad indentation', 'server:\n  ws_port: 1\n bad: 2'],
    ['tab indentation', 'server:\n\tws_port: 1'],
  ])('invalid YAML (%s) is a ConfigError naming the file', (_name, text) => {
    const file = yaml(text);
    const error = configError(() => loadConfig({ env: {}, file }));
    expect(error.message).toContain(file);
    expect(error.message).toMatch(/YAML/);
  });

  it.each([
    ['a scalar', 'hello'],
    ['a list', '- a\n- b'],
  ])('a YAML file whose top level is %s is a ConfigError, also with env overrides', (_name, text) => {
    const file = yaml(text);
    configError(() => loadConfig({ env: {}, file }));
    configError(() => loadConfig({ env: { DATA_DIR: '/x', VOICE_WS_PORT: '1' }, file }));
  });
});
