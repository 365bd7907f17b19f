// The one typed configuration of deskbot. Every default lives here; config/voice.yaml documents them.
import { z } from 'zod';
import { isCidr } from '../util/cidr.js';

const port = z.number().int().min(0).max(65535);
const binaryVersion = z.literal([0, 1, 2, 3]);

/**
 * Resource limits of every listener (docs/limits.md). One self-contained block: the WebSocket listener,
 * both HTTP servers, the perception route, SSE and MCP discovery read their defaults from here.
 */
export const limitsSchema = z.object({
  /** Device WebSockets at once on :8000 (counted per TCP connection, upgraded or not). */
  ws_max_connections: z.number().int().positive().default(512),
  /** Per remote address; loopback counts like any address (a NAT'd household shares one). */
  ws_max_connections_per_address: z.number().int().positive().default(64),
  /** TCP connections at once on each HTTP server (:8003, :8080). */
  http_max_connections: z.number().int().positive().default(256),
  http_max_connections_per_address: z.number().int().positive().default(64),
  /** A connection over a cap is answered 503 when its request arrives, or destroyed after this long. */
  over_limit_grace_ms: z.number().int().positive().default(2000),
  /** Whole header block must arrive within this (slowloris); node answers 408. */
  http_headers_timeout_ms: z.number().int().positive().default(10_000),
  /** Whole request (headers and body) must arrive within this; node answers 408. */
  http_request_timeout_ms: z.number().int().positive().default(30_000),
  /** An idle keep-alive connection is closed after this. */
  http_keep_alive_timeout_ms: z.number().int().positive().default(5000),
  /** How often node checks the two timeouts above (they fire up to this late). */
  http_connections_check_interval_ms: z.number().int().positive().default(1000),
  /** POST /api/perception/event body, and the keys / nesting depth of its `data`. */
  perception_event_max_bytes: z
    .number()
    .int()
    .positive()
    .default(8 * 1024),
  perception_event_max_keys: z.number().int().positive().default(64),
  perception_event_max_depth: z.number().int().positive().default(4),
  /** Dashboard event streams per address; the oldest of that address is closed for a new one. */
  sse_max_streams_per_address: z.number().int().positive().default(4),
  /** MCP tools kept per device and list (regular, user-only), and their JSON bytes. */
  mcp_max_tools: z.number().int().positive().default(64),
  mcp_max_tool_list_bytes: z
    .number()
    .int()
    .positive()
    .default(64 * 1024),
});
export type Limits = z.infer<typeof limitsSchema>;
/** The defaults, for modules constructed without a config (tests, the bench). */
export const DEFAULT_LIMITS: Limits = limitsSchema.parse({});

