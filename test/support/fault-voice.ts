import type { VirtualRobot } from '../../src/device/robot.js';
import type { AsrProvider } from '../../src/providers/asr/types.js';
import type { LlmProvider, LlmTurn } from '../../src/providers/llm/types.js';
import type { TtsProvider } from '../../src/providers/tts/types.js';
import type { Logger } from '../../src/util/log.js';
import type { Conversation } from '../../src/voice/conversation.js';
import { createProviders, type VoiceProviders } from '../../src/voice/providers.js';
import { readToggles } from '../../src/voice/toggles.js';
import { eventually, startTestVoice, type TestVoice } from './voice.js';

/** 120 ms of tone per segment: real frames through the real pacer, without seconds of playout per turn. */
export class ShortTts implements TtsProvider {
  readonly name = 'short-tone';
  readonly sampleRate = 24_000;

  describe(): string {
    return 'a 120 ms tone per segment (tests)';
  }

  async *synthesize(_text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    if (signal.aborted) return;
    const pcm = new Int16Array(2880);
    for (let i = 0; i < pcm.length; i++)
      pcm[i] = Math.round(4000 * Math.sin((2 * Math.PI * 440 * i) / 24_000));
    yield pcm;
  }
}

/** The speech engine a test picks, without restarting the server. */
export class SwitchTts implements TtsProvider {
  constructor(public current: TtsProvider) {}

  get name(): string {
    return this.current.name;
  }

  get sampleRate(): number {
    return this.current.sampleRate;
  }

  describe(): string {
    return this.current.describe();
  }

  synthesize(text: string, signal: AbortSignal): AsyncIterable<Int16Array> {
    return this.current.synthesize(text, signal);
  }
}

/** The language model a test picks, without restarting the server. */
export class SwitchLlm implements LlmProvider {
  constructor(public current: LlmProvider) {}

  get name(): string {
    return this.current.name;
  }

  describe(): string {
    return this.current.describe();
  }

  reply(turn: LlmTurn): AsyncIterable<string> {
    return this.current.reply(turn);
  }
}

/** The real recogniser, but its answer is held until `release()`: it arrives after whatever the test does
 *  meanwhile, as pocketsphinx's does when the abort comes mid-decode (it returns its text regardless). */
export class HeldAsr implements AsrProvider {
  readonly name: string;
  hold = false;
  started = 0;
  finished = 0;
  private releases: Array<() => void> = [];

  constructor(private readonly inner: AsrProvider) {
    this.name = inner.name;
  }

  describe(): string {
    return this.inner.describe();
  }

  async transcribe(pcm: Int16Array, signal: AbortSignal): Promise<string> {
    this.started++;
    const held = this.hold ? new Promise<void>((resolve) => this.releases.push(resolve)) : undefined;
    try {
      const text = await this.inner.transcribe(pcm, signal);
      await held;
      return text;
    } finally {
      this.finished++;
    }
  }

  release(): void {
    for (const release of this.releases.splice(0)) release();
  }
}

/** Opens the booted robot's audio channel again (a device reconnecting, no OTA request: its keep-alive
 *  connection would stay in the handle counts) and waits for the server's conversation with it. */
export async function reconnect(t: TestVoice, robot: VirtualRobot): Promise<Conversation> {
  await robot.connect();
  return eventually(() => {
    const session = t.voice.registry.get(robot.deviceId);
    return session && t.voice.conversationOf(session);
  });
}

export interface FaultVoice extends TestVoice {
  tts: SwitchTts;
  llm: SwitchLlm;
  asr: HeldAsr;
  /** The providers the configuration built (TwoTier's hot swap lives on `configured.llm`). */
  configured: VoiceProviders;
}

/** A voice server on ephemeral ports, logging into `logger`, with switchable speech, model and recogniser. */
export async function startFaultVoice(
  overrides: Record<string, unknown>,
  logger: Logger,
): Promise<FaultVoice> {
  let built: Pick<FaultVoice, 'tts' | 'llm' | 'asr' | 'configured'> | undefined;
  const t = await startTestVoice(overrides, {
    logger,
    providers: (config, dataDir) => {
      const configured = createProviders(config, logger.child({ component: 'llm' }), readToggles(dataDir));
      built = {
        configured,
        tts: new SwitchTts(new ShortTts()),
        llm: new SwitchLlm(configured.llm),
        asr: new HeldAsr(configured.asr),
      };
      return { ...configured, tts: built.tts, llm: built.llm, asr: built.asr };
    },
  });
  return { ...t, ...built! };
}
