/**
 * The register's answers when the ledger refuses a call for now (src/core/register.ts): the Toast
 * adapter's own words, never the bridge's `{error}` body, which a register cannot read. The HTTP
 * suites (test/e2e/register-toast.test.ts) cover every transaction type against the simulator; this
 * one reaches the refusal a probe makes (core/transitions.ts `refuseWhileProbing`), which takes an
 * ambiguity the simulator makes only by chance.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { toastAdapter } from '../../adapters/toast/index.js';
import { CardReads, RegisterService, type RegisterMerchant } from '../../src/core/register.js';
import { createMetrics } from '../../src/core/metrics.js';
import { ConflictError } from '../../src/kernel/errors.js';
import { silentLogger } from '../../src/kernel/logger.js';
import { MemoryLedgerStore } from '../../src/ledger/memory-store.js';

const fixture = (name: string) => JSON.parse(readFileSync(new URL(`../fixtures/toast/loyalty/${name}.json`, import.meta.url), 'utf8')) as { headers: Record<string, string>; body: unknown };
const REVERSE = fixture('reverse_request');
const RESTAURANT = REVERSE.headers['toast-restaurant-external-id']!;
const KEY = REVERSE.headers.authorization!;

const merchant: RegisterMerchant = {
  id: 'default',
  status: 'active',
  client: { canVerify: true } as RegisterMerchant['client'],
  context: { defaultCurrency: 'USD', defaultPhoneRegion: 'US' },
  pos: { toast: { account: RESTAURANT, registerKey: KEY, apiBaseUrl: 'http://127.0.0.1:9' } },
};

function registerWith(reverseSale: () => Promise<never>) {
  const store = new MemoryLedgerStore();
  const service = new RegisterService({
    adapters: new Map([['toast', toastAdapter]]),
    merchants: { get: async () => merchant, byAccount: async () => merchant },
    ingest: { checkoutIntent: async () => Promise.reject(new Error('no accrue in this test')) },
    intake: { reverseSale },
    store,
    reads: new CardReads({ budgetMs: 400, cacheMs: 1000, cacheEntries: 10, now: () => Date.now() }),
    metrics: createMetrics(undefined, false),
    logger: silentLogger,
    now: () => new Date(),
  });
  return { service, store };
}

describe('a register call the ledger refuses for now', () => {
  it("a REVERSE met by a probe of its accrual is Toast's catch-all ERROR with a message for the employee, not the bridge's body", async () => {
    const { service, store } = registerWith(async () => {
      throw new ConflictError("the bridge is asking the loyalty service whether toast:o:c's accrual happened (a probe: its reverse is in_flight); deliver the refund again once that is answered");
    });
    const reversed = (REVERSE.body as { reverseTransactionInformation: { transactionId: string } }).reverseTransactionInformation.transactionId;
    // The accrue this REVERSE names was taken: bound to its sale as the register binds it.
    await store.bindDelivery('toast-register', `default/${reversed}`, 'accrue:toast:o:c');

    const answer = await service.call('toast', REVERSE.headers, Buffer.from(JSON.stringify(REVERSE.body)));

    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ transactionStatus: 'ERROR', message: expect.stringContaining('try again') });
    expect(answer.body).not.toHaveProperty('error');
  });

  it('another failure is not dressed as a refusal: it reaches the error handler', async () => {
    const { service, store } = registerWith(async () => {
      throw new Error('the ledger broke');
    });
    const reversed = (REVERSE.body as { reverseTransactionInformation: { transactionId: string } }).reverseTransactionInformation.transactionId;
    await store.bindDelivery('toast-register', `default/${reversed}`, 'accrue:toast:o:c');
    await expect(service.call('toast', REVERSE.headers, Buffer.from(JSON.stringify(REVERSE.body)))).rejects.toThrow('the ledger broke');
  });
});
