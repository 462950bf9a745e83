/**
 * The Clover, Toast and Loyverse fakes and fixtures held against each vendor's documented objects,
 * field by field (docs/simulator-pos-apis.md, "Checked against": which document each table was
 * written from, and the differences that remain). Every fake answer, read over real HTTP, and every
 * API object in test/fixtures/<pos>/ may hold only the fields its table lists, each of the listed
 * type. `null` is accepted for any listed field: the vendors' schemas do not mark nullability, and
 * their own sample payloads (the fixtures) carry nulls for absent values.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { call, fakePosApis, TWO_LINES } from '../support/pos-http.js';

/**
 * A field's documented type: a JSON type, a date-time or epoch-millisecond time, another table
 * (`@Name`), an array of one (`[]@Name` / `[]string`), or Clover's collection wrapper
 * (`{elements}Name`: the documented array, as Clover answers it, `{ elements: [ … ] }`).
 */
type FieldType = string;
type Table = Record<string, FieldType>;
type Tables = Record<string, Table>;

function check(tables: Tables, tableName: string, value: unknown, path: string, problems: string[]): void {
  const table = tables[tableName];
  if (table === undefined) throw new Error(`no table ${tableName}`);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    problems.push(`${path}: expected a ${tableName} object, got ${JSON.stringify(value)}`);
    return;
  }
  for (const [field, v] of Object.entries(value as Record<string, unknown>)) {
    const type = table[field];
    const at = `${path}.${field}`;
    if (type === undefined) problems.push(`${at}: not a documented ${tableName} field`);
    else if (v !== null) checkType(tables, type, v, at, problems);
  }
}

function checkType(tables: Tables, type: FieldType, v: unknown, at: string, problems: string[]): void {
  const bad = () => problems.push(`${at}: expected ${type}, got ${JSON.stringify(v)}`);
  if (type.startsWith('@')) return check(tables, type.slice(1), v, at, problems);
  if (type.startsWith('[]')) {
    if (!Array.isArray(v)) return void bad();
    v.forEach((x, i) => x !== null && checkType(tables, type.slice(2), x, `${at}[${i}]`, problems));
    return;
  }
  if (type.startsWith('{elements}')) {
    const list = (v as { elements?: unknown }).elements;
    if (typeof v !== 'object' || v === null || !Array.isArray(list) || Object.keys(v).some((k) => k !== 'elements' && k !== 'href')) return void bad();
    list.forEach((x, i) => checkType(tables, `@${type.slice('{elements}'.length)}`, x, `${at}.elements[${i}]`, problems));
    return;
  }
  switch (type) {
    case 'string':
      return void (typeof v === 'string' || bad());
    case 'number':
      return void (typeof v === 'number' || bad());
    case 'integer':
      return void (Number.isInteger(v) || bad());
    case 'boolean':
      return void (typeof v === 'boolean' || bad());
    case 'object':
      return void ((typeof v === 'object' && !Array.isArray(v)) || bad());
    case 'epochMs':
      return void ((Number.isInteger(v) && (v as number) > 1e11) || bad());
    case 'datetime':
      return void ((typeof v === 'string' && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$/.test(v)) || bad());
    case 'yyyymmdd':
      return void ((Number.isInteger(v) && /^\d{8}$/.test(String(v))) || bad());
    default:
      throw new Error(`unknown type ${type}`);
  }
}

function problemsOf(tables: Tables, tableName: string, value: unknown, path = tableName): string[] {
  const problems: string[] = [];
  check(tables, tableName, value, path, problems);
  return problems;
}

const fixture = (path: string): any => JSON.parse(readFileSync(new URL(`../fixtures/${path}`, import.meta.url), 'utf8'));

