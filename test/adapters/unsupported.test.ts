/**
 * Fixtures of POS systems the bridge has no adapter for (Lightspeed K-Series): the exact way each is
 * refused, with nothing recorded and nothing sent.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import request from 'supertest';
import { startHarness, type Harness } from '../support/harness.js';

const sale = readFileSync(new URL('../fixtures/lightspeed/kseries_financial_sale_dto_example.json', import.meta.url), 'utf8');
let h: Harness;
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
});

it('a Lightspeed K-Series sale posted to /v1/checkouts/lightspeed is a 404 naming the POS systems served', async () => {
  const res = await request(h.bridge.url).post('/v1/checkouts/lightspeed').set('content-type', 'application/json').send(sale);
  expect(res.status).toBe(404);
  expect(res.body.error).toMatchObject({ code: 'unknown_pos', message: 'unknown POS "lightspeed"; known: generic, square, shopify, clover, toast, loyverse' });
});

it('the same sale posted as a generic checkout is a 400 naming what the generic payload needs', async () => {
  const res = await request(h.bridge.url).post('/v1/checkouts/generic').set('content-type', 'application/json').send(sale);
  expect(res.status).toBe(400);
  const fields = res.body.error.issues.map((i: { field: string }) => i.field);
  // Not currency: a payload without one takes the merchant's.
  expect(fields).toEqual(expect.arrayContaining(['orderId', 'total']));
  expect(await h.bridge.store.count()).toBe(0);
  expect(h.sim.books().accrueRequests).toBe(0);
});
