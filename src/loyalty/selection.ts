/**
 * The one rule for quantities. The loyalty service wants `Selection.quantity` an integer > 0. A
 * whole quantity is sent as it is, with the unit price. A fractional quantity (weighed goods:
 * Square "1.70000", Clover unitQty 2500, Toast 0.45) becomes quantity 1 with `price` =
 * `totalPrice` = the exact line total, so the selections still add up to what was sold.
 */
import { ValidationError } from '../kernel/errors.js';
import type { Selection } from './contract.js';
import { decimalToCents, isWholeNumber, mulDecimal, parseDecimal, type Decimal } from '../kernel/money.js';

export interface LineInput {
  id?: string;
  groupId?: string;
  name?: string;
  /** Decimal text or number, > 0. */
  quantity: string | number;
  /** Unit price in major units, when the POS states it. */
  unitPrice?: Decimal;
  /** Line total in cents after the line's own discounts, tax excluded, when the POS states it. */
  totalCents?: number;
}

export function toSelection(line: LineInput, field: string): Selection {
  const quantity = parseDecimal(line.quantity, `${field}.quantity`);
  if (quantity.units <= 0n) throw ValidationError.field(`${field}.quantity`, 'must be greater than 0');
  const totalCents =
    line.totalCents ??
    (line.unitPrice ? decimalToCents(mulDecimal(line.unitPrice, quantity), `${field}.total`) : undefined);
  if (totalCents === undefined) throw ValidationError.field(`${field}.total`, 'is required when the unit price is not given');
  const base: Selection = {
    quantity: 1,
    totalPrice: totalCents,
    ...(line.id ? { id: line.id } : {}),
    ...(line.groupId ? { groupId: line.groupId } : {}),
    ...(line.name ? { displayName: line.name } : {}),
  };
  if (!isWholeNumber(line.quantity)) return { ...base, price: totalCents };
  const whole = Number(quantity.units / 10n ** BigInt(quantity.scale));
  if (!Number.isSafeInteger(whole)) throw ValidationError.field(`${field}.quantity`, 'is too large');
  return {
    ...base,
    quantity: whole,
    ...(line.unitPrice ? { price: decimalToCents(line.unitPrice, `${field}.unitPrice`) } : {}),
  };
}
