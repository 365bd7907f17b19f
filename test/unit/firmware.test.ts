// The virtual robot's firmware behaviour (SPEC "Robot state and toggles", "LED ring contract", "States and
// transitions", "Limits"): the Firmware class on a manual clock, with every perception event it emits
// recorded. Expected colours and timings are written out here from SPEC, not read from src/robot/led.ts.
import { describe, expect, it, vi } from 'vitest';
import { Firmware, type FirmwareOptions } from '../../src/device/firmware.js';
import type { DeviceMcpServer } from '../../src/device/mcp-server.js';
import { VirtualRobot } from '../../src/device/robot.js';
import { buildTools, type DeviceModel, initialModel } from '../../src/device/tools.js';
import type { RobotState } from '../../src/robot/states.js';
import { ManualClock } from '../support/fake-clock.js';

type Rgb = [number, number, number];

// SPEC "LED ring contract".
const OFF: Rgb = [0, 0, 0];
const TALK: Rgb = [0, 60, 0];
const STORY: Rgb = [100, 40, 0];
const SECURITY_ON: Rgb = [80, 80, 80];
const SLEEP: Rgb = [0, 0, 16];
const FACE_YELLOW: Rgb = [168, 140, 0];
const FACE_GREEN: Rgb = [0, 140, 30];
const KID: Rgb = [220, 80, 80];
const SMART: Rgb = [168, 80, 0];
const REPAINT_MS = 200;
const SECURITY_HALF_MS = 500;

interface Recorded {
  name: string;
  data: Record<string, unknown>;
  at: number;
}

/** A non-zero origin, so nothing passes by assuming the clock starts at 0. */
const T0 = 100_000;

function setup(
  options: Partial<Omit<FirmwareOptions, 'emit' | 'clock' | 'model'>> = {},
  model = initialModel(),
) {
  const clock = new ManualClock(T0);
  const events: Recorded[] = [];
  const openListening = vi.fn();
  const firmware = new Firmware({
    model,
    clock,
    emit: (name, data) => events.push({ name, data, at: clock.now() }),
    openListening,
    ...options,
  });
  return {
    clock,
    model,
    events,
    firmware,
    openListening,
    names: () => events.map((e) => e.name),
    of: (name: string) => events.filter((e) => e.name === name),
    clear: () => {
      events.length = 0;
    },
  };
}

const arc = (ring: Rgb[]) => ring.slice(0, 6);
const allOf = (colour: Rgb) => Array.from({ length: 6 }, () => colour);

describe('boot', () => {
  it('boots idle, with both toggles off and every one of the 12 pixels off, and emits nothing', () => {
    const model = initialModel();
    model.state = 'dance'; // whatever the model said before, the firmware boots into idle
    const { firmware, events, clock } = setup({}, model);
    expect(firmware.state).toBe('idle');
    expect(model.state).toBe('idle');
    expect(model.toggles).toEqual({ kid_mode: false, smart_mode: false });
    expect(firmware.ring()).toEqual(Array.from({ length: 12 }, () => OFF));
    firmware.start();
    clock.advance(1000);
    expect(firmware.ring()).toEqual(Array.from({ length: 12 }, () => OFF));
    expect(events).toEqual([]);
    expect(firmware.torque).toBe(true);
    expect(model.cameraEnabled && model.micEnabled).toBe(true);
  });

  it('ring() returns a copy: changing it does not change what the ring shows', () => {
    const { firmware } = setup();
    const ring = firmware.ring();
    ring[0]![0] = 255;
    ring[3] = [1, 2, 3];
    expect(firmware.ring()[0]).toEqual(OFF);
    expect(firmware.ring()[3]).toEqual(OFF);
  });
});

