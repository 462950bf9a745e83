/**
 * What the five fake POS APIs share (docs/simulator-pos-apis.md): accounts found by the POS's own
 * account id, each with its access token and fault queue; the fault gate every read passes after
 * authentication; and the errors a POS answers in its own shape.
 */
import type { Request, RequestHandler, Response } from 'express';
import type express from 'express';
import type { PosFaultQueue } from './faults.js';

import { VENDOR_POS_NAMES, type VendorPosName } from '../../src/pos/contract.js';

/** The simulator fakes the API of every vendor POS the bridge has an adapter for. */
export const POS_NAMES = VENDOR_POS_NAMES;
export type PosName = VendorPosName;

/** The simulator's clock and cancellable timers (SimContext), all a fake POS needs of it. */
export interface PosContext {
  readonly now: () => Date;
  later(ms: number, fn: () => void): void;
}

/** A webhook delivery signed as the POS signs it: POST these exact body bytes with these headers. */
export interface SignedDelivery {
  headers: Record<string, string>;
  body: string;
}

/** Names something the fake does not hold (an account, order, customer): the control API answers 404. */
export class NotHeldError extends Error {}

/** How a POS answers the refusals every fake shares, in its own shape. */
export interface PosErrors {
  /** Seconds of Retry-After this POS sends with a 429, or null when it sends none. */
  readonly retryAfter: number | null;
  unauthorized(res: Response, why: 'missing' | 'wrong'): void;
  rateLimited(res: Response, retryAfter: number | null): void;
  serverError(res: Response, status: number): void;
}

export interface PosAccount {
  readonly accessToken: string;
  readonly faults: PosFaultQueue;
}

/** What every fake POS offers the control API and the simulator. */
export interface FakePos {
  readonly name: PosName;
  /** A new account from that POS's account options (validated there); RangeError on a taken id or token. */
  addAccount(options: unknown): unknown;
  accounts(): unknown[];
  faults(account: string): PosFaultQueue;
  addOrder(account: string, input: unknown): unknown;
  addRefund(account: string, input: unknown): unknown;
  addCustomer(account: string, input: unknown): unknown;
  /** Moves an order's last-modified time (default now), as any change of it in the POS would. */
  touchOrder(account: string, orderId: string, at?: string): unknown;
  /** A signed webhook delivery about an object this account holds. */
  webhook(account: string, request: unknown): SignedDelivery;
  /** A call of the account's register to its loyalty provider (Toast's loyalty integration API), where the POS has one. */
  loyaltyCall?(account: string, request: unknown): SignedDelivery & { guid: string };
  /** The POS's API, to be mounted under its prefix. */
  router(): express.Router;
  /** Forgets every account and everything in them. */
  reset(): void;
}

/** The accounts of one fake POS by their POS account id. */
export class Accounts<A extends PosAccount> {
  readonly #byId = new Map<string, A>();

  constructor(private readonly what: string) {}

  add(id: string, account: A): A {
    if (this.#byId.has(id)) throw new RangeError(`${this.what} ${id} already exists`);
    this.#byId.set(id, account);
    return account;
  }

  get(id: string): A {
    const account = this.#byId.get(id);
    if (account === undefined) throw new NotHeldError(`no ${this.what} ${id}`);
    return account;
  }

  find(id: string | undefined): A | undefined {
    return id === undefined ? undefined : this.#byId.get(id);
  }

  byToken(token: string | undefined): A | undefined {
    if (!token) return undefined;
    for (const account of this.#byId.values()) if (account.accessToken === token) return account;
    return undefined;
  }

  list(): A[] {
    return [...this.#byId.values()];
  }

  clear(): void {
    this.#byId.clear();
  }
}

/** The token of `Authorization: Bearer <token>`, or undefined. */
export function bearerToken(req: Request): string | undefined {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.get('authorization') ?? '');
  return match?.[1];
}

/** A path parameter as one string (Express types a wildcard's value as an array). */
export function pathParam(req: Request, name: string): string {
  const value = (req.params as Record<string, string | string[] | undefined>)[name];
  return Array.isArray(value) ? value.join('/') : (value ?? '');
}

/** The account a request was authenticated for (set by each POS's authentication middleware). */
export function accountOf<A>(res: Response): A {
  return res.locals.posAccount as A;
}

/**
 * The account's next fault for this kind of read, if any, answered in the POS's shape; otherwise the
 * request goes on (at once, or after the slow fault's delay).
 */
export function faultGate(ctx: PosContext, errors: PosErrors, target: 'list' | 'get'): RequestHandler {
  return (req, res, next) => {
    const fault = accountOf<PosAccount>(res).faults.take(target);
    if (fault === undefined) return next();
    switch (fault.kind) {
      case 'rate_limit':
        errors.rateLimited(res, fault.retryAfter === undefined ? errors.retryAfter : fault.retryAfter);
        return;
      case 'server_error':
        errors.serverError(res, fault.status ?? 500);
        return;
      case 'slow':
        ctx.later(fault.delayMs ?? 5000, () => {
          if (!req.socket.destroyed) next();
        });
        return;
      default: {
        const unreachable: never = fault.kind;
        throw new Error(`unhandled fault ${String(unreachable)}`);
      }
    }
  };
}

/** This request's URL up to its router's mount point: links the fake answers point back at itself. */
export function mountedBase(req: Request): string {
  return `${req.protocol}://${req.get('host') ?? 'localhost'}${req.baseUrl}`;
}

/** JSON with object keys sorted, so two equal queries compare equal whatever their key order. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

/** A deep copy, so what a caller or a client receives never aliases what the fake keeps. */
export function copy<T>(value: T): T {
  return structuredClone(value);
}

