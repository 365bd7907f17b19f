// loadConfig for the LLM side: SPEC defaults of the two-tier provider, the bridge and the face greeter, every
// environment variable of SPEC's table landing in its key, the cloud-key fallback, and enum errors.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, ConfigError, loadConfig } from '../../src/config/index.js';

let dir: string;
let n = 0;
function yaml(text: string): string {
  const file = join(dir, `voice-${n++}.yaml`);
  writeFileSync(file, text);
  return file;
}

/** loadConfig with only the given environment and an empty YAML file (no shipped config involved). */
function load(env: Record<string, string | undefined> = {}, text = ''): Config {
  return loadConfig({ env, file: yaml(text) });
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

function valueAt(config: Config, path: string): unknown {
  let node: unknown = config;
  for (const key of path.split('.')) node = (node as Record<string, unknown>)[key];
  return node;
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'deskbot-config-llm-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('SPEC defaults', () => {
  it('provider choice, two-tier block, bridge, limits and face greeter', () => {
    const config = load();
    expect(config.selected_module.LLM).toBe('TwoTier');
    expect(config.voice_provider).toBe('agent');
    expect(config.LLM.TwoTier).toMatchObject({
      type: 'two_tier',
      url: 'http://localhost:8080/v1',
      max_tokens: 256,
      temperature: 0.7,
      timeout: 60,
      cloud_api_key: '',
    });
    // A fixed placeholder bearer token for the local router, and non-empty model names.
    expect(config.LLM.TwoTier.api_key).not.toBe('');
    expect(config.LLM.TwoTier.model).not.toBe('');
    expect(config.LLM.TwoTier.smart_model).not.toBe('');
    expect(config.LLM.TwoTier.cloud_url).toMatch(/^https?:\/\/.+\/v1\/?$/);
    expect(config.LLM.TwoTier.persona_file).not.toBe('');
    expect(config.LLM.AgentLLM).toMatchObject({ type: 'agent', timeout: 90 });
    expect(config.bridge).toMatchObject({
      url: 'http://localhost:8080',
      timeout_short: 5,
      timeout_long: 30,
      thinker_timeout: 90,
      max_sentences: 6,
    });
    expect(config.voice.min_utterance_chars).toBe(2); // DESIGN §3
    expect(config.face_greet).toMatchObject({ min_interval_sec: 30, hour_start: 6, hour_end: 21 });
    expect(config.face_greet.text).not.toBe(''); // a short greeting by default
    expect(config.VAD.silero.min_silence_duration_ms).toBe(700);
  });
});