describe('camera edges', () => {
  it('a face in idle → face_detected {}, then state_changed idle → talk (reason face_detected)', () => {
    const { firmware, events, model } = setup();
    firmware.faceAppears();
    expect(events.map(({ name, data }) => ({ name, data }))).toEqual([
      { name: 'face_detected', data: {} },
      { name: 'state_changed', data: { from: 'idle', to: 'talk', reason: 'face_detected' } },
    ]);
    expect(firmware.state).toBe('talk');
    expect(model.state).toBe('talk');
    expect(firmware.facePresent).toBe(true);
    // The transition repaints at once: talk arc and the yellow face pip.
    expect(arc(firmware.ring())).toEqual(allOf(TALK));
    expect(firmware.ring()[6]).toEqual(FACE_YELLOW);
  });

  it('a face that stays in view is reported once', () => {
    const { firmware, clock, of } = setup();
    firmware.faceAppears();
    clock.advance(100);
    firmware.faceAppears();
    firmware.faceAppears();
    expect(of('face_detected')).toHaveLength(1);
    expect(of('state_changed')).toHaveLength(1);
  });

  it('face_lost {} is emitted 800 ms after the face leaves, not at 799 ms', () => {
    const { firmware, clock, of } = setup();
    firmware.faceAppears();
    clock.advance(1000);
    const left = clock.now();
    firmware.faceLeaves();
    clock.advance(799);
    expect(of('face_lost')).toEqual([]);
    expect(firmware.facePresent).toBe(true);
    clock.advance(1);
    expect(of('face_lost')).toEqual([{ name: 'face_lost', data: {}, at: left + 800 }]);
    expect(firmware.facePresent).toBe(false);
  });

  it('a face back within 800 ms: no face_lost and no second face_detected, ever', () => {
    const { firmware, clock, names } = setup({ faceLostGraceMs: 1000 });
    firmware.faceAppears();
    firmware.faceLeaves();
    clock.advance(799);
    firmware.faceAppears();
    clock.advance(60_000);
    expect(names()).toEqual(['face_detected', 'state_changed']);
    expect(firmware.state).toBe('talk');
  });

  it('leaving, coming back and leaving again: face_lost 800 ms after the last leave', () => {
    const { firmware, clock, of } = setup();
    firmware.faceAppears();
    firmware.faceLeaves();
    clock.advance(500);
    firmware.faceAppears();
    clock.advance(500);
    firmware.faceLeaves();
    const left = clock.now();
    clock.advance(5000);
    expect(of('face_lost').map((e) => e.at)).toEqual([left + 800]);
  });

  it('talk → idle exactly faceLostGraceMs after face_lost (not 1 ms earlier)', () => {
    const { firmware, clock, of } = setup({ faceLostGraceMs: 2000 });
    firmware.faceAppears();
    clock.advance(300);
    const left = clock.now();
    firmware.faceLeaves();
    clock.advanceTo(left + 800 + 1999);
    expect(firmware.state).toBe('talk');
    clock.advance(1);
    expect(firmware.state).toBe('idle');
    expect(of('state_changed').at(-1)).toEqual({
      name: 'state_changed',
      data: { from: 'talk', to: 'idle', reason: 'face_lost_grace_expired' },
      at: left + 2800,
    });
  });

  it('the default face-lost grace is 8000 ms', () => {
    const { firmware, clock } = setup();
    firmware.faceAppears();
    firmware.faceLeaves();
    clock.advance(800 + 7999);
    expect(firmware.state).toBe('talk');
    clock.advance(1);
    expect(firmware.state).toBe('idle');
  });

  it('a face back during the grace cancels it; a later loss gets a full grace of its own', () => {
    const { firmware, clock, of } = setup({ faceLostGraceMs: 2000 });
    firmware.faceAppears();
    firmware.faceLeaves();
    clock.advance(800 + 1500); // face_lost at 800, grace running for 1500 ms
    firmware.faceAppears();
    expect(of('face_detected')).toHaveLength(2);
    clock.advance(10_000);
    expect(firmware.state).toBe('talk');
    const left = clock.now();
    firmware.faceLeaves();
    clock.advanceTo(left + 800 + 1999);
    expect(firmware.state).toBe('talk');
    clock.advance(1);
    expect(firmware.state).toBe('idle');
    expect(of('state_changed')).toHaveLength(2);
  });

  it('face_recognized {name, confidence} follows faceAppears(name) after 300 ms', () => {
    const { firmware, clock, of } = setup();
    firmware.faceAppears('Ann');
    clock.advance(299);
    expect(of('face_recognized')).toEqual([]);
    clock.advance(1);
    const recognized = of('face_recognized');
    expect(recognized).toHaveLength(1);
    expect(recognized[0]!.at).toBe(T0 + 300);
    expect(recognized[0]!.data.name).toBe('Ann');
    expect(recognized[0]!.data.confidence).toEqual(expect.any(Number));
    const confidence = recognized[0]!.data.confidence as number;
    expect(confidence).toBeGreaterThan(0);
    expect(confidence).toBeLessThanOrEqual(1);
    // Recognition does not gate the move: talk began at once.
    expect(of('state_changed')[0]!.at).toBe(T0);
  });

  it('an unnamed face is never recognised', () => {
    const { firmware, clock, of } = setup();
    firmware.faceAppears();
    clock.advance(10_000);
    expect(of('face_recognized')).toEqual([]);
  });

  it('story_time ignores camera edges (Rule 2) but still reports them', () => {
    const { firmware, clock, of } = setup({ faceLostGraceMs: 100 });
    firmware.setState('story_time');
    firmware.faceAppears();
    firmware.faceLeaves();
    clock.advance(5000);
    expect(firmware.state).toBe('story_time');
    expect(of('face_detected')).toHaveLength(1);
    expect(of('face_lost')).toHaveLength(1);
    expect(of('state_changed')).toHaveLength(1);
    expect(arc(firmware.ring())).toEqual(allOf(STORY));
  });
});

