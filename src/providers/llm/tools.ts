// The two-tier provider's tool catalogue (SPEC "Tool catalogue"): what the small model may escalate.

export const ESCALATION_TOOLS = ['memory_lookup', 'think_hard', 'play_song', 'take_photo'] as const;
export type EscalationTool = (typeof ESCALATION_TOOLS)[number];

/** Spoken while the tool runs; only take_photo has one (the others are silent and block). */
export const TOOL_FILLERS: Partial<Record<EscalationTool, string>> = {
  take_photo: '😮 Let me take a look.',
};

/** think_hard uses the long timeout; everything else the short one. */
export function isLongTool(tool: EscalationTool): boolean {
  return tool === 'think_hard';
}

export function isEscalationTool(name: string): name is EscalationTool {
  return (ESCALATION_TOOLS as readonly string[]).includes(name);
}

const fn = (
  name: EscalationTool,
  description: string,
  properties: Record<string, unknown>,
  required: string[],
) => ({
  type: 'function',
  function: {
    name,
    description,
    parameters: { type: 'object', properties, required, additionalProperties: false },
  },
});

/** Chat-completions `tools` with JSON schemas. */
export const TOOL_SCHEMAS = [
  fn(
    'memory_lookup',
    'Look up what you remember about the user or past conversations (names, preferences, facts they told you).',
    { query: { type: 'string', description: 'keywords to search for' } },
    ['query'],
  ),
  fn(
    'think_hard',
    'Ask a much stronger model a hard question that needs careful reasoning, maths or detailed knowledge.',
    { question: { type: 'string', description: 'the full question' } },
    ['question'],
  ),
  fn(
    'play_song',
    "Play a song from the robot's song library.",
    { name: { type: 'string', description: 'the song name' } },
    ['name'],
  ),
  fn('take_photo', 'Look through the camera and describe what is in front of the robot.', {}, []),
];
