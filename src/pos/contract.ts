/**
 * The POS contract: what the core and the adapters share, owned here and nowhere else. What an
 * adapter is: pure functions from one POS's own payloads to the bridge's neutral intents, plus a
 * description of how that POS signs and shapes its webhooks. Adapters describe and
 * translate; the core verifies signatures, calls the POS's API, writes the ledger and calls the
 * loyalty service. Adapters throw ValidationError (naming the field) for anything they cannot
 * translate exactly: a wrong guess must fail loudly, never become a wrong amount.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { ZodType } from 'zod';
import type { Customer } from '../kernel/customer.js';
import type { Check } from '../loyalty/contract.js';
import type { PosSettingDeclarations, PosSettings } from './settings.js';

/** An adapter reads its settings as settings.ts declares them; named here too, as every adapter's contract uses them. */
export type { PosSettings } from './settings.js';

/**
 * Every POS the bridge takes payloads from (`{pos}` in the POS-facing paths), written here and
 * nowhere else: test/openapi.test.ts holds it to the adapters the bridge registers.
 */
export const POS_NAMES = ['generic', 'square', 'shopify', 'clover', 'toast', 'loyverse'] as const;
export type PosName = (typeof POS_NAMES)[number];
/**
 * The vendors' POSes: each has its own API and signed webhooks. `generic` is the bridge's own
 * payload for a POS without an adapter, posted to /v1/checkouts and /v1/refunds, with no webhooks.
 */
export type VendorPosName = Exclude<PosName, 'generic'>;
export const VENDOR_POS_NAMES: readonly VendorPosName[] = POS_NAMES.filter((pos): pos is VendorPosName => pos !== 'generic');

export interface AdapterContext {
  defaultCurrency: string;
  defaultPhoneRegion: string;
  /**
   * For a direct post: the posting merchant's account on this POS where one is bound (e.g.
   * CLOVER_MERCHANT_ID, a merchant's pos.clover.merchantId), else the only one the bridge has
   * configured on it. It names the merchant scope of a payload that names none (a Clover refund).
   */
  posAccount?: string;
}

/**
 * How a sale is known in the ledger beyond its order id: `part`, the part of the order it is where
 * the POS gives loyalty per part (a Toast check: an order's checks may name different guests), which
 * gets a transactionId of its own beside the order's (transaction-id.ts); `recordedAs`, the
 * transactionIds an earlier build may have recorded the same sale under (a Toast order kept whole
 * before its checks had ids of their own): a sale found there is that record's, never a second one.
 */
export interface SaleIdentity {
  orderId: string;
  /** Merchant/location part of the order's identity where the POS's order ids are not globally unique. */
  scope?: string;
  part?: string;
  recordedAs?: readonly string[];
}

export interface CheckoutIntent extends SaleIdentity {
  check: Check;
  customer: Customer;
  /** The POS's own customer id, when the payload names a customer but carries no contact details. */
  customerRef?: string;
}

export interface RefundLine {
  id: string;
  quantity: number;
  totalCents: number;
}

export interface RefundIntent extends SaleIdentity {
  /**
   * A full refund of a part (`part`): the part's own Check amount, in cents. Met by a record an
   * earlier build kept whole for the order (`recordedAs`), which holds more than the part, the
   * refund takes back this much of it, not all of it.
   */
  partCents?: number;
  /** The POS's id of this refund: the same id delivered again changes nothing. */
  refundId?: string;
  /** Partial refunds name the refunded amount (cents, tax and tip excluded) and/or lines. */
  amountCents?: number;
  items?: RefundLine[];
  /**
   * Instead of an amount: the money given back as the POS states it, tax and tip included, where the
   * POS does not say (and its API cannot be asked) which part of it was the purchase. The core
   * measures it against the order as the ledger recorded it: all that was paid (Check + tax + tip)
   * is a full refund; less is that share of the Check (`proRataCents`), noted on the record.
   */
  paidBack?: {
    cents: number;
    currency: string;
    /** How it was measured, for the record's history (e.g. "measured without the return order"). */
    note: string;
    /** What to do when the ledger does not know the order (so there is nothing to measure against). */
    unknownOrder: string;
  };
}

/** An object of the POS's a request names (`order` `ABC123`): what a refusal says the POS does not have. */
export interface PosObjectRef {
  kind: string;
  id: string;
}

/** Reads the POS's own API with its access token (GET, JSON). */
export interface PosApi {
  get(path: string, query?: Record<string, string>): Promise<unknown>;
}

