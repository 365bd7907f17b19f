// The turn pipeline: what happens between "the user said X" and the robot's last audio frame.
//
//   llm {emotion: thinking}            before the model call, so the face shows thinking
//   model stream ──► segmenter ──► queue ──► speech: emotion frame (leading emoji), tts start,
//                                             sentence_start + paced Opus per segment, tts stop
//
// The model is read by its own task into a queue, so a slow listener never stalls the model stream,
// and segment n+1 is synthesised while segment n plays. One AbortSignal cancels all of it.

import type { LlmProvider } from '../providers/llm/types.js';
import type { ChatMessage } from '../providers/openai-client.js';
import { AsyncQueue } from '../util/async-queue.js';
import type { Logger } from '../util/log.js';
import { Segmenter } from './segmenter.js';
import type { SpeechOut, SpeechSink } from './speech-out.js';

/** Spoken when the model fails before saying anything: honest, short, and in the 😐 face. */
export const MODEL_FAILURE_REPLY = '😐 Sorry, I cannot think right now. Please try again in a moment.';

export interface ChatReplyInput {
  llm: LlmProvider;
  speech: SpeechOut;
  sink: SpeechSink & { deviceId: string };
  history: ChatMessage[];
  systemPrompt: string;
  kidMode: boolean;
  signal: AbortSignal;
  log: Logger;
  /** Called once, when the model's first text arrives. */
  onFirstToken?: () => void;
}

/** Runs one chat reply to the end (or until aborted). Returns the text that was spoken. */
export async function runChatReply(input: ChatReplyInput): Promise<string> {
  const { llm, speech, sink, signal, log } = input;
  // Clients show `text` as the face (SPEC lists it on every llm frame); without it they log "undefined".
  sink.sendJson({ type: 'llm', emotion: 'thinking', text: '🤔', session_id: sink.sessionId });

  // The model gets its own signal: when speech fails or the reply ends early, its request must close too,
  // not run on to its own deadline with nobody listening.
  const modelStop = new AbortController();
  const modelSignal = AbortSignal.any([signal, modelStop.signal]);
  // `lead` marks text that starts a part of the reply: its leading emoji sets the face. A tool filler is one
  // part and the answer after it another, so each shows its own emotion.
  const segments = new AsyncQueue<{ text: string; lead: boolean }>();
  let segmenter = new Segmenter();
  let lead = true;
  const push = (text: string) => {
    segments.push({ text, lead });
    lead = false;
  };
  const readModel = async () => {
    const stream = llm.reply({
      sessionId: sink.sessionId,
      deviceId: sink.deviceId,
      history: input.history,
      systemPrompt: input.systemPrompt,
      kidMode: input.kidMode,
      signal: modelSignal,
      say: (filler) => {
        for (const segment of segmenter.flush()) push(segment);
        segments.push({ text: filler, lead: true });
        segmenter = new Segmenter();
        lead = true;
      },
    });
    let first = true;
    for await (const delta of stream) {
      if (first) {
        first = false;
        input.onFirstToken?.();
      }
      for (const segment of segmenter.push(delta)) push(segment);
    }
    for (const segment of segmenter.flush()) push(segment);
    segments.end();
  };
  readModel().catch((error) => segments.fail(error));

  let failure: { stage: 'model' | 'speech'; error: unknown } | undefined;
  try {
    for await (const segment of segments) {
      try {
        await speech.speak(segment.text, segment.lead);
      } catch (error) {
        failure = { stage: 'speech', error };
        break;
      }
    }
  } catch (error) {
    failure = { stage: 'model', error };
  } finally {
    modelStop.abort();
  }
  if (signal.aborted) return speech.spoken.join(' ');
  if (failure?.stage === 'speech') {
    // Speech is what failed, so an apology would fail the same way: end the turn and say why in the log.
    log.warn(
      { err: reason(failure.error), provider: speech.ttsName },
      'speech synthesis failed during a turn; reply cut short',
    );
  } else if (failure || speech.spoken.length === 0) {
    log.warn(
      { err: failure ? reason(failure.error) : 'the model returned no text', provider: llm.name },
      'model failed during a turn',
    );
    if (speech.spoken.length === 0) await speakApology(speech, log);
  }
  // A reply that never reached audio still ends with `tts stop`, so the device leaves its thinking face.
  if (speech.hasStarted) await speech.finish();
  else speech.stopNow();
  return speech.spoken.join(' ');
}

/** The apology goes through the same speech engine; if that fails too, the turn still ends. */
async function speakApology(speech: SpeechOut, log: Logger): Promise<void> {
  try {
    await speech.speak(MODEL_FAILURE_REPLY);
  } catch (error) {
    log.warn({ err: reason(error), provider: speech.ttsName }, 'speech synthesis failed for the apology');
  }
}

function reason(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Speaks fixed text (acknowledgements, inject-text) through the same segmenting and TTS path. */
export async function speakText(speech: SpeechOut, text: string): Promise<void> {
  const segmenter = new Segmenter();
  for (const segment of [...segmenter.push(text), ...segmenter.flush()]) await speech.speak(segment);
}
