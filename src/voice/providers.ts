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
import { SherpaAsr } from '../providers/asr/sherpa.js';
import type { AsrProvider } from '../providers/asr/types.js';
import { CompatLlm } from '../providers/llm/compat.js';
import type { LlmProvider } from '../providers/llm/types.js';
import { EspeakTts } from '../providers/tts/espeak.js';
import { OpenAiTts } from '../providers/tts/openai.js';
import { SherpaTts } from '../providers/tts/sherpa.js';
import type { TtsProvider } from '../providers/tts/types.js';
import { phraseTable } from '../robot/phrases.js';

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
  return new PocketsphinxAsr({ modelDir: config.ASR.pocketsphinx.model_dir, commands });
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

export function createLlm(config: Config): LlmProvider {
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

export function createProviders(config: Config): VoiceProviders {
  return {
    asr: createAsr(config),
    tts: createTts(config),
    llm: createLlm(config),
    createVad: () => SileroVad.create(),
  };
}
