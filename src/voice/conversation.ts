// One device's conversation: decodes uplink audio, finds utterances, and runs the turn machine's effects
// (recognition, replies, cancellation). The decisions live in turn-machine.ts; this file only acts.
import { EventEmitter } from 'node:events';
import type { AssetLibrary } from '../audio/assets.js';
import { type Clock, monotonicClock, Pacer } from '../audio/pacer.js';
import type { UtteranceOptions, VadModel } from '../audio/utterance.js';
import type { ListenFrame } from '../protocol/index.js';
import type { AsrProvider } from '../providers/asr/types.js';
import type { LlmProvider } from '../providers/llm/types.js';
import type { ChatMessage } from '../providers/openai-client.js';
import type { TtsProvider } from '../providers/tts/types.js';
import { matchPhrase, STATE_ACKNOWLEDGEMENTS } from '../robot/phrases.js';
import { isRobotState, type RobotState } from '../robot/states.js';
import type { WakeWordList } from '../robot/wake-words.js';
import type { Logger } from '../util/log.js';
import { runChatReply, speakText } from './reply.js';
import type { DeviceSession } from './session.js';
import { SpeechOut } from './speech-out.js';
import {
  initialTurnState,
  type ReplyKind,
  step,
  type TurnEffect,
  type TurnEvent,
  type TurnState,
} from './turn-machine.js';
import type { TurnTiming } from './turn-timing.js';

export type { TurnTiming };

import { UPLINK_RATE, UplinkAudio } from './uplink.js';

export interface ConversationOptions {
  robotName: string;
  wakeWords: WakeWordList;
  /** Spoken on a wake word; '' = nothing (voice.wake_word_reply). */
  wakeGreeting: string;
  systemPrompt: string;
  minUtteranceChars: number;
  historyMessages: number;
  stopMarginMs: number;
  /** See SpeechOutOptions; unset = its defaults. */
  stallMarginMs?: number;
  tailSilenceMs?: number;
  utterance: Partial<UtteranceOptions>;
  /** Longest manual-mode recording kept before it is cut. */
  maxUtteranceMs: number;
}

export interface ConversationDeps {
  session: DeviceSession;
  asr: AsrProvider;
  tts: TtsProvider;
  llm: LlmProvider;
  /** The session's VAD; it may still be loading — audio waits for it, control frames do not. */
  vad: VadModel | Promise<VadModel>;
  options: ConversationOptions;
  logger: Logger;
  /** Song names available to the dance phrase ("dance to <song>"), refreshed by the server. */
  songs?: () => string[];
  /** The songs folder, for play-asset and the dance phrase. */
  assets?: AssetLibrary;
  kidMode?: () => boolean;
  /** Answers turns while the robot is in story_time (the bridge's story route). */
  storyLlm?: LlmProvider;
  /** Told when a `listen detect` carried a wake word (relayed to the bridge's wake-word turner). */
  onWakeWord?: (text: string) => void;
  clock?: Clock;
}

const SET_STATE_TOOL = 'self.robot.set_state';

export interface ConversationEvents {
  turn: [TurnTiming];
}

export class Conversation extends EventEmitter<ConversationEvents> {
  private state: TurnState = initialTurnState();
  private readonly controllers = new Map<number, AbortController>();
  private readonly speeches = new Map<number, SpeechOut>();
  private readonly uplink: UplinkAudio;
  private readonly pacer: Pacer;
  private readonly history: ChatMessage[] = [];
  private readonly log: Logger;
  robotState: RobotState = 'idle';
  private sttAt: number | undefined;
  private closed = false;
  readonly stats = { utterances: 0, recognized: 0, dropped: 0, replies: 0, aborted: 0, droppedAudio: 0 };

  private readonly timings = new Map<number, TurnTiming>();
  private readonly recognitions = new Map<number, { endAt: number; asrMs?: number }>();

