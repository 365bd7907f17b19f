// The recognition queue on its own: a tiny real job function stands in for a decoder. Each job is a gate
// the test opens, so the test decides when a worker is busy; `ran` records which job started on which worker.
import { describe, expect, it } from 'vitest';
import {
  RecognitionQueue,
  type RecognitionQueueOptions,
  RecognitionRefusedError,
} from '../../src/providers/asr/recognition-queue.js';

interface Gate {
  name: string;
  open(): void;
  opened: Promise<void>;
}

function gate(name: string): Gate {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { name, open, opened };
}

function setup(options: Partial<RecognitionQueueOptions>) {
  const ran: Array<{ name: string; worker: number }> = [];
  const queue = new RecognitionQueue<Gate, string>(async (job, worker) => {
    ran.push({ name: job.name, worker });
    if (job.name.startsWith('throw')) throw new Error(`${job.name} failed`);
    await job.opened;
    return `${job.name} done`;
  }, options);
  const jobs = new Map<string, { gate: Gate; result: Promise<string>; controller: AbortController }>();
  const submit = (name: string, deviceId?: string) => {
    const controller = new AbortController();
    const g = gate(name);
    const result = queue.submit(g, controller.signal, deviceId);
    result.catch(() => undefined); // each test awaits the ones it cares about
    jobs.set(name, { gate: g, result, controller });
    return result;
  };
  /** Opens the gate of `name` and waits until its result is in and the queue moved on. */
  const finish = async (name: string) => {
    const job = jobs.get(name)!;
    job.gate.open();
    await job.result.catch(() => undefined);
    await new Promise((resolve) => setImmediate(resolve));
  };
  const names = () => ran.map((r) => r.name);
  return { queue, ran, names, submit, finish, jobs };
}

describe('cancellation', () => {
  it('a job aborted while waiting leaves the queue at once, rejects with AbortError and never runs', async () => {
    const q = setup({ workers: 1 });
    q.submit('a', 'dev-a');
    const b = q.submit('b', 'dev-b');
    expect(q.queue.stats()).toMatchObject({ running: 1, queued: 1 });
    q.jobs.get('b')!.controller.abort();
    await expect(b).rejects.toMatchObject({ name: 'AbortError' }); // before "a" is done
    expect(q.queue.stats()).toMatchObject({ running: 1, queued: 0, cancelled: 1 });
    await q.finish('a');
    expect(q.names()).toEqual(['a']);
    expect(q.queue.stats()).toMatchObject({ started: 1, cancelled: 1, running: 0 });
  });

  it('a job whose signal is already aborted is refused at submit and never runs', async () => {
    const q = setup({ workers: 1 });
    const controller = new AbortController();
    controller.abort();
    await expect(q.queue.submit(gate('x'), controller.signal, 'dev')).rejects.toMatchObject({
      name: 'AbortError',
    });
    expect(q.ran).toEqual([]);
    expect(q.queue.stats()).toMatchObject({ started: 0, cancelled: 1, queued: 0 });
  });

  it('six jobs aborted while waiting cost nothing: the next live job is the second to run', async () => {
    const q = setup({ workers: 1 });
    q.submit('busy', 'dev-0');
    for (let i = 1; i <= 6; i++) q.submit(`stale-${i}`, `dev-${i}`);
    for (let i = 1; i <= 6; i++) q.jobs.get(`stale-${i}`)!.controller.abort();
    const live = q.submit('live', 'dev-7');
    await q.finish('busy');
    expect(q.names()).toEqual(['busy', 'live']);
    await q.finish('live');
    expect(await live).toBe('live done');
    expect(q.queue.stats()).toMatchObject({ started: 2, cancelled: 6 });
  });

  it('aborting a running job does not free its worker early (the worker is still busy)', async () => {
    const q = setup({ workers: 1 });
    q.submit('a', 'dev-a');
    q.submit('b', 'dev-b');
    q.jobs.get('a')!.controller.abort(); // the job function decides what an abort mid-run means
    await new Promise((resolve) => setImmediate(resolve));
    expect(q.names()).toEqual(['a']);
    await q.finish('a');
    expect(q.names()).toEqual(['a', 'b']);
  });
});

