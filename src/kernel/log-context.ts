/**
 * What every log line written while handling one request (or one record in the background) says
 * about it: the request id and the merchant. Carried by AsyncLocalStorage, so the services deep
 * below a route log through their own logger and still name the merchant, without each call passing
 * it down; the logger reads it in its mixin (logger.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export interface LogContext {
  requestId?: string;
  /** Set once the request's merchant is known: by its token, or by the POS account a webhook names. */
  merchantId?: string;
}

const storage = new AsyncLocalStorage<LogContext>();

/** Runs `fn` with a context of its own, starting from `context`. */
export function withLogContext<T>(context: LogContext, fn: () => T): T {
  return storage.run({ ...context }, fn);
}

/** Runs `fn` naming `merchantId` on its lines, keeping the request id around it. */
export function withMerchant<T>(merchantId: string, fn: () => T): T {
  return storage.run({ ...storage.getStore(), merchantId }, fn);
}

/** The current context; mutable, so that a middleware naming the merchant names it for the rest of the request. */
export function logContext(): LogContext | undefined {
  return storage.getStore();
}

/** Names the merchant for the rest of the current request (its token or account said whose it is). */
export function nameMerchant(merchantId: string): void {
  const context = storage.getStore();
  if (context) context.merchantId = merchantId;
}
