// The bridge's perception consumers (SPEC "Events" 2, DESIGN §3) on a hand-driven clock, and the bus they
// subscribe to. Times are epoch ms on a fake clock; local hours come from real local dates.
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ConsumerDeps,
  FaceGreeter,
  FaceIdentifiedRefresher,
  FaceLostAborter,
  PurrPlayer,
  SoundTurner,
  startConsumers,
  type VoiceActions,
  WakeWordTurner,
} from '../../src/bridge/perception/consumers.js';
import { DeviceStateStore } from '../../src/bridge/perception/device-state.js';
import { createPerception, PerceptionBus, type PerceptionEvent } from '../../src/bridge/perception/index.js';
import type { RobotState } from '../../src/robot/states.js';
import { ManualClock } from '../support/fake-clock.js';

interface Call {
  action: keyof VoiceActions;
  device: string;
  at: number;
  args: unknown[];
}

/** Records every voice call with the fake time it was made at. */
function recorder(clock: ManualClock) {
  const calls: Call[] = [];
  const record =
    (action: keyof VoiceActions) =>
    (device: string, ...args: unknown[]) => {
      calls.push({ action, device, at: clock.now(), args });
      return Promise.resolve({ ok: true });
    };
  const voice: VoiceActions = {
    inject: record('inject'),
    abort: record('abort'),
    setHeadAngles: record('setHeadAngles'),
    setFaceIdentified: record('setFaceIdentified'),
    playPurr: record('playPurr'),
  };
  const of = (action: keyof VoiceActions, device?: string) =>
    calls.filter((c) => c.action === action && (device === undefined || c.device === device));
  return { calls, voice, of };
}

/** A local time on a fixed winter day (no DST edge), as epoch ms. */
const local = (hour: number, minute = 0, second = 0) => new Date(2025, 0, 15, hour, minute, second).getTime();

function ev(name: string, device = 'dev-a', data: Record<string, unknown> = {}): PerceptionEvent {
  return { name, data, device_id: device, session_id: 's1', ts: 0 };
}

function setup(start = local(12)) {
  const clock = new ManualClock(start);
  const rec = recorder(clock);
  const states = new Map<string, RobotState>();
  const deps: ConsumerDeps = {
    clock,
    voice: rec.voice,
    devices: { robotState: (id) => states.get(id) },
  };
  return { clock, deps, states, ...rec };
}

describe('face greeter', () => {
  it('greets the first face, then not again until 30 s have passed (29.9 s no, 30 s yes)', () => {
    const { clock, deps, of } = setup();
    const greeter = new FaceGreeter(deps, { text: 'Hello!' });
    const t0 = clock.now();
    greeter.handle(ev('face_detected'));
    expect(of('inject')).toEqual([{ action: 'inject', device: 'dev-a', at: t0, args: ['Hello!'] }]);
    clock.advance(29_900);
    greeter.handle(ev('face_detected'));
    expect(of('inject')).toHaveLength(1);
    clock.advance(100);
    greeter.handle(ev('face_detected'));
    expect(of('inject').map((c) => c.at)).toEqual([t0, t0 + 30_000]);
    expect(greeter.lastGreetingAt('dev-a')).toBe(t0 + 30_000);
  });

  it('keeps the cooldown per device', () => {
    const { clock, deps, of } = setup();
    const greeter = new FaceGreeter(deps, { text: 'Hello!' });
    greeter.handle(ev('face_detected', 'dev-a'));
    clock.advance(1000);
    greeter.handle(ev('face_detected', 'dev-b'));
    greeter.handle(ev('face_detected', 'dev-a'));
    expect(of('inject').map((c) => c.device)).toEqual(['dev-a', 'dev-b']);
  });

  it.each([
    [5, 59, false],
    [6, 0, true],
    [20, 59, true],
    [21, 0, false],
  ])('at %i:%i local time greets: %s', (hour, minute, expected) => {
    const { deps, of } = setup(local(hour, minute));
    new FaceGreeter(deps, { text: 'Hello!', hourStart: 6, hourEnd: 21 }).handle(ev('face_detected'));
    expect(of('inject')).toHaveLength(expected ? 1 : 0);
  });

  it('a face outside the hours does not start the cooldown', () => {
    const { clock, deps, of } = setup(local(5, 59, 50));
    const greeter = new FaceGreeter(deps, { text: 'Hello!' });
    greeter.handle(ev('face_detected'));
    clock.advance(10_000); // 06:00:00
    greeter.handle(ev('face_detected'));
    expect(of('inject').map((c) => c.at)).toEqual([local(6)]);
  });

  it('is disabled by an empty (or blank) text', () => {
    const { deps, of } = setup();
    new FaceGreeter(deps, { text: '' }).handle(ev('face_detected'));
    new FaceGreeter(deps, { text: '   ' }).handle(ev('face_detected'));
    expect(of('inject')).toHaveLength(0);
  });

  it.each(['security', 'sleep', 'story_time', 'dance'] as const)('never greets in %s', (state) => {
    const { deps, states, of } = setup();
    states.set('dev-a', state);
    const greeter = new FaceGreeter(deps, { text: 'Hello!' });
    greeter.handle(ev('face_detected'));
    expect(of('inject')).toHaveLength(0);
    // and the suppressed face did not use up the cooldown
    states.set('dev-a', 'idle');
    greeter.handle(ev('face_detected'));
    expect(of('inject')).toHaveLength(1);
  });

  it('reacts to face_detected only', () => {
    const { deps, of } = setup();
    const greeter = new FaceGreeter(deps, { text: 'Hello!' });
    for (const name of ['face_recognized', 'face_lost', 'sound_event', 'head_pet_started']) {
      greeter.handle(ev(name));
    }
    expect(of('inject')).toHaveLength(0);
  });
});