  constructor(private readonly deps: ConversationDeps) {
    super();
    const { session, options } = deps;
    this.log = deps.logger.child({ device: session.deviceId });
    this.uplink = new UplinkAudio({
      vad: deps.vad,
      utterance: options.utterance,
      maxUtteranceMs: options.maxUtteranceMs,
      log: this.log,
      onUtterance: (pcm) => this.dispatch({ type: 'utterance', audio: pcm }),
    });
    this.pacer = new Pacer({
      sendAudio: (packet, replyId) => {
        const timing = this.timings.get(replyId);
        if (timing && timing.firstAudioAt === undefined) timing.firstAudioAt = performance.now();
        session.sendAudio(packet);
      },
      frameMs: 60,
      clock: deps.clock ?? monotonicClock,
    });
    session.on('listen', (frame) => this.onListen(frame));
    session.on('abort', (reason) => this.dispatch({ type: 'abort', reason: reason ?? 'device' }));
    session.on('audio', (packet) => this.onAudio(packet));
    session.on('event', (event) => {
      const next = (event.data as { state?: unknown; to?: unknown } | undefined) ?? {};
      const state = next.state ?? next.to;
      if (event.name === 'state_changed' && isRobotState(state)) this.robotState = state;
    });
    session.on('closed', () => this.close());
  }

  /** The robot speaks `text` as its own utterance (inject-text): the channel opens and the robot talks. */
  inject(text: string): void {
    this.dispatch({ type: 'inject', text, kind: 'speak' });
  }

  /** Synthesises and plays `text` verbatim, pre-empting current speech (say). */
  say(text: string): void {
    this.dispatch({ type: 'inject', text, kind: 'say' });
  }

  /** Plays a named asset from the songs folder like speech (play-asset). */
  playAsset(name: string): void {
    this.dispatch({ type: 'inject', text: name, kind: 'asset' });
  }

  abort(reason: string): void {
    this.dispatch({ type: 'abort', reason });
  }

  get turnState(): Readonly<TurnState> {
    return this.state;
  }

  /** What the conversation still holds, for leak checks: all zero once a closed device's turns have ended. */
  debugCounts() {
    return {
      controllers: this.controllers.size,
      speeches: this.speeches.size,
      timings: this.timings.size,
      recognitions: this.recognitions.size,
      pacerItems: this.pacer.queuedItems,
    };
  }

  private onListen(frame: ListenFrame): void {
    if (frame.state === 'start') this.dispatch({ type: 'listen_start', mode: frame.mode ?? 'auto' });
    else if (frame.state === 'stop') this.dispatch({ type: 'listen_stop' });
    else if (frame.state === 'detect' && frame.text !== undefined) {
      const text = frame.text.trim();
      this.dispatch({ type: 'detect', text, wakeWord: this.deps.options.wakeWords.matches(text) });
    }
  }

  private onAudio(packet: Uint8Array): void {
    if (!this.state.listening) return; // wake-word pre-roll and stray audio: accepted, not a turn
    this.uplink.push(packet, this.state.mode === 'manual');
    this.stats.droppedAudio = this.uplink.dropped;
  }

  private dispatch(event: TurnEvent): void {
    if (this.closed) return; // a late result (ASR that ignored its abort) must not start a turn for nobody
    const { state, effects } = step(this.state, event, {
      minUtteranceChars: this.deps.options.minUtteranceChars,
      wakeGreeting: this.deps.options.wakeGreeting,
    });
    this.state = state;
    for (const effect of effects) {
      try {
        this.perform(effect);
      } catch (error) {
        this.log.error({ err: error, effect: effect.type }, 'turn effect failed');
      }
    }
  }

