// The robot's six mutually exclusive states and two toggles (SPEC "Robot state and toggles"). Pure.
export const ROBOT_STATES = ['idle', 'talk', 'story_time', 'security', 'sleep', 'dance'] as const;
export type RobotState = (typeof ROBOT_STATES)[number];

export const TOGGLE_NAMES = ['kid_mode', 'smart_mode'] as const;
export type ToggleName = (typeof TOGGLE_NAMES)[number];

export function isRobotState(value: unknown): value is RobotState {
  return typeof value === 'string' && (ROBOT_STATES as readonly string[]).includes(value);
}
