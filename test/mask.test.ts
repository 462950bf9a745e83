/**
 * Masking customers' contact details (src/kernel/mask.ts; docs/operators.md: dead letters, records and kept
 * payloads are masked unless unmasked): what is masked, by key and by shape, and what is kept,
 * because an operator needs it and it is no contact (dates, amounts, card serials, ids). A masked
 * dead letter used to show `"mobile":"015199998888"`, "0151-12345678", "(415) 555-0123" and
 * "ANN(at)example.com" (issue 19, row 9).
 */
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { isContactKey, maskCardSerial, maskContacts, maskContactsInJson, maskSecret } from '../src/kernel/mask.js';

describe('maskContacts: free text, by shape', () => {
  it.each([
    ['+15550001111', '***'],
    ['+1 (415) 555-0123', '***'],
    ['+49 151 12345678', '***'],
    ['+49 (0)151 12345678', '***'],
    ['tel:+4915112345678', 'tel:***'],
    ['015199998888', '***'],
    ['0151-12345678', '***'],
    ['0151 1234 5678', '***'],
    ['(415) 555-0123', '***'],
    ['415-555-0123', '***'],
    ['415.555.0123', '***'],
    ['4155550123', '***'],
    ['020 7946 0018', '***'],
    ['call 0151 1234567 after six', 'call *** after six'],
    ['{"mobile":"015199998888"}', '{"mobile":"***"}'],
    ['ann@example.com', '***@***'],
    ['Ann.Lee+shop@mail.example.co.uk', '***@***'],
    ['ANN(at)example.com', '***@***'],
    ['ann (at) example (dot) com', '***@***'],
    ['name [at] domain dot com', '***@***'],
    ['ann{at}example{dot}org', '***@***'],
    ['ann@example dot com', '***@***'],
    ['write to ANN [AT] EXAMPLE [DOT] COM today', 'write to ***@*** today'],
  ])('masks %j', (text, masked) => {
    expect(maskContacts(text)).toBe(masked);
  });

  it.each([
    ['an ISO date-time', '2026-11-21T10:20:00Z'],
    ['an ISO date-time with an offset and milliseconds', '2026-11-21T10:20:00.123+01:00'],
    ['a date and a time', '2026-11-21 10:20:00'],
    ['a date', 'closed 2026-11-21'],
    ['a European date', '21.11.2026'],
    ['an amount', '59.97'],
    ['a large amount', '1234567.89'],
    ['an amount with thousands', '1,234,567.00'],
    ['a card serial', '11-100001-2'],
    ['a card serial in a sentence', 'card 123-4567890-1 credited'],
    ['a UUID', '550e8400-e29b-41d4-a716-446655440000'],
    ['an order id with letters', 'A-1001234567'],
    ['an order id run together', 'ORD20261121001'],
    ['a transactionId', 'generic:20261121001'],
    ['a hashed transactionId', 'square:~1234567890123456abcdef0123456789'],
    ['a Shopify gid', 'gid://shopify/Order/5001234567'],
    ['an IP address', '192.168.100.200'],
    ['a short number', 'table 12, 3 guests, 450 points'],
    ['digits spaced one by one', '1 2 3 4 5 6 7 8'],
    ['more digits than any phone', '12345678901234567890'],
    ['a price list', 'Latte @ 4.50'],
  ])('keeps %s: %j', (_name, text) => {
    expect(maskContacts(text)).toBe(text);
  });

  it('masks every contact of a longer text, and only those', () => {
    const text = 'Order A-1001 (2026-11-21T10:20:00Z), 59.97 USD: customer Ann, mobile 0151-12345678, alt (415) 555-0123, ANN(at)example.com, card 11-100001-2.';
    expect(maskContacts(text)).toBe('Order A-1001 (2026-11-21T10:20:00Z), 59.97 USD: customer Ann, mobile ***, alt ***, ***@***, card 11-100001-2.');
  });

  it('takes linear time on a hostile text (a dead letter is a client\'s body, up to the body limit)', () => {
    const started = Date.now();
    for (const text of ['a'.repeat(1_000_000), '1'.repeat(1_000_000), '1 '.repeat(500_000), 'a@'.repeat(500_000), 'a(at)'.repeat(200_000), '1-'.repeat(500_000), 'a.'.repeat(500_000)]) maskContacts(text);
    // Linear, these take well under a second; a backtracking pattern would take hours on them. The
    // bound sits far from both, so a loaded machine cannot fail it and a quadratic mask cannot pass.
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('never leaves a phone of any national format whole, wherever it stands in a text', () => {
    const phone = fc.oneof(
      fc.tuple(fc.integer({ min: 100, max: 999 }), fc.integer({ min: 100, max: 999 }), fc.integer({ min: 1000, max: 9999 })).map(([a, b, c]) => `(${a}) ${b}-${c}`),
      fc.tuple(fc.integer({ min: 10, max: 9999 }), fc.integer({ min: 100000, max: 99999999 })).map(([a, b]) => `0${a}-${b}`),
      fc.integer({ min: 10_000_000, max: 999_999_999 }).map((n) => `0151${n}`),
      fc.tuple(fc.integer({ min: 1, max: 99 }), fc.integer({ min: 100, max: 999 }), fc.integer({ min: 1000000, max: 9999999 })).map(([a, b, c]) => `+${a} ${b} ${c}`),
    );
    fc.assert(
      fc.property(fc.constantFrom('', 'call ', 'tel ', '"', '(', 'mobile: '), phone, fc.constantFrom('', ' now', '"', ')', '.', ', thanks'), (before, number, after) => {
        const masked = maskContacts(`${before}${number}${after}`);
        // An opening parenthesis may be taken as the area code's: the number is gone either way.
        expect(masked.replace(/\D/g, '')).toBe('');
        expect(masked).toContain('***');
        expect(masked.endsWith(after)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});

describe('isContactKey: keys whose values are a phone or an email', () => {
  it.each(['phone', 'Phone', 'phone_number', 'phoneNumber', 'mobile', 'mobileNo', 'mobile_phone', 'cell', 'cellPhone', 'cell_phone', 'tel', 'telNumber', 'telephone', 'Telefon', 'msisdn', 'fax', 'contact', 'contactNumber', 'contact_details', 'email', 'e-mail', 'emailAddress', 'mail', 'home-phone', 'whatsapp'])('%s is one', (key) => {
    expect(isContactKey(key)).toBe(true);
  });

  it.each(['orderId', 'hotel', 'retail', 'telemetry', 'cellar', 'total', 'name', 'firstName', 'note', 'serialNumber', 'createdAt', 'items', 'location_id'])('%s is not', (key) => {
    expect(isContactKey(key)).toBe(false);
  });
});

describe('maskContactsInJson: a payload as an operator reads it', () => {
  it('masks every value under a contact key (strings and numbers), and contacts by shape in other strings', () => {
    const payload = {
      id: 'ORD-1',
      customer: { first_name: 'Ann', mobile: '015199998888', cell: 4155550123, telephone: '+44 20 7946 0018', email: 'ANN@example.com', contact: { msisdn: '491511234567' } },
      note: 'call (415) 555-0123 or write ANN(at)example.com',
      recipient: { display_name: 'Ann Lee', phone_number: '0151-12345678' },
      items: [{ name: 'Latte', total: '59.97' }],
    };
    expect(maskContactsInJson(payload)).toEqual({
      id: 'ORD-1',
      customer: { first_name: 'Ann', mobile: '***', cell: '***', telephone: '***', email: '***', contact: { msisdn: '***' } },
      note: 'call *** or write ***@***',
      recipient: { display_name: 'Ann Lee', phone_number: '***' },
      items: [{ name: 'Latte', total: '59.97' }],
    });
  });

  it('keeps the digits of values under keys naming an id, a number or a code (an order number is not a phone), but masks emails there', () => {
    const payload = { orderId: '20261121001', order_number: '1001234567', receipt_number: '2-1001', barcode: '4006381333931', serialNumber: '11-100001-2', cardNumber: '0151123456789', reference: 'ann@example.com', createdAt: '2026-11-21T10:20:00Z', total: 1234567.89 };
    expect(maskContactsInJson(payload)).toEqual({ ...payload, reference: '***@***' });
  });

  it('an empty contact value stays empty; other types are as they were', () => {
    expect(maskContactsInJson({ phone: '', email: null, mobile: true, items: [1, 2], ok: false })).toEqual({ phone: '', email: null, mobile: true, items: [1, 2], ok: false });
  });
});

describe('maskCardSerial and maskSecret: what a person is shown to recognise one by', () => {
  it('a card serial keeps its last four characters, and at most half of a short one', () => {
    expect([maskCardSerial('11-100001-2'), maskCardSerial('12'), maskCardSerial('1'), maskCardSerial('')]).toEqual(['…01-2', '…2', '…', '…']);
  });

  it('a secret keeps its last four characters, and nothing of one shorter than 12', () => {
    expect([maskSecret('0123456789ab'), maskSecret('0123456789a'), maskSecret('')]).toEqual(['…89ab', '…', '…']);
  });
});