describe('sound turner', () => {
  it('turns toward left, right and centre', () => {
    const { clock, deps, of } = setup();
    const turner = new SoundTurner(deps, { minIntervalMs: 1000 });
    for (const direction of ['left', 'right', 'center']) {
      turner.handle(ev('sound_event', 'dev-a', { direction, balance: 0.5, energy: 0.8 }));
      clock.advance(1000);
    }
    expect(of('setHeadAngles').map((c) => c.args)).toEqual([
      [-45, 0],
      [45, 0],
      [0, 0],
    ]);
  });

  it('ignores sounds below the energy threshold, and unknown directions', () => {
    const { clock, deps, of } = setup();
    const turner = new SoundTurner(deps, { minEnergy: 0.3, minIntervalMs: 0 });
    turner.handle(ev('sound_event', 'dev-a', { direction: 'left', balance: -1, energy: 0.29 }));
    turner.handle(ev('sound_event', 'dev-a', { direction: 'up', balance: 0, energy: 0.9 }));
    turner.handle(ev('sound_event', 'dev-a', { direction: 'left', balance: -1 }));
    expect(of('setHeadAngles')).toHaveLength(0);
    clock.advance(1);
    turner.handle(ev('sound_event', 'dev-a', { direction: 'left', balance: -1, energy: 0.3 }));
    expect(of('setHeadAngles').map((c) => c.args)).toEqual([[-45, 0]]);
  });

  it('is rate-limited per device, and weak sounds do not use up the budget', () => {
    const { clock, deps, of } = setup();
    const turner = new SoundTurner(deps, { minIntervalMs: 1500 });
    const loud = (direction: string, device = 'dev-a') =>
      turner.handle(ev('sound_event', device, { direction, balance: 0, energy: 0.9 }));
    loud('left');
    clock.advance(1499);
    loud('right');
    loud('right', 'dev-b');
    expect(of('setHeadAngles', 'dev-a')).toHaveLength(1);
    expect(of('setHeadAngles', 'dev-b')).toHaveLength(1);
    clock.advance(1);
    loud('right');
    expect(of('setHeadAngles', 'dev-a').map((c) => c.args[0])).toEqual([-45, 45]);
  });

  it('can scale the yaw by balance', () => {
    const { deps, of } = setup();
    new SoundTurner(deps, { scaleByBalance: true }).handle(
      ev('sound_event', 'dev-a', { direction: 'right', balance: 0.5, energy: 1 }),
    );
    expect(of('setHeadAngles')[0]!.args).toEqual([23, 0]);
  });

  it('does not turn in sleep', () => {
    const { deps, states, of } = setup();
    states.set('dev-a', 'sleep');
    new SoundTurner(deps).handle(ev('sound_event', 'dev-a', { direction: 'left', balance: -1, energy: 1 }));
    expect(of('setHeadAngles')).toHaveLength(0);
  });
});

