/**
 * The operator console (docs/operators.md "Console"): static files from `src/console/` (copied beside the
 * compiled code by `npm run build`), served at `/admin` with headers that keep the page to its own
 * files. Everything the page shows or does goes through `/v1/admin/*` with the operator's token,
 * so there is no session here to steal and nothing is served that the token would not be given.
 *
 * Besides its files, the page reads one answer made here, `/admin/vocabulary.json`: the bridge's
 * own lists and words (ledger statuses with their labels and meanings, POS names), which the page
 * loads once before it renders instead of keeping copies of its own.
 *
 * Middleware, not routes: the page is not part of the JSON API `/openapi.json` documents.
 */
import express, { Router } from 'express';
import { fileURLToPath } from 'node:url';
import { DELIVERING_STATUSES, LEDGER_STATUSES, type LedgerStatus } from '../../state/record.js';
import { RESOLVE_OUTCOME_WORDS, STATUS_DESCRIPTIONS, STATUS_LABELS } from '../words.js';
import { POS_NAMES, VENDOR_POS_NAMES, type PosCatalogue } from '../../pos/contract.js';
import { DIFFERENCE_KINDS, DIFFERENCE_LABELS, type DifferenceKind } from '../../reconcile/classify.js';
import { RESOLVE_OUTCOMES, type ResolveOutcome } from '../../core/transitions.js';

/** From src/http/routes (sources) and dist/src/http/routes (the build) alike: src/console beside it. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * No script or style but the console's own files (no inline script, so an injected tag does not
 * run), requests to this origin only, and no framing (clickjacking an operator into an action).
 */
export const CONSOLE_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  // Revalidated on every load, so an upgraded bridge never runs yesterday's page against today's API.
  'Cache-Control': 'no-cache',
};

/** Where the page reads the bridge's vocabulary, under /admin. */
export const VOCABULARY_PATH = '/vocabulary.json';

/** The bridge's lists and words as the console reads them (src/console/js/vocabulary.js): each from its one owner. */
export interface ConsoleVocabulary {
  /** Every ledger status, in the ledger's order (src/state/record.ts), with its label and meaning (src/http/words.ts). */
  /** `delivering`: the bridge is still delivering a record in it by itself (`DELIVERING_STATUSES`): what an operator queued has not landed yet. */
  statuses: { status: LedgerStatus; label: string; description: string; delivering: boolean }[];
  /** Every POS whose payloads the bridge takes (`/v1/checkouts/{pos}`), generic first: what a record's POS may be. */
  pos: string[];
  /** Those whose webhooks the bridge takes (`/v1/webhooks/{pos}`): what a dead letter's POS may be. */
  webhookPos: string[];
  /** Those whose API lists orders, which backfill reads. */
  listingPos: string[];
  /** Every kind of difference the three-way report names, in its order, with its words (src/reconcile/classify.ts). */
  differenceKinds: { kind: DifferenceKind; label: string }[];
  /** Every outcome `/resolve` takes, in its order (src/core/transitions.ts), with its name and what the bridge then does (src/http/words.ts). */
  resolveOutcomes: { outcome: ResolveOutcome; label: string; effect: string }[];
}

/** The POSes a bridge registers, as its composition root knows them (the shape of the POS contract's catalogue). */
/** The POS lists the console offers: the catalogue the bridge was built with (PosCatalogue). */
export type ConsolePosNames = Pick<PosCatalogue, 'names' | 'webhookNames' | 'listingNames'>;

/** The POS contract's own lists: every vendor's POS has webhooks and an API backfill reads; generic has neither. */
const CONTRACT_POS_NAMES: ConsolePosNames = { names: POS_NAMES, webhookNames: VENDOR_POS_NAMES, listingNames: VENDOR_POS_NAMES };

/** The vocabulary for the POSes `pos` names: the ledger's statuses with their words, and those POSes. */
export function consoleVocabulary(pos: ConsolePosNames = CONTRACT_POS_NAMES): Readonly<ConsoleVocabulary> {
  return Object.freeze({
    statuses: LEDGER_STATUSES.map((status) => ({ status, label: STATUS_LABELS[status], description: STATUS_DESCRIPTIONS[status], delivering: DELIVERING_STATUSES.has(status) })),
    pos: [...pos.names],
    webhookPos: [...pos.webhookNames],
    listingPos: [...pos.listingNames],
    differenceKinds: DIFFERENCE_KINDS.map((kind) => ({ kind, label: DIFFERENCE_LABELS[kind] })),
    resolveOutcomes: RESOLVE_OUTCOMES.map((outcome) => ({ outcome, ...RESOLVE_OUTCOME_WORDS[outcome] })),
  });
}

/** The vocabulary of the bridge as built: the ledger's statuses and their words, the POS contract's names. */
export const CONSOLE_VOCABULARY: Readonly<ConsoleVocabulary> = consoleVocabulary();

/** `dir`: the page's files; `vocabulary`: what `/admin/vocabulary.json` answers (the bridge's own unless a caller that knows better gives it). */
export function consoleRoutes(dir: string = CONSOLE_DIR, vocabulary: Readonly<ConsoleVocabulary> = CONSOLE_VOCABULARY): Router {
  const router = Router();
  const vocabularyJson = JSON.stringify(vocabulary);
  router.use(
    '/admin',
    (req, res, next) => {
      // On every answer under /admin, the redirect to /admin/ and a 404 included.
      res.set(CONSOLE_HEADERS);
      // The page's relative URLs (console.css, js/main.js) resolve under /admin/ only. Redirected
      // here rather than by express.static, which would replace the policy with its own.
      if (req.path === '/' && !req.originalUrl.split('?')[0]!.endsWith('/')) return res.redirect(301, '/admin/');
      if (req.path === VOCABULARY_PATH && (req.method === 'GET' || req.method === 'HEAD')) return res.type('application/json').send(vocabularyJson);
      next();
    },
    express.static(dir, { index: 'index.html', dotfiles: 'ignore', redirect: false, fallthrough: true }),
  );
  return router;
}
