/**
 * At the register (contract v1.5): `POST /v1/toast/loyalty`, Toast's loyalty integration for every
 * merchant on one path, and `POST /v1/lookup`, a guest lookup for any other register. What they do
 * is the core's (src/core/register.ts); here, how they are reached and documented.
 */
import { z } from 'zod';
import { toE164 } from '../../kernel/customer.js';
import { NotFoundError, ValidationError } from '../../kernel/errors.js';
import { CARD_SERIAL_PATTERN } from '../../state/customer-index.js';
import { jsonBody, rawBody } from '../body.js';
import { error, route, type Route } from '../route.js';
import { LookupAnswer, ToastLoyaltyAnswer } from '../schemas.js';

/** A lookup names one guest: a few hundred bytes at most. */
const LOOKUP_BODY_LIMIT_BYTES = 4 * 1024;

const contact = z.string().trim().min(1, 'must not be empty').max(200, 'must be at most 200 characters');

export const LookupBody = z
  .strictObject({
    phone: contact.optional().meta({ description: "A phone number: with its +country code, or national digits read in the merchant's phone region." }),
    email: contact.optional().meta({ description: 'An email (any case).' }),
    cardSerial: z
      .string()
      .trim()
      .regex(new RegExp(`^${CARD_SERIAL_PATTERN}$`), 'must be a card serial (letters, digits and dashes, with a digit)')
      .optional()
      .meta({ description: "A card's serial, as the loyalty service writes it (11-100001-2)." }),
  })
  .superRefine((body, ctx) => {
    const given = [body.phone, body.email, body.cardSerial].filter((v) => v !== undefined).length;
    if (given !== 1) ctx.addIssue({ code: 'custom', path: [], message: 'name the guest by exactly one of phone, email or cardSerial' });
  })
  .meta({ description: 'The guest, by exactly one of phone, email or card serial: in the body, never in the URL.', oneOf: [{ required: ['phone'] }, { required: ['email'] }, { required: ['cardSerial'] }] });

const TOAST_EXAMPLE = {
  toastTransactionType: 'LOYALTY_SEARCH',
  searchTransactionInformation: { searchCriteria: { phone: '+15550007001' } },
};

