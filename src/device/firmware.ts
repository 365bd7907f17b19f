// The virtual robot's firmware behaviour: the state machine of src/robot driven by what the robot senses,
// the behaviours each state has (head pose, torque, camera/mic, scan, dance), the perception events the real
// firmware emits, and the LED ring repainted every 200 ms. Time comes from a Clock so scenarios can run on a
// fake one.
import { type Clock, monotonicClock } from '../audio/pacer.js';
import { REPAINT_MS, type Rgb, renderRing } from '../robot/led.js';
import {
  initialRobotState,
  type RobotEffect,
  type RobotEvent,
  type RobotMachineState,
  robotStep,
  STATE_BEHAVIOUR,
} from '../robot/machine.js';
import type { RobotState } from '../robot/states.js';
import type { DeviceModel } from './tools.js';

export interface FirmwareOptions {
  model: DeviceModel;
  /** Sends a perception event frame (dropped by the caller when the channel is closed). */
  emit: (name: string, data: Record<string, unknown>) => void;
  /** Security mode's periodic audio capture: send this many ms of what the microphone hears. */
  captureAudio?: (ms: number) => void;
  /** Between audio captures in security (default 5 s). */
  captureIntervalMs?: number;
  /** Opens the audio channel's listening (a head-pet hold). */
  openListening?: () => void;
  clock?: Clock;
  /** The firmware reports a face lost this long after the last sighting (DESIGN §3). */
  faceLostEmitMs?: number;
  /** talk → idle this long after face_lost (FACE_LOST_GRACE_MS). */
  faceLostGraceMs?: number;
  /** A head pet held this long opens listening (SPEC: 2 s or more). */
  headPetHoldMs?: number;
  choreographyMs?: number;
  /** Sleep releases servo torque at the latest after this long (SPEC: 3000 ms). */
  torqueReleaseMs?: number;
}

export class Firmware {
  private machine: RobotMachineState;
  private readonly clockSource: Clock;
  private readonly timers = new Map<string, unknown>();
  private painted: Rgb[];
  private faceLostAt: number | undefined;
  private headPetStartedAt: number | undefined;
  private danceSong: string | undefined;
  listening = false;
  torque = true;
  readonly stats = { repaints: 0, transitions: 0 };

  constructor(private readonly options: FirmwareOptions) {
    this.clockSource = options.clock ?? monotonicClock;
    this.machine = initialRobotState(this.clockSource.now());
    options.model.state = 'idle';
    this.painted = this.render();
  }

  get state(): RobotState {
    return this.machine.current;
  }

  /** The firmware's clock (scenarios schedule on it). */
  get clock(): Clock {
    return this.clockSource;
  }

  now(): number {
    return this.clockSource.now();
  }

  get facePresent(): boolean {
    return this.machine.facePresent;
  }

  /** Starts the 200 ms repaint (kReassertIntervalMs). */
  start(): void {
    const repaint = () => {
      this.painted = this.render();
      this.stats.repaints++;
      this.schedule('repaint', REPAINT_MS, repaint);
    };
    repaint();
  }

  stop(): void {
    for (const handle of this.timers.values()) this.clockSource.clearTimer(handle);
    this.timers.clear();
  }

  /** The 12 pixels as the ring shows them now (an LED tool write lasts until the next repaint). */
  ring(): Rgb[] {
    return this.painted.map((rgb) => [...rgb] as Rgb);
  }

  /** An LED tool wrote the left ring: visible at once, overwritten by the next repaint. */
  ledWritten(): void {
    for (let i = 0; i < 6; i++) this.painted[i] = [...this.options.model.leftRing[i]!] as Rgb;
  }

  // --- what the robot senses -----------------------------------------------------------------------

  faceAppears(name?: string): void {
    this.cancel('face_lost_emit');
    if (!this.machine.facePresent) {
      this.options.emit('face_detected', {});
      this.dispatch({ type: 'face_detected', now: this.clockSource.now() });
    }
    if (name) {
      this.schedule('face_recognized', 300, () => {
        if (this.machine.facePresent) this.options.emit('face_recognized', { name, confidence: 0.92 });
      });
    }
  }

  /** The face left the frame; the firmware reports it only after its loss grace. */
  faceLeaves(): void {
    if (!this.machine.facePresent) return;
    this.schedule('face_lost_emit', this.options.faceLostEmitMs ?? 800, () => {
      this.faceLostAt = this.clockSource.now();
      this.options.emit('face_lost', {});
      this.dispatch({ type: 'face_lost', now: this.clockSource.now() });
    });
  }

  hearSound(direction: 'left' | 'right' | 'center', balance: number, energy: number): void {
    if (!this.options.model.micEnabled) return;
    this.options.emit('sound_event', { direction, balance, energy });
  }

  headPetStart(): void {
    this.headPetStartedAt = this.clockSource.now();
    this.options.emit('head_pet_started', {});
    this.dispatch({ type: 'head_pet', now: this.clockSource.now() });
    this.schedule('head_pet_hold', this.options.headPetHoldMs ?? 2000, () => {
      this.dispatch({ type: 'voice_listening_start', now: this.clockSource.now(), source: 'head_pet_hold' });
      this.options.openListening?.();
    });
  }

  headPetEnd(): void {
    if (this.headPetStartedAt === undefined) return; // no pet in progress
    this.cancel('head_pet_hold');
    const since = this.headPetStartedAt ?? this.clockSource.now();
    this.headPetStartedAt = undefined;
    this.options.emit('head_pet_ended', { duration_ms: Math.round(this.clockSource.now() - since) });
  }

