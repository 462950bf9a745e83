/**
 * Square refunds → the refund intent (pure), measured tax-excluded from Square's own figures like
 * the sale (checkout.ts), and refused rather than estimated where Square does not state them.
 *
 * The Square fact relied on (Square API reference, and the fixtures in test/fixtures/square):
 * - A `PaymentRefund.order_id` names "the Order that was created for the refund. This isn't the same
 *   Order object that was created for the initial Payment" (Square, Retrieve Refunds): a return
 *   order whose `returns[].source_order_id` is the original order and whose `return_line_items`
 *   say, tax-excluded, what was returned.
 */
import { echoed, ValidationError } from '../../src/kernel/errors.js';
import { assertCurrency, isWholeNumber, minorUnitsToCents } from '../../src/kernel/money.js';
import type { RefundIntent, RefundLine } from '../../src/pos/contract.js';
import { isObject, parseWith } from '../../src/kernel/validation.js';
import { at, COMPLETED, MinorUnits, parseOrder, taxExcluded } from './checkout.js';
import { PaymentRefund, type Order } from './schema.js';

/**
 * A return order → the partial refund of its source order, measured from its return line items
 * and returned service charges, tax excluded (their total_money − total_tax_money, like sale
 * lines), tips left out. `refundId` is the return order's id, so the return order posted directly
 * and each PaymentRefund of it (one per refunded tender) are the same refund to the core.
 */
function refundFromReturnOrder(order: Order, prefix: string, refundCurrency?: { currency: string; field: string }): RefundIntent {
  const path = (field: string) => at(prefix, field);
  if (!order.id) throw ValidationError.field(path('id'), 'is required: the return order id identifies the refund');
  const returns = order.returns ?? [];
  const sources = [...new Set(returns.map((r) => r.source_order_id))];
  if (sources.length !== 1 || !sources[0]) {
    throw ValidationError.field(path('returns'), `must name exactly one source_order_id (the sale being refunded), got ${echoed(sources.map((s) => JSON.stringify(s ?? null)).join(', '))}`);
  }
  if ((order.line_items ?? []).length > 0) {
    throw ValidationError.field(path('line_items'), 'are present next to returns: an exchange is not split automatically; post the sale to /v1/checkouts/generic and the return to /v1/refunds/generic');
  }
  const firstMoney = order.return_amounts?.total_money ?? returns.flatMap((r) => r.return_line_items ?? []).at(0)?.total_money ?? returns.flatMap((r) => r.return_service_charges ?? []).at(0)?.total_money;
  if (!firstMoney) throw ValidationError.field(path('returns'), 'state no returned money (no return_line_items, return_service_charges or return_amounts)');
  const money = new MinorUnits(assertCurrency(firstMoney.currency, path('return_amounts.total_money.currency')), prefix);
  if (refundCurrency && refundCurrency.currency !== money.currency) {
    throw ValidationError.field(refundCurrency.field, `is ${JSON.stringify(echoed(refundCurrency.currency))} but the return order is in ${money.currency}`);
  }

  let refunded = 0n;
  const lines: RefundLine[] = [];
  let itemized = true;
  returns.forEach((ret, r) => {
    (ret.return_line_items ?? []).forEach((line, i) => {
      const field = `returns.${r}.return_line_items.${i}`;
      const net = taxExcluded(money, line, field);
      refunded += net;
      // The core takes refunded lines off the original selections by id and whole quantity; a line
      // without a catalog id or with a weighed quantity cannot be matched, so the refund is then
      // measured by amount only (still exact).
      if (line.catalog_object_id && isWholeNumber(line.quantity) && Number(line.quantity) > 0) {
        lines.push({ id: line.catalog_object_id, quantity: Number(line.quantity), totalCents: money.cents(net, `${field}.total_money`) });
      } else itemized = false;
    });
    (ret.return_service_charges ?? []).forEach((charge, c) => {
      if (charge.treatment_type === 'APPORTIONED_TREATMENT') return; // already inside the returned lines' totals
      refunded += taxExcluded(money, charge, `returns.${r}.return_service_charges.${c}`);
    });
    refunded += money.read(ret.rounding_adjustment?.amount_money, `returns.${r}.rounding_adjustment.amount_money`, 'any');
  });

  const stated = order.return_amounts;
  if (stated?.total_money) {
    const expected = money.read(stated.total_money, 'return_amounts.total_money') - money.read(stated.tax_money, 'return_amounts.tax_money') - money.read(stated.tip_money, 'return_amounts.tip_money');
    if (expected !== refunded) {
      throw ValidationError.field(
        path('return_amounts'),
        `do not add up: total − tax − tip = ${money.show(expected)}, but the returned lines and service charges (tax excluded) come to ${money.show(refunded)}; refusing to guess which figure is right`,
      );
    }
  }
  if (refunded < 0n) throw ValidationError.field(path('returns'), `come to a negative amount (${money.show(refunded)})`);
  return {
    orderId: sources[0],
    refundId: order.id,
    amountCents: money.cents(refunded, 'returns'),
    ...(itemized && lines.length > 0 ? { items: lines } : {}),
  };
}