/** The POS's API as backfill reads it: any one request (a listing's page: POST bodies, repeated parameters, extra headers), answered with its headers. */
export interface PosListingApi extends PosApi {
  request(request: PosRequest): Promise<PosAnswer>;
}

/**
 * One request to a POS's API. `path` is relative to the POS's base URL, or a whole URL the POS gave
 * out (Shopify's `Link` header). `query` values that are lists repeat the parameter (Clover's `filter`).
 */
export interface PosRequest {
  method: 'GET' | 'POST';
  path: string;
  query?: Record<string, string | string[]>;
  body?: unknown;
  headers?: Record<string, string>;
}

/** A 200 answer: its JSON and its headers (names in lower case). */
export interface PosAnswer {
  data: unknown;
  headers: Record<string, string>;
}

/** A window of a POS's modification times: `since` included, `until` excluded. */
export interface BackfillWindow {
  since: Date;
  until: Date;
}

/**
 * One order or refund a POS listed, ready for the adapter's `parseCheckout` / `parseRefund`: its
 * payload is what those read (the order, the return order, `{ order, refundId }`, …).
 */
export interface ListedObject {
  kind: 'checkout' | 'refund';
  payload: unknown;
  /** The POS's own order id (for a refund: its sale's). */
  orderId: string;
  /** The POS's own refund id (refunds only). */
  refundId?: string;
  /** When the POS last changed it (ISO 8601, as the POS states it). */
  updatedAt: string;
  /**
   * A sale the POS counts as paid. An unpaid one (Square OPEN, Shopify `pending`, Clover open,
   * Toast OPEN) is listed but is not a checkout yet: nothing accrues for it. Always true for a refund.
   */
  paid: boolean;
}

/**
 * How backfill lists a POS account's orders and refunds changed in a window (docs/backfill-and-reconcile.md).
 * Pure apart from `prepare`: it says which requests to send and reads their answers; the core
 * sends them and pages through them.
 */
export interface BackfillSpec {
  /** What the listings need that only the POS knows (Square's locations), read once per pass. */
  prepare?(api: PosListingApi, account: string): Promise<unknown>;
  /**
   * The first request of each listing; together they cover the window. Several when the POS bounds
   * one listing (Square takes at most 10 locations). `pageSize`: wanted per page, within the POS's limit.
   */
  listings(window: BackfillWindow, account: string, pageSize: number, prepared: unknown): PosRequest[];
  /**
   * Reads what one request cannot carry and answers the page whole (Clover expands at most three
   * collections a call): the same page again with the rest, merged. Absent: the answer is whole.
   */
  completePage?(api: PosListingApi, answer: PosAnswer, request: PosRequest): Promise<PosAnswer>;
  /** One page's answer: what it lists, and the request for the next page (absent: the listing is done). */
  page(answer: PosAnswer, request: PosRequest): { found: ListedObject[]; next?: PosRequest };
}

export type SignatureScheme =
  /** HMAC of `message(raw body, headers)` keyed with the secret, in the header, in one of `encodings`. */
  | {
      kind: 'hmac';
      header: string;
      algorithm: 'sha256' | 'sha1';
      encodings: ('base64' | 'hex')[];
      /** The exact bytes the POS signs; undefined when a header they need is missing (→ 401). */
      message(raw: Buffer, headers: IncomingHttpHeaders, settings: PosSettings): Buffer | undefined;
      /** Where the POS signs a time: that time and how old (or how far ahead) it may be. */
      replay?: ReplayWindow;
    }
  /** A static code in the header, compared to the configured secret. */
  | { kind: 'static'; header: string };

/**
 * A signed time bounds how long a captured delivery can be replayed. Each window is longer than
 * the POS's own retries (a retry of an authentic delivery must still pass) and shorter than the
 * time the bridge remembers webhook event ids (7 days), so a replay is either recognised as a
 * repeat or refused as too old.
 */
export interface ReplayWindow {
  /** The signed time as the delivery states it; undefined when it states none. */
  signedAt(raw: Buffer, headers: IncomingHttpHeaders): string | undefined;
  windowMs: number;
  /** Why this window, for the refusal's message and the README. */
  why: string;
}

