/**
 * Small readers the adapters' backfill specs share (`adapters/<pos>/backfill.ts`): a listed page is
 * the POS's own JSON, read defensively, since one malformed object must not hide the rest of a page
 * (it is handed to the adapter, which refuses it naming the field).
 */
import { isObject } from '../kernel/validation.js';
import type { BackfillWindow } from './contract.js';

/** The objects under `field` of a page (absent or not a list: none). */
export function listAt(data: unknown, field: string): Record<string, unknown>[] {
  const list = isObject(data) ? data[field] : undefined;
  return Array.isArray(list) ? list.filter(isObject) : [];
}

/** A field's text: strings as they are, numbers (Shopify's and Clover's ids, epoch times) as their decimal text. */
export function textOf(object: unknown, field: string): string | undefined {
  const value = isObject(object) ? object[field] : undefined;
  if (typeof value === 'string' && value.trim()) return value.trim();
  return typeof value === 'number' && Number.isFinite(value) ? String(value) : undefined;
}

/**
 * The window's last instant for a POS whose upper bound is inclusive (Square, Shopify, Loyverse):
 * one millisecond before `until`, or the last whole second before it where the POS reads seconds.
 */
export function inclusiveEnd(window: BackfillWindow, unit: 'ms' | 's' = 'ms'): Date {
  const last = window.until.getTime() - 1;
  return new Date(unit === 's' ? Math.floor(last / 1000) * 1000 : last);
}

/** `since` rounded down to the second, for a POS that reads seconds (the window only grows). */
export function floorToSecond(at: Date): Date {
  return new Date(Math.floor(at.getTime() / 1000) * 1000);
}

/** ISO 8601 without milliseconds (`2026-03-01T10:00:00Z`). */
export function isoSeconds(at: Date): string {
  return at.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Within 1 … max. */
export function clampPageSize(pageSize: number, max: number): number {
  return Math.max(1, Math.min(max, Math.floor(pageSize)));
}