describe('face-lost aborter', () => {
  /** A greeter at t0 for dev-a, and an aborter reading it. */
  function withGreeting() {
    const s = setup();
    const greeter = new FaceGreeter(s.deps, { text: 'Hello!' });
    const aborter = new FaceLostAborter(s.deps, greeter);
    const both = (e: PerceptionEvent) => {
      greeter.handle(e);
      aborter.handle(e);
    };
    both(ev('face_detected'));
    expect(s.of('inject')).toHaveLength(1);
    return { ...s, greeter, aborter, both };
  }

  it('aborts when the 4 s grace expires (3999 ms no, 4000 ms yes)', () => {
    const { clock, both, of } = withGreeting();
    const t0 = clock.now();
    clock.advance(1000);
    both(ev('face_lost'));
    clock.advance(3999);
    expect(of('abort')).toHaveLength(0);
    clock.advance(1);
    expect(of('abort')).toEqual([{ action: 'abort', device: 'dev-a', at: t0 + 5000, args: [] }]);
    expect(clock.pendingTimers).toBe(0);
  });

  it('is cancelled when the face comes back within the grace', () => {
    const { clock, both, of } = withGreeting();
    both(ev('face_lost'));
    clock.advance(3999);
    both(ev('face_detected'));
    clock.advance(10_000);
    expect(of('abort')).toHaveLength(0);
    expect(clock.pendingTimers).toBe(0);
  });

  it('aborts only within 12 s of a greeting (checked when the grace expires)', () => {
    const inside = withGreeting();
    inside.clock.advance(8000);
    inside.both(ev('face_lost'));
    inside.clock.advance(4000); // expires 12 000 ms after the greeting
    expect(inside.of('abort')).toHaveLength(1);

    const outside = withGreeting();
    outside.clock.advance(8001);
    outside.both(ev('face_lost'));
    outside.clock.advance(4000); // 12 001 ms
    expect(outside.of('abort')).toHaveLength(0);
  });

  it('never aborts without a greeting, nor twice for one greeting', () => {
    const { clock, deps, of } = setup();
    const greeter = new FaceGreeter(deps, { text: '' }); // disabled: no greetings
    const aborter = new FaceLostAborter(deps, greeter);
    aborter.handle(ev('face_lost'));
    clock.advance(5000);
    expect(of('abort')).toHaveLength(0);

    const g = withGreeting();
    g.both(ev('face_lost'));
    g.clock.advance(4000);
    g.both(ev('face_detected')); // within the 30 s cooldown: no new greeting
    g.both(ev('face_lost'));
    g.clock.advance(4000);
    expect(g.of('inject')).toHaveLength(1);
    expect(g.of('abort')).toHaveLength(1);
  });

  it('stop() clears a running grace', () => {
    const { clock, aborter, both, of } = withGreeting();
    both(ev('face_lost'));
    expect(clock.pendingTimers).toBe(1);
    aborter.stop();
    expect(clock.pendingTimers).toBe(0);
    clock.advance(5000);
    expect(of('abort')).toHaveLength(0);
  });
});

describe('wake-word turner', () => {
  it('turns toward a sound heard less than 3 s before the wake word', () => {
    const { clock, deps, of } = setup();
    const turner = new WakeWordTurner(deps);
    turner.handle(ev('sound_event', 'dev-a', { direction: 'right', balance: 0.7, energy: 0.05 }));
    turner.handle(ev('sound_event', 'dev-b', { direction: 'left', balance: -0.7, energy: 0.5 }));
    clock.advance(2999);
    turner.handle(ev('wake_word_detected', 'dev-a', { text: 'hey pip' }));
    expect(of('setHeadAngles').map((c) => [c.device, ...c.args])).toEqual([['dev-a', 45, 0]]);
  });

  it('centres when the last sound is old, or there was none', () => {
    const { clock, deps, of } = setup();
    const turner = new WakeWordTurner(deps);
    turner.handle(ev('sound_event', 'dev-a', { direction: 'left', balance: -1, energy: 0.9 }));
    clock.advance(3000);
    turner.handle(ev('wake_word_detected', 'dev-a', { text: 'hey pip' }));
    turner.handle(ev('wake_word_detected', 'dev-c', { text: 'hey pip' }));
    expect(of('setHeadAngles').map((c) => [c.device, ...c.args])).toEqual([
      ['dev-a', 0, 0],
      ['dev-c', 0, 0],
    ]);
  });
});