describe('sleep', () => {
  it('setState(sleep): head face-down and centred, camera and mic off, torque released by 3000 ms', () => {
    const { firmware, clock, model, of } = setup();
    model.head = { yaw: 40, pitch: 20 };
    firmware.setState('sleep');
    expect(of('state_changed').map((e) => e.data)).toEqual([
      { from: 'idle', to: 'sleep', reason: 'set_state' },
    ]);
    expect(firmware.state).toBe('sleep');
    expect(model.state).toBe('sleep');
    expect(model.head).toEqual({ yaw: 0, pitch: -45 });
    expect(model.cameraEnabled).toBe(false);
    expect(model.micEnabled).toBe(false);
    expect(firmware.torque).toBe(true); // holds while the head goes down
    clock.advance(3000);
    expect(firmware.torque).toBe(false);
    expect(arc(firmware.ring())).toEqual(allOf(SLEEP));
  });

  it('the 3000 ms fallback bounds a slower release (true at 2999, false at 3000)', () => {
    const { firmware, clock } = setup({ torqueReleaseMs: 60_000 });
    firmware.setState('sleep');
    clock.advance(2999);
    expect(firmware.torque).toBe(true);
    clock.advance(1);
    expect(firmware.torque).toBe(false);
  });

  it('sound events are suppressed while the mic is off, and flow again once awake', () => {
    const { firmware, of } = setup();
    firmware.hearSound('left', -0.8, 0.6);
    expect(of('sound_event').map((e) => e.data)).toEqual([{ direction: 'left', balance: -0.8, energy: 0.6 }]);
    firmware.setState('sleep');
    firmware.hearSound('right', 0.9, 1);
    expect(of('sound_event')).toHaveLength(1);
    firmware.setState('idle');
    firmware.hearSound('right', 0.9, 1);
    expect(of('sound_event').map((e) => e.data)).toEqual([
      { direction: 'left', balance: -0.8, energy: 0.6 },
      { direction: 'right', balance: 0.9, energy: 1 },
    ]);
  });

  it('sleep → idle on a head pet: torque back, camera and mic on', () => {
    const { firmware, clock, model, of, names, clear } = setup();
    firmware.setState('sleep');
    clock.advance(3000);
    clear();
    firmware.headPetStart();
    expect(names()).toEqual(['head_pet_started', 'state_changed']);
    expect(of('state_changed')[0]!.data).toEqual({ from: 'sleep', to: 'idle', reason: 'head_pet' });
    expect(firmware.state).toBe('idle');
    expect(firmware.torque).toBe(true);
    expect(model.cameraEnabled).toBe(true);
    expect(model.micEnabled).toBe(true);
    expect(arc(firmware.ring())).toEqual(allOf(OFF));
  });

  it('sleep → idle (not talk) on a face', () => {
    const { firmware, clock, of, clear } = setup();
    firmware.setState('sleep');
    clock.advance(100);
    clear();
    firmware.faceAppears();
    expect(of('face_detected')).toHaveLength(1);
    expect(of('state_changed').map((e) => e.data)).toEqual([
      { from: 'sleep', to: 'idle', reason: 'face_detected' },
    ]);
    expect(firmware.state).toBe('idle');
    // Woken before the release: the pending release must not drop the torque afterwards.
    clock.advance(5000);
    expect(firmware.torque).toBe(true);
  });

  it('setting the current state is a no-op', () => {
    const { firmware, of } = setup();
    firmware.setState('sleep');
    firmware.setState('sleep');
    expect(of('state_changed')).toHaveLength(1);
  });
});