/**
 * A PaymentRefund whose order is the sale itself (no returns[]): its amount includes tax and tip,
 * so it is exact only when it refunds the whole order total (→ a full refund) or when the order
 * has neither tax nor tip (→ the amount as it is). Anything else would need the tax split of a
 * partial refund, which Square does not state: refused, never estimated.
 */
function refundFromSaleOrder(refund: PaymentRefund, order: Order, prefix: string, refundPrefix: string): RefundIntent {
  const r = (field: string) => at(refundPrefix, field);
  const path = (field: string) => at(prefix, field);
  if (!order.total_money) throw ValidationError.field(path('total_money'), 'is required to measure the refund against the order');
  const money = new MinorUnits(assertCurrency(order.total_money.currency, path('total_money.currency')), prefix);
  if (refund.amount_money.currency !== money.currency) {
    throw ValidationError.field(r('amount_money.currency'), `is ${JSON.stringify(echoed(refund.amount_money.currency))} but the order is in ${money.currency}`);
  }
  const refunded = BigInt(refund.amount_money.amount);
  const total = money.read(order.total_money, 'total_money');
  const tax = money.read(order.total_tax_money, 'total_tax_money');
  const tip = money.read(order.total_tip_money, 'total_tip_money');
  if (refunded <= 0n) throw ValidationError.field(r('amount_money.amount'), `must be greater than 0, got ${refund.amount_money.amount}`);
  if (refunded > total) throw ValidationError.field(r('amount_money.amount'), `(${money.show(refunded)}) is more than the order's total_money (${money.show(total)})`);
  if (refunded === total) return { orderId: order.id!, refundId: refund.id };
  if (tax === 0n && tip === 0n) return { orderId: order.id!, refundId: refund.id, amountCents: minorUnitsToCents(refunded, money.currency, r('amount_money')) };
  throw ValidationError.field(
    r('amount_money'),
    `refunds ${money.show(refunded)} of an order of ${money.show(total)} with ${money.show(tax)} tax and ${money.show(tip)} tip, and names no returned items: how much of it is tax or tip is not stated, so it cannot be measured exactly; refund the items through a return order, or post the tax-excluded amount to /v1/refunds/generic`,
  );
}

/** How the history of a record says that a refund was measured from the ledger, not from Square's figures. */
export const MEASURED_WITHOUT_RETURN_ORDER = 'measured without the return order';

/**
 * A PaymentRefund that comes without its order (posted bare or as `{ "refund": … }`, or from a
 * refund webhook while SQUARE_ACCESS_TOKEN is unset): its amount includes tax and tip, and which
 * part is which only the return order says. So it is measured against the sale as the ledger
 * recorded it, the record its `order_id` names (a refund through Square's Refunds API names the
 * sale): all that was paid is a full refund, less a pro rata share of the Check, noted on the
 * record (see the core's `measureFromLedger`).
 */
