/**
 * Named mistakes the model checker (`npm run model-check`, docs/correctness.md) must be able to
 * find. Each re-introduces one known way to lose exactly-once at the exact rule that prevents it,
 * through a one-line hook there (`mutant(name)`), so that a checker that stops finding it has
 * stopped checking that rule. Off unless MODEL_CHECK_MUTANT names one (or the checker arms one
 * for a run); refused in production, like the crash tests' failpoints (failpoints.ts).
 */
export const MUTANTS = [
  /** Two unsettled accruals of one customer and one amount are allowed at once: the store holds no accrual keys (memory-store.ts). */
  'no-accrual-keys',
  /** The history verifier claims an operation although another unsettled accrual could have made it (history-verifier.ts). */
  'claim-ambiguous',
  /** The count rule settles as happened where fewer operations than accruals in doubt are in the history (history-verifier.ts `#count`). */
  'count-fewer',
  /** A record whose accrual the history settled (its operation claimed) is probed all the same (delivery.ts, transitions.ts `startProbe`). */
  'probe-claimed',
  /** A probe that found the accrual had happened accrues the purchase again under the original transactionId (transitions.ts `settleProbe`). */
  'reaccrue-same-id',
  /** A probing accrual lets go of its hold (keys, rivalry) while the ambiguity stands (record.ts `isAccrualUnsettled`). */
  'release-hold-early',
  /** An accrue whose outcome is unknown is sent again without asking the operations history (transitions.ts `plan`). */
  'resend-after-reset',
  /** A refund delivered again reverses again (intake.ts and transitions.ts `requestReversal`). */
  'double-reverse',
  /** A reversal the history did not prove is never looked at again, even once the rival that made it ambiguous has settled (transitions.ts `reconsiderUnproven`). */
  'keep-unproven',
  /** The reversal count rule settles as reversed where fewer entries than reversals in doubt are in the history (history-verifier.ts `#countReversals`). */
  'count-reversals-fewer',
] as const;
export type MutantName = (typeof MUTANTS)[number];

let armed: string | undefined = process.env.MODEL_CHECK_MUTANT || undefined;
refuseInProduction(armed);

/** Arms `name` (undefined: none) for what runs next in this process: the checker runs each mutant in turn. */
export function armMutant(name: MutantName | undefined): void {
  refuseInProduction(name);
  armed = name;
}

/** The mutant armed now, if any. */
export function armedMutant(): MutantName | undefined {
  return armed as MutantName | undefined;
}

/** True when the named mistake is to be made here. */
export function mutant(name: MutantName): boolean {
  return armed === name;
}

function refuseInProduction(name: string | undefined): void {
  if (name === undefined) return;
  if (process.env.NODE_ENV === 'production') throw new Error(`MODEL_CHECK_MUTANT=${name} re-introduces a known mistake for the model checker and is refused in production`);
  if (!(MUTANTS as readonly string[]).includes(name)) throw new Error(`unknown mutant ${JSON.stringify(name)}; known: ${MUTANTS.join(', ')}`);
}
