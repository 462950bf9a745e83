/**
 * Customers' contact details taken out of what operators read (docs/operators.md: a dead letter's
 * body, a record's customer and attempts, a kept payload, all masked unless unmasked) and out of a
 * refusal's message before it is logged (the messages themselves name fields, not values).
 *
 * In JSON, by key: every value under a key that names a phone or an email (`phone`, `mobile`,
 * `msisdn`, `tel`, `cell`, `contact…`, `email`, …). Everywhere, by shape: an email, also written
 * `name(at)domain.com` or `name [at] domain dot com`, and a phone number, international (`+49 151
 * …`) or national (`0151-12345678`, `(415) 555-0123`, `015199998888`). A masked dead letter used to
 * show all of those but the first (issue 19). What is kept: ISO dates and times, amounts
 * (`59.97`), card serials (`11-100001-2`), and ids (a UUID, an order id with letters, a run of
 * digits inside an id, and any value under a key naming an id, a number or a code).
 *
 * Every pattern only starts where a token starts, and its repeats are bounded: the text is a
 * client's (a dead letter's body, up to the body limit), and a pattern that could try every
 * position of a long token again would take quadratic time.
 */

/** A plain email: local part, @, a domain with a dot and a top-level label. */
const EMAIL = /(?<![^\s"'<>()[\]{},;:])[^\s"'<>()[\]{}@,;:]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}\b/g;

/** `at` and `dot` written out to hide an email from a scraper: `(at)`, `[at]`, `{at}`; `(dot)`, ` dot `. */
const AT = String.raw`\s{0,3}(?:@|[([{]\s{0,2}at\s{0,2}[)\]}])\s{0,3}`;
const DOT = String.raw`(?:\s{0,3}[([{]\s{0,2}dot\s{0,2}[)\]}]\s{0,3}|\s{1,3}dot\s{1,3}|\.)`;
/** An email with its @ or dots written out (at least one of them: a plain one is EMAIL's). */
const OBFUSCATED_EMAIL = new RegExp(String.raw`(?<![\w.%+-])[\w.%+-]{1,64}${AT}[A-Za-z0-9-]{1,63}(?:${DOT}[A-Za-z0-9-]{1,63}){0,8}${DOT}[A-Za-z]{2,24}\b`, 'gi');

/**
 * A phone number's shape: an optional `+`, then groups of digits separated by one space, dash or
 * dot, or by parentheses around an area code (`(415) 555-0123`, `+49 (0)151 …`). Without a `+`, it
 * may not start inside a token (after a letter, digit, `_`, `-`, `.`, `/`, `:`, `#` or `~`: the tail
 * of a UUID, of an order id, of a path or a transactionId), and it never ends inside one. Not a date (`2026-11-21`,
 * `21.11.2026`), a time, an IP address or an amount (`1234567.89`). Whether it has a phone's number
 * of digits is `isPhoneNumber`'s question.
 */
const PHONE = new RegExp(
  [
    String.raw`(?:(?<![\w+])\+ ?|(?<![\w\-./:#~+]))`,
    String.raw`(?!\d{4}[-./]\d{1,2}[-./]\d{1,2}(?!\d))`,
    String.raw`(?!\d{1,2}[-./]\d{1,2}[-./]\d{4}(?!\d))`,
    String.raw`(?!\d{1,3}(?:\.\d{1,3}){3}(?!\d))`,
    String.raw`(?!\d{1,15}\.\d{1,3}(?![\d.]))`,
    String.raw`\(?\d{1,15}(?:(?:[ .\-]|\) ?| ?\()\d{1,15}){0,8}`,
    String.raw`(?![\w\-/:@]|[.,]\d)`,
  ].join(''),
  'g',
);

/** E.164: at most 15 digits; no national number is shorter than 7 digits with its area code. */
const MIN_PHONE_DIGITS = 7;
const MAX_PHONE_DIGITS = 15;

/**
 * Whether a PHONE match is a phone number: 7 to 15 digits, and not ending in a group of one digit
 * (a card serial's check digit, `11-100001-2`, or digits spaced one by one).
 */
function isPhoneNumber(match: string): boolean {
  const digits = match.replace(/\D/g, '').length;
  if (digits < MIN_PHONE_DIGITS || digits > MAX_PHONE_DIGITS) return false;
  const groups = match.split(/\D+/).filter(Boolean);
  return groups.length === 1 || groups.at(-1)!.length > 1;
}

function maskPhones(text: string): string {
  return text.replace(PHONE, (match) => (isPhoneNumber(match) ? '***' : match));
}

function maskEmails(text: string): string {
  return text.replace(EMAIL, '***@***').replace(OBFUSCATED_EMAIL, '***@***');
}

/** Emails and phone numbers in free text, by their shape. */
export function maskContacts(text: string): string {
  return maskPhones(maskEmails(text));
}

/** The words of a JSON key: `phoneNumber`, `phone_number` and `phone-number` are `phone number`. */
function wordsOf(key: string): string[] {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
}

/** Words that name a phone or an email on their own; `contact…` any contact detail. */
const CONTACT_WORD = /^(?:tel|cell|cellular|fax|msisdn|sms|whatsapp|contact\w*|telefon\w*|telephone\w*|mail)$/;
/** Parts that name a phone or an email inside any word: `cellphone`, `mobileno`, `emailaddress`. */
const CONTACT_PART = /phone|mobile|msisdn|e-?mail/i;

/** A JSON key whose values are a customer's phone number or email, in any POS's payload (Square's phone_number, Shopify's email, Toast's mobile, …). */
export function isContactKey(key: string): boolean {
  return CONTACT_PART.test(key) || wordsOf(key).some((word) => CONTACT_WORD.test(word));
}

/** Words that end a key naming an id, which a phone's shape must not mask: `orderId`, `receipt_number`, `barcode`. */
const ID_WORD = /^(?:id|ids|uuid|guid|number|no|code|barcode|sku|gtin|ean|upc|serial|token|key|version|ref|reference)$/;

function isIdKey(key: string): boolean {
  return ID_WORD.test(wordsOf(key).at(-1) ?? '');
}

/**
 * A parsed JSON value with customers' contact details masked: every value under a contact key
 * (`isContactKey`: strings and numbers) becomes `***`; other strings are masked by shape, except
 * that a value under a key naming an id keeps its digits (an order number is not a phone).
 */
export function maskContactsInJson(value: unknown, key = ''): unknown {
  const contact = key !== '' && isContactKey(key);
  if (typeof value === 'string') return contact && value ? '***' : isIdKey(key) ? maskEmails(value) : maskContacts(value);
  if (typeof value === 'number' && contact) return '***';
  if (Array.isArray(value)) return value.map((v) => maskContactsInJson(v, key));
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskContactsInJson(v, k)]));
  return value;
}

/** A phone number as a person may be shown it to recognise it: its last four digits (`…0012`). */
export function maskPhone(phone: string): string {
  const digits = phone.replace(/\D/g, '');
  return `…${digits.slice(-4)}`;
}

/** An email as a person may be shown it to recognise it: its first character and its domain (`a…@example.test`). */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf('@');
  return at > 0 ? `${email[0]}…@${email.slice(at + 1)}` : '…';
}

/** A card serial as a person may be shown it to recognise it: its last four characters, and never more than half of a short one (`…01-2`). */
export function maskCardSerial(serial: string): string {
  const shown = Math.min(4, Math.floor(serial.length / 2));
  return `…${shown ? serial.slice(-shown) : ''}`;
}

/** How a secret is shown (a sealed secret's hint, an answer naming a token): its last four characters, never more, and nothing of a short one. */
export function maskSecret(secret: string): string {
  return secret.length >= 12 ? `…${secret.slice(-4)}` : '…';
}
