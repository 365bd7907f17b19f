// The six perception consumers of SPEC "Events" 2, each a small state machine over (event, clock):
//
//   face greeter          face_detected → inject FACE_GREET_TEXT (cooldown per device, greeting hours, states)
//   sound turner          sound_event → set-head-angles toward `direction` (energy threshold, rate limit)
//   face-lost aborter     face_lost → after a 4 s grace (cancelled by the face coming back) abort the
//                         in-flight turn, only within 12 s of a greeting (DESIGN §3)
//   wake-word turner      wake_word_detected → turn toward the device's last sound if recent, else centre
//   face-identified       face_recognized → set-face-identified about every 3 s while the identity is fresh,
//   refresher             so the firmware's 4 s timeout does not expire
//   purr player           head_pet_started → play the purr asset (per-device cooldown; an asset, not text to
//                         the model, so the kid-mode sandwich is bypassed by construction)
//
// `handle(event)` is synchronous: it decides at once and fires the voice call without awaiting it (a failed
// call is logged, never thrown), so a slow voice server never backs up the bus. Every consumer's `stop()`
import type { PerceptionBus } from './bus.js';
import type { ConsumerDeps } from './consumer-base.js';
import {
  FaceGreeter,
  type FaceGreeterOptions,
  FaceIdentifiedRefresher,
  type FaceIdentifiedRefresherOptions,
  FaceLostAborter,
  type FaceLostAborterOptions,
} from './face-consumers.js';
import {
  PurrPlayer,
  type PurrPlayerOptions,
  SoundTurner,
  type SoundTurnerOptions,
  WakeWordTurner,
  type WakeWordTurnerOptions,
} from './head-consumers.js';

export * from './consumer-base.js';
export * from './face-consumers.js';
export * from './head-consumers.js';

// ---------------------------------------------------------------------------------------------------------
// All six

export interface ConsumersOptions {
  greeter?: FaceGreeterOptions;
  soundTurner?: SoundTurnerOptions;
  aborter?: FaceLostAborterOptions;
  wakeWordTurner?: WakeWordTurnerOptions;
  refresher?: FaceIdentifiedRefresherOptions;
  purr?: PurrPlayerOptions;
  /** Queue bound of each consumer's bus subscription (default: the bus default). */
  maxQueue?: number;
}

export interface Consumers {
  greeter: FaceGreeter;
  soundTurner: SoundTurner;
  aborter: FaceLostAborter;
  wakeWordTurner: WakeWordTurner;
  refresher: FaceIdentifiedRefresher;
  purr: PurrPlayer;
  /** Unsubscribes all six and clears their timers. Idempotent. */
  stop(): void;
}

/** Builds the six consumers and subscribes each to the bus with its own queue. */
export function startConsumers(
  bus: PerceptionBus,
  deps: ConsumerDeps,
  options: ConsumersOptions = {},
): Consumers {
  const greeter = new FaceGreeter(deps, options.greeter);
  const consumers = {
    greeter,
    soundTurner: new SoundTurner(deps, options.soundTurner),
    aborter: new FaceLostAborter(deps, greeter, options.aborter),
    wakeWordTurner: new WakeWordTurner(deps, options.wakeWordTurner),
    refresher: new FaceIdentifiedRefresher(deps, options.refresher),
    purr: new PurrPlayer(deps, options.purr),
  };
  const subscription = options.maxQueue !== undefined ? { maxQueue: options.maxQueue } : {};
  const stops = Object.values(consumers).map((consumer) => consumer.subscribe(bus, subscription));
  return {
    ...consumers,
    stop() {
      for (const stop of stops.splice(0)) stop();
    },
  };
}