function refundWithoutOrder(refund: PaymentRefund, refundPrefix: string): RefundIntent {
  const r = (field: string) => at(refundPrefix, field);
  if (!refund.order_id) throw ValidationError.field(r('order_id'), 'is required: it names the order the refund belongs to');
  const currency = assertCurrency(refund.amount_money.currency, r('amount_money.currency'));
  const cents = minorUnitsToCents(refund.amount_money.amount, currency, r('amount_money.amount'));
  if (cents <= 0) throw ValidationError.field(r('amount_money.amount'), `must be greater than 0, got ${refund.amount_money.amount}`);
  return {
    orderId: refund.order_id,
    refundId: refund.id,
    paidBack: {
      cents,
      currency,
      note: MEASURED_WITHOUT_RETURN_ORDER,
      unknownOrder:
        'a PaymentRefund without its order is measured against the sale its order_id names, and that may be the return order Square created for the refund, which only Square can lead back to the sale. Set SQUARE_ACCESS_TOKEN (the bridge then reads the return order), or post { "refund": …, "order": … } with that order (GET /v2/orders/{order_id})',
    },
  };
}

/** A COMPLETED PaymentRefund that comes without its order: the order to read from Square, when the bridge can. */
export function paymentRefundOrderId(body: unknown): { orderId: string; refund: unknown } | undefined {
  if (!isObject(body)) return undefined;
  const raw = isObject(body.refund) ? body.refund : 'amount_money' in body ? body : undefined;
  if (!isObject(raw) || (raw !== body && body.order !== undefined)) return undefined;
  const parsed = PaymentRefund.safeParse(raw);
  if (!parsed.success || parsed.data.status !== COMPLETED || !parsed.data.order_id) return undefined;
  return { orderId: parsed.data.order_id, refund: raw };
}

/**
 * Refund payloads: `{ refund, order }` (a PaymentRefund with the order its order_id names, as the
 * webhook path builds it after fetching that order), a return order alone (bare or `{ order }`),
 * or a PaymentRefund alone (bare or `{ refund }`): measured from the ledger, see
 * `refundWithoutOrder` (with SQUARE_ACCESS_TOKEN set, the core reads its order first and posts
 * `{ refund, order }` here instead).
 */
export function refundFromSquare(body: unknown): RefundIntent {
  const isRefund = (v: unknown) => isObject(v) && 'amount_money' in v;
  if (isObject(body) && (isObject(body.refund) || isRefund(body))) {
    const [rawRefund, refundPrefix] = isObject(body.refund) ? [body.refund, 'refund'] : [body, ''];
    const refund = parseWith(PaymentRefund, rawRefund, refundPrefix);
    if (refund.status !== COMPLETED) {
      throw ValidationError.field(at(refundPrefix, 'status'), `is ${echoed(JSON.stringify(refund.status))}: a Square refund is acted on once its status is ${COMPLETED}`);
    }
    if (refundPrefix === '' || body.order === undefined) return refundWithoutOrder(refund, refundPrefix);
    const { order, prefix: orderPrefix } = parseOrder(body.order, 'order');
    if (!refund.order_id) throw ValidationError.field(at(refundPrefix, 'order_id'), 'is required: it names the order the refund belongs to');
    if (order.id !== refund.order_id) {
      throw ValidationError.field(at(orderPrefix, 'id'), `is ${echoed(JSON.stringify(order.id ?? null))} but the refund's order_id is ${echoed(JSON.stringify(refund.order_id))}`);
    }
    return (order.returns ?? []).length > 0
      ? refundFromReturnOrder(order, orderPrefix, { currency: refund.amount_money.currency, field: at(refundPrefix, 'amount_money.currency') })
      : refundFromSaleOrder(refund, order, orderPrefix, refundPrefix);
  }
  const { order, prefix } = parseOrder(body);
  if ((order.returns ?? []).length === 0) {
    throw ValidationError.field(
      at(prefix, 'returns'),
      'are missing: a Square order posted as a refund must be a return order (returns[].source_order_id); a PaymentRefund is posted as { "refund": …, "order": … }',
    );
  }
  if (order.state !== COMPLETED) {
    throw ValidationError.field(at(prefix, 'state'), `is ${echoed(JSON.stringify(order.state ?? null))}: a return order is acted on once it is ${COMPLETED}`);
  }
  return refundFromReturnOrder(order, prefix);
}