// ---------------------------------------------------------------------------------------------
// Clover: REST API v3 (docs/simulator-pos-apis.md, "Checked against"). Order, Payment and Customer
// from the platform reference's schemas; LineItem, Discount, Refund and the references from the
// reference's object pages. `href` is on every object Clover answers (the fixtures), though the
// schemas leave it out.
// ---------------------------------------------------------------------------------------------
const REF = { href: 'string', id: 'string' };
const CLOVER: Tables = {
  Ref: REF,
  Order: {
    href: 'string', id: 'string', currency: 'string', customers: '{elements}Customer', employee: '@Ref', total: 'integer', externalReferenceId: 'string',
    unpaidBalance: 'integer', paymentState: 'string', title: 'string', note: 'string', orderType: 'object', taxRemoved: 'boolean', isVat: 'boolean',
    state: 'string', manualTransaction: 'boolean', groupLineItems: 'boolean', testMode: 'boolean', payType: 'string', createdTime: 'epochMs',
    clientCreatedTime: 'epochMs', modifiedTime: 'epochMs', deletedTimestamp: 'epochMs', serviceCharge: 'object', additionalCharges: '{elements}Ref',
    discounts: '{elements}Discount', lineItems: '{elements}LineItem', payments: '{elements}Payment', refunds: '{elements}Refund', credits: '{elements}Ref',
    voids: '{elements}Ref', preAuths: '{elements}Ref', device: '@Ref', authorizations: '{elements}Ref', merchant: '@Ref', printGroups: '{elements}Ref',
    orderFulfillmentEvent: 'object',
  },
  LineItem: {
    href: 'string', id: 'string', orderRef: '@Ref', item: '@Ref', name: 'string', alternateName: 'string', price: 'integer', priceWithModifiers: 'integer',
    priceWithModifiersAndItemAndOrderDiscounts: 'integer', unitQty: 'integer', unitName: 'string', itemCode: 'string', note: 'string', printed: 'boolean',
    exchangedLineItem: '@Ref', binName: 'string', userData: 'string', createdTime: 'epochMs', orderClientCreatedTime: 'epochMs',
    discounts: '{elements}Discount', discountAmount: 'integer', exchanged: 'boolean', modifications: '{elements}Ref', refunded: 'boolean', refund: '@Ref',
    isRevenue: 'boolean', taxRates: '{elements}Ref', payments: '{elements}Ref', revenueAmount: 'integer', isOrderFee: 'boolean',
  },
  Discount: { href: 'string', id: 'string', orderRef: '@Ref', lineItemRef: '@Ref', discount: '@Ref', approver: '@Ref', name: 'string', amount: 'integer', percentage: 'integer' },
  Payment: {
    href: 'string', id: 'string', order: '@Ref', device: '@Ref', tender: '@Tender', amount: 'integer', tipAmount: 'integer', taxAmount: 'integer',
    cashbackAmount: 'integer', cashTendered: 'integer', externalPaymentId: 'string', employee: '@Ref', createdTime: 'epochMs', clientCreatedTime: 'epochMs',
    gatewayProcessingTime: 'epochMs', modifiedTime: 'epochMs', offline: 'boolean', result: 'string', cardTransaction: 'object', serviceCharge: 'object',
    attributes: 'object', additionalCharges: '{elements}Ref', taxRates: '{elements}Ref', refunds: '{elements}Refund', note: 'string',
    lineItemPayments: '{elements}Ref', authorization: 'object', voidPaymentRef: '@Ref', voidReason: 'string', voidReasonDetails: 'object', dccInfo: 'object',
    transactionSettings: 'object', germanInfo: 'object', appTracking: 'object', cashAdvanceExtra: 'object', transactionInfo: 'object',
    signatureDisclaimer: 'object', externalReferenceId: 'string', merchant: '@Ref', increments: '{elements}Ref', purchaseCardL2: 'object',
    purchaseCardL3: 'object', oceanGatewayInfo: 'object', terminalManagementComponents: '[]object', emiInfo: 'object',
  },
  Tender: { href: 'string', id: 'string', editable: 'boolean', labelKey: 'string', label: 'string', opensCashDrawer: 'boolean', supportsTipping: 'boolean', enabled: 'boolean', visible: 'boolean', instructions: 'string' },
  Refund: {
    href: 'string', id: 'string', orderRef: '@Ref', device: '@Ref', amount: 'integer', taxAmount: 'integer', tipAmount: 'integer', createdTime: 'epochMs',
    clientCreatedTime: 'epochMs', payment: '@Ref', employee: '@Ref', lineItems: '{elements}Ref', overrideMerchantTender: '@Ref', taxableAmountRates: '{elements}Ref',
    serviceChargeAmount: 'object', additionalCharges: '{elements}Ref', voided: 'boolean', voidReason: 'string', appTracking: 'object', merchant: '@Ref',
    externalReferenceId: 'string', transactionInfo: 'object', status: 'string', cardTransaction: 'object',
  },
  Customer: {
    href: 'string', id: 'string', merchant: '@Ref', firstName: 'string', lastName: 'string', marketingAllowed: 'boolean', customerSince: 'epochMs',
    orders: '{elements}Ref', addresses: '{elements}Ref', emailAddresses: '{elements}EmailAddress', phoneNumbers: '{elements}PhoneNumber', cards: '{elements}Ref', metadata: 'object',
  },
  EmailAddress: { href: 'string', id: 'string', emailAddress: 'string', verifiedTime: 'epochMs', primaryEmail: 'boolean', customer: '@Ref' },
  PhoneNumber: { href: 'string', id: 'string', phoneNumber: 'string', customer: '@Ref' },
  OrderList: { elements: '[]@Order', href: 'string' },
  Error: { message: 'string' },
};