  private perform(effect: TurnEffect): void {
    switch (effect.type) {
      case 'recognize':
        this.stats.utterances++;
        void this.recognize(effect.turnId, effect.audio as Int16Array);
        break;
      case 'send_stt':
        this.sttAt = performance.now();
        this.deps.session.sendJson({
          type: 'stt',
          text: effect.text,
          session_id: this.deps.session.sessionId,
        });
        break;
      case 'reply':
        void this.reply(effect.turnId, effect.text, effect.kind);
        break;
      case 'cancel':
        this.stats.aborted++;
        this.controllers.get(effect.turnId)?.abort();
        this.speeches.get(effect.turnId)?.cancel();
        break;
      case 'tts_stop': {
        const speech = this.speeches.get(effect.turnId);
        if (speech) speech.stopNow();
        else
          this.deps.session.sendJson({ type: 'tts', state: 'stop', session_id: this.deps.session.sessionId });
        break;
      }
      case 'flush_utterance': {
        const pcm = this.uplink.takeManual();
        if (pcm.length > 0) this.dispatch({ type: 'utterance', audio: pcm });
        break;
      }
      case 'reset_detector':
        this.uplink.reset();
        break;
      case 'wake_word':
        this.deps.onWakeWord?.(effect.text);
        void this.onWakeWord();
        break;
      case 'dropped':
        this.stats.dropped++;
        this.log.debug({ reason: effect.reason, text: effect.text }, 'utterance dropped');
        break;
    }
  }

  private async recognize(turnId: number, pcm: Int16Array): Promise<void> {
    const controller = this.track(turnId);
    const recognition: { endAt: number; asrMs?: number } = { endAt: performance.now() };
    this.recognitions.set(turnId, recognition);
    let text = '';
    try {
      text = (
        await this.deps.asr.transcribe(pcm, controller.signal, { deviceId: this.deps.session.deviceId })
      ).trim();
      recognition.asrMs = performance.now() - recognition.endAt;
      this.stats.recognized++;
      this.log.info({ turnId, text, audioMs: Math.round((pcm.length / UPLINK_RATE) * 1000) }, 'recognized');
    } catch (error) {
      if (!controller.signal.aborted)
        this.log.warn({ err: (error as Error).message }, 'speech recognition failed');
    } finally {
      this.untrack(turnId, controller);
    }
    this.dispatch({ type: 'recognized', turnId, text });
    this.recognitions.delete(turnId); // the reply (if any) took it synchronously
  }

