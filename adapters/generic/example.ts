/**
 * The generic payload's example (README "The generic payload"): one checkout of three lattes with
 * tax and a tip, and its full refund. The OpenAPI document shows it, the tests post it and the
 * benchmarks vary it, so all three speak of the same order.
 */
import type { z } from 'zod';
import type { GenericCheckout } from './schema.js';

export type GenericCheckoutBody = z.input<typeof GenericCheckout>;

export const EXAMPLE_CHECKOUT = {
  orderId: 'A-1001',
  currency: 'USD',
  total: '59.97',
  tax: '4.80',
  discount: '0',
  tip: '5.00',
  serviceCharge: '0',
  openedAt: '2026-11-21T10:00:00Z',
  closedAt: '2026-11-21T10:20:00Z',
  customer: { phone: '+15550001111', email: 'a@b.test', cardSerial: '11-123456-1', firstName: 'Ann', lastName: 'Lee' },
  items: [{ id: 'sku-1', groupId: 'coffee', name: 'Latte', quantity: 3, unitPrice: '19.99', total: '59.97' }],
} as const satisfies GenericCheckoutBody;
