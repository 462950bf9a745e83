/**
 * Managing merchants under `/v1/admin/merchants` (bridge-contract "Merchants"): the bridge's own
 * ADMIN_TOKEN only (a merchant's admin token is a 403). The bodies are the merchant registry's own
 * schemas (`merchantSchemas`), with the POS accounts of the POSes the bridge registers.
 */
import { z } from 'zod';
import { echoed, NotFoundError } from '../../kernel/errors.js';
import { DEFAULT_MERCHANT } from '../../state/merchant.js';
import { merchantSchemas } from '../../merchants/admin.js';
import { MERCHANT_ID } from '../../state/merchant.js';
import type { PosCatalogue } from '../../pos/contract.js';
import { BAD_PATH, error, route, type PathParam, type Route } from '../route.js';
import { MerchantList, MerchantView, MerchantWithTokens } from '../schemas.js';
import { PageQuery } from './admin.js';

/** One no merchant can have (not a merchant id) is the same 404 as an unknown one, its text cut short. */
const merchantId: Record<string, PathParam> = {
  merchantId: { description: 'The merchant id (lower-case letters, digits and dashes).', schema: z.string().regex(MERCHANT_ID), refuse: (id) => new NotFoundError(`no merchant ${echoed(id)}`) },
};

export function merchantRoutes(catalogue: PosCatalogue): Route[] {
  const bodies = merchantSchemas(catalogue.settingDeclarations);
  /** The default merchant is built from the variables, never created: its id is refused as the body is parsed, and the document says so. */
  const MerchantCreate = bodies.create.extend({
    id: bodies.create.shape.id
      .refine((id) => id !== DEFAULT_MERCHANT, `"${DEFAULT_MERCHANT}" is the merchant built from the variables; choose another id`)
      .meta({ not: { const: DEFAULT_MERCHANT } }),
  });
  return [
    route({
      method: 'post',
      path: '/v1/admin/merchants',
      operationId: 'createMerchant',
      tag: 'Merchants',
      summary: 'Add a merchant from its loyalty app install',
      description:
        "Reads the install's settings from the loyalty service (resolve-credentials) to fill what the body leaves out, seals every secret with SECRETS_KEY, and answers with the merchant's POS and admin tokens, shown this once.",
      access: 'globalAdmin',
      body: { schema: MerchantCreate, component: 'MerchantCreate', required: true },
      answers: {
        201: { description: 'Created, with its tokens.', json: MerchantWithTokens },
        400: error('The body is not valid (invalid_payload, each field named), the id is "default", or the loyalty service refused the app token (loyalty.appToken named).'),
        409: error('The id, or one of its POS accounts, is taken (conflict); or SECRETS_KEY is not set (secrets_key_missing).'),
        502: error("The loyalty service could not be asked for the install's settings (upstream_unavailable): nothing was stored; send it again."),
      },
      async handle({ req, res, deps }) {
        res.status(201).json(await deps.merchants.create(req.body));
      },
    }),
    route({
      method: 'get',
      path: '/v1/admin/merchants',
      operationId: 'listMerchants',
      tag: 'Merchants',
      summary: 'List merchants, oldest first',
      access: 'globalAdmin',
      query: PageQuery,
      answers: {
        200: { description: 'One page of merchants, secrets masked.', json: MerchantList },
        400: error('A query parameter is not valid, or unknown (invalid_payload, each named).'),
      },
      async handle({ res, query: q, deps }) {
        const { items, total } = await deps.merchants.list((q.page - 1) * q.limit, q.limit);
        res.json({ items, total, page: q.page, limit: q.limit });
      },
    }),
    route({
      method: 'get',
      path: '/v1/admin/merchants/{merchantId}',
      operationId: 'getMerchant',
      tag: 'Merchants',
      summary: 'One merchant, secrets masked',
      access: 'globalAdmin',
      params: merchantId,
      answers: {
        200: { description: 'The merchant.', json: MerchantView },
        400: error(BAD_PATH),
        404: error('No such merchant (not_found); the default merchant is built from the variables and not managed here.'),
      },
      async handle({ req, res, deps }) {
        res.json(await deps.merchants.get(req.params.merchantId as string));
      },
    }),
    route({
      method: 'patch',
      path: '/v1/admin/merchants/{merchantId}',
      operationId: 'updateMerchant',
      tag: 'Merchants',
      summary: 'Change a merchant',
      description: 'Only what the body names changes; null removes an optional setting or a POS account. status suspended stops its posts (403), routes its webhooks to dead letters and sends nothing upstream for it; active resumes.',
      access: 'globalAdmin',
      params: merchantId,
      body: { schema: bodies.update, component: 'MerchantUpdate', required: true },
      answers: {
        200: { description: 'The merchant as changed.', json: MerchantView },
        400: error(`The body is not valid (invalid_payload, each field named), a new app token the loyalty service refused (loyalty.appToken), or ${BAD_PATH}.`),
        404: error('No such merchant (not_found).'),
        409: error('A POS account taken by another merchant, a change made meanwhile (send it again), or SECRETS_KEY not set.'),
        502: error('A new app token could not be checked with the loyalty service (upstream_unavailable); nothing changed.'),
      },
      async handle({ req, res, deps }) {
        res.json(await deps.merchants.update(req.params.merchantId as string, req.body));
      },
    }),
    route({
      method: 'post',
      path: '/v1/admin/merchants/{merchantId}/tokens',
      operationId: 'rotateMerchantTokens',
      tag: 'Merchants',
      summary: 'Give a merchant new POS and admin tokens',
      description: 'The old ones stop working at once (on every instance within seconds); the new ones are shown this once.',
      access: 'globalAdmin',
      params: merchantId,
      answers: {
        200: { description: 'The merchant, with its new tokens.', json: MerchantWithTokens },
        400: error(BAD_PATH),
        404: error('No such merchant (not_found).'),
        409: error('A change made meanwhile: send it again.'),
      },
      async handle({ req, res, deps }) {
        res.json(await deps.merchants.rotateTokens(req.params.merchantId as string));
      },
    }),
    route({
      method: 'post',
      path: '/v1/admin/merchants/{merchantId}/refresh',
      operationId: 'refreshMerchant',
      tag: 'Merchants',
      summary: "Read the merchant's settings from the loyalty service again",
      description: 'resolve-credentials with its app token: fills the currency, phone region and POS accounts it has not been given explicitly.',
      access: 'globalAdmin',
      params: merchantId,
      answers: {
        200: { description: 'The merchant as refreshed.', json: MerchantView },
        400: error(`The loyalty service refused its app token (loyalty.appToken), or ${BAD_PATH}.`),
        404: error('No such merchant (not_found).'),
        409: error('A change made meanwhile: send it again.'),
        502: error('The loyalty service could not be asked (upstream_unavailable); nothing changed.'),
      },
      async handle({ req, res, deps }) {
        res.json(await deps.merchants.refresh(req.params.merchantId as string));
      },
    }),
  ];
}