describe('fairness', () => {
  it("another device's job is served before one device's backlog", async () => {
    const q = setup({ workers: 1, maxQueuedPerDevice: 4 });
    for (const name of ['a1', 'a2', 'a3', 'a4']) q.submit(name, 'dev-a');
    q.submit('b1', 'dev-b');
    for (const name of ['a1', 'b1', 'a2', 'a3']) await q.finish(name);
    expect(q.names()).toEqual(['a1', 'b1', 'a2', 'a3', 'a4']);
  });

  it('devices take turns: least recently served first, then in the order they began waiting', async () => {
    const q = setup({ workers: 1, maxQueuedPerDevice: 3 });
    for (const name of ['a1', 'a2', 'a3']) q.submit(name, 'dev-a');
    for (const name of ['b1', 'b2', 'b3']) q.submit(name, 'dev-b');
    q.submit('c1', 'dev-c');
    for (const name of ['a1', 'b1', 'c1', 'a2', 'b2', 'a3']) await q.finish(name);
    expect(q.names()).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'a3', 'b3']);
  });

  it("a newer job of the same device replaces its waiting one (counted 'superseded')", async () => {
    const q = setup({ workers: 1 });
    q.submit('a1', 'dev-a');
    const a2 = q.submit('a2', 'dev-a');
    q.submit('a3', 'dev-a');
    await expect(a2).rejects.toBeInstanceOf(RecognitionRefusedError);
    await expect(a2).rejects.toMatchObject({ reason: 'superseded' });
    expect(q.queue.stats()).toMatchObject({ queued: 1, dropped: { superseded: 1, full: 0 } });
    await q.finish('a1');
    expect(q.names()).toEqual(['a1', 'a3']);
  });

  it('jobs without a device id are not superseded: they wait in one line, oldest first', async () => {
    const q = setup({ workers: 1 });
    for (const name of ['x1', 'x2', 'x3']) q.submit(name);
    for (const name of ['x1', 'x2']) await q.finish(name);
    expect(q.names()).toEqual(['x1', 'x2', 'x3']);
    expect(q.queue.stats().dropped.superseded).toBe(0);
  });
});

describe('bounds and the pool', () => {
  it("a full queue refuses the new job (counted 'full'); the refused job never runs", async () => {
    const q = setup({ workers: 1, maxQueued: 2 });
    q.submit('run', 'dev-0');
    q.submit('wait-1', 'dev-1');
    q.submit('wait-2', 'dev-2');
    const refused = q.submit('over', 'dev-3');
    await expect(refused).rejects.toMatchObject({ name: 'RecognitionRefusedError', reason: 'full' });
    await expect(refused).rejects.toThrow(/queue is full/);
    expect(q.queue.stats()).toMatchObject({ queued: 2, dropped: { full: 1 } });
    for (const name of ['run', 'wait-1', 'wait-2']) await q.finish(name);
    expect(q.names()).toEqual(['run', 'wait-1', 'wait-2']);
  });

  it('maxQueued 0 still runs a job when a worker is free, and refuses one when none is', async () => {
    const q = setup({ workers: 1, maxQueued: 0 });
    q.submit('run', 'dev-0');
    await expect(q.submit('over', 'dev-1')).rejects.toMatchObject({ reason: 'full' });
    await q.finish('run');
    expect(q.names()).toEqual(['run']);
  });

  it('runs one job per worker at once, lowest worker first', async () => {
    const q = setup({ workers: 2 });
    for (const name of ['j1', 'j2', 'j3']) q.submit(name, name);
    expect(q.ran).toEqual([
      { name: 'j1', worker: 0 },
      { name: 'j2', worker: 1 },
    ]);
    await q.finish('j2');
    expect(q.ran.at(-1)).toEqual({ name: 'j3', worker: 1 });
    expect(q.queue.stats()).toMatchObject({ workers: 2, running: 2, queued: 0, started: 3 });
  });

  it("a job that fails rejects with the worker's error and frees the worker", async () => {
    const q = setup({ workers: 1 });
    const failed = q.submit('throw-1', 'dev-a');
    const next = q.submit('next', 'dev-b');
    await expect(failed).rejects.toThrow('throw-1 failed');
    await q.finish('next');
    expect(await next).toBe('next done');
  });

  it("close refuses waiting and new jobs (counted 'closed'); the running one finishes", async () => {
    const q = setup({ workers: 1 });
    const running = q.submit('run', 'dev-0');
    const waiting = q.submit('wait', 'dev-1');
    q.queue.close();
    await expect(waiting).rejects.toMatchObject({ reason: 'closed' });
    await expect(q.submit('late', 'dev-2')).rejects.toMatchObject({ reason: 'closed' });
    await q.finish('run');
    expect(await running).toBe('run done');
    expect(q.queue.stats().dropped.closed).toBe(2);
  });

  it('refuses options that make no queue', () => {
    const run = async () => '';
    expect(() => new RecognitionQueue(run, { workers: 0 })).toThrow(/workers/);
    expect(() => new RecognitionQueue(run, { maxQueuedPerDevice: 0 })).toThrow(/maxQueuedPerDevice/);
  });
});