describe('face-identified refresher', () => {
  it('refreshes at once and then every 3 s, and stops once the identity is older than 10 s', () => {
    const { clock, deps, of } = setup();
    const refresher = new FaceIdentifiedRefresher(deps);
    const t0 = clock.now();
    refresher.handle(ev('face_recognized', 'dev-a', { name: 'Ana', confidence: 0.9 }));
    clock.advance(60_000);
    expect(of('setFaceIdentified').map((c) => c.at - t0)).toEqual([0, 3000, 6000, 9000]);
    expect(refresher.isRefreshing('dev-a')).toBe(false);
    expect(clock.pendingTimers).toBe(0);
  });

  it('never leaves a gap of 4 s or more while the identity stays fresh', () => {
    const { clock, deps, of } = setup();
    const refresher = new FaceIdentifiedRefresher(deps);
    const t0 = clock.now();
    // Recognised again every 7 s for a minute; between recognitions the firmware's 4 s timer must not lapse.
    for (let t = 0; t <= 56_000; t += 7000) {
      clock.advance(t - (clock.now() - t0));
      refresher.handle(ev('face_recognized', 'dev-a', { name: 'Ana', confidence: 0.9 }));
    }
    const freshUntil = t0 + 56_000 + 10_000;
    clock.advance(30_000);
    const times = of('setFaceIdentified').map((c) => c.at);
    expect(times[0]).toBe(t0);
    const pipExpires = [...times.slice(1), freshUntil].map((t, i) => t - times[i]!);
    expect(Math.max(...pipExpires)).toBeLessThan(4000);
    expect(times.at(-1)!).toBeLessThanOrEqual(freshUntil);
    expect(clock.pendingTimers).toBe(0);
  });

  it('stops after face_lost plus the 4 s grace; keeps going if the face returns', () => {
    const { clock, deps, of } = setup();
    const refresher = new FaceIdentifiedRefresher(deps, { freshMs: 60_000 });
    const t0 = clock.now();
    refresher.handle(ev('face_recognized', 'dev-a', { name: 'Ana', confidence: 0.9 }));
    refresher.handle(ev('face_recognized', 'dev-b', { name: 'Ben', confidence: 0.8 }));
    clock.advance(1000);
    refresher.handle(ev('face_lost', 'dev-a'));
    refresher.handle(ev('face_lost', 'dev-b'));
    clock.advance(2000);
    refresher.handle(ev('face_detected', 'dev-b')); // back within the grace
    clock.advance(20_000);
    // dev-a: refreshed at 0 and 3 s (inside the grace), ended at 5 s
    expect(of('setFaceIdentified', 'dev-a').map((c) => c.at - t0)).toEqual([0, 3000]);
    expect(refresher.isRefreshing('dev-a')).toBe(false);
    expect(refresher.isRefreshing('dev-b')).toBe(true);
    expect(of('setFaceIdentified', 'dev-b').length).toBeGreaterThanOrEqual(8);
    refresher.stop();
    expect(clock.pendingTimers).toBe(0);
  });
});

describe('purr player', () => {
  it('purrs on head_pet_started with a 20 s cooldown per device', () => {
    const { clock, deps, of } = setup();
    const purr = new PurrPlayer(deps);
    const t0 = clock.now();
    purr.handle(ev('head_pet_started', 'dev-a'));
    purr.handle(ev('head_pet_ended', 'dev-a', { duration_ms: 2500 }));
    clock.advance(19_999);
    purr.handle(ev('head_pet_started', 'dev-b'));
    purr.handle(ev('head_pet_started', 'dev-a')); // dev-b's purr does not reset dev-a's cooldown
    clock.advance(1);
    purr.handle(ev('head_pet_started', 'dev-a'));
    expect(of('playPurr').map((c) => [c.device, c.at - t0])).toEqual([
      ['dev-a', 0],
      ['dev-b', 19_999],
      ['dev-a', 20_000],
    ]);
    expect(of('inject')).toHaveLength(0); // an asset, never text for the model
  });
});