/** What one authentic webhook delivery asks for. Batched deliveries (Clover, Loyverse) give several. */
export type WebhookAction = (
  | { kind: 'checkout'; payload: unknown }
  | { kind: 'refund'; payload: unknown }
  /**
   * Id-only events: fetch the object from the POS's API, then decide what it is. `withoutApi`: what
   * to do instead when the POS's access token is not set (absent: the event waits for one, as a dead
   * letter). Not used when the API fails: that passes, and the exact answer is worth waiting for.
   * What it decides is remembered under this action's key, as unique as this action's.
   */
  | { kind: 'fetch'; fetch(api: PosApi): Promise<unknown>; decide(fetched: unknown): WebhookAction | WebhookAction[]; withoutApi?(): WebhookAction }
  | { kind: 'ignored'; reason: string }
) &
  ActionKey;

/** The identity an action is deduplicated by: the same key delivered again changes nothing. */
export interface ActionKey {
  key: string;
  /**
   * The key is an id the POS issues once across all its accounts (Shopify's event and webhook ids,
   * docs/pos-systems.md), so a delivery taken under it is a duplicate for every merchant, whichever
   * account a later copy names: where the account is named outside what is signed (Shopify's shop
   * domain header), a copy naming another shop must not accrue again. Absent: the key is the
   * account's own (the POS's event ids may repeat across accounts, or the key is built from the
   * object's id), and is remembered per merchant.
   */
  uniqueAcrossAccounts?: true;
}

/**
 * One merchant's part of a webhook delivery, and how it names its account. A POS app's webhook
 * secret is the same for every merchant that installed it, so only what the signature covers can
 * be trusted to name the account: where the body names it, a header that disagrees is refused;
 * where only a header names it (Shopify's shop domain, a Toast message without its restaurant),
 * the core binds the signed bytes to the account they were first taken for (contract v1.5).
 */
export interface WebhookPart {
  /** The account as the signed body names it. */
  account?: string;
  /** The account as an unsigned header of the delivery names it. */
  headerAccount?: string;
  body: unknown;
}

/** A non-empty text the delivery names at `field` of its body (an object), else undefined. */
export function namedIn(body: unknown, field: string): string | undefined {
  const value = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)[field] : undefined;
  return typeof value === 'string' && value.trim() ? value.trim() : undefined;
}

/** One header's value; a repeated header (Node joins it, or gives an array) names nothing. */
export function singleHeaderValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  return typeof value === 'string' && value.trim() && !value.includes(',') ? value.trim() : undefined;
}

export interface WebhookSpec {
  signature: SignatureScheme;
  /**
   * Pure: the delivery's actions, each with its dedupe key (the POS's event id, or the POS's own
   * identity of the change where it has no event id). Unknown event types are `ignored`.
   */
  classify(body: unknown, headers: IncomingHttpHeaders): WebhookAction[];
  /**
   * Pure: the merchant accounts a delivery speaks for (the POS names the merchant in every delivery
   * of an app many merchants installed), each with the part of the body that is its own: one part
   * for most POSes, one per merchant for a Clover delivery batching several. Neither `account` nor
   * `headerAccount`: the delivery names none. Each part is classified on its own. Absent: one part, the whole body.
   */
  accounts?(body: unknown, headers: IncomingHttpHeaders): WebhookPart[];
  /**
   * A set-up handshake the POS sends before any secret exists (Clover's URL verification), so it
   * cannot be signed: returns what the operator must see when `raw` is exactly that handshake.
   * Matched only when the signature header is absent; it is acknowledged and nothing is recorded.
   */
  unsignedHandshake?(body: unknown): string | undefined;
  /**
   * Other names the POS (or its own libraries) send a header under, each with the name this spec
   * reads (lower case): the core reads a delivery's headers under the spec's names, whichever the
   * sender used, and refuses (400, naming the header) a delivery giving both names different values.
   */
  headerAliases?: Readonly<Record<string, string>>;
}

export interface PosAdapter {
  readonly name: string;
  parseCheckout(body: unknown, context: AdapterContext): CheckoutIntent;
  parseRefund(body: unknown, context: AdapterContext): RefundIntent;
  /** Contact details of `customerRef` from the POS's API (used only when its access token is set). */
  fetchCustomer?(customerRef: string, api: PosApi, context: AdapterContext): Promise<Customer>;
  /**
   * A refund posted directly that names, rather than carries, what measures it (a Square
   * PaymentRefund without its return order): how to read that from the POS's API and the payload it
   * makes, used when the access token is set. Undefined for a refund that is complete as it is.
   */
  refundFetch?(body: unknown): { fetch(api: PosApi): Promise<unknown>; payload(fetched: unknown): unknown; reads: PosObjectRef } | undefined;
  webhook?: WebhookSpec;
  /** How to list the account's orders and refunds by modification time (backfill); absent: the POS has no such API. */
  backfill?: BackfillSpec;
  /** The POS's register protocol (Toast's loyalty integration API), where it calls the loyalty provider while a sale is open. */
  register?: RegisterSpec;
}