export const registerRoutes: readonly Route[] = [
  route({
    method: 'post',
    path: '/v1/toast/loyalty',
    operationId: 'postToastLoyalty',
    tag: 'Register',
    summary: "Toast's loyalty integration: SEARCH, INQUIRE, REDEEM, ACCRUE, REVERSE from a Toast register",
    description:
      "The bridge as a Toast restaurant's loyalty provider, for every merchant on this one path (docs/pos-systems.md, \"Toast at the register\"). Toast-Restaurant-External-ID names the merchant whose pos.toast.restaurantGuid it is (TOAST_RESTAURANT_GUID for the default merchant); Authorization holds, as the whole header value, that merchant's pos.toast.loyaltyKey (TOAST_LOYALTY_KEY), compared in constant time. Toast-Transaction-GUID identifies the call: the same GUID again gets the first answer and calls nothing. LOYALTY_SEARCH finds the guest's cards by phone or email; LOYALTY_INQUIRE answers a card's points; LOYALTY_REDEEM answers every redemption rejected (the loyalty service has none a register can redeem); LOYALTY_ACCRUE records the check's sale and is answered once recorded, delivery going on in the background (one check, one accrual, however many GUIDs carry it and whether it also comes by the orders webhook or backfill); LOYALTY_REVERSE takes back the accrue whose GUID it names, once; LOYALTY_TRANSFER is refused. Answers are Toast's LoyaltyTransactionResponse: ACCEPT with 200, or an ERROR_* status with 400 (404 ERROR_ACCOUNT_INVALID).",
    access: 'none',
    body: {
      raw: { jsonSchema: { type: 'object', description: "Toast's LoyaltyTransaction (its loyalty integration API v1.1.0)." } },
      description: "Toast's LoyaltyTransaction, as the register sends it.",
      examples: { search: { summary: 'A search by phone', value: TOAST_EXAMPLE } },
    },
    answers: {
      200: { description: 'ACCEPT: searchResponse (SEARCH), checkResponse (INQUIRE, and REDEEM or ACCRUE with their rejected redemptions), nothing else (REVERSE).', json: ToastLoyaltyAnswer },
      400: { description: "Refused in Toast's words (transactionStatus ERROR_INVALID_TOKEN: the key is missing or not this restaurant's, and nothing is read or recorded; ERROR_INVALID_RESTAURANT, ERROR_INVALID_INPUT_PROPERTIES naming the field in message, ERROR_TRANSACTION_DOES_NOT_EXIST, ERROR_INVALID_TOAST_TRANSACTION_TYPE, ERROR with a message the cashier sees when the loyalty service cannot answer in time).", json: ToastLoyaltyAnswer },
      404: { description: 'ERROR_ACCOUNT_INVALID: a search that finds no guest, an inquire of a card the loyalty service does not know.', json: ToastLoyaltyAnswer },
    },
    before: (deps) => [rawBody(deps.bodyLimitBytes)],
    async handle({ req, res, deps }) {
      const answer = await deps.register.call('toast', req.headers, req.rawBody ?? Buffer.alloc(0));
      res.status(answer.status).json(answer.body);
    },
  }),
  route({
    method: 'post',
    path: '/v1/lookup',
    operationId: 'postLookup',
    tag: 'Register',
    summary: "A guest's cards and points, for any register (a Shopify POS tile, a Clover app)",
    description:
      "With a merchant's POS token (as /v1/checkouts): that merchant's guest, by phone, email or card serial in the body, read from its loyalty service with its API key (one request, within REGISTER_BUDGET_MS, from a short-lived cache forgotten whenever the bridge accrues to a card or reverses it). Nothing is recorded; the contact is never logged.",
    access: 'pos',
    body: { schema: LookupBody, component: 'LookupBody', required: true, emptyWhenAbsent: true },
    answers: {
      200: { description: 'The cards, with their points and balance.', json: LookupAnswer },
      400: error('The body is not valid (invalid_payload, each field named): not exactly one of phone, email or cardSerial, or not one of them.'),
      404: error("The merchant's loyalty service knows no such guest or card (not_found)."),
      409: error("The merchant has no loyalty API key to read its cards with (api_key_missing, field loyalty.apiKey)."),
      503: error('The loyalty service did not answer within the budget (upstream_unavailable): try again.'),
    },
    before: () => jsonBody(LOOKUP_BODY_LIMIT_BYTES),
    async handle({ req, res, body, deps }) {
      const merchant = req.posMerchant!;
      const phone = body.phone === undefined ? undefined : toE164(body.phone, merchant.context.defaultPhoneRegion, 'phone');
      const email = body.email?.toLowerCase();
      if (email !== undefined && !email.includes('@')) throw ValidationError.field('email', 'is not an email address');
      const cards = await deps.register.lookup(merchant.id, { ...(phone ? { phone } : {}), ...(email ? { email } : {}), ...(body.cardSerial ? { cardSerial: body.cardSerial } : {}) });
      if (!cards) throw new NotFoundError("this merchant's loyalty service knows no such guest or card");
      res.json({
        cards: cards.map((c) => ({
          serialNumber: c.serialNumber,
          ...(c.templateId !== undefined ? { templateId: c.templateId } : {}),
          ...(c.pointsBalance !== undefined ? { pointsBalance: c.pointsBalance } : {}),
          balance: c.balance,
          customer: { ...(c.customer.firstName ? { firstName: c.customer.firstName } : {}), ...(c.customer.surname ? { surname: c.customer.surname } : {}) },
        })),
      } satisfies LookupAnswer);
    },
  }),
];
