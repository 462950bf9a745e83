/**
 * Customers' contact details taken out of free text: what a dead letter shows unless unmasked, and
 * the second line of defence on a refusal's message before it is logged (the messages themselves
 * name fields, not values).
 */
const EMAIL = /[^\s"'<>@,;:]+@[^\s"'<>@,;:]+\.[A-Za-z]{2,}/g;
/** A phone number written as one (a +, then digits and separators): a bare run of digits is more often an id or an amount. */
const PHONE = /\+\d[\d ().-]{5,}\d/g;

export function maskContacts(text: string): string {
  return text.replace(EMAIL, '***@***').replace(PHONE, '+***');
}