  private async reply(turnId: number, text: string, kind: ReplyKind): Promise<void> {
    const controller = this.track(turnId);
    const speech = new SpeechOut({
      sink: this.deps.session,
      tts: this.deps.tts,
      pacer: this.pacer,
      replyId: turnId,
      signal: controller.signal,
      sampleRate: 24000,
      frameMs: 60,
      stopMarginMs: this.deps.options.stopMarginMs,
      ...(this.deps.options.stallMarginMs !== undefined
        ? { stallMarginMs: this.deps.options.stallMarginMs }
        : {}),
      ...(this.deps.options.tailSilenceMs !== undefined
        ? { tailSilenceMs: this.deps.options.tailSilenceMs }
        : {}),
      now: () => (this.deps.clock ?? monotonicClock).now(),
    });
    this.speeches.set(turnId, speech);
    this.stats.replies++;
    const recognition = this.recognitions.get(turnId);
    this.recognitions.delete(turnId);
    const timing: TurnTiming = {
      turnId,
      kind,
      text,
      replyStartAt: performance.now(),
      aborted: false,
      ...(recognition ? { utteranceEndAt: recognition.endAt, asrMs: recognition.asrMs } : {}),
      ...(kind === 'chat' && this.sttAt !== undefined ? { sttAt: this.sttAt } : {}),
    };
    this.timings.set(turnId, timing);
    try {
      if (kind === 'speak') {
        if (this.robotState === 'idle' || this.robotState === 'sleep') await this.setState('talk');
        await speakText(speech, text);
      } else if (kind === 'greeting') {
        await speakText(speech, text); // the wake_word effect already moved the state
      } else if (kind === 'say') {
        await speech.speakVerbatim(text);
      } else if (kind === 'asset') {
        await this.playNamedAsset(speech, text, controller.signal);
      }
      if (kind !== 'chat') {
        await speech.finish();
        return;
      }
      const phrase = matchPhrase(
        text,
        this.robotState,
        this.deps.options.robotName,
        this.deps.songs?.() ?? [],
      );
      // A client without the state tool (stock firmware, browser and PC clients) has no states: its phrase is a
      // question for the model, not an acknowledgement of a change that cannot happen.
      if (phrase && (await this.deps.session.offersTool(SET_STATE_TOOL))) {
        this.log.info({ phrase: phrase.phrase, target: phrase.target }, 'voice phrase');
        await this.setState(phrase.target);
        await speakText(speech, STATE_ACKNOWLEDGEMENTS[phrase.target]);
        if (phrase.target === 'dance' && phrase.song)
          await this.playNamedAsset(speech, phrase.song, controller.signal);
        await speech.finish();
        return;
      }
      this.history.push({ role: 'user', content: text });
      const spoken = await runChatReply({
        llm: this.robotState === 'story_time' && this.deps.storyLlm ? this.deps.storyLlm : this.deps.llm,
        speech,
        sink: this.deps.session,
        history: [...this.history],
        systemPrompt: this.deps.options.systemPrompt,
        kidMode: this.deps.kidMode?.() ?? false,
        signal: controller.signal,
        log: this.log,
        onFirstToken: () => {
          timing.modelFirstTokenAt = performance.now();
        },
      });
      if (spoken) this.history.push({ role: 'assistant', content: spoken });
      this.trimHistory();
    } catch (error) {
      if (!controller.signal.aborted) this.log.error({ err: error }, 'reply failed');
      speech.stopNow();
    } finally {
      timing.endAt = performance.now();
      timing.aborted = controller.signal.aborted;
      if (speech.ttsFirstChunkMs !== undefined) timing.ttsFirstChunkMs = speech.ttsFirstChunkMs;
      this.timings.delete(turnId);
      this.speeches.delete(turnId);
      this.untrack(turnId, controller);
      this.dispatch({ type: 'reply_done', turnId });
      this.emit('turn', timing);
    }
  }

  private async playNamedAsset(speech: SpeechOut, name: string, signal: AbortSignal): Promise<void> {
    const assets = this.deps.assets;
    if (!assets || signal.aborted) return;
    const asset = await assets.find(name);
    await speech.playPcm(await assets.decode(asset, 24_000), asset.name);
  }

  private async onWakeWord(): Promise<void> {
    if (this.robotState === 'idle') await this.setState('talk');
    else if (this.robotState === 'sleep') await this.setState('idle');
  }

  /** Asks the firmware to change state; the device's own state_changed event confirms it. */
  private async setState(target: RobotState): Promise<void> {
    if (target === this.robotState) return;
    if (!(await this.deps.session.offersTool(SET_STATE_TOOL))) return;
    try {
      await this.deps.session.mcp.callTool(SET_STATE_TOOL, { state: target }, { timeoutMs: 5000 });
      this.robotState = target;
    } catch (error) {
      this.log.warn({ err: (error as Error).message, target }, 'device did not take the state change');
    }
  }

  private track(turnId: number): AbortController {
    const controller = new AbortController();
    this.controllers.set(turnId, controller);
    return controller;
  }

  private untrack(turnId: number, controller: AbortController): void {
    if (this.controllers.get(turnId) === controller) this.controllers.delete(turnId);
  }

  private trimHistory(): void {
    const max = this.deps.options.historyMessages;
    if (this.history.length > max) this.history.splice(0, this.history.length - max);
  }

  private close(): void {
    this.dispatch({ type: 'abort', reason: 'device gone' });
    this.closed = true;
    this.recognitions.clear();
    for (const controller of this.controllers.values()) controller.abort();
    this.controllers.clear();
    this.pacer.close();
  }
}