export const configSchema = z.object({
  limits: limitsSchema.prefault({}),
  data_dir: z.string().default('./data'),
  log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  server: z
    .object({
      bind_host: z.string().default('0.0.0.0'),
      ws_port: port.default(8000),
      http_port: port.default(8003),
      /** WebSocket URL handed to devices by OTA; empty = derived from the request's Host and ws_port. */
      websocket: z.string().default(''),
      /** Host name put into URLs handed to devices (vision, firmware); empty = the request's Host. */
      public_host: z.string().default(''),
      /** Binary protocol version announced in the OTA response (0 = do not announce; device default 1). */
      ws_protocol_version: binaryVersion.default(0),
      /** Minutes east of UTC in server_time; null = this machine's offset. */
      timezone_offset_min: z.number().int().min(-720).max(840).nullable().default(null),
      /** Close a connection that has not said hello by then. The device itself gives up after 10 s. */
      hello_timeout_sec: z.number().positive().default(10),
      /** Close a connection after this long without any frame (a device may vanish without a Close). */
      idle_timeout_sec: z.number().positive().default(300),
      /** Frames larger than this are logged and dropped; the connection stays up. */
      max_frame_bytes: z
        .number()
        .int()
        .positive()
        .default(64 * 1024),
    })
    .prefault({}),
  /**
   * Guards of /device/admin/* (DESIGN §3). Unset, the routes are locked to this machine and other hosts need the
   * token generated into DATA_DIR (src/voice/admin-auth.ts); set-toggle always needs the token.
   */
  voice_admin: z
    .object({
      /** Bearer token the admin routes require; '' = none (env VOICE_ADMIN_TOKEN). */
      token: z.string().default(''),
      /** CIDRs the TCP peer must be inside; empty = any peer (env VOICE_ADMIN_ALLOW, comma-separated). */
      allow: z
        .array(
          z.string().refine(isCidr, {
            error: (issue) => `${JSON.stringify(issue.input)} is not a CIDR (like 192.168.1.0/24 or ::1/128)`,
          }),
        )
        .default([]),
    })
    .prefault({}),
  auth: z
    .object({
      enabled: z.boolean().default(false),
      /** HMAC secret for device tokens; empty = generated once and kept under data_dir. */
      secret: z.string().default(''),
      token_ttl_sec: z
        .number()
        .int()
        .positive()
        .default(30 * 24 * 3600),
    })
    .prefault({}),
  firmware: z
    .object({
      /** Offer the image even when it is not newer (force = 1 in the OTA response). */
      force: z.boolean().default(false),
    })
    .prefault({}),
  activation: z
    .object({
      /** Shared HMAC key for Activation-Version 2 devices; empty = activation off. */
      hmac_key: z.string().default(''),
      timeout_ms: z.number().int().positive().default(30_000),
      message: z.string().default('Activating this robot with deskbot'),
    })
    .prefault({}),
  mcp: z
    .object({
      timeout_ms: z.number().int().positive().default(30_000),
    })
    .prefault({}),
  selected_module: z
    .object({
      VAD: z.enum(['silero']).default('silero'),
      ASR: z.enum(['auto', 'sherpa', 'pocketsphinx', 'openai']).default('auto'),
      LLM: z.enum(['TwoTier', 'AgentLLM', 'CompatLLM']).default('TwoTier'),
      TTS: z.enum(['auto', 'sherpa', 'espeak', 'openai']).default('auto'),
    })
    .prefault({}),
  voice: z
    .object({
      /** <robot_name> in phrases (env ROBOT_NAME). */
      robot_name: z.string().min(1).default('Pip'),
      /**
       * `listen detect` texts that mean "wake up and talk" (never a model turn); empty = the robot name,
       * hi/hey/hello/ok + robot name, and the stock xiaozhi wake words (你好小智 …).
       */
      wake_words: z.array(z.string().min(1).max(100)).max(200).default([]),
      /** What the robot does on a wake word: a short spoken greeting (as the reference server) or nothing. */
      wake_word_reply: z.enum(['greeting', 'none']).default('greeting'),
      wake_greeting: z.string().min(1).max(200).default("😊 Hi, I'm listening."),
      system_prompt: z
        .string()
        .default(
          'You are {robot_name}, a small friendly desk robot. Answer in English in one or two short sentences. ' +
            'Start every reply with one emoji that shows your feeling: one of 😊 😆 😢 😮 🤔 😠 😐 😍 😴.',
        ),
      /** Recognised text shorter than this is noise (env MIN_UTTERANCE_CHARS). */
      min_utterance_chars: z.number().int().min(1).default(2),
      history_messages: z.number().int().min(0).default(20),
      /** `tts stop` goes this long after the estimated end of the speech (the tail silence plays inside it). */
      tts_stop_margin_ms: z.number().int().min(0).max(10_000).default(400),
      // Defaults and their reasons in src/voice/speech-out.ts (DEFAULT_STALL_MARGIN_MS, DEFAULT_TAIL_SILENCE_MS):
      /** …and at least this long after it plus how late our frames left (≤ 240 ms), for clients that stall. */
      tts_stop_stall_margin_ms: z.number().int().min(0).max(10_000).optional(),
      /** Silence after each reply's speech, inside the margin (a client playing only while it holds 240 ms). */
      tts_tail_silence_ms: z.number().int().min(0).max(2000).optional(),
    })
    .prefault({}),
  VAD: z
    .object({
      silero: z
        .object({
          threshold: z.number().min(0).max(1).default(0.5),
          threshold_low: z.number().min(0).max(1).default(0.35),
          min_silence_duration_ms: z.number().int().positive().default(700),
          preroll_ms: z.number().int().min(0).default(600),
          max_utterance_ms: z.number().int().positive().default(20_000),
        })
        .prefault({}),
    })
    .prefault({}),
  ASR: z
    .object({
      sherpa: z
        .object({
          /** Catalogue name (deskbot models list). */
          model: z.string().default('sensevoice-small'),
          /** '' = <data_dir>/models/<model> */
          model_dir: z.string().default(''),
          kind: z.enum(['auto', 'sense_voice', 'whisper']).default('auto'),
          num_threads: z.number().int().min(1).max(16).default(2),
          language: z.string().default(''),
        })
        .prefault({}),
      pocketsphinx: z
        .object({
          model_dir: z.string().default('/usr/share/pocketsphinx/model/en-us'),
          // The recognition queue (src/providers/asr/recognition-queue.ts holds the defaults): decoder pool size
          // (0 = auto), recognitions waiting in all, and per device.
          decoders: z.number().int().min(0).max(16).optional(),
          max_queued: z.number().int().min(0).max(1000).optional(),
          max_queued_per_device: z.number().int().min(1).max(100).optional(),
        })
        .prefault({}),
      openai: z
        .object({
          url: z.string().default(''),
          api_key: z.string().default(''),
          model: z.string().default('whisper-1'),
          timeout: z.number().positive().default(30),
        })
        .prefault({}),
    })
    .prefault({}),
  TTS: z
    .object({
      sherpa: z
        .object({
          model: z.string().default('piper-en-amy'),
          model_dir: z.string().default(''),
          kind: z.enum(['auto', 'vits', 'kokoro']).default('auto'),
          speaker_id: z.number().int().min(0).default(0),
          speed: z.number().positive().default(1),
          num_threads: z.number().int().min(1).max(16).default(2),
        })
        .prefault({}),
      espeak: z
        .object({
          voice: z.string().default('en-us'),
          rate: z.number().int().min(80).max(450).default(165),
          pitch: z.number().int().min(0).max(99).default(50),
        })
        .prefault({}),
      openai: z
        .object({
          url: z.string().default(''),
          api_key: z.string().default(''),
          model: z.string().default('tts-1'),
          voice: z.string().default('alloy'),
          timeout: z.number().positive().default(30),
        })
        .prefault({}),
    })
    .prefault({}),
  /** How smart mode flips (env VOICE_PROVIDER): twotier = in-process and instant; agent = config rewrite + restart. */
  voice_provider: z.enum(['agent', 'twotier']).default('agent'),
  /** The bridge as the voice server sees it (escalations, memory side channel, agent path). */
  bridge: z
    .object({
      url: z.string().default('http://localhost:8080'),
      port: port.default(8080),
      /** Where the bridge reaches the voice server's HTTP admin routes (env VOICE_URL). */
      voice_url: z.string().default('http://localhost:8003'),
      /** Seconds; memory_lookup, play_song, take_photo (env BRIDGE_TIMEOUT_SHORT). */
      timeout_short: z.number().positive().default(5),
      /** Seconds; think_hard (env BRIDGE_TIMEOUT_LONG). */
      timeout_long: z.number().positive().default(30),
      /** Seconds the bridge allows think_hard (env VOICE_THINKER_TIMEOUT). */
      thinker_timeout: z.number().positive().default(90),
      max_sentences: z.number().int().positive().default(6),
      robot_channel: z.string().min(1).default('deskbot'),
      robot_channel_legacy: z.string().min(1).default('desk-bot'),
      /**
       * Host names (besides localhost and loopback addresses) that /admin/* requests may be addressed to, in
       * Host and Origin; anything else is refused as DNS rebinding (env BRIDGE_ADMIN_HOSTS, comma-separated).
       */
      admin_hosts: z.array(z.string().trim().min(1).max(253)).max(50).default([]),
    })
    .prefault({}),
  vision: z
    .object({
      vlm_model: z.string().default('openai/gpt-4o-mini'),
      vlm_api_url: z.string().default('https://openrouter.ai/api/v1'),
      vision_model: z.string().default('openai/gpt-4o-mini'),
      audio_caption_model: z.string().default('openai/gpt-4o-audio-preview'),
    })
    .prefault({}),
  cloud: z
    .object({
      /** The cloud router (env CLOUD_ROUTER_URL) and its key (env CLOUD_ROUTER_API_KEY). */
      url: z.string().default('https://openrouter.ai/api/v1'),
      api_key: z.string().default(''),
    })
    .prefault({}),
  /** The agent runtime the bridge drives over ACP, and the embedded agent's own model. */
  agent: z
    .object({
      /** Command line the bridge spawns (env AGENT_CMD); '' = this package's own `deskbot agent`. */
      command: z.string().default(''),
      /** The embedded agent's model endpoint; '' = cloud.url (env AGENT_MODEL_URL). */
      model_url: z.string().default(''),
      /** '' = cloud.api_key (env AGENT_API_KEY). */
      api_key: z.string().default(''),
      model: z.string().default('openai/gpt-4o-mini'),
      /** Seconds per agent turn (SPEC agent provider timeout). */
      turn_timeout: z.number().positive().default(90),
      /** Session rotation (DESIGN §3). */
      session_idle_sec: z.number().positive().default(300),
      session_max_turns: z.number().int().positive().default(50),
      session_max_age_sec: z.number().positive().default(1800),
    })
    .prefault({}),
  /** The real local OpenAI-compatible router (llama.cpp server, llama-swap, Ollama...); '' = none. */
  local_router: z
    .object({
      url: z.string().default(''),
      /** The large local reasoning model for think_hard (env THINK_MODEL). */
      think_model: z.string().default('qwen3-32b'),
    })
    .prefault({}),
  /** Timings of the bridge's perception consumers and modes (SPEC "Events", DESIGN §3). */
  perception: z
    .object({
      /** Face-lost aborter: wait after face_lost, and only this soon after a greeting. */
      abort_grace_ms: z.number().int().min(0).default(4000),
      abort_greeting_window_ms: z.number().int().min(0).default(12_000),
      /** Sound turner: quieter sounds are ignored; at most one turn per interval. */
      sound_min_energy: z.number().min(0).max(1).default(0.2),
      sound_min_interval_ms: z.number().int().min(0).default(1500),
      /** Face-identified refresher cadence (the firmware's green pip times out after 4000 ms). */
      identified_refresh_ms: z.number().int().positive().default(3000),
      purr_cooldown_sec: z.number().min(0).default(20),
      security_photo_interval_sec: z.number().positive().default(60),
      story_silence_sec: z.number().positive().default(90),
    })
    .prefault({}),
  /** Calendar feeds (DESIGN §3): ICS by URL or file, one per person plus a household feed. */
  calendar: z
    .object({
      /** Per person: `{person, source}`; source is an http(s) URL or a file path (env CALENDAR_FEEDS). */
      feeds: z
        .array(z.object({ person: z.string().trim().min(1).max(64), source: z.string().trim().min(1) }))
        .max(32)
        .default([]),
      /** The household feed (URL or file), tagged `household` (env CALENDAR_HOUSEHOLD). */
      household: z.string().default(''),
      /** Feeds are refetched when older than this. */
      refresh_sec: z.number().positive().default(900),
      /** Deadline of one feed fetch. */
      fetch_timeout_ms: z.number().int().positive().default(10_000),
      /** Feeds larger than this are refused. */
      max_feed_bytes: z
        .number()
        .int()
        .positive()
        .default(2 * 1024 * 1024),
      /** IANA zone that decides what "today" is; '' = this machine's zone (env CALENDAR_TIME_ZONE). */
      time_zone: z.string().default(''),
    })
    .prefault({}),
  /** The LAN dashboard (/ui): read-only unless a password is set (env UI_PASSWORD). */
  ui: z
    .object({
      password: z.string().default(''),
      /** Lifetime of a dashboard login. */
      session_ttl_sec: z
        .number()
        .int()
        .positive()
        .default(12 * 3600),
    })
    .prefault({}),
  face_greet: z
    .object({
      /** Empty disables the spoken greeting (env FACE_GREET_TEXT). */
      text: z.string().default('😊 Hi there!'),
      min_interval_sec: z.number().min(0).default(30),
      hour_start: z.number().int().min(0).max(24).default(6),
      hour_end: z.number().int().min(0).max(24).default(21),
    })
    .prefault({}),
  LLM: z
    .object({
      TwoTier: z
        .object({
          type: z.literal('two_tier').default('two_tier'),
          /** Inner-loop endpoint with smart mode off (env TWOTIER_LOCAL_URL). */
          url: z.string().default('http://localhost:8080/v1'),
          /** Sent as a bearer token; the local router ignores it (env TWOTIER_LOCAL_API_KEY). */
          api_key: z.string().default('sk-local-not-checked'),
          /** A ~4B-parameter local model (env TWOTIER_LOCAL_MODEL). */
          model: z.string().default('qwen3-4b-instruct'),
          /** Endpoint with smart mode on (env TWOTIER_CLOUD_URL). */
          cloud_url: z.string().default('https://openrouter.ai/api/v1'),
          /** env TWOTIER_CLOUD_API_KEY, else CLOUD_ROUTER_API_KEY; needed to turn smart mode on. */
          cloud_api_key: z.string().default(''),
          /** Model with smart mode on (env SMART_MODEL). */
          smart_model: z.string().default('openai/gpt-4o-mini'),
          max_tokens: z.number().int().positive().default(256),
          temperature: z.number().min(0).max(2).default(0.7),
          /** Seconds per model request. */
          timeout: z.number().positive().default(60),
          /** The one system prompt; '' = merge the dialogue's system messages. */
          persona_file: z.string().default('config/personas/voice.md'),
        })
        .prefault({}),
      AgentLLM: z
        .object({
          type: z.literal('agent').default('agent'),
          /** The bridge's streaming message endpoint; '' = <bridge.url>/api/message/stream. */
          url: z.string().default(''),
          /** '' = bridge.robot_channel */
          channel: z.string().default(''),
          timeout: z.number().positive().default(90),
          system_prompt: z.string().default(''),
        })
        .prefault({}),
      CompatLLM: z
        .object({
          type: z.literal('compat').default('compat'),
          url: z.string().default('http://localhost:8080/v1'),
          api_key: z.string().default('sk-local'),
          model: z.string().default('local-model'),
          max_tokens: z.number().int().positive().default(256),
          temperature: z.number().min(0).max(2).default(0.7),
          timeout: z.number().positive().default(60),
        })
        .prefault({}),
    })
    .prefault({}),
});

export type Config = z.infer<typeof configSchema>;