describe('head pet', () => {
  it('held 2000 ms: opens listening exactly once (not at 1999 ms) and moves idle → talk', () => {
    const { firmware, clock, openListening, of, names } = setup();
    firmware.headPetStart();
    clock.advance(1999);
    expect(openListening).not.toHaveBeenCalled();
    expect(firmware.state).toBe('idle');
    clock.advance(1);
    expect(openListening).toHaveBeenCalledTimes(1);
    expect(firmware.state).toBe('talk');
    expect(of('state_changed').map((e) => e.data)).toEqual([
      { from: 'idle', to: 'talk', reason: 'voice_listening_start' },
    ]);
    clock.advance(3000); // still held
    firmware.headPetEnd();
    clock.advance(10_000);
    expect(openListening).toHaveBeenCalledTimes(1);
    expect(names().filter((n) => n.startsWith('head_pet'))).toEqual(['head_pet_started', 'head_pet_ended']);
    expect(of('head_pet_started')[0]).toEqual({ name: 'head_pet_started', data: {}, at: T0 });
    expect(of('head_pet_ended')[0]).toEqual({
      name: 'head_pet_ended',
      data: { duration_ms: 5000 },
      at: T0 + 5000,
    });
  });

  it('released at 1999 ms: no listening, head_pet_ended {duration_ms: 1999}', () => {
    const { firmware, clock, openListening, of } = setup();
    firmware.headPetStart();
    clock.advance(1999);
    firmware.headPetEnd();
    clock.advance(10_000);
    expect(openListening).not.toHaveBeenCalled();
    expect(firmware.state).toBe('idle');
    expect(of('head_pet_ended').map((e) => e.data)).toEqual([{ duration_ms: 1999 }]);
  });

  it('two short pets never add up to a hold', () => {
    const { firmware, clock, openListening } = setup();
    firmware.headPetStart();
    clock.advance(1500);
    firmware.headPetEnd();
    clock.advance(100);
    firmware.headPetStart();
    clock.advance(1500);
    firmware.headPetEnd();
    clock.advance(5000);
    expect(openListening).not.toHaveBeenCalled();
  });
});

