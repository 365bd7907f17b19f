// Records what a virtual robot receives, JSON frames and audio in one ordered list, for order assertions.
import type { VirtualRobot } from '../../src/device/robot.js';
import type { ServerFrame } from '../../src/protocol/index.js';

export type Entry =
  | { kind: 'frame'; frame: ServerFrame; at: number }
  | { kind: 'audio'; samples: number; at: number };

export class Timeline {
  readonly entries: Entry[] = [];

  constructor(robot: VirtualRobot) {
    robot.on('frame', (frame) => {
      if (frame.type !== 'mcp') this.entries.push({ kind: 'frame', frame, at: performance.now() });
    });
    robot.on('audio', (pcm) =>
      this.entries.push({ kind: 'audio', samples: pcm.length, at: performance.now() }),
    );
  }

  /** Compact labels: "stt", "llm:thinking", "tts:start", "sentence:It is sunny.", "audio" (runs collapsed). */
  labels(): string[] {
    const out: string[] = [];
    for (const entry of this.entries) {
      let label: string;
      if (entry.kind === 'audio') label = 'audio';
      else if (entry.frame.type === 'llm') label = `llm:${entry.frame.emotion}`;
      else if (entry.frame.type === 'tts')
        label =
          entry.frame.state === 'sentence_start'
            ? `sentence:${entry.frame.text}`
            : `tts:${entry.frame.state}`;
      else label = entry.frame.type;
      if (label === 'audio' && out[out.length - 1] === 'audio') continue;
      out.push(label);
    }
    return out;
  }

  clear(): void {
    this.entries.length = 0;
  }
}