describe('perception bus', () => {
  const buses: PerceptionBus[] = [];
  afterEach(() => {
    for (const bus of buses.splice(0)) bus.close();
  });

  it('a throwing and a slow subscriber do not hold up the publisher or a fast one', async () => {
    const bus = new PerceptionBus();
    buses.push(bus);
    const fast: string[] = [];
    let releaseSlow!: () => void;
    const slowGate = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const slow: string[] = [];
    bus.subscribe(() => {
      throw new Error('boom');
    });
    bus.subscribe(async (e) => {
      await slowGate;
      slow.push(e.name);
    });
    bus.subscribe((e) => {
      fast.push(e.name);
    });
    for (let i = 0; i < 5; i++) expect(() => bus.publish(ev(`e${i}`))).not.toThrow();
    expect(fast).toEqual([]); // never called inside publish
    for (let i = 0; i < 20 && fast.length < 5; i++) await new Promise((r) => setImmediate(r));
    expect(fast).toEqual(['e0', 'e1', 'e2', 'e3', 'e4']);
    expect(slow).toEqual([]);
    const [throwing, slowStats] = bus.stats().subscribers;
    expect(throwing!.failed).toBe(5);
    expect(slowStats!.queued).toBe(4); // one in its handler, four waiting
    releaseSlow();
    await bus.idle();
    expect(slow).toEqual(['e0', 'e1', 'e2', 'e3', 'e4']);
  });

  it('on overflow drops the oldest events of that subscriber only, and counts them', async () => {
    const bus = new PerceptionBus();
    buses.push(bus);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slow: string[] = [];
    const fast: string[] = [];
    bus.subscribe(
      async (e) => {
        await gate;
        slow.push(e.name);
      },
      { maxQueue: 3 },
    );
    bus.subscribe((e) => {
      fast.push(e.name);
    });
    bus.publish(ev('e0'));
    await new Promise((r) => setImmediate(r)); // e0 is now inside the slow handler
    for (let i = 1; i <= 6; i++) bus.publish(ev(`e${i}`));
    release();
    await bus.idle();
    expect(slow).toEqual(['e0', 'e4', 'e5', 'e6']);
    expect(fast).toEqual(['e0', 'e1', 'e2', 'e3', 'e4', 'e5', 'e6']);
    const stats = bus.stats();
    expect(stats.dropped).toBe(3);
    expect(stats.subscribers.map((s) => s.dropped)).toEqual([3, 0]);
  });

  it('unsubscribe stops delivery', async () => {
    const bus = new PerceptionBus();
    buses.push(bus);
    const seen: string[] = [];
    const unsubscribe = bus.subscribe((e) => {
      seen.push(e.name);
    });
    bus.publish(ev('a'));
    await bus.idle();
    unsubscribe();
    bus.publish(ev('b'));
    await bus.idle();
    expect(seen).toEqual(['a']);
    expect(bus.subscriberCount).toBe(0);
  });
});

describe('wired together', () => {
  it('state_changed reaches the device state before consumers read it; stop() leaves no timers', async () => {
    const clock = new ManualClock(local(12));
    const rec = recorder(clock);
    const perception = createPerception({ voice: rec.voice, clock, consumers: { greeter: { text: 'Hi!' } } });
    perception.ingest(ev('state_changed', 'dev-a', { from: 'idle', to: 'security', reason: 'voice' }));
    perception.ingest(ev('face_detected', 'dev-a'));
    perception.ingest(ev('face_recognized', 'dev-a', { name: 'Ana', confidence: 0.93 }));
    await perception.bus.idle();
    expect(rec.of('inject')).toHaveLength(0); // security: no proactive greeting
    expect(rec.of('setFaceIdentified')).toHaveLength(1);
    const snapshot = perception.devices.get('dev-a')!;
    expect(snapshot.state).toBe('security');
    expect(snapshot.face.present).toBe(true);
    expect(snapshot.identified).toMatchObject({ name: 'Ana', confidence: 0.93 });

    perception.ingest(ev('state_changed', 'dev-b', { from: 'sleep', to: 'idle', reason: 'face' }));
    perception.ingest(ev('face_detected', 'dev-b'));
    perception.ingest(ev('face_lost', 'dev-b'));
    await perception.bus.idle();
    expect(rec.of('inject').map((c) => [c.device, c.args[0]])).toEqual([['dev-b', 'Hi!']]);
    expect(clock.pendingTimers).toBeGreaterThan(0);
    perception.stop();
    expect(clock.pendingTimers).toBe(0);
  });

  it('startConsumers subscribes all six and stop() unsubscribes them', () => {
    const clock = new ManualClock(local(12));
    const bus = new PerceptionBus();
    const consumers = startConsumers(bus, {
      clock,
      voice: recorder(clock).voice,
      devices: new DeviceStateStore(),
    });
    expect(bus.subscriberCount).toBe(6);
    consumers.stop();
    consumers.stop();
    expect(bus.subscriberCount).toBe(0);
  });
});