// ---------------------------------------------------------------------------------------------
// Toast: orders API v2, Order and its parts from the orders API's published OpenAPI definitions;
// ErrorMessage from the same family's data definitions.
// ---------------------------------------------------------------------------------------------
const EXT = { guid: 'string', entityType: 'string', externalId: 'string' };
const TOAST: Tables = {
  ExternalReference: EXT,
  ToastReference: { guid: 'string', entityType: 'string' },
  ConfigReference: { ...EXT, multiLocationId: 'string' },
  Device: { id: 'string' },
  Order: {
    ...EXT, openedDate: 'datetime', modifiedDate: 'datetime', promisedDate: 'datetime', channelGuid: 'string', diningOption: '@ExternalReference', checks: '[]@Check',
    table: '@ExternalReference', serviceArea: '@ExternalReference', restaurantService: '@ExternalReference', revenueCenter: '@ExternalReference', source: 'string',
    duration: 'integer', deliveryInfo: 'object', requiredPrepTime: 'string', estimatedFulfillmentDate: 'datetime', numberOfGuests: 'integer', voided: 'boolean',
    voidDate: 'datetime', voidBusinessDate: 'yyyymmdd', paidDate: 'datetime', closedDate: 'datetime', deletedDate: 'datetime', deleted: 'boolean',
    businessDate: 'yyyymmdd', server: '@ExternalReference', pricingFeatures: '[]string', approvalStatus: 'string', createdDevice: '@Device', createdDate: 'datetime',
    lastModifiedDevice: '@Device', curbsidePickupInfo: 'object', marketplaceFacilitatorTaxInfo: 'object', createdInTestMode: 'boolean', appliedPackagingInfo: 'object',
    excessFood: 'boolean', displayNumber: 'string',
  },
  Check: {
    ...EXT, createdDate: 'datetime', openedDate: 'datetime', closedDate: 'datetime', modifiedDate: 'datetime', deletedDate: 'datetime', deleted: 'boolean',
    selections: '[]@Selection', customer: '@Customer', appliedLoyaltyInfo: 'object', taxExempt: 'boolean', displayNumber: 'string', appliedServiceCharges: '[]object',
    amount: 'number', taxAmount: 'number', totalAmount: 'number', payments: '[]@Payment', tabName: 'string', paymentStatus: 'string', appliedDiscounts: '[]@AppliedDiscount',
    voided: 'boolean', voidDate: 'datetime', voidBusinessDate: 'yyyymmdd', paidDate: 'datetime', createdDevice: '@Device', lastModifiedDevice: '@Device', duration: 'integer',
    openedBy: '@ExternalReference',
  },
  Selection: {
    ...EXT, item: '@ConfigReference', itemGroup: '@ConfigReference', optionGroup: '@ConfigReference', preModifier: '@ConfigReference', quantity: 'number',
    seatNumber: 'integer', unitOfMeasure: 'string', selectionType: 'string', salesCategory: '@ConfigReference', appliedDiscounts: '[]@AppliedDiscount', deferred: 'boolean',
    preDiscountPrice: 'number', price: 'number', tax: 'number', voided: 'boolean', voidDate: 'datetime', voidBusinessDate: 'yyyymmdd', voidReason: '@ExternalReference',
    refundDetails: '@RefundDetails', displayName: 'string', plu: 'string', premodifierPlu: 'string', createdDate: 'datetime', modifiedDate: 'datetime', modifiers: '[]@Selection',
    fulfillmentStatus: 'string', fulfillment: 'object', taxInclusion: 'string', appliedTaxes: '[]@AppliedTaxRate', diningOption: '@ExternalReference', openPriceAmount: 'number',
    receiptLinePrice: 'number', optionGroupPricingMode: 'string', externalPriceAmount: 'number', splitOrigin: '@ExternalReference',
  },
  Payment: {
    ...EXT, paidDate: 'datetime', paidBusinessDate: 'yyyymmdd', type: 'string', cardEntryMode: 'string', amount: 'number', tipAmount: 'number', amountTendered: 'number',
    cardType: 'string', first6Digits: 'string', last4Digits: 'string', originalProcessingFee: 'number', server: '@ExternalReference', cashDrawer: '@ExternalReference',
    refundStatus: 'string', refund: '@Refund', paymentStatus: 'string', voidInfo: 'object', houseAccount: '@ExternalReference', otherPayment: '@ExternalReference',
    createdDevice: '@Device', lastModifiedDevice: '@Device', mcaRepaymentAmount: 'number', cardPaymentId: 'string', orderGuid: 'string', checkGuid: 'string',
    tenderTransactionGuid: 'string', networkTransactionIdentifier: 'string',
  },
  Customer: { guid: 'string', entityType: 'string', firstName: 'string', lastName: 'string', phone: 'string', phoneCountryCode: 'string', email: 'string' },
  AppliedTaxRate: {
    guid: 'string', entityType: 'string', taxRate: '@ToastReference', name: 'string', rate: 'number', taxAmount: 'number', type: 'string',
    facilitatorCollectAndRemitTax: 'boolean', displayName: 'string', jurisdiction: 'string', jurisdictionType: 'string',
  },
  AppliedDiscount: {
    ...EXT, name: 'string', discountAmount: 'number', nonTaxDiscountAmount: 'number', discount: '@ToastReference', triggers: '[]object', approver: '@ExternalReference',
    processingState: 'string', appliedDiscountReason: 'object', loyaltyDetails: 'object', comboItems: '[]@ExternalReference', appliedPromoCode: 'string',
    discountType: 'string', discountPercent: 'number',
  },
  RefundDetails: { refundAmount: 'number', taxRefundAmount: 'number', refundTransaction: '@ToastReference' },
  Refund: { refundAmount: 'number', tipRefundAmount: 'number', refundDate: 'datetime', refundBusinessDate: 'yyyymmdd', refundTransaction: '@ToastReference' },
  ErrorMessage: {
    status: 'integer', code: 'integer', message: 'string', messageKey: 'string', fieldName: 'string', link: 'string', requestId: 'string', developerMessage: 'string',
    errors: '[]@ErrorMessage', canRetry: 'string',
  },
};

