// YAML file + environment → one validated Config. Environment wins over the file, the file over defaults.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { isCidr } from '../util/cidr.js';
import { type Config, configSchema } from './schema.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Env variable → config path and how to read it. SPEC/DESIGN names are kept as they are. */
type EnvKind = 'int' | 'number' | 'string' | 'bool' | 'feeds' | 'cidrs' | 'list';
const ENV_MAP: Array<[string, string[], EnvKind]> = [
  ['DATA_DIR', ['data_dir'], 'string'],
  ['LOG_LEVEL', ['log_level'], 'string'],
  ['BIND_HOST', ['server', 'bind_host'], 'string'],
  ['VOICE_WS_PORT', ['server', 'ws_port'], 'int'],
  ['VOICE_HTTP_PORT', ['server', 'http_port'], 'int'],
  ['VOICE_WS_URL', ['server', 'websocket'], 'string'],
  ['PUBLIC_HOST', ['server', 'public_host'], 'string'],
  ['WS_AUTH', ['auth', 'enabled'], 'bool'],
  ['WS_AUTH_SECRET', ['auth', 'secret'], 'string'],
  ['VOICE_ADMIN_TOKEN', ['voice_admin', 'token'], 'string'],
  ['VOICE_ADMIN_ALLOW', ['voice_admin', 'allow'], 'cidrs'],
  ['ACTIVATION_HMAC_KEY', ['activation', 'hmac_key'], 'string'],
  ['ROBOT_NAME', ['voice', 'robot_name'], 'string'],
  ['MIN_UTTERANCE_CHARS', ['voice', 'min_utterance_chars'], 'int'],
  ['VOICE_PROVIDER', ['voice_provider'], 'string'],
  ['BRIDGE_URL', ['bridge', 'url'], 'string'],
  ['BRIDGE_PORT', ['bridge', 'port'], 'int'],
  ['VOICE_URL', ['bridge', 'voice_url'], 'string'],
  ['BRIDGE_ADMIN_HOSTS', ['bridge', 'admin_hosts'], 'list'],
  ['BRIDGE_TIMEOUT_SHORT', ['bridge', 'timeout_short'], 'number'],
  ['BRIDGE_TIMEOUT_LONG', ['bridge', 'timeout_long'], 'number'],
  ['VOICE_THINKER_TIMEOUT', ['bridge', 'thinker_timeout'], 'number'],
  ['MAX_SENTENCES', ['bridge', 'max_sentences'], 'int'],
  ['ROBOT_CHANNEL', ['bridge', 'robot_channel'], 'string'],
  ['ROBOT_CHANNEL_LEGACY', ['bridge', 'robot_channel_legacy'], 'string'],
  ['VLM_MODEL', ['vision', 'vlm_model'], 'string'],
  ['VLM_API_URL', ['vision', 'vlm_api_url'], 'string'],
  ['VISION_MODEL', ['vision', 'vision_model'], 'string'],
  ['AUDIO_CAPTION_MODEL', ['vision', 'audio_caption_model'], 'string'],
  ['CLOUD_ROUTER_URL', ['cloud', 'url'], 'string'],
  ['CLOUD_ROUTER_API_KEY', ['cloud', 'api_key'], 'string'],
  ['FACE_GREET_TEXT', ['face_greet', 'text'], 'string'],
  ['FACE_GREET_MIN_INTERVAL_SEC', ['face_greet', 'min_interval_sec'], 'number'],
  ['FACE_GREET_HOUR_START', ['face_greet', 'hour_start'], 'int'],
  ['FACE_GREET_HOUR_END', ['face_greet', 'hour_end'], 'int'],
  ['TWOTIER_LOCAL_URL', ['LLM', 'TwoTier', 'url'], 'string'],
  ['TWOTIER_LOCAL_MODEL', ['LLM', 'TwoTier', 'model'], 'string'],
  ['TWOTIER_LOCAL_API_KEY', ['LLM', 'TwoTier', 'api_key'], 'string'],
  ['TWOTIER_CLOUD_URL', ['LLM', 'TwoTier', 'cloud_url'], 'string'],
  ['TWOTIER_CLOUD_API_KEY', ['LLM', 'TwoTier', 'cloud_api_key'], 'string'],
  ['SMART_MODEL', ['LLM', 'TwoTier', 'smart_model'], 'string'],
  ['AGENT_CMD', ['agent', 'command'], 'string'],
  ['AGENT_MODEL', ['agent', 'model'], 'string'],
  ['AGENT_MODEL_URL', ['agent', 'model_url'], 'string'],
  ['AGENT_API_KEY', ['agent', 'api_key'], 'string'],
  ['AGENT_SESSION_IDLE_SEC', ['agent', 'session_idle_sec'], 'number'],
  ['AGENT_SESSION_MAX_TURNS', ['agent', 'session_max_turns'], 'int'],
  ['AGENT_SESSION_MAX_AGE_SEC', ['agent', 'session_max_age_sec'], 'number'],
  ['LOCAL_ROUTER_URL', ['local_router', 'url'], 'string'],
  ['THINK_MODEL', ['local_router', 'think_model'], 'string'],
  ['CALENDAR_FEEDS', ['calendar', 'feeds'], 'feeds'],
  ['CALENDAR_HOUSEHOLD', ['calendar', 'household'], 'string'],
  ['CALENDAR_REFRESH_SEC', ['calendar', 'refresh_sec'], 'number'],
  ['CALENDAR_TIME_ZONE', ['calendar', 'time_zone'], 'string'],
  ['UI_PASSWORD', ['ui', 'password'], 'string'],
];

