/**
 * Toast's loyalty integration as the Toast adapter reads and writes it (adapters/toast/loyalty.ts,
 * pure): Toast's documented requests (test/fixtures/toast/loyalty) become the bridge's register
 * calls, and its answers are Toast's LoyaltyTransactionResponse with Toast's statuses.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { toastRegister } from '../../adapters/toast/loyalty.js';
import { ValidationError } from '../../src/kernel/errors.js';

const context = { defaultCurrency: 'USD', defaultPhoneRegion: 'US' };
const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/toast/loyalty/${name}_request.json`, import.meta.url), 'utf8')) as { headers: Record<string, string>; body: any };
const parse = (name: string) => {
  const { headers, body } = fixture(name);
  return toastRegister.parse(body, headers, context);
};
const refusal = (fn: () => unknown): ValidationError => {
  try {
    fn();
  } catch (error) {
    if (error instanceof ValidationError) return error;
    throw error;
  }
  throw new Error('not refused');
};

describe("Toast's documented requests", () => {
  it('SEARCH by phone: the phone in E.164; a national number is read in the merchant\'s region', () => {
    expect(parse('search')).toEqual({ id: 'a1000000-0000-4000-8000-000000000001', kind: 'search', phone: '+15550007001' });
    const { headers, body } = fixture('search');
    body.searchTransactionInformation.searchCriteria = { phone: '030 1234567', email: ' Ada@Example.COM ' };
    expect(toastRegister.parse(body, headers, { ...context, defaultPhoneRegion: 'DE' })).toMatchObject({ phone: '+49301234567', email: 'ada@example.com' });
  });

  it('INQUIRE and REDEEM: the card and the redemptions as Toast wrote them', () => {
    const inquire = parse('inquire');
    expect(inquire).toMatchObject({ kind: 'inquire', identifier: '11-100001-2' });
    expect(inquire.kind === 'inquire' && inquire.redemptions).toHaveLength(1);
    expect(parse('redeem')).toMatchObject({ kind: 'redeem', redemptions: [expect.objectContaining({ appliedDiscountGuid: 'd0000000-0000-4000-8000-0000000001a1' })] });
  });

  it("ACCRUE: the check's sale, as every Toast check is translated, to the card Toast attached", () => {
    const accrue = parse('accrue');
    if (accrue.kind !== 'accrue') throw new Error(accrue.kind);
    expect(accrue.sale).toMatchObject({ orderId: 'd0000000-0000-4000-8000-000000000010', part: 'd0000000-0000-4000-8000-000000000011', customer: { serialNumber: '11-100001-2' } });
    expect(accrue.sale.check).toMatchObject({ amount: 2500, taxAmount: 156, tipAmount: 400 });
    const { headers, body } = fixture('accrue');
    body.checkTransactionInformation.loyaltyIdentifier = null;
    const unattached = toastRegister.parse(body, headers, context);
    expect(unattached.kind === 'accrue' && unattached.sale.customer).toEqual({});
  });

  it('REVERSE names the call it undoes; TRANSFER is a call the bridge does not take', () => {
    expect(parse('reverse')).toEqual({ id: 'a5000000-0000-4000-8000-000000000005', kind: 'reverse', reverses: 'a4000000-0000-4000-8000-000000000004', redemptions: [] });
    expect(parse('transfer')).toMatchObject({ kind: 'unsupported', type: 'LOYALTY_TRANSFER' });
  });
});

describe('what Toast sends that is not its shape is refused naming the field', () => {
  it.each([
    ['no Toast-Transaction-GUID', (h: Record<string, string>) => delete h['toast-transaction-guid'], (b: any) => b, 'Toast-Transaction-GUID'],
    ['a header type that disagrees with the body', (h: Record<string, string>) => (h['toast-transaction-type'] = 'LOYALTY_ACCRUE'), (b: any) => b, 'toastTransactionType'],
    ['an unknown type', (h: Record<string, string>) => delete h['toast-transaction-type'], (b: any) => ({ ...b, toastTransactionType: 'LOYALTY_SIGNUP' }), 'toastTransactionType'],
    ['an INQUIRE without its account', (h: Record<string, string>) => h, (b: any) => ({ ...b, checkTransactionInformation: { ...b.checkTransactionInformation, loyaltyIdentifier: '' } }), 'checkTransactionInformation.loyaltyIdentifier'],
  ])('%s', (_name, headers, body, field) => {
    const request = fixture('inquire');
    headers(request.headers);
    const error = refusal(() => toastRegister.parse(body(request.body), request.headers, context));
    expect(error.issues.map((i) => i.field)).toContain(field);
  });

  it('an ACCRUE whose check has no order, or whose selections do not add up to its amount', () => {
    const { headers, body } = fixture('accrue');
    const noOrder = structuredClone(body);
    noOrder.checkTransactionInformation.orderGuid = null;
    expect(refusal(() => toastRegister.parse(noOrder, headers, context)).issues.map((i) => i.field)).toEqual(['checkTransactionInformation.orderGuid']);
    const off = structuredClone(body);
    off.checkTransactionInformation.check.amount = 26;
    expect(refusal(() => toastRegister.parse(off, headers, context)).message).toMatch(/checkTransactionInformation\.check/);
  });
});

describe("answers in Toast's words", () => {
  it('ACCEPT with 200; refusals with their Toast status and HTTP status; redemptions rejected naming them', () => {
    const redemption = { identifier: 'RWD-5OFF', appliedDiscountGuid: 'g-1' };
    expect(toastRegister.answer({ kind: 'accepted', rejected: [] })).toEqual({ status: 200, body: { transactionStatus: 'ACCEPT' } });
    expect(toastRegister.answer({ kind: 'accepted', rejected: [redemption] }).body).toEqual({ transactionStatus: 'ACCEPT', checkResponse: { rejectedRedemptions: [{ redemption, message: expect.any(String) }], appliedRedemptions: [] } });
    const cases = [
      ['key', 400, 'ERROR_INVALID_TOKEN'],
      ['account', 400, 'ERROR_INVALID_RESTAURANT'],
      ['input', 400, 'ERROR_INVALID_INPUT_PROPERTIES'],
      ['no_card', 404, 'ERROR_ACCOUNT_INVALID'],
      ['unknown_call', 400, 'ERROR_TRANSACTION_DOES_NOT_EXIST'],
      ['unsupported', 400, 'ERROR_INVALID_TOAST_TRANSACTION_TYPE'],
      ['unavailable', 400, 'ERROR'],
    ] as const;
    for (const [reason, status, transactionStatus] of cases) expect(toastRegister.answer({ kind: 'refused', reason, message: 'why' })).toEqual({ status, body: { transactionStatus, message: 'why' } });
  });

  it("an account's contacts are masked; its points are a number", () => {
    const account = { serialNumber: '11-1', pointsBalance: 40, customer: { firstName: 'Ada', surname: 'Okafor', phone: '+15550007001', email: 'ada.okafor@example.com' } };
    const { body } = toastRegister.answer({ kind: 'account', account, rejected: [] }) as { body: any };
    expect(body.checkResponse.accountInfo).toEqual({ identifier: '11-1', firstName: 'Ada', lastName: 'Okafor', phone: expect.stringMatching(/7001$/), email: expect.stringMatching(/example\.com$/), pointsBalance: 40 });
    expect(JSON.stringify(body)).not.toContain('5550007001');
    expect(JSON.stringify(body)).not.toContain('ada.okafor');
    expect(body.checkResponse.pointsBalance).toBe(40);
  });
});
