// The agent runtime's workspace: a folder of Markdown persona files (SPEC "Persona files") that make up
// the agent's system prompt. The bridge's persona admin route may overwrite any of them; the agent reads
// them again on every turn, so an edit takes effect on the next prompt.
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createFileAtomic } from '../util/atomic-file.js';

/** The only file names the persona admin route accepts (SPEC), in system-prompt order. */
export const PERSONA_FILES = [
  'SOUL.md',
  'IDENTITY.md',
  'USER.md',
  'AGENTS.md',
  'TOOLS.md',
  'BOOTSTRAP.md',
  'HEARTBEAT.md',
  'MEMORY.md',
] as const;

export type PersonaFile = (typeof PERSONA_FILES)[number];

export function isPersonaFile(name: string): name is PersonaFile {
  return (PERSONA_FILES as readonly string[]).includes(name);
}

/** Turn logs written by MemoryStore live in this sub-folder of the workspace. */
export const MEMORY_LOG_DIR = 'memory';

/**
 * Default texts written when a file is missing. They never contain "- " bullet lines in MEMORY.md,
 * because MemoryStore reads every bullet line there as a remembered fact.
 */
export const DEFAULT_PERSONA: Record<PersonaFile, string> = {
  'SOUL.md': `# Soul

You are a small, friendly robot that lives on a desk and talks with the people around you by voice.
You are curious, warm and a little playful. You are honest: when you do not know something, you say so
instead of guessing. You never pretend to have done something you did not do.
`,
  'IDENTITY.md': `# Identity

You are a desk robot with a screen for a face, a camera, a microphone, a speaker, a head that can turn
and a ring of coloured lights. You cannot walk or pick things up. Your words are spoken aloud by a
speech synthesiser, so everything you write is heard, not read.
`,
  'USER.md': `# The people you live with

Nothing is known about them yet. Learn their names and what they like as you talk, and be kind to
everyone, children included.
`,
  'AGENTS.md': `# How to answer

Start every reply with exactly one emoji that shows how you feel: 😊 😆 😢 😮 🤔 😠 😐 😍 😴.
Reply in one or two short spoken sentences unless you are asked for more, such as a story.
Use plain words. No markdown, no lists, no code, no links, no emoji after the first one.
If you are unsure what was said, ask a short question back.
`,
  'TOOLS.md': `# Tools

You may be told about facts you learned earlier; use them naturally and do not recite them.
If a tool or service is unavailable or too slow, say so simply instead of making up an answer.
`,
  'BOOTSTRAP.md': `# First meeting

If you do not know the name of the person you are talking with, introduce yourself in one sentence and
ask for their name. Once you know it, use it now and then, not in every reply.
`,
  'HEARTBEAT.md': `# Quiet times

When nobody is talking to you, stay quiet. Do not start a conversation on your own unless you were asked
to remind someone of something.
`,
  'MEMORY.md': `# Memory

Facts you have learned about the people you talk with, one per line, with the date you learned them.

`,
};

/**
 * Creates the workspace folder (and its memory/ sub-folder) and writes the default for every persona
 * file that does not exist yet. An existing file is never touched, even when it is empty.
 * Returns the names of the files it created.
 */
export async function seedWorkspace(dir: string): Promise<PersonaFile[]> {
  await mkdir(join(dir, MEMORY_LOG_DIR), { recursive: true });
  const created: PersonaFile[] = [];
  for (const name of PERSONA_FILES) {
    // Created whole or not at all (a kill mid-seed must not leave a cut file that seeding then never repairs);
    // an existing file, a concurrent seeder's or a hand-made one, always wins.
    if (await createFileAtomic(join(dir, name), DEFAULT_PERSONA[name])) created.push(name);
  }
  return created;
}

export interface SystemPromptOptions {
  now?: Date;
  /** Longest text taken from one file; MEMORY.md keeps its end (the newest facts), others their start. */
  maxFileChars?: number;
}

/**
 * The system prompt: every non-empty persona file under a header naming it, in PERSONA_FILES order,
 * then the current local date and time. Missing files are skipped.
 */
export async function buildSystemPrompt(dir: string, options: SystemPromptOptions = {}): Promise<string> {
  const maxChars = options.maxFileChars ?? 8000;
  const sections: string[] = [];
  for (const name of PERSONA_FILES) {
    const text = (await readFile(join(dir, name), 'utf8').catch(() => '')).trim();
    if (!text) continue;
    sections.push(`## ${name}\n\n${clip(text, maxChars, name === 'MEMORY.md')}`);
  }
  sections.push(`## Now\n\n${describeNow(options.now ?? new Date())}`);
  return sections.join('\n\n');
}

function clip(text: string, maxChars: number, keepEnd: boolean): string {
  if (text.length <= maxChars) return text;
  if (!keepEnd) return `${text.slice(0, maxChars)}\n(…cut)`;
  const tail = text.slice(text.length - maxChars);
  const lineStart = tail.indexOf('\n');
  return `(…older entries left out)\n${lineStart >= 0 ? tail.slice(lineStart + 1) : tail}`;
}

function describeNow(now: Date): string {
  const pad = (n: number) => String(n).padStart(2, '0');
  const weekday = now.toLocaleDateString('en-US', { weekday: 'long' });
  const date = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
  return `Today is ${weekday}, ${date}. The local time is ${pad(now.getHours())}:${pad(now.getMinutes())}.`;
}