// ---------------------------------------------------------------------------------------------
// Loyverse: API v1.0 reference for receipts and customers. The reference's published schemas are
// partial; the fields of a real receipt (the Loyverse fixture, a delivery from Loyverse itself)
// complete them, as noted in docs/simulator-pos-apis.md.
// ---------------------------------------------------------------------------------------------
const LOYVERSE: Tables = {
  Receipt: {
    receipt_number: 'string', note: 'string', receipt_type: 'string', refund_for: 'string', order: 'string', created_at: 'datetime', updated_at: 'datetime',
    source: 'string', receipt_date: 'datetime', cancelled_at: 'datetime', total_money: 'number', total_tax: 'number', points_earned: 'number',
    points_deducted: 'number', points_balance: 'number', customer_id: 'string', total_discount: 'number', employee_id: 'string', store_id: 'string',
    pos_device_id: 'string', dining_option: 'string', total_discounts: '[]@Discount', total_taxes: '[]@Tax', tip: 'number', surcharge: 'number',
    line_items: '[]@LineItem', payments: '[]@Payment',
  },
  LineItem: {
    id: 'string', item_id: 'string', variant_id: 'string', item_name: 'string', variant_name: 'string', sku: 'string', quantity: 'number', price: 'number',
    gross_total_money: 'number', total_money: 'number', cost: 'number', cost_total: 'number', line_note: 'string', line_taxes: '[]@Tax', total_discount: 'number',
    line_discounts: '[]@Discount', line_modifiers: '[]object',
  },
  Tax: { id: 'string', type: 'string', name: 'string', rate: 'number', money_amount: 'number' },
  Discount: { id: 'string', type: 'string', name: 'string', percentage: 'number', money_amount: 'number' },
  Payment: { payment_type_id: 'string', name: 'string', type: 'string', money_amount: 'number', paid_at: 'datetime', payment_details: 'object' },
  Customer: {
    id: 'string', name: 'string', email: 'string', phone_number: 'string', address: 'string', city: 'string', region: 'string', postal_code: 'string',
    country_code: 'string', note: 'string', customer_code: 'string', first_visit: 'datetime', last_visit: 'datetime', total_visits: 'integer',
    total_spent: 'number', total_points: 'number', permanent_deletion_at: 'datetime', created_at: 'datetime', updated_at: 'datetime', deleted_at: 'datetime',
  },
  ReceiptList: { receipts: '[]@Receipt', cursor: 'string' },
  Errors: { errors: '[]@Error' },
  Error: { code: 'string', details: 'string', field: 'string' },
};