/** A card a register is shown: its serial (the account's identifier), points and owner (loyalty/client.ts `RegisterCard`). */
export interface RegisterAccount {
  serialNumber: string;
  pointsBalance?: number;
  customer: { firstName?: string; surname?: string; phone?: string; email?: string };
}

/**
 * One call of a register, as its adapter read it (pure). `id`: the POS's id of this call, the same
 * when it repeats it (Toast-Transaction-GUID). `redemptions`: rewards the register asks to redeem,
 * as the POS wrote them (answered rejected: the loyalty service publishes no redemption a point of
 * sale can make, docs/pos-systems.md).
 */
export type RegisterCall = { id: string } & (
  | { kind: 'search'; phone?: string; email?: string }
  | { kind: 'inquire'; identifier: string; redemptions: readonly unknown[] }
  | { kind: 'redeem'; identifier?: string; redemptions: readonly unknown[] }
  /** The check's purchase, with the card the register attached (`intent.customer.serialNumber`), or none. */
  | { kind: 'accrue'; sale: CheckoutIntent; redemptions: readonly unknown[] }
  /** Undo the call `reverses` names (an accrue's or a redeem's id). */
  | { kind: 'reverse'; reverses: string; redemptions: readonly unknown[] }
  /** A kind of call the bridge does not take (Toast's TRANSFER). */
  | { kind: 'unsupported'; type: string }
);

/** Why a register's call is refused, in the bridge's words; the adapter says it in the POS's. */
export type RegisterRefusalReason = 'key' | 'account' | 'input' | 'no_card' | 'unknown_call' | 'cannot_reverse' | 'unsupported' | 'unavailable';

/** What the bridge answers a register's call (the adapter writes it in the POS's shape). */
export type RegisterAnswer =
  | { kind: 'accounts'; accounts: readonly RegisterAccount[] }
  | { kind: 'account'; account: RegisterAccount; rejected: readonly unknown[] }
  | { kind: 'accepted'; rejected: readonly unknown[] }
  | { kind: 'refused'; reason: RegisterRefusalReason; message: string };

/**
 * A POS's register protocol (Toast's loyalty integration API): the calls a cashier's POS makes to
 * the loyalty provider while the sale is open, read and answered in the POS's own shapes (pure).
 */
export interface RegisterSpec {
  /** The header naming the merchant's account on the POS (Toast-Restaurant-External-ID). */
  accountHeader: string;
  /** The header holding the key the merchant's integration was set up with (Authorization, the whole value). */
  keyHeader: string;
  /** The call's id header (Toast-Transaction-GUID): what a repeat is known by. */
  callIdHeader: string;
  /** Pure: the call a request makes, or a ValidationError naming the field. */
  parse(body: unknown, headers: IncomingHttpHeaders, context: AdapterContext): RegisterCall;
  /** Pure: the answer in the POS's shape, with its HTTP status. */
  answer(answer: RegisterAnswer): { status: number; body: unknown };
}

/**
 * What the HTTP layer needs of the POSes the composition root registered, handed to it so that it
 * imports no adapter: the names it routes and documents, the POS accounts a merchant may be given,
 * and the generic payload (the one POS payload the bridge defines itself) as its adapter parses it.
 */
export interface PosCatalogue {
  /** Every POS whose payloads `/v1/checkouts/{pos}` and `/v1/refunds/{pos}` take (the adapters' names). */
  names: readonly string[];
  /** Those whose webhooks `/v1/webhooks/{pos}` takes (an adapter with a `webhook` spec). */
  webhookNames: readonly string[];
  /** Those whose API lists orders by modification time (an adapter with a `backfill` spec): what backfill can read. */
  listingNames: readonly string[];
  /** Each POS's settings: the POS accounts a merchant's body may name (`/v1/admin/merchants`). */
  settingDeclarations: PosSettingDeclarations;
  /** The generic payload's zod schemas, as its adapter parses them (the document shows their input side). */
  schemas: { checkout: ZodType; refund: ZodType };
  /** A generic checkout the document shows (and the generic schema accepts). */
  examples: { checkout: unknown };
}
