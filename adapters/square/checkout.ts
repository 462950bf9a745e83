/**
 * A COMPLETED Square sale → the checkout intent (pure), and how Square's orders and money are read
 * (refund.ts reads return orders the same way). Every figure is read from Square's own read-only
 * totals in minor units (bigint arithmetic, one conversion to cents per figure), and cross-checked against the parts Square states, so that a wrong reading of Square's arithmetic
 * fails loudly (ValidationError → 400 / dead letter) instead of accruing a wrong amount.
 *
 * The Square facts relied on (Square API reference, and the fixtures in
 * test/fixtures/square, whose numbers add up exactly this way):
 * - `Order.total_money` is what the buyer pays: line items after discounts, with their taxes,
 *   plus service charges, plus tips (`total_tip_money`), plus any cash rounding adjustment.
 *   CreateOrderResponse: 1648 + 4528 = 6176 with 510 of tax, so Check.amount = 6176 − 510 = 5666.
 * - `OrderLineItem.total_money` is the line after its own (and its share of order-level)
 *   discounts, INCLUDING its tax (additive tax is added, inclusive tax is already inside), so
 *   `total_money − total_tax_money` is the line's tax-excluded total (1648 − 136 = 1512).
 * - Order-level discounts are spread over the lines by Square (`applied_discounts`), so the lines'
 *   tax-excluded totals plus the order-level service charges' tax-excluded totals plus the rounding
 *   adjustment equal `total − tax − tip`. That equality is checked; an order where it fails (a tip
 *   that is not inside total_money after all, a field Square added) is refused, never guessed.
 */
import { hasContact, normalizeCustomer, type Customer, type RawCustomer } from '../../src/kernel/customer.js';
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import type { Selection } from '../../src/loyalty/contract.js';
import { assertCurrency, minorUnitsToCents, minorUnitsToDecimal } from '../../src/kernel/money.js';
import { nonZero } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { Customer as SquareCustomer, Order, type LineItem, type Money, type Recipient, type ServiceCharge } from './schema.js';

/** The only order state that is a finished sale (OPEN, DRAFT and CANCELED are not). */
export const COMPLETED = 'COMPLETED';

/** Dotted field path under an optional prefix ('order' for `{ order: … }` wrappers). */
export function at(prefix: string, field: string): string {
  return [prefix, field].filter(Boolean).join('.');
}

/** A bare Order, or a Square API answer wrapping one (`{ "order": … }` from Retrieve/Create/Pay/Calculate Order). */
export function unwrapOrder(body: unknown): { raw: unknown; prefix: string } {
  if (isObject(body) && isObject(body.order) && !('id' in body) && !('line_items' in body)) return { raw: body.order, prefix: 'order' };
  return { raw: body, prefix: '' };
}

/** Parses a bare or wrapped Order found at `base` (e.g. 'order' inside `{ refund, order }`); `prefix` is where the Order itself sits. */
export function parseOrder(body: unknown, base = ''): { order: Order; prefix: string } {
  const unwrapped = unwrapOrder(body);
  const prefix = at(base, unwrapped.prefix);
  if (!isObject(unwrapped.raw)) throw ValidationError.field(prefix, 'must be a Square Order object (or { "order": … })');
  return { order: parseWith(Order, unwrapped.raw, prefix), prefix };
}

/** Reads Money fields of one currency as bigint minor units; converts to cents once per figure. */
export class MinorUnits {
  constructor(
    readonly currency: string,
    private readonly prefix: string,
  ) {}

  path(field: string): string {
    return at(this.prefix, field);
  }

  /** Absent money is zero: Square leaves zero totals out (PayOrderResponse has no total_tip_money). */
  read(money: Money | null | undefined, field: string, sign: 'non-negative' | 'any' = 'non-negative'): bigint {
    if (!money) return 0n;
    if (money.currency !== this.currency) {
      throw ValidationError.field(`${this.path(field)}.currency`, `is ${JSON.stringify(echoed(money.currency))} but the order is in ${this.currency}`);
    }
    const minor = BigInt(money.amount);
    if (sign === 'non-negative' && minor < 0n) throw ValidationError.field(`${this.path(field)}.amount`, `must not be negative, got ${money.amount}`);
    return minor;
  }

  cents(minor: bigint, field: string): number {
    return minorUnitsToCents(minor, this.currency, this.path(field));
  }

