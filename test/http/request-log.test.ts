/**
 * What a request's log line keeps of its path (src/http/request-log.ts `pathForLog`): a phone number
 * or an email typed where an id goes is masked, percent-encoded or not; ids, transactionIds, card
 * serials, dates and UUIDs are kept as sent; a long path is cut.
 */
import { describe, expect, it } from '@jest/globals';
import { pathForLog } from '../../src/http/request-log.js';

describe('pathForLog', () => {
  it.each([
    ['/v1/admin/transactions/leak3.probe@example.com', '/v1/admin/transactions/***@***'],
    ['/v1/admin/transactions/leak3.probe%40example.com', '/v1/admin/transactions/***@***'],
    ['/v1/admin/transactions/%2B15557770008', '/v1/admin/transactions/***'],
    ['/v1/admin/transactions/+15557770008', '/v1/admin/transactions/***'],
    ['/v1/admin/transactions/0151-55577700', '/v1/admin/transactions/***'],
    ['/v1/admin/dead-letters/ann(at)example.com', '/v1/admin/dead-letters/***@***'],
    ['/v1/refunds/generic/leak11@example.com', '/v1/refunds/generic/***@***'],
    // One bad escape beside a contact does not keep the contact from being read.
    ['/v1/admin/transactions/ann%40example.com%', '/v1/admin/transactions/***@***%'],
    ['/v1/admin/transactions/%2B15550001111%', '/v1/admin/transactions/***%'],
    ['/v1/admin/transactions/%ZZann%40example.com', '/v1/admin/transactions/***@***'],
  ])('masks a contact in %s', (path, logged) => {
    expect(pathForLog(path)).toBe(logged);
  });

  it.each([
    '/v1/admin/transactions/generic:SqOrd-1001',
    '/v1/admin/transactions/generic:SqOrd-1001~r1/evidence',
    '/v1/admin/transactions/clover:DEMOCAFECL001:F1YD6JX3K8Z0A',
    '/v1/admin/transactions/square:100000012345',
    '/v1/admin/dead-letters/0b6f3f4e-7d2a-4f0e-9a43-2d2b7f1e9c11/replay',
    '/v1/admin/merchants/demo-cafe',
    '/v1/checkouts/generic',
    '/v1/admin/transactions/a%ZZb',
  ])('keeps %s as sent', (path) => {
    expect(pathForLog(path)).toBe(path);
  });

  it('drops the segment the read limit cuts, which may hold a contact no longer shaped as one', () => {
    const path = `/v1/admin/transactions/${'a'.repeat(1_956)}/john.smith@example.com`;
    expect(path.slice(0, 2_000)).toMatch(/john\.smith@example\.c$/);
    expect(pathForLog(path)).not.toContain('john.smith');
  });

  it('cuts a long path as every echo is, after masking what it reads', () => {
    const logged = pathForLog(`/v1/admin/transactions/ann@example.com/${'x'.repeat(15_000)}`);
    expect(logged.length).toBeLessThanOrEqual(201);
    expect(logged).not.toContain('ann@');
  });
});
