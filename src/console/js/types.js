// @ts-check
/**
 * The console's types, for the type-check only (`tsconfig.console.json`): the page never loads this
 * module, which holds nothing but JSDoc. What the API answers is the bridge's own description of
 * it: the zod schemas of src/http/schemas.ts (the ones `/openapi.json` documents), the routes' own
 * request schemas and the vocabulary src/http/routes/console.ts serves, so an answer that changes
 * shape fails the console's check too. The rest are the page's own shapes: an element's attributes
 * and children, a view's context.
 *
 * JSDoc in a checked .js rather than a .d.ts: the project skips checking declaration files
 * (`skipLibCheck`), where a name the bridge renamed would silently become `any`.
 */

// ---- The bridge's words ----

/** @typedef {import('../../state/record.js').LedgerStatus} LedgerStatus */
/** @typedef {import('../../http/routes/console.js').ConsoleVocabulary} ConsoleVocabulary */

// ---- What the API answers ----

/**
 * The bridge's app as it is built: the route modules named below are typed against what its
 * modules add to express's Request (src/http/request-log.ts and the others), as in the bridge's own check.
 * @typedef {Parameters<typeof import('../../http/app.js').createApp>[0]} App
 */

/** @typedef {import('../../http/schemas.js').ErrorEnvelope} ErrorEnvelope The error envelope of every answer that is not a success. */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').FieldIssue>} FieldIssue */
/** @typedef {import('../../http/schemas.js').WhoAmI} WhoAmI `GET /v1/admin/whoami`: who the token is. */
/** @typedef {import('../../http/schemas.js').RecordSummary} RecordSummary */
/** @typedef {import('../../http/schemas.js').RecordDetail} RecordDetail `GET /v1/admin/transactions/{id}`. */
/** @typedef {import('../../http/schemas.js').TransactionList} TransactionList */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').ActionAllowed>} ActionRule Whether an action is allowed now, and why not (`actions` of a record or dead letter). */
/** @typedef {import('../../http/schemas.js').EvidenceAnswer} EvidenceAnswer */
/** @typedef {import('../../http/schemas.js').KeptPayload} KeptPayload */
/** @typedef {import('zod').input<typeof import('../../http/routes/admin.js').BulkBody>} BulkRequest `POST /v1/admin/transactions/bulk`: what the page sends, as the route parses it. */
/** @typedef {import('../../http/schemas.js').BulkAnswer} BulkAnswer */
/** @typedef {import('../../http/schemas.js').BulkPreview} BulkPreview `POST /v1/admin/transactions/bulk/preview`: what a bulk action would do. */
/** @typedef {import('../../http/schemas.js').AttentionAnswer} AttentionAnswer */
/** @typedef {import('../../http/schemas.js').Readiness} Readiness */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').AttentionItem>} AttentionItem */
/** @typedef {AttentionItem['kind']} AttentionKind */
/** @typedef {import('../../http/schemas.js').AuditList} AuditList */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').AuditEntry>} AuditEntry */
/** @typedef {import('../../http/schemas.js').DeadLetter} DeadLetter */
/** @typedef {import('../../http/schemas.js').DeadLetterList} DeadLetterList */
/** @typedef {import('../../http/schemas.js').ReplayAnswer} ReplayAnswer */
/** @typedef {import('../../http/schemas.js').ReconcileReport} ReconcileReport */
/** @typedef {import('../../http/schemas.js').ThreeWayReport} ThreeWayReport */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').ThreeWayDifference>} ThreeWayDifference */
/** @typedef {import('zod').infer<typeof import('../../http/schemas.js').MerchantList>} MerchantList */
/** @typedef {import('zod').input<ReturnType<typeof import('../../http/routes/backfill.js').backfillRequest>>} BackfillRequest `POST /v1/admin/backfill`. */
/** @typedef {import('../../http/schemas.js').BackfillAnswer} BackfillAnswer */
/** @typedef {import('../../http/schemas.js').BackfillStatusList} BackfillStatusList */

/**
 * A merchant as the page lists it to pick from: the list's fields it shows (a merchant's own token knows only its id).
 * @typedef {Pick<import('../../http/schemas.js').MerchantView, 'id'> & Partial<Pick<import('../../http/schemas.js').MerchantView, 'name' | 'status'>>} Merchant
 */

/**
 * What a POS delivered, as a dead letter or a record's kept payload shows it.
 * @typedef {Partial<Pick<KeptPayload, 'headers' | 'bodyEncoding' | 'masked' | 'body'>>} Delivery
 */

/** @typedef {keyof RecordDetail['actions']} RecordActionName The actions on a record (`actions` of its detail). */
/** @typedef {NonNullable<ActionRule['outcomes']>[number]} ResolveOutcome What a person established and resolves a record with. */
/** @typedef {NonNullable<RecordDetail['origin']>['via']} OriginVia How a record came to be (`origin.via`). */

// ---- The page's own shapes ----

/** @typedef {string | number | boolean | null | undefined} QueryValue A value in a query string or a route's parameters; empty ones are left out. */

/** @typedef {Node | string | number | null | undefined | false | readonly Child[]} Child What `h` and `replace` take as children: nodes and text, arrays of them; `null`, `undefined` and `false` are skipped. */

/** @typedef {string | number | boolean | null | undefined} AttributeValue An attribute's value: `undefined`, `null` and `false` leave it out, `true` sets it empty. */

/**
 * `on<event>` listeners, each given its event with `currentTarget` the element itself.
 * @template El
 * @typedef {{ [E in keyof HTMLElementEventMap as `on${E}`]?: (event: HTMLElementEventMap[E] & { currentTarget: El }) => unknown }} Listeners
 */

/**
 * An element's attributes for `h`: plain ones, and `on*` listeners.
 * @template [El=HTMLElement]
 * @typedef {Listeners<El> & { [name: string]: AttributeValue | ((event: never) => unknown) }} Attributes
 */

/**
 * The page a view renders into, and what it may do.
 * @typedef {object} ViewContext
 * @property {HTMLElement} section The view's own section: once the operator moves on, it is no longer on the page.
 * @property {URLSearchParams} params The route's filters (`#/search?status=a,b`).
 * @property {WhoAmI} principal
 * @property {(path: string, params?: Record<string, QueryValue>) => void} navigate Goes to `path` with `params` (empty values left out).
 * @property {(text: string, tone?: 'done' | 'problem') => void} announce A message for screen readers and eyes alike; a problem is drawn and worded as one.
 * @property {() => Promise<void>} refresh Renders the current route again.
 */

/** @typedef {(context: ViewContext, ...route: string[]) => Promise<void>} View A view: renders the route's page into `context.section`; the route's captured parts follow, decoded. */

export {};
