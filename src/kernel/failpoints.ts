/**
 * Named points where a crash test can have the process kill itself (SIGKILL, no cleanup), to prove
 * that a crash at that exact instant loses and doubles nothing. Set only by BRIDGE_FAILPOINTS in
 * crash tests and the chaos campaign; configuration refuses it in production.
 */
export const FAILPOINTS = [
  /** Checkout validated, nothing written yet. */
  'checkout:before-ledger-write',
  /** Checkout recorded (already marked in flight), no call made yet. */
  'checkout:after-ledger-write',
  /** Refund recorded on the ledger, no call made yet. */
  'refund:after-ledger-write',
  /** In-flight marker written, request not sent. */
  'call:before-send',
  /** The loyalty service answered (and committed); the outcome is not recorded yet. */
  'call:after-answer',
  /** Partial refund: the whole accrual is reversed; the remainder's record does not exist yet. */
  'partial:before-remainder',
  /** Partial refund: the remainder's record exists but is not linked from the original yet. */
  'partial:before-link',
] as const;
export type Failpoint = (typeof FAILPOINTS)[number];

let armed = new Set<string>();

export function armFailpoints(names: readonly string[]): void {
  armed = new Set(names);
}

export function failpoint(name: Failpoint): void {
  if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
}
