// What a long-running virtual robot tells the person watching it: one human-readable line per change (channel,
// robot state, chat status, LED ring, what the server heard, the reply), and what `/state`, `/leds` and `/last`
// show. The ring is looked at on the firmware's repaint period and printed only when its look changes.

import type { ServerFrame } from '../protocol/index.js';
import { REPAINT_MS } from '../robot/led.js';
import type { KeeperEvent } from './reconnect.js';
import { ringLook, ringText } from './ring-text.js';
import type { VirtualRobot } from './robot.js';

export interface RobotConsoleOptions {
  /** Coloured LED dots (a colour terminal). */
  color: boolean;
  print: (line: string) => void;
}

/** "robot heard: …": one line per reply, the same in every mode. */
export function replyLine(sentences: string[], pcmSamples: number, sampleRate: number): string {
  const text = sentences.length > 0 ? sentences.join(' ') : '(no words)';
  return `robot heard: ${text} (${(pcmSamples / sampleRate).toFixed(1)} s of audio)`;
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

export class RobotConsole {
  /** The last reply's sentences and what the server recognised before it. */
  lastReply: string | undefined;
  lastHeard: string | undefined;
  private chatStatus = 'idle';
  private ringLookNow: string;
  private readonly watcher: NodeJS.Timeout;

  constructor(
    private readonly robot: VirtualRobot,
    private readonly options: RobotConsoleOptions,
  ) {
    this.ringLookNow = ringLook(robot.firmware.ring(), robot.firmware.state);
    robot.on('connected', this.onConnected);
    robot.on('perception', this.onPerception);
    robot.on('frame', this.onFrame);
    robot.on('reply', this.onReply);
    // Unref'd: watching the ring must not keep a robot that is done alive.
    this.watcher = setInterval(() => this.checkRing(), REPAINT_MS).unref();
  }

  stop(): void {
    clearInterval(this.watcher);
    this.robot.off('connected', this.onConnected);
    this.robot.off('perception', this.onPerception);
    this.robot.off('frame', this.onFrame);
    this.robot.off('reply', this.onReply);
  }

  /** The reconnect loop's news. */
  keeperEvent(event: KeeperEvent): void {
    if (event.type === 'disconnected')
      this.print(`disconnected (${event.code}); idle, reconnecting in ${seconds(event.retryInMs)}`);
    else if (event.type === 'replaced')
      this.print(
        `disconnected (${event.code}): another connection uses device id ${this.robot.deviceId} (a second robot on this state dir?); idle, not reconnecting until spoken to`,
      );
    else this.print(`server unreachable (${event.error}); retrying in ${seconds(event.retryInMs)}`);
  }

  leds(): string {
    return `leds ${ringText(this.robot.firmware.ring(), this.robot.firmware.state, this.options.color)}`;
  }

  state(): string[] {
    const { robot } = this;
    const toggles = Object.entries(robot.model.toggles).map(([name, on]) => `${name} ${on ? 'on' : 'off'}`);
    return [
      `state ${robot.firmware.state} · chat ${this.chatStatus} · face ${robot.firmware.facePresent ? 'present' : 'none'} · ${toggles.join(' · ')}`,
      robot.connected
        ? `channel open · session ${robot.sessionId} · binary protocol v${robot.protocolVersion}`
        : 'channel closed (typing a line opens it)',
      `device ${robot.deviceId} · firmware ${robot.firmwareVersion} on ${robot.partition} · head yaw ${robot.model.head.yaw} pitch ${robot.model.head.pitch}`,
    ];
  }

  last(): string[] {
    if (this.lastReply === undefined) return ['no reply yet'];
    return [`server heard: ${this.lastHeard ?? '(nothing recognised)'}`, `reply: ${this.lastReply}`];
  }

  private print(line: string): void {
    this.options.print(`robot: ${line}`);
  }

  private readonly onConnected = (sessionId: string) => {
    const url = this.robot.ota?.websocket?.url ?? '?';
    this.print(
      `connected to ${url}, session ${sessionId}, firmware ${this.robot.firmwareVersion}, binary protocol v${this.robot.protocolVersion}`,
    );
  };

  private readonly onPerception = (name: string, data: Record<string, unknown>) => {
    if (name === 'state_changed') {
      this.print(`state ${String(data.from)} → ${String(data.to)} (${String(data.reason)})`);
      this.checkRing();
    } else if (name === 'chat_status' && data.status !== this.chatStatus) {
      this.chatStatus = String(data.status);
      this.print(`chat ${this.chatStatus}`);
    }
  };

  private readonly onFrame = (frame: ServerFrame) => {
    switch (frame.type) {
      case 'hello':
      case 'tts':
        return; // the connected line, chat status and the reply line say it
      case 'stt':
        this.lastHeard = frame.text;
        this.print(`server heard "${frame.text}"`);
        return;
      case 'llm':
        if (frame.emotion) this.print(`emotion ${frame.emotion}`);
        return;
      case 'mcp':
        if (frame.payload.method === 'initialize') this.print('MCP initialized by the server');
        return;
      default:
        this.options.print(`robot <- ${JSON.stringify(frame)}`);
    }
  };

  private readonly onReply = ({ pcm, sentences }: { pcm: Int16Array; sentences: string[] }) => {
    this.lastReply = sentences.join(' ');
    this.options.print(replyLine(sentences, pcm.length, this.robot.downlinkSampleRate));
  };

  private checkRing(): void {
    const look = ringLook(this.robot.firmware.ring(), this.robot.firmware.state);
    if (look === this.ringLookNow) return;
    this.ringLookNow = look;
    this.options.print(`robot: ${this.leds()}`);
  }
}