/** Variables whose empty value is a setting of its own (SPEC: an empty greeting disables it). */
const EMPTY_MEANS_SOMETHING = new Set(['FACE_GREET_TEXT']);

/** Variables that only fill a value when another left it empty (SPEC: the cloud key falls back). */
const ENV_FALLBACKS: Array<[string, string[]]> = [
  ['CLOUD_ROUTER_API_KEY', ['LLM', 'TwoTier', 'cloud_api_key']],
];

export interface LoadOptions {
  env?: Env;
  /** Explicit YAML path; else VOICE_CONFIG, else config/voice.yaml when it exists. */
  file?: string;
  /** Extra values applied last (tests, CLI flags). */
  overrides?: Record<string, unknown>;
}

export function loadConfig(options: LoadOptions = {}): Config {
  const env = options.env ?? process.env;
  const file = options.file ?? env.VOICE_CONFIG ?? 'config/voice.yaml';
  let raw: Record<string, unknown> = {};
  const explicit = Boolean(options.file ?? env.VOICE_CONFIG);
  if (existsSync(file)) {
    try {
      raw = (parseYaml(readFileSync(file, 'utf8')) as Record<string, unknown> | null) ?? {};
    } catch (error) {
      throw new ConfigError(`${resolve(file)}: not valid YAML: ${(error as Error).message}`);
    }
    if (!isPlainObject(raw))
      throw new ConfigError(`${resolve(file)}: the top level must be a mapping of keys`);
  } else if (explicit) {
    throw new ConfigError(`config file ${resolve(file)} does not exist (set by VOICE_CONFIG)`);
  }
  for (const [name, path, kind] of ENV_MAP) {
    const value = env[name];
    if (value === undefined || (value === '' && !EMPTY_MEANS_SOMETHING.has(name))) continue;
    setPath(raw, path, readEnv(name, value, kind));
  }
  for (const [name, path] of ENV_FALLBACKS) {
    const value = env[name];
    if (value && !getPath(raw, path)) setPath(raw, path, value);
  }
  if (options.overrides) deepMerge(raw, options.overrides);
  return parseConfig(raw);
}

export function parseConfig(raw: unknown): Config {
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) throw new ConfigError(describeIssues(parsed.error, raw));
  return parsed.data;
}

function describeIssues(error: z.ZodError, raw: unknown): string {
  return error.issues
    .map((issue) => {
      const key = issue.path.join('.') || '(root)';
      const allowed =
        'values' in issue && Array.isArray(issue.values) ? ` (allowed: ${issue.values.join(', ')})` : '';
      const value = isPlainObject(raw) ? getPath(raw, issue.path.map(String)) : undefined;
      const got = value !== undefined ? ` (got ${JSON.stringify(value)})` : '';
      return `config key "${key}": ${issue.message}${got}${allowed}`;
    })
    .join('; ');
}

function readEnv(name: string, value: string, kind: EnvKind): unknown {
  if (kind === 'string') return value;
  if (kind === 'feeds') return readFeeds(name, value);
  if (kind === 'cidrs') return readCidrs(name, value);
  if (kind === 'list') {
    return value
      .split(',')
      .map((entry) => entry.trim())
      .filter(Boolean);
  }
  if (kind === 'number') {
    if (!/^\d+(\.\d+)?$/.test(value)) throw new ConfigError(`env ${name}="${value}" is not a number`);
    return Number(value);
  }
  if (kind === 'bool') {
    if (/^(1|true|yes|on)$/i.test(value)) return true;
    if (/^(0|false|no|off)$/i.test(value)) return false;
    throw new ConfigError(`env ${name}="${value}" is not a boolean (allowed: true, false, 1, 0)`);
  }
  if (!/^\d+$/.test(value)) throw new ConfigError(`env ${name}="${value}" is not a whole number`);
  return Number(value);
}

/** `person=source;person=source` (a source may itself contain `=`, so only the first one splits). */
function readFeeds(name: string, value: string): Array<{ person: string; source: string }> {
  return value
    .split(';')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const at = entry.indexOf('=');
      if (at <= 0) throw new ConfigError(`env ${name}: "${entry}" is not person=source (URL or file)`);
      return { person: entry.slice(0, at).trim(), source: entry.slice(at + 1).trim() };
    });
}

/** `192.168.1.0/24, ::1/128`: a bad entry stops startup by name rather than silently allowing less (or more). */
function readCidrs(name: string, value: string): string[] {
  const entries = value
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  for (const entry of entries) {
    if (!isCidr(entry))
      throw new ConfigError(`env ${name}: "${entry}" is not a CIDR (like 192.168.1.0/24 or ::1/128)`);
  }
  return entries;
}

function setPath(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (typeof next !== 'object' || next === null) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

function getPath(target: Record<string, unknown>, path: string[]): unknown {
  let node: unknown = target;
  for (const key of path) node = isPlainObject(node) ? node[key] : undefined;
  return node;
}

function deepMerge(target: Record<string, unknown>, source: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(source)) {
    const existing = target[key];
    if (isPlainObject(value) && isPlainObject(existing)) deepMerge(existing, value);
    else target[key] = value;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
