// The dashboard's data (GET /ui/api/overview): what the bridge knows, gathered in one read-only JSON.
// Nothing secret goes in: no password, no session or CSRF token, no API keys.
import type { Calendar, CalendarToday } from '../calendar/index.js';
import type { Controls } from '../controls.js';
import { PERCEPTION_EVENT_NAMES } from '../perception/bus.js';
import type { DeviceSnapshot, PerceptionBus, PerceptionEvent } from '../perception/index.js';
import type { TurnLog } from '../turns.js';

/** A perception event as the dashboard lists it; big payloads are cut so the ring stays small. */
export interface RecentEvent {
  name: string;
  device_id: string;
  /** Epoch seconds (the record's own ts). */
  ts: number;
  /** Epoch ms when the bridge saw it. */
  received_at_ms: number;
  data: Record<string, unknown>;
}

const MAX_DATA_CHARS = 300;

/** The last `keep` perception events, newest first, from a bus subscription. */
export class RecentEvents {
  private readonly events: RecentEvent[] = [];
  private readonly unsubscribe: () => void;

  constructor(
    bus: Pick<PerceptionBus, 'subscribe'>,
    private readonly keep = 50,
    private readonly now: () => number = Date.now,
  ) {
    this.unsubscribe = bus.subscribe((event) => this.add(event), { name: 'ui-recent-events' });
  }

  add(event: PerceptionEvent): void {
    this.events.push({
      name: event.name,
      device_id: event.device_id,
      ts: event.ts,
      received_at_ms: this.now(),
      data: trimmedData(event.data),
    });
    if (this.events.length > this.keep) this.events.splice(0, this.events.length - this.keep);
  }

  recent(): RecentEvent[] {
    return [...this.events].reverse();
  }

  close(): void {
    this.unsubscribe();
  }
}

function trimmedData(data: Record<string, unknown>): Record<string, unknown> {
  let text: string;
  try {
    text = JSON.stringify(data ?? {});
  } catch {
    return { unreadable: true };
  }
  return text.length <= MAX_DATA_CHARS
    ? (JSON.parse(text) as Record<string, unknown>)
    : { preview: `${text.slice(0, MAX_DATA_CHARS)}…` };
}

/** A device connected to the voice server, reduced to the fields the dashboard shows. */
export interface ConnectedDevice {
  device_id: string;
  session_id: string | null;
  client_id: string | null;
  connected_at: string | null;
  robot_state: string | null;
  tools: number | null;
}

export interface Overview {
  server_now_ms: number;
  /** true when no UI_PASSWORD is set: the controls are off. */
  read_only: boolean;
  logged_in: boolean;
  toggles: { kid_mode: boolean; smart_mode: boolean };
  voice: { ok: true; devices: ConnectedDevice[] } | { ok: false; error: string; devices: [] };
  devices: DeviceSnapshot[];
  events: RecentEvent[];
  turns: ReturnType<TurnLog['recent']>;
  calendar: { ok: true; today: CalendarToday } | { ok: false; error: string };
  /** Event names on /api/perception/stream (an EventSource listens by name); the list lives in bus.ts only. */
  stream_events: string[];
}

export interface OverviewSources {
  readOnly: boolean;
  loggedIn: boolean;
  controls: Pick<Controls, 'toggles'>;
  devices: () => DeviceSnapshot[];
  events: RecentEvents;
  turns: Pick<TurnLog, 'recent'>;
  connectedDevices: () => Promise<Array<Record<string, unknown>>>;
  calendar: Pick<Calendar, 'today'>;
  nowMs: number;
  /** Turns listed (default 20). */
  turnLimit?: number;
}

export async function buildOverview(sources: OverviewSources): Promise<Overview> {
  const [voice, calendar] = await Promise.all([
    sources.connectedDevices().then(
      (devices) => ({ ok: true as const, devices: devices.map(connectedDevice) }),
      (error: unknown) => ({ ok: false as const, error: message(error), devices: [] as [] }),
    ),
    sources.calendar.today().then(
      (today) => ({ ok: true as const, today }),
      (error: unknown) => ({ ok: false as const, error: message(error) }),
    ),
  ]);
  const toggles = sources.controls.toggles();
  return {
    server_now_ms: sources.nowMs,
    read_only: sources.readOnly,
    logged_in: sources.loggedIn,
    toggles: { kid_mode: toggles.kid_mode, smart_mode: toggles.smart_mode },
    voice,
    devices: sources.devices(),
    events: sources.events.recent(),
    turns: sources.turns.recent(sources.turnLimit ?? 20),
    calendar,
    stream_events: ['snapshot', 'turn', ...PERCEPTION_EVENT_NAMES],
  };
}

function message(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 300);
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value.slice(0, 200) : null);

function connectedDevice(raw: Record<string, unknown>): ConnectedDevice {
  return {
    device_id: str(raw.device_id) ?? '(unknown)',
    session_id: str(raw.session_id),
    client_id: str(raw.client_id),
    connected_at: str(raw.connected_at),
    robot_state: str(raw.robot_state),
    tools: Array.isArray(raw.tools) ? raw.tools.length : null,
  };
}