describe('security', () => {
  it('the head sweeps side to side while in security, and stops when it leaves', () => {
    const { firmware, clock, model } = setup();
    firmware.setState('security');
    const yaws: number[] = [];
    for (let t = 0; t < 6000; t += 100) {
      yaws.push(model.head.yaw);
      clock.advance(100);
    }
    const changes = yaws.filter((yaw, i) => i > 0 && yaw !== yaws[i - 1]).length;
    expect(changes).toBeGreaterThanOrEqual(3);
    expect(Math.min(...yaws)).toBeLessThan(0);
    expect(Math.max(...yaws)).toBeGreaterThan(0);

    firmware.faceAppears(); // security → idle on a face
    expect(firmware.state).toBe('idle');
    const yaw = model.head.yaw;
    clock.advance(6000);
    expect(model.head.yaw).toBe(yaw);
  });

  it('the state arc flashes (80,80,80) on and off with a 500 ms half-period, seen through ring()', () => {
    const { firmware, clock } = setup();
    firmware.start();
    firmware.setState('security');
    const entered = clock.now();
    const seen: string[] = [];
    // Sample each half-period twice, past the first repaint inside it (the ring repaints every 200 ms).
    for (let k = 0; k < 10; k++) {
      for (const offset of [250, 450]) {
        clock.advanceTo(entered + k * SECURITY_HALF_MS + offset);
        const ring = firmware.ring();
        const expected = k % 2 === 0 ? SECURITY_ON : OFF;
        expect(arc(ring), `half-period ${k} at +${offset} ms`).toEqual(allOf(expected));
        expect(ring.slice(6)).toEqual(Array.from({ length: 6 }, () => OFF));
        seen.push(k % 2 === 0 ? 'on' : 'off');
      }
    }
    expect(seen).toContain('on');
    expect(seen).toContain('off');
  });
});

describe('dance', () => {
  it('dance_started, head moves, and after choreographyMs: dance_ended and state_changed → idle', () => {
    const { firmware, clock, model, names, of } = setup({ choreographyMs: 2000 });
    firmware.setState('dance');
    expect(names()).toEqual(['state_changed', 'dance_started']);
    const heads = new Set<string>();
    for (let t = 0; t < 1900; t += 100) {
      heads.add(JSON.stringify(model.head));
      clock.advance(100);
    }
    clock.advanceTo(T0 + 1999);
    expect(heads.size).toBeGreaterThanOrEqual(2);
    expect(firmware.state).toBe('dance');
    expect(of('dance_ended')).toEqual([]);
    clock.advance(1);
    expect(firmware.state).toBe('idle');
    expect(names().slice(2)).toEqual(['dance_ended', 'state_changed']);
    expect(of('state_changed')[1]).toEqual({
      name: 'state_changed',
      data: { from: 'dance', to: 'idle', reason: 'choreography_ended' },
      at: T0 + 2000,
    });
    expect(model.head).toEqual({ yaw: 0, pitch: 0 });
    clock.advance(10_000);
    expect(of('dance_ended')).toHaveLength(1);
  });

  it('the dance animates the left ring only (a moving rainbow), the right ring keeps its owners', () => {
    const { firmware, clock, model } = setup({ choreographyMs: 60_000 });
    model.toggles.kid_mode = true;
    firmware.start();
    firmware.setState('dance');
    clock.advance(100);
    const a = firmware.ring();
    clock.advance(300);
    const b = firmware.ring();
    expect(new Set(arc(a).map((p) => JSON.stringify(p))).size).toBeGreaterThan(1);
    expect(arc(b)).not.toEqual(arc(a));
    for (const ring of [a, b]) {
      expect(ring.slice(6)).toEqual([OFF, OFF, KID, OFF, OFF, OFF]);
    }
  });
});

