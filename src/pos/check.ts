/**
 * How an adapter fills the upstream Check's optional money parts, the same way for every POS.
 */
import type { Check } from '../loyalty/contract.js';

/** The Check's money parts besides its amount. */
export type CheckPart = 'taxAmount' | 'discountAmount' | 'tipAmount' | 'serviceAmount';

/** Zero is absent: the Check carries tax, discount, tip and service only when non-zero. */
export function nonZero(key: CheckPart, cents: number | undefined): Partial<Pick<Check, CheckPart>> {
  return cents ? { [key]: cents } : {};
}
