/** A generic checkout → the checkout intent: the payload already states the Check's figures. */
import { normalizeCustomer } from '../../src/kernel/customer.js';
import { nonZero } from '../../src/pos/check.js';
import type { AdapterContext, CheckoutIntent } from '../../src/pos/contract.js';
import { toSelection } from '../../src/loyalty/selection.js';
import { parseWith } from '../../src/kernel/validation.js';
import { GenericCheckout } from './schema.js';

export function parseGenericCheckout(body: unknown, context: AdapterContext): CheckoutIntent {
  const order = parseWith(GenericCheckout, body);
  const selections = order.items.map((item, i) =>
    toSelection({ id: item.id, groupId: item.groupId, name: item.name, quantity: item.quantity, unitPrice: item.unitPrice, totalCents: item.total }, `items.${i}`),
  );
  return {
    orderId: order.orderId,
    scope: order.storeId,
    customer: normalizeCustomer(order.customer, context.defaultPhoneRegion),
    check: {
      amount: order.total,
      // The contract: a payload without a currency takes the merchant's (DEFAULT_CURRENCY for the default merchant).
      currency: order.currency ?? context.defaultCurrency,
      selections,
      externalTransactionId: order.orderId,
      ...(order.openedAt ? { checkOpenedAt: order.openedAt } : {}),
      ...(order.closedAt ? { checkClosedAt: order.closedAt } : {}),
      ...nonZero('taxAmount', order.tax),
      ...nonZero('discountAmount', order.discount),
      ...nonZero('tipAmount', order.tip),
      ...nonZero('serviceAmount', order.serviceCharge),
    },
  };
}