describe('LED ring', () => {
  it('repaints every 200 ms: stats.repaints grows by 5 per second of clock time', () => {
    const { firmware, clock } = setup();
    firmware.start();
    const first = firmware.stats.repaints;
    expect(first).toBe(1); // start() paints at once
    clock.advance(REPAINT_MS - 1);
    expect(firmware.stats.repaints).toBe(first);
    clock.advance(1);
    expect(firmware.stats.repaints).toBe(first + 1);
    clock.advance(1000 - REPAINT_MS);
    expect(firmware.stats.repaints).toBe(first + 5);
    clock.advance(3000);
    expect(firmware.stats.repaints).toBe(first + 20);
  });

  it('an LED tool write shows at once on the left ring and lasts until the next repaint', async () => {
    const { firmware, clock, model } = setup();
    const tools = toolsFor(model, firmware);
    firmware.start();
    firmware.faceAppears(); // talk: arc green, pip yellow
    clock.advance(50);
    await tools.call('self.robot.set_led_color', { red: 10, green: 20, blue: 30 });
    expect(arc(firmware.ring())).toEqual(allOf([10, 20, 30]));
    expect(firmware.ring()[6]).toEqual(FACE_YELLOW);
    clock.advance(REPAINT_MS - 50 - 1);
    expect(arc(firmware.ring())).toEqual(allOf([10, 20, 30]));
    clock.advance(1);
    expect(arc(firmware.ring())).toEqual(allOf(TALK));
  });

  it('set_led_multi writes single left pixels; a right-ring write is rejected and changes nothing', async () => {
    const { firmware, clock, model } = setup();
    const tools = toolsFor(model, firmware);
    model.toggles.smart_mode = true;
    firmware.start();
    clock.advance(10);
    await tools.call('self.robot.set_led_multi', { pixels: [{ index: 2, red: 200, green: 0, blue: 0 }] });
    const ring = firmware.ring();
    expect(ring[2]).toEqual([200, 0, 0]);
    expect(ring[1]).toEqual(OFF);
    await expect(
      tools.call('self.robot.set_led_multi', { pixels: [{ index: 9, red: 0, green: 0, blue: 255 }] }),
    ).rejects.toThrow(/right ring/);
    expect(firmware.ring()).toEqual(ring);
    expect(firmware.ring()[9]).toEqual(SMART);
  });

  it('toggles on the model show as pixel 8 (kid_mode) and pixel 9 (smart_mode) by the next repaint', () => {
    const { firmware, clock, model } = setup();
    firmware.start();
    clock.advance(50);
    model.toggles.kid_mode = true;
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[8]).toEqual(KID);
    expect(firmware.ring()[9]).toEqual(OFF);
    model.toggles.smart_mode = true;
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[8]).toEqual(KID);
    expect(firmware.ring()[9]).toEqual(SMART);
    model.toggles.kid_mode = false;
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[8]).toEqual(OFF);
    expect(firmware.ring()[9]).toEqual(SMART);
  });

  it('reserved pixels 7 and 10 stay off in every state, with everything else lit', () => {
    const { firmware, clock, model } = setup({ choreographyMs: 60_000 });
    model.toggles.kid_mode = true;
    model.toggles.smart_mode = true;
    firmware.start();
    firmware.setListening(true);
    firmware.faceAppears();
    const states: RobotState[] = ['talk', 'story_time', 'security', 'sleep', 'dance', 'idle'];
    let samples = 0;
    for (const state of states) {
      firmware.setState(state);
      for (let t = 0; t < 1500; t += 100) {
        const ring = firmware.ring();
        expect(ring[7], `${state} +${t}`).toEqual(OFF);
        expect(ring[10], `${state} +${t}`).toEqual(OFF);
        samples++;
        clock.advance(100);
      }
    }
    expect(samples).toBe(states.length * 15);
    expect(firmware.ring()[8]).toEqual(KID); // the lit neighbours really were lit
  });

  it('the face pip: yellow while a face is present, green while identified, off when gone', () => {
    const { firmware, clock, model } = setup();
    firmware.start();
    firmware.faceAppears();
    expect(firmware.ring()[6]).toEqual(FACE_YELLOW);
    model.faceIdentifiedAt = clock.now();
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[6]).toEqual(FACE_GREEN);
    clock.advance(4000); // 4000 ms timeout without a refresh
    expect(firmware.ring()[6]).toEqual(FACE_YELLOW);
    firmware.faceLeaves();
    clock.advance(800 + REPAINT_MS);
    expect(firmware.ring()[6]).toEqual(OFF);
  });

  it("the VirtualRobot's set_face_identified tool turns the pip green (tool time on the firmware clock)", async () => {
    const clock = new ManualClock(T0);
    const robot = new VirtualRobot({ otaUrl: 'http://127.0.0.1:9/', clock });
    try {
      robot.firmware.faceAppears();
      const mcp = (robot as unknown as { mcp: DeviceMcpServer }).mcp;
      const reply = await mcp.handle({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'self.robot.set_face_identified', arguments: {} },
      });
      expect(reply).toMatchObject({ result: { isError: false } });
      clock.advance(REPAINT_MS);
      expect(robot.firmware.ring()[6]).toEqual(FACE_GREEN);
    } finally {
      robot.firmware.stop();
    }
  });
});

