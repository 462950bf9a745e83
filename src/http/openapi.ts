/** The bridge's public interface (bridge-contract.md) as an OpenAPI 3 document, served at /openapi.json. */
import { LEDGER_STATUSES } from '../ledger/record.js';
import { RECONCILE_BUDGET_MS } from './routes/admin.js';

const json = (schema: object) => ({ content: { 'application/json': { schema } } });
const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const posParam = { name: 'pos', in: 'path', required: true, schema: { type: 'string', enum: ['generic', 'square', 'shopify', 'clover', 'toast', 'loyverse'] } };
const txParam = { name: 'transactionId', in: 'path', required: true, schema: { type: 'string' } };
const errors = {
  '400': { description: 'Invalid payload; names each field', ...json(ref('Error')) },
  '404': { description: 'Unknown POS, record, or an order the loyalty service does not know', ...json(ref('Error')) },
  '413': { description: 'Body too large', ...json(ref('Error')) },
  '415': { description: 'Body is not JSON', ...json(ref('Error')) },
  '503': {
    description: 'Overloaded (POS_MAX_IN_FLIGHT requests being handled): refused before the body was read, nothing recorded; send it again after Retry-After seconds',
    headers: { 'Retry-After': { schema: { type: 'integer' } } },
    ...json(ref('Error')),
  },
};
const answers = {
  '200': { description: 'Final outcome now, or the recorded outcome of a repeat', ...json(ref('Answer')) },
  '202': { description: 'Recorded durably; delivery continues in the background', ...json(ref('Answer')) },
};
const admin = { security: [{ bearer: [] }], tags: ['admin'] };

export function openApiDocument(version: string) {
  return {
    openapi: '3.0.3',
    info: { title: 'loyalty-bridge', version, description: 'Point-of-sale checkouts and refunds to the loyalty service, through a durable ledger.' },
    paths: {
      '/v1/checkouts/{pos}': { post: { summary: "Record a closed order, then accrue (Authorization: Bearer POS_TOKEN; open only in sandbox or with POS_AUTH=off)", parameters: [posParam], requestBody: json(ref('GenericCheckout')), responses: { ...answers, ...errors } } },
      '/v1/refunds/{pos}': { post: { summary: 'Record a refund, then reverse (Authorization: Bearer POS_TOKEN; open only in sandbox or with POS_AUTH=off)', parameters: [posParam], requestBody: json(ref('GenericRefund')), responses: { ...answers, ...errors } } },
      '/v1/admin/transactions': {
        get: {
          ...admin,
          summary: 'List ledger records, newest first',
          parameters: ['status', 'pos', 'from', 'to', 'page', 'limit'].map((name) => ({ name, in: 'query', schema: name === 'status' ? { type: 'string', enum: LEDGER_STATUSES } : { type: name === 'page' || name === 'limit' ? 'integer' : 'string' } })),
          responses: { '200': { description: '{ items, total, page, limit }' }, '401': { description: 'Missing or wrong token' } },
        },
      },
      '/v1/admin/transactions/{transactionId}': { get: { ...admin, summary: 'One record with its attempts and history', parameters: [txParam], responses: { '200': { description: 'The record' }, '404': { description: 'No such record' } } } },
      '/v1/admin/transactions/{transactionId}/retry': { post: { ...admin, summary: 'Deliver again what provably did not happen', parameters: [txParam], responses: { ...answers, '409': { description: 'Not retryable in this state' } } } },
      '/v1/admin/transactions/{transactionId}/reverse': { post: { ...admin, summary: 'Reverse the whole accrual', parameters: [txParam], responses: answers } },
      '/v1/admin/transactions/{transactionId}/resolve': {
        post: {
          ...admin,
          summary: 'Settle an in-doubt call by hand, or attest a failed reverse finished by hand (outcome reversed)',
          parameters: [txParam],
          requestBody: json({ type: 'object', required: ['outcome'], properties: { outcome: { type: 'string', enum: ['accrued', 'not_accrued', 'reversed', 'not_reversed'] }, operationId: { type: 'integer' }, note: { type: 'string' } } }),
          responses: { ...answers, '409': { description: 'Not in doubt (nor a failed reverse, for outcome reversed)' } },
        },
      },
      '/v1/admin/reconcile': {
        post: {
          ...admin,
          summary: `One reconciliation pass now, for at most budgetMs (default and maximum ${RECONCILE_BUDGET_MS}); report of examined, complete, fixed and open`,
          parameters: [{ name: 'budgetMs', in: 'query', schema: { type: 'integer', minimum: 0, maximum: RECONCILE_BUDGET_MS } }],
          responses: { '200': { description: 'The report; complete=false: call again for the rest' }, '400': { description: 'budgetMs out of range' } },
        },
      },
      '/healthz': { get: { summary: 'Alive', responses: { '200': { description: 'ok' } } } },
      '/readyz': { get: { summary: 'Ledger reachable and upstream configured', responses: { '200': { description: 'ready' }, '503': { description: 'not ready' } } } },
      '/metrics': { get: { summary: 'Prometheus metrics', responses: { '200': { description: 'text/plain exposition' } } } },
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Money: { oneOf: [{ type: 'string', pattern: '^-?[0-9]+(\\.[0-9]+)?$' }, { type: 'number' }], description: 'Major units; converted to integer cents exactly' },
        GenericCheckout: {
          type: 'object',
          required: ['orderId', 'currency', 'total'],
          properties: {
            orderId: { type: 'string' },
            storeId: { type: 'string', description: 'Part of the order identity when order ids repeat across stores' },
            currency: { type: 'string', description: 'ISO 4217' },
            total: ref('Money'),
            tax: ref('Money'),
            discount: ref('Money'),
            tip: ref('Money'),
            serviceCharge: ref('Money'),
            openedAt: { type: 'string', format: 'date-time' },
            closedAt: { type: 'string', format: 'date-time' },
            customer: { type: 'object', properties: { phone: { type: 'string' }, email: { type: 'string' }, cardSerial: { type: 'string' }, firstName: { type: 'string' }, lastName: { type: 'string' } } },
            items: { type: 'array', items: { type: 'object', required: ['quantity'], properties: { id: { type: 'string' }, groupId: { type: 'string' }, name: { type: 'string' }, quantity: { oneOf: [{ type: 'number' }, { type: 'string' }] }, unitPrice: ref('Money'), total: ref('Money') } } },
          },
        },
        GenericRefund: { type: 'object', required: ['orderId'], properties: { orderId: { type: 'string' }, storeId: { type: 'string' }, refundId: { type: 'string' } } },
        Answer: {
          type: 'object',
          required: ['transactionId', 'status'],
          properties: { transactionId: { type: 'string' }, status: { type: 'string', enum: LEDGER_STATUSES }, repeat: { type: 'boolean' }, refundId: { type: 'string' }, results: { type: 'array', items: { type: 'object' } }, errors: { type: 'array', items: { type: 'string' } } },
        },
        Error: { type: 'object', properties: { error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' }, issues: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } } } }, requestId: { type: 'string' } } },
      },
    },
  };
}