  /** "1234 JPY" style, for messages that show Square's own figures. */
  show(minor: bigint): string {
    return `${minor} ${this.currency} minor units`;
  }
}

/** Square's line name and variation ("New York Steak" + "Larger"), the way a receipt shows them. */
function displayName(line: { name?: string | null; variation_name?: string | null }): string | undefined {
  const name = line.name?.trim();
  const variation = line.variation_name?.trim();
  if (name && variation) return `${name} (${variation})`;
  return name || variation || undefined;
}

/** Tax-excluded total of a line or service charge: Square's total_money includes its tax. */
export function taxExcluded(money: MinorUnits, item: { total_money: Money; total_tax_money?: Money | null }, field: string): bigint {
  const net = money.read(item.total_money, `${field}.total_money`) - money.read(item.total_tax_money, `${field}.total_tax_money`);
  if (net < 0n) throw ValidationError.field(`${money.path(field)}.total_tax_money`, 'is larger than the total_money it is part of');
  return net;
}

/**
 * Service charges that are not already inside a line's total_money. An APPORTIONED_TREATMENT
 * charge is spread over the lines it applies to (`applied_service_charges` on the line), so adding
 * it again would count it twice.
 */
function standaloneServiceCharges(charges: ServiceCharge[], lines: LineItem[]): { charge: ServiceCharge; index: number }[] {
  const apportioned = new Set(lines.flatMap((l) => (l.applied_service_charges ?? []).map((a) => a.service_charge_uid).filter(Boolean)));
  return charges
    .map((charge, index) => ({ charge, index }))
    .filter(({ charge }) => charge.treatment_type !== 'APPORTIONED_TREATMENT' && !(charge.uid && apportioned.has(charge.uid)));
}

function selectionOf(line: LineItem, index: number, money: MinorUnits): { selection: Selection; netMinor: bigint } {
  const field = `line_items.${index}`;
  const netMinor = taxExcluded(money, line, field);
  const unitPrice = line.base_price_money ? minorUnitsToDecimal(money.read(line.base_price_money, `${field}.base_price_money`), money.currency, money.path(`${field}.base_price_money`)) : undefined;
  const selection = toSelection(
    {
      // Square has no category on a line (pos-facts), so no groupId. The catalog variation id is the
      // product identity, and what return line items repeat, so item refunds find their selection.
      id: line.catalog_object_id ?? undefined,
      name: displayName(line),
      quantity: line.quantity,
      unitPrice,
      totalCents: money.cents(netMinor, `${field}.total_money`),
    },
    money.path(field),
  );
  return { selection, netMinor };
}

/** One contact from Square's loose fields; an unusable phone or email is dropped only when the other one identifies the customer. */
function contactOf(raw: RawCustomer, region: string, field: string): Customer {
  try {
    return normalizeCustomer(raw, region, field);
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    for (const alone of [{ ...raw, phone: null }, { ...raw, email: null }]) {
      try {
        const customer = normalizeCustomer(alone, region, field);
        if (hasContact(customer)) return customer;
      } catch {
        /* this half is unusable too */
      }
    }
    throw error;
  }
}

function recipients(order: Order): { recipient: Recipient; field: string }[] {
  return (order.fulfillments ?? []).flatMap((f, i) =>
    (['pickup_details', 'delivery_details', 'shipment_details'] as const)
      .map((kind) => ({ recipient: f[kind]?.recipient, field: `fulfillments.${i}.${kind}.recipient` }))
      .filter((r): r is { recipient: Recipient; field: string } => Boolean(r.recipient)),
  );
}

/**
 * Contact details in the order itself (fulfillment recipients) win; otherwise the Square customer
 * id (order, recipient or tender) is handed to the core, which fetches the Customer when
 * SQUARE_ACCESS_TOKEN is set and records the checkout as skipped when it is not.
 */
function customerOf(order: Order, region: string, prefix: string): { customer: Customer; customerRef?: string } {
  const found = recipients(order);
  for (const { recipient, field } of found) {
    if (!recipient.phone_number?.trim() && !recipient.email_address?.trim()) continue;
    const customer = contactOf({ phone: recipient.phone_number, email: recipient.email_address }, region, at(prefix, field));
    if (hasContact(customer)) return { customer };
  }
  const ref = [order.customer_id, ...found.map((r) => r.recipient.customer_id), ...(order.tenders ?? []).map((t) => t.customer_id)].map((v) => v?.trim()).find(Boolean);
  return ref ? { customer: {}, customerRef: ref } : { customer: {} };
}