describe('environment overrides (SPEC table)', () => {
  it.each([
    ['VOICE_PROVIDER', 'twotier', 'voice_provider', 'twotier'],
    ['TWOTIER_LOCAL_URL', 'http://10.0.0.5:9000/v1', 'LLM.TwoTier.url', 'http://10.0.0.5:9000/v1'],
    ['TWOTIER_LOCAL_MODEL', 'tiny-local-model', 'LLM.TwoTier.model', 'tiny-local-model'],
    ['TWOTIER_LOCAL_API_KEY', 'sk-local-env', 'LLM.TwoTier.api_key', 'sk-local-env'],
    ['TWOTIER_CLOUD_URL', 'https://cloud.example/v1', 'LLM.TwoTier.cloud_url', 'https://cloud.example/v1'],
    ['TWOTIER_CLOUD_API_KEY', 'sk-cloud-env', 'LLM.TwoTier.cloud_api_key', 'sk-cloud-env'],
    ['SMART_MODEL', 'vendor/smart-model', 'LLM.TwoTier.smart_model', 'vendor/smart-model'],
    ['BRIDGE_URL', 'http://bridge.lan:8181', 'bridge.url', 'http://bridge.lan:8181'],
    ['BRIDGE_TIMEOUT_SHORT', '7', 'bridge.timeout_short', 7],
    ['BRIDGE_TIMEOUT_SHORT', '2.5', 'bridge.timeout_short', 2.5],
    ['BRIDGE_TIMEOUT_LONG', '45', 'bridge.timeout_long', 45],
    ['VOICE_THINKER_TIMEOUT', '120', 'bridge.thinker_timeout', 120],
    ['VLM_MODEL', 'vendor/vlm', 'vision.vlm_model', 'vendor/vlm'],
    ['VLM_API_URL', 'http://127.0.0.1:1234/v1', 'vision.vlm_api_url', 'http://127.0.0.1:1234/v1'],
    ['VISION_MODEL', 'vendor/vision', 'vision.vision_model', 'vendor/vision'],
    ['AUDIO_CAPTION_MODEL', 'vendor/audio', 'vision.audio_caption_model', 'vendor/audio'],
    ['MAX_SENTENCES', '3', 'bridge.max_sentences', 3],
    ['MIN_UTTERANCE_CHARS', '4', 'voice.min_utterance_chars', 4],
    ['FACE_GREET_TEXT', '😊 Welcome back!', 'face_greet.text', '😊 Welcome back!'],
    ['FACE_GREET_MIN_INTERVAL_SEC', '120', 'face_greet.min_interval_sec', 120],
    ['FACE_GREET_HOUR_START', '8', 'face_greet.hour_start', 8],
    ['FACE_GREET_HOUR_END', '20', 'face_greet.hour_end', 20],
  ] as const)('%s=%s → %s', (name, value, path, expected) => {
    const before = load();
    const config = load({ [name]: value });
    expect(valueAt(config, path)).toEqual(expected);
    expect(valueAt(before, path)).not.toEqual(expected); // the override really changed something
  });

  it('environment wins over the YAML file', () => {
    const config = loadConfig({
      file: yaml(['LLM:', '  TwoTier:', '    model: yaml-model', 'bridge:', '  timeout_short: 9'].join('\n')),
      env: { TWOTIER_LOCAL_MODEL: 'env-model', BRIDGE_TIMEOUT_SHORT: '3' },
    });
    expect(config.LLM.TwoTier.model).toBe('env-model');
    expect(config.bridge.timeout_short).toBe(3);
  });

  it('FACE_GREET_TEXT="" disables the spoken greeting (SPEC: empty string disables)', () => {
    expect(load({ FACE_GREET_TEXT: '' }).face_greet.text).toBe('');
    // Also over a YAML greeting.
    expect(load({ FACE_GREET_TEXT: '' }, 'face_greet: {text: "Hello from YAML"}').face_greet.text).toBe('');
  });

  it('face_greet.text "" in YAML disables the greeting', () => {
    expect(load({}, 'face_greet: {text: ""}').face_greet.text).toBe('');
  });

  it.each([
    ['BRIDGE_TIMEOUT_SHORT', 'soon'],
    ['MAX_SENTENCES', '2.5'],
    ['FACE_GREET_HOUR_START', 'six'],
  ])('%s=%s is a ConfigError naming the variable', (name, value) => {
    expect(configError(() => load({ [name]: value })).message).toContain(name);
  });
});

describe('cloud key fallback', () => {
  it('CLOUD_ROUTER_API_KEY fills the TwoTier cloud key when TWOTIER_CLOUD_API_KEY is unset', () => {
    const config = load({ CLOUD_ROUTER_API_KEY: 'sk-router' });
    expect(config.LLM.TwoTier.cloud_api_key).toBe('sk-router');
    expect(config.cloud.api_key).toBe('sk-router');
  });

  it('TWOTIER_CLOUD_API_KEY wins over CLOUD_ROUTER_API_KEY', () => {
    const config = load({ CLOUD_ROUTER_API_KEY: 'sk-router', TWOTIER_CLOUD_API_KEY: 'sk-twotier' });
    expect(config.LLM.TwoTier.cloud_api_key).toBe('sk-twotier');
    expect(config.cloud.api_key).toBe('sk-router');
  });

  it('a cloud key set in YAML is not replaced by CLOUD_ROUTER_API_KEY', () => {
    const config = load({ CLOUD_ROUTER_API_KEY: 'sk-router' }, 'LLM: {TwoTier: {cloud_api_key: sk-yaml}}');
    expect(config.LLM.TwoTier.cloud_api_key).toBe('sk-yaml');
  });

  it('without either variable the cloud key stays empty', () => {
    expect(load({}).LLM.TwoTier.cloud_api_key).toBe('');
  });
});

describe('enum errors', () => {
  it('an unknown selected_module.LLM names the key, the bad value and the allowed values', () => {
    const error = configError(() => load({}, 'selected_module: {LLM: GPTBrain}'));
    expect(error.message).toContain('selected_module.LLM');
    expect(error.message).toContain('GPTBrain');
    for (const allowed of ['TwoTier', 'AgentLLM', 'CompatLLM']) expect(error.message).toContain(allowed);
  });

  it('an unknown VOICE_PROVIDER names the key, the bad value and the allowed values', () => {
    const error = configError(() => load({ VOICE_PROVIDER: 'cloudy' }));
    expect(error.message).toMatch(/voice_provider/i);
    expect(error.message).toContain('cloudy');
    for (const allowed of ['agent', 'twotier']) expect(error.message).toContain(allowed);
  });

  it.each(['TwoTier', 'AgentLLM', 'CompatLLM'])('selected_module.LLM %s is accepted', (value) => {
    expect(load({}, `selected_module: {LLM: ${value}}`).selected_module.LLM).toBe(value);
  });
});