  // --- what the audio channel does -----------------------------------------------------------------

  /** The mic opened (wake word, inject-text) or closed. */
  setListening(listening: boolean, source: 'wake_word' | 'inject_text' = 'wake_word'): void {
    if (listening === this.listening) return;
    this.listening = listening;
    this.options.emit('chat_status', { status: listening ? 'listening' : 'idle' });
    if (listening) this.dispatch({ type: 'voice_listening_start', now: this.clockSource.now(), source });
  }

  setSpeaking(speaking: boolean): void {
    if (speaking) this.listening = false;
    this.options.emit('chat_status', { status: speaking ? 'speaking' : 'idle' });
  }

  /** self.robot.set_state (the server: admin route, voice phrases). */
  setState(target: RobotState): void {
    this.dispatch({ type: 'set_state', now: this.clockSource.now(), target });
  }

  // --- the machine ---------------------------------------------------------------------------------

  private dispatch(event: RobotEvent): void {
    const { state, effects } = robotStep(this.machine, event, {
      faceLostGraceMs: this.options.faceLostGraceMs ?? 8000,
    });
    this.machine = state;
    for (const effect of effects) this.apply(effect);
  }

  private apply(effect: RobotEffect): void {
    const model = this.options.model;
    switch (effect.type) {
      case 'state_changed':
        this.stats.transitions++;
        model.state = effect.to;
        this.options.emit('state_changed', { from: effect.from, to: effect.to, reason: effect.reason });
        this.painted = this.render();
        break;
      case 'start_face_lost_timer':
        this.schedule('face_lost_grace', effect.ms, () =>
          this.dispatch({
            type: 'face_lost_grace_expired',
            now: this.clockSource.now(),
            startedAt: effect.startedAt,
          }),
        );
        break;
      case 'cancel_face_lost_timer':
        this.cancel('face_lost_grace');
        break;
      case 'exit':
        for (const name of ['torque', 'scan', 'choreography', 'capture']) this.cancel(name);
        this.torque = true;
        if (effect.state === 'dance')
          this.options.emit('dance_ended', this.danceSong ? { song: this.danceSong } : {});
        break;
      case 'enter':
        this.enter(effect.state, effect.song);
        break;
    }
  }

  private enter(state: RobotState, song?: string): void {
    const model = this.options.model;
    const behaviour = STATE_BEHAVIOUR[state];
    model.cameraEnabled = behaviour.cameraEnabled;
    model.micEnabled = behaviour.micEnabled;
    if (behaviour.head === 'face_down_centred') {
      model.head = { yaw: 0, pitch: -45 };
      // Released once the head is down; the fallback bounds it (SPEC: 3000 ms).
      const releaseMs = Math.min(
        this.options.torqueReleaseMs ?? 1000,
        behaviour.torqueReleaseFallbackMs ?? 3000,
      );
      this.schedule('torque', releaseMs, () => {
        this.torque = false;
      });
    }
    if (behaviour.head === 'wide_scan') this.scan(1);
    if (behaviour.periodicCapture) this.capture();
    if (behaviour.choreography) {
      this.danceSong = song;
      this.options.emit('dance_started', song ? { song } : {});
      this.dance(0);
    }
  }

  /** Security: record a few seconds of sound now and then. */
  private capture(): void {
    this.options.captureAudio?.(3000);
    this.schedule('capture', this.options.captureIntervalMs ?? 5000, () => this.capture());
  }

  /** Security: sweep the head side to side. */
  private scan(direction: 1 | -1): void {
    this.options.model.head = { yaw: 60 * direction, pitch: 0 };
    this.schedule('scan', 1500, () => this.scan(direction === 1 ? -1 : 1));
  }

  /** Dance: a short choreography of head moves, then back to idle. */
  private dance(step: number): void {
    const moves: Array<{ yaw: number; pitch: number }> = [
      { yaw: -30, pitch: 10 },
      { yaw: 30, pitch: 10 },
      { yaw: -30, pitch: -10 },
      { yaw: 30, pitch: -10 },
    ];
    const total = this.options.choreographyMs ?? 6000;
    const stepMs = 500;
    if (step * stepMs >= total) {
      this.options.model.head = { yaw: 0, pitch: 0 };
      this.dispatch({ type: 'choreography_ended', now: this.clockSource.now() });
      return;
    }
    this.options.model.head = moves[step % moves.length]!;
    this.schedule('choreography', stepMs, () => this.dance(step + 1));
  }

  private render(): Rgb[] {
    const model = this.options.model;
    const ring = renderRing({
      state: this.machine.current,
      stateSince: this.machine.since,
      toggles: model.toggles,
      facePresent: this.machine.facePresent,
      ...(this.faceLostAt !== undefined ? { faceLostAt: this.faceLostAt } : {}),
      ...(model.faceIdentifiedAt !== null ? { faceIdentifiedAt: model.faceIdentifiedAt } : {}),
      listening: this.listening,
      now: this.clockSource.now(),
    });
    return ring;
  }

  private schedule(name: string, ms: number, callback: () => void): void {
    this.cancel(name);
    const handle = this.clockSource.setTimer(() => {
      this.timers.delete(name);
      callback();
    }, ms);
    (handle as { unref?: () => void })?.unref?.();
    this.timers.set(name, handle);
  }

  private cancel(name: string): void {
    const handle = this.timers.get(name);
    if (handle !== undefined) this.clockSource.clearTimer(handle);
    this.timers.delete(name);
  }
}
