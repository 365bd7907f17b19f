// Waiting for the server's reply to what the robot said: the reply, or one clear reason why none came.
import { ChannelError } from './channel.js';
import type { VirtualRobot } from './robot.js';

export interface Reply {
  pcm: Int16Array;
  sentences: string[];
}

/**
 * The next reply (tts stop). Rejects with a ChannelError when the channel closes first or nothing comes within
 * `timeoutMs`; `cancel` stops waiting (listeners and timer removed; `done` then never settles).
 */
export function nextReply(
  robot: VirtualRobot,
  timeoutMs: number,
): { done: Promise<Reply>; cancel: () => void } {
  let cancel: () => void = () => undefined;
  const done = new Promise<Reply>((resolve, reject) => {
    const onReply = (reply: Reply) => {
      cancel();
      resolve(reply);
    };
    const onClosed = (code: number) => {
      cancel();
      reject(new ChannelError(`the server closed the channel (${code}) before replying`));
    };
    const timer = setTimeout(() => {
      cancel();
      reject(new ChannelError(`no reply within ${timeoutMs / 1000} s`));
    }, timeoutMs);
    cancel = () => {
      clearTimeout(timer);
      robot.off('reply', onReply);
      robot.off('disconnected', onClosed);
    };
    robot.on('reply', onReply);
    robot.on('disconnected', onClosed);
  });
  return { done, cancel };
}