export function customerFromSquare(body: unknown, region: string): Customer {
  const raw = isObject(body) && isObject(body.customer) ? body.customer : body;
  const prefix = raw === body ? '' : 'customer';
  const c = parseWith(SquareCustomer, raw, prefix);
  return contactOf({ phone: c.phone_number, email: c.email_address, firstName: c.given_name, lastName: c.family_name }, region, prefix || 'customer');
}

/** A COMPLETED sale → CheckoutIntent. Return orders and exchanges are refused here (they are refunds). */
export function checkoutFromOrder(body: unknown, context: AdapterContext): CheckoutIntent {
  const { order, prefix } = parseOrder(body);
  const path = (field: string) => at(prefix, field);
  if (!order.id) throw ValidationError.field(path('id'), 'is required: the Square order id identifies the transaction');
  if (order.state !== COMPLETED) {
    throw ValidationError.field(path('state'), `is ${echoed(JSON.stringify(order.state ?? null))}: only ${COMPLETED} Square orders are sales that accrue (OPEN, DRAFT and CANCELED ones are not)`);
  }
  const lines = order.line_items ?? [];
  if ((order.returns ?? []).length > 0) {
    throw ValidationError.field(
      path('returns'),
      lines.length > 0
        ? 'this order is an exchange (returned and new items in one order); the bridge does not split exchanges automatically: post the sale to /v1/checkouts/generic and the return to /v1/refunds/generic'
        : 'this is a return order: it is a refund, post it to /v1/refunds/square (its PaymentRefund webhook reverses it too)',
    );
  }
  if (!order.total_money) throw ValidationError.field(path('total_money'), 'is required: a completed Square order states its total');
  const money = new MinorUnits(assertCurrency(order.total_money.currency, path('total_money.currency')), prefix);

  const total = money.read(order.total_money, 'total_money');
  const tax = money.read(order.total_tax_money, 'total_tax_money');
  const tip = money.read(order.total_tip_money, 'total_tip_money');
  const discount = money.read(order.total_discount_money, 'total_discount_money');
  const service = money.read(order.total_service_charge_money, 'total_service_charge_money');
  const rounding = money.read(order.rounding_adjustment?.amount_money, 'rounding_adjustment.amount_money', 'any');
  const amount = total - tax - tip;
  if (amount < 0n) throw ValidationError.field(path('total_money'), `is less than its tax and tip (${money.show(total)} − ${money.show(tax)} − ${money.show(tip)})`);

  const read = lines.map((line, i) => selectionOf(line, i, money));
  const linesNet = read.reduce((sum, r) => sum + r.netMinor, 0n);
  const chargesNet = standaloneServiceCharges(order.service_charges ?? [], lines).reduce((sum, { charge, index }) => sum + taxExcluded(money, charge, `service_charges.${index}`), 0n);
  if (linesNet + chargesNet + rounding !== amount) {
    throw ValidationError.field(
      path('total_money'),
      `does not add up: total_money − total_tax_money − total_tip_money = ${money.show(amount)}, but the line items (tax excluded) ${money.show(linesNet)} + service charges (tax excluded) ${money.show(chargesNet)} + rounding ${money.show(rounding)} = ${money.show(linesNet + chargesNet + rounding)}; refusing to guess which figure is right`,
    );
  }

  const { customer, customerRef } = customerOf(order, context.defaultPhoneRegion, prefix);
  return {
    // Square order ids are unique across merchants and locations: no scope is needed.
    orderId: order.id,
    customer,
    ...(customerRef ? { customerRef } : {}),
    check: {
      amount: money.cents(amount, 'total_money'),
      currency: money.currency,
      selections: read.map((r) => r.selection),
      externalTransactionId: order.id,
      ...(order.created_at ? { checkOpenedAt: order.created_at } : {}),
      ...(order.closed_at ? { checkClosedAt: order.closed_at } : {}),
      ...nonZero('taxAmount', money.cents(tax, 'total_tax_money')),
      ...nonZero('discountAmount', money.cents(discount, 'total_discount_money')),
      ...nonZero('tipAmount', money.cents(tip, 'total_tip_money')),
      ...nonZero('serviceAmount', money.cents(service, 'total_service_charge_money')),
    },
  };
}
