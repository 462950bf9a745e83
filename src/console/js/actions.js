// @ts-check
/**
 * Whether an operator action is allowed now, as the API says (`actions` of a record's or a dead
 * letter's detail: `{ allowed, why?, outcomes? }` for each). The page never decides it: an action
 * the API gave no rule for (an older bridge, an answer cut short, an action the page knows and the
 * bridge does not) is shown not allowed, with that as the reason, never allowed.
 */

/** @import { ActionRule } from './types.js' */

/** The reason shown for an action the API gave no rule for. */
export const NO_RULE = 'the bridge gave no rule for this action, so the console does not offer it';

/**
 * The API's rule for `name` in `actions`; not allowed, with why, when it gave none.
 * @param {Readonly<Partial<Record<string, ActionRule>>> | null | undefined} actions
 * @param {string} name
 * @returns {ActionRule}
 */
export function ruleOf(actions, name) {
  const rule = actions && typeof actions === 'object' && Object.hasOwn(actions, name) ? actions[name] : undefined;
  if (!rule || typeof rule !== 'object' || typeof rule.allowed !== 'boolean') return { allowed: false, why: NO_RULE };
  return rule;
}