describe('chat status', () => {
  it('setListening / setSpeaking emit chat_status; listening lights pixel 11 red and moves idle → talk', () => {
    const { firmware, clock, of } = setup();
    firmware.start();
    firmware.setListening(true, 'inject_text');
    expect(of('chat_status').map((e) => e.data)).toEqual([{ status: 'listening' }]);
    expect(of('state_changed').map((e) => e.data)).toEqual([
      { from: 'idle', to: 'talk', reason: 'voice_listening_start' },
    ]);
    clock.advance(REPAINT_MS);
    const [r, g, b] = firmware.ring()[11]!;
    expect(r).toBeGreaterThan(100);
    expect([g, b]).toEqual([0, 0]);

    firmware.setListening(true); // already listening: nothing new
    expect(of('chat_status')).toHaveLength(1);

    firmware.setSpeaking(true);
    expect(of('chat_status').at(-1)!.data).toEqual({ status: 'speaking' });
    expect(firmware.listening).toBe(false);
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[11]).toEqual(OFF); // the robot holds the turn now

    firmware.setSpeaking(false);
    expect(of('chat_status').at(-1)!.data).toEqual({ status: 'idle' });

    firmware.setListening(true);
    firmware.setListening(false);
    expect(of('chat_status').map((e) => e.data.status)).toEqual([
      'listening',
      'speaking',
      'idle',
      'listening',
      'idle',
    ]);
    clock.advance(REPAINT_MS);
    expect(firmware.ring()[11]).toEqual(OFF);
  });

  it('listening wakes the robot from sleep', () => {
    const { firmware, of } = setup();
    firmware.setState('sleep');
    firmware.setListening(true, 'wake_word');
    expect(firmware.state).toBe('idle');
    expect(of('state_changed').at(-1)!.data).toEqual({
      from: 'sleep',
      to: 'idle',
      reason: 'voice_listening_start',
    });
  });
});

describe('stop', () => {
  const busy: Record<string, (f: ReturnType<typeof setup>) => void> = {
    'talk with the grace timer, a pending recognition, a held pet and a pending face_lost': ({
      firmware,
      clock,
    }) => {
      firmware.faceAppears();
      firmware.faceLeaves();
      clock.advance(800); // face_lost → grace timer armed
      firmware.faceAppears('Ann'); // recognition pending
      firmware.headPetStart(); // hold pending
      firmware.faceLeaves(); // face_lost report pending
    },
    'sleep with the torque release pending': ({ firmware }) => firmware.setState('sleep'),
    'security sweeping': ({ firmware }) => firmware.setState('security'),
    'dance mid-choreography': ({ firmware }) => firmware.setState('dance'),
  };

  for (const [label, makeBusy] of Object.entries(busy)) {
    it(`stop() leaves no timers: ${label}`, () => {
      const fixture = setup({ faceLostGraceMs: 2000 });
      const { firmware, clock, events, model } = fixture;
      firmware.start();
      makeBusy(fixture);
      expect(clock.pendingTimers).toBeGreaterThan(1);
      firmware.stop();
      expect(clock.pendingTimers).toBe(0);
      const emitted = events.length;
      const repaints = firmware.stats.repaints;
      const state = firmware.state;
      const head = { ...model.head };
      clock.advance(60_000);
      expect(events.length).toBe(emitted);
      expect(firmware.stats.repaints).toBe(repaints);
      expect(firmware.state).toBe(state);
      expect(model.head).toEqual(head);
    });
  }
});

/** The device's MCP tools wired to the firmware the way VirtualRobot wires them (LED writes repaint). */
function toolsFor(model: DeviceModel, firmware: Firmware) {
  const tools = buildTools(model, {
    setState: (state) => firmware.setState(state),
    changed: (what) => {
      if (what === 'led') firmware.ledWritten();
    },
  });
  return {
    call: async (name: string, args: Record<string, unknown>) => {
      const tool = tools.find((t) => t.name === name);
      if (!tool) throw new Error(`no tool ${name}`);
      return tool.call(args);
    },
  };
}
