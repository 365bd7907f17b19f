// The reconnect loop of a long-running robot, in-process against a real voice server: a robot whose device id
// another connection took over (close 4001) stays idle instead of taking it back, until it is woken.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChannelKeeper, type KeeperEvent } from '../../src/device/reconnect.js';
import { eventually, startTestVoice, type TestVoice } from '../support/voice.js';

let t: TestVoice;
beforeAll(async () => {
  t = await startTestVoice();
});
afterAll(async () => {
  await t.close();
});

describe('ChannelKeeper', () => {
  it('does not fight a newer connection with the same device id, and reconnects on wake', async () => {
    const deviceId = '02:00:00:00:40:01';
    const first = t.robot({ deviceId });
    const events: KeeperEvent[] = [];
    const keeper = new ChannelKeeper(first, {
      backoff: { firstDelayMs: 50, maxDelayMs: 100 },
      report: (event) => events.push(event),
    });
    keeper.start();
    await eventually(() => first.connected && t.voice.registry.get(deviceId)?.sessionId === first.sessionId);

    const second = t.robot({ deviceId });
    await second.start();
    await eventually(() => events.some((event) => event.type === 'replaced'));
    expect(events).toEqual([{ type: 'replaced', code: 4001 }]);
    await new Promise((resolve) => setTimeout(resolve, 400)); // several backoff periods
    expect(first.connected).toBe(false);
    expect(t.voice.registry.get(deviceId)?.sessionId).toBe(second.sessionId);

    expect(await keeper.wake()).toBe(true); // spoken to: it opens the channel again, as on a wake word
    await eventually(() => t.voice.registry.get(deviceId)?.sessionId === first.sessionId);
    keeper.stop();
  });
});
