// Builds the selected providers from the configuration (`selected_module`), with `auto` choosing the
// best one installed. A provider that cannot start stops startup with a message saying what to install.
import { existsSync } from 'node:fs';
import { SileroVad } from '../audio/silero.js';
import type { VadModel } from '../audio/utterance.js';
import type { Config } from '../config/index.js';
import { findModel } from '../models/catalog.js';
import { modelDir } from '../models/fetch.js';
import { OpenAiAsr } from '../providers/asr/openai.js';
import { PocketsphinxAsr } from '../providers/asr/pocketsphinx.js';
import type { RecognitionQueueOptions } from '../providers/asr/recognition-queue.js';
import { SherpaAsr } from '../providers/asr/sherpa.js';
import type { AsrProvider } from '../providers/asr/types.js';
import { AgentLlm } from '../providers/llm/agent.js';
import { BridgeClient } from '../providers/llm/bridge-client.js';
import { CompatLlm } from '../providers/llm/compat.js';
import { TwoTierLlm } from '../providers/llm/twotier.js';
import type { LlmProvider } from '../providers/llm/types.js';
import { EspeakTts } from '../providers/tts/espeak.js';
import { OpenAiTts } from '../providers/tts/openai.js';
import { SherpaTts } from '../providers/tts/sherpa.js';
import type { TtsProvider } from '../providers/tts/types.js';
import { phraseTable } from '../robot/phrases.js';
import type { Logger } from '../util/log.js';
import type { Toggles } from './toggles.js';

export interface VoiceProviders {
  asr: AsrProvider;
  tts: TtsProvider;
  llm: LlmProvider;
  createVad(): Promise<VadModel>;
}

export function createAsr(config: Config): AsrProvider {
  const choice = config.selected_module.ASR;
  const sherpa = config.ASR.sherpa;
  const sherpaDir = sherpa.model_dir || modelDir(sherpa.model, config.data_dir);
  // auto prefers a downloaded sherpa model (the quality path); an incomplete folder is an error, not a fallback.
  if (choice === 'sherpa' || (choice === 'auto' && existsSync(sherpaDir))) {
    const kind = sherpa.kind !== 'auto' ? sherpa.kind : findModel(sherpa.model)?.engine;
    if (kind !== 'sense_voice' && kind !== 'whisper') {
      throw new Error(`ASR.sherpa.kind must be sense_voice or whisper for model "${sherpa.model}"`);
    }
    return new SherpaAsr({
      modelDir: sherpaDir,
      kind,
      numThreads: sherpa.num_threads,
      language: sherpa.language,
    });
  }
  const openai = config.ASR.openai;
  if (choice === 'openai' || (choice === 'auto' && openai.url)) {
    if (!openai.url) throw new Error('ASR "openai" needs ASR.openai.url (a /v1 base URL)');
    return new OpenAiAsr({
      url: openai.url,
      apiKey: openai.api_key,
      model: openai.model,
      timeoutSec: openai.timeout,
    });
  }
  const commands = phraseTable(config.voice.robot_name).flatMap((row) => row.phrases);
  const pocketsphinx = config.ASR.pocketsphinx;
  return new PocketsphinxAsr({
    modelDir: pocketsphinx.model_dir,
    commands,
    queue: queueOptions(pocketsphinx),
  });
}

/** The ASR.pocketsphinx keys of the decoder pool and its queue; a key left out (or decoders: 0, "auto")
 *  takes RECOGNITION_QUEUE_DEFAULTS. */
interface PocketsphinxPoolConfig {
  model_dir: string;
  decoders?: number;
  max_queued?: number;
  max_queued_per_device?: number;
}

function queueOptions(section: PocketsphinxPoolConfig): Partial<RecognitionQueueOptions> {
  const options: Partial<RecognitionQueueOptions> = {};
  if (section.decoders) options.workers = section.decoders;
  if (section.max_queued !== undefined) options.maxQueued = section.max_queued;
  if (section.max_queued_per_device !== undefined) options.maxQueuedPerDevice = section.max_queued_per_device;
  return options;
}

export function createTts(config: Config): TtsProvider {
  const choice = config.selected_module.TTS;
  const openai = config.TTS.openai;
  const sherpa = config.TTS.sherpa;
  const sherpaDir = sherpa.model_dir || modelDir(sherpa.model, config.data_dir);
  if (choice === 'sherpa' || (choice === 'auto' && existsSync(sherpaDir))) {
    return new SherpaTts({
      modelDir: sherpaDir,
      kind: sherpa.kind,
      speakerId: sherpa.speaker_id,
      speed: sherpa.speed,
      numThreads: sherpa.num_threads,
    });
  }
  if (choice === 'openai') {
    if (!openai.url) throw new Error('TTS "openai" needs TTS.openai.url (a /v1 base URL)');
    return new OpenAiTts({
      url: openai.url,
      apiKey: openai.api_key,
      model: openai.model,
      voice: openai.voice,
      timeoutSec: openai.timeout,
    });
  }
  return new EspeakTts(config.TTS.espeak);
}

export function createLlm(config: Config, logger: Logger, toggles: Toggles): LlmProvider {
  const choice = config.selected_module.LLM;
  if (choice === 'TwoTier') {
    const t = config.LLM.TwoTier;
    return new TwoTierLlm({
      local: { url: t.url, apiKey: t.api_key, model: t.model },
      cloud: { url: t.cloud_url, apiKey: t.cloud_api_key, model: t.smart_model },
      smartMode: toggles.smart_mode,
      maxTokens: t.max_tokens,
      temperature: t.temperature,
      timeoutSec: t.timeout,
      personaFile: t.persona_file,
      bridge: new BridgeClient({ url: config.bridge.url, logger }),
      shortTimeoutMs: config.bridge.timeout_short * 1000,
      longTimeoutMs: config.bridge.timeout_long * 1000,
      logger,
    });
  }
  if (choice === 'AgentLLM') {
    const a = config.LLM.AgentLLM;
    return new AgentLlm({
      url: a.url || `${config.bridge.url.replace(/\/+$/, '')}/api/message/stream`,
      channel: a.channel || config.bridge.robot_channel,
      timeoutSec: a.timeout,
    });
  }
  const c = config.LLM.CompatLLM;
  return new CompatLlm({
    url: c.url,
    apiKey: c.api_key,
    model: c.model,
    maxTokens: c.max_tokens,
    temperature: c.temperature,
    timeoutSec: c.timeout,
  });
}

export function createProviders(config: Config, logger: Logger, toggles: Toggles): VoiceProviders {
  return {
    asr: createAsr(config),
    tts: createTts(config),
    llm: createLlm(config, logger, toggles),
    createVad: () => SileroVad.create(),
  };
}