describe('the Clover, Toast and Loyverse fakes and fixtures hold only documented fields of documented types', () => {
  const T0 = Date.parse('2026-03-01T10:00:00.000Z');
  const CLOVER_MERCHANT = 'HFBW9FH45ZBH2';
  const TOAST_RESTAURANT = '4f6c2d1e-8a3b-4c5d-9e7f-0a1b2c3d4e5f';
  const apis = fakePosApis({
    now: () => new Date(T0),
    accounts: (sim) => {
      sim.pos.clover.addAccount({ merchantId: CLOVER_MERCHANT, accessToken: 'c-token' });
      sim.pos.toast.addAccount({ restaurantGuid: TOAST_RESTAURANT, accessToken: 't-token' });
      sim.pos.loyverse.addAccount({ accessToken: 'l-token' });
    },
  });
  const { sim } = apis;

  it('Clover: every order, list, refund, customer and error the fake answers, and the fixtures', async () => {
    const customer = sim.pos.clover.addCustomer(CLOVER_MERCHANT, { firstName: 'Ada', phone: '+14155550123', email: 'ada@example.com' });
    const order = sim.pos.clover.addOrder(CLOVER_MERCHANT, { lines: TWO_LINES, tip: 100, customer: customer.id as string });
    const refund = sim.pos.clover.addRefund(CLOVER_MERCHANT, { orderId: order.id as string, lines: [{ line: 0, quantity: 1 }] });
    sim.pos.clover.addOrder(CLOVER_MERCHANT, { lines: TWO_LINES, open: true });
    const get = (path: string) => call(`${apis.url}/clover/v3/merchants/${CLOVER_MERCHANT}${path}`, { headers: { authorization: 'Bearer c-token' } });
    const all = 'lineItems,lineItems.discounts,lineItems.modifications,payments,payments.refunds,refunds,customers,customers.phoneNumbers,customers.emailAddresses,discounts';
    const problems = [
      ...problemsOf(CLOVER, 'Order', order, 'addOrder'),
      ...problemsOf(CLOVER, 'Refund', refund, 'addRefund'),
      ...problemsOf(CLOVER, 'Customer', customer, 'addCustomer'),
      ...problemsOf(CLOVER, 'Order', (await get(`/orders/${order.id as string}`)).body, 'GET order'),
      ...problemsOf(CLOVER, 'Order', (await get(`/orders/${order.id as string}?expand=${all}`)).body, 'GET order?expand=all'),
      ...problemsOf(CLOVER, 'OrderList', (await get(`/orders?expand=${all}`)).body, 'GET orders'),
      ...problemsOf(CLOVER, 'Refund', (await get(`/refunds/${refund.id as string}`)).body, 'GET refund'),
      ...problemsOf(CLOVER, 'Customer', (await get(`/customers/${customer.id as string}?expand=emailAddresses,phoneNumbers`)).body, 'GET customer'),
      ...problemsOf(CLOVER, 'Error', (await get('/orders/NOPE')).body, '404'),
      ...problemsOf(CLOVER, 'Error', (await get('/orders?limit=0')).body, '400'),
    ];
    expect(problems).toEqual([]);
  });

  it('Clover fixtures', () => {
    const problems = [
      ...problemsOf(CLOVER, 'Order', fixture('clover/order_expanded_lineItems_payments_sandbox.json'), 'order_expanded_lineItems_payments_sandbox'),
      ...(fixture('clover/order_line_items_with_discounts_sandbox.json').elements as unknown[]).flatMap((l, i) => problemsOf(CLOVER, 'LineItem', l, `order_line_items_with_discounts_sandbox[${i}]`)),
    ];
    expect(problems).toEqual([]);
  });

  it('Toast: every order, page and error the fake answers, and the fixture', async () => {
    const order = sim.pos.toast.addOrder(TOAST_RESTAURANT, { lines: TWO_LINES, tip: 100, customer: { firstName: 'Jack', phone: '+14155550123', email: 'jack@example.com' } });
    sim.pos.toast.addRefund(TOAST_RESTAURANT, { orderId: order.guid, lines: [{ line: 0, quantity: 1 }] });
    sim.pos.toast.addOrder(TOAST_RESTAURANT, { lines: TWO_LINES, open: true });
    const get = (path: string) => call(`${apis.url}/toast${path}`, { headers: { authorization: 'Bearer t-token', 'toast-restaurant-external-id': TOAST_RESTAURANT } });
    const bulk = await get('/orders/v2/ordersBulk?businessDate=20260301');
    expect(bulk.body).toHaveLength(2);
    const one = await get(`/orders/v2/orders/${order.guid}`);
    sim.pos.toast.faults(TOAST_RESTAURANT).inject({ kind: 'rate_limit' });
    const problems = [
      ...problemsOf(TOAST, 'Order', order, 'addOrder'),
      ...problemsOf(TOAST, 'Order', one.body, 'GET order'),
      ...(bulk.body as unknown[]).flatMap((o, i) => problemsOf(TOAST, 'Order', o, `ordersBulk[${i}]`)),
      ...problemsOf(TOAST, 'ErrorMessage', (await get('/orders/v2/ordersBulk')).body, '429'),
      ...problemsOf(TOAST, 'ErrorMessage', (await get('/orders/v2/ordersBulk?pageSize=101&businessDate=20260301')).body, '400'),
      ...problemsOf(TOAST, 'ErrorMessage', (await get('/orders/v2/orders/nope')).body, '404'),
      ...problemsOf(TOAST, 'Order', fixture('toast/order_get_example_docs.json'), 'order_get_example_docs'),
    ];
    expect(problems).toEqual([]);
  });

  it('Loyverse: every receipt, list, customer and error the fake answers, and the fixture', async () => {
    const [account] = sim.pos.loyverse.accounts();
    const merchant = account!.merchantId;
    const sale = sim.pos.loyverse.addOrder(merchant, { lines: TWO_LINES, tip: 100, customer: { firstName: 'Ada', phone: '+14155550123', code: '11-1' } });
    const refund = sim.pos.loyverse.addRefund(merchant, { orderId: sale.receipt_number, lines: [{ line: 0, quantity: 1 }] });
    const get = (path: string) => call(`${apis.url}/loyverse${path}`, { headers: { authorization: 'Bearer l-token' } });
    const problems = [
      ...problemsOf(LOYVERSE, 'Receipt', sale, 'addOrder'),
      ...problemsOf(LOYVERSE, 'Receipt', refund, 'addRefund'),
      ...problemsOf(LOYVERSE, 'Receipt', (await get(`/v1.0/receipts/${sale.receipt_number}`)).body, 'GET receipt'),
      ...problemsOf(LOYVERSE, 'ReceiptList', (await get('/v1.0/receipts?limit=1')).body, 'GET receipts'),
      ...problemsOf(LOYVERSE, 'Customer', (await get(`/v1.0/customers/${sale.customer_id as string}`)).body, 'GET customer'),
      ...problemsOf(LOYVERSE, 'Errors', (await get('/v1.0/receipts?limit=0')).body, '400'),
      ...problemsOf(LOYVERSE, 'Errors', (await get('/v1.0/receipts/nope')).body, '404'),
      ...(fixture('loyverse/receipts_update_webhook_pipedream_test_event.json').receipts as unknown[]).flatMap((r, i) => problemsOf(LOYVERSE, 'Receipt', r, `receipts_update_webhook_pipedream_test_event.receipts[${i}]`)),
    ];
    expect(problems).toEqual([]);
  });

  it('the checker itself refuses an undocumented field and a wrong type', () => {
    expect(problemsOf(TOAST, 'Device', { id: 1, colour: 'red' })).toEqual(['Device.id: expected string, got 1', 'Device.colour: not a documented Device field']);
    expect(problemsOf(CLOVER, 'Order', { lineItems: [] })).toEqual(['Order.lineItems: expected {elements}LineItem, got []']);
  });
});
