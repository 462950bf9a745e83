/**
 * One route, declared once: its method and path, who may call it, the zod schemas of what it reads
 * (path, query, body) and of every answer it gives, its words for readers, and its handler. The
 * router mounts routes from these declarations (`router.ts`) and `/openapi.json` is generated from
 * the very same ones (`openapi.ts`), so a route cannot be served and not documented, documented
 * with another schema than it parses, or documented with a status its middleware cannot give.
 */
import type { ErrorRequestHandler, Request, RequestHandler, Response } from 'express';
import type { z } from 'zod';
import type { AppDeps } from './deps.js';
import { ErrorEnvelope, PosAnswer } from './schemas.js';

export type Method = 'get' | 'post' | 'patch';

/**
 * Who may call a route: both the middleware in front of it (`router.ts`) and what the document
 * says of it (its security and the statuses that middleware answers).
 * - `none`: anyone (operations).
 * - `signed`: anyone; the POS's signature over the exact body vouches for a delivery (webhooks).
 * - `pos`: a merchant's POS token (or POS_TOKEN), whose merchant is active (direct POS posts).
 * - `admin`: an admin token, the bridge's or a merchant's; every `/v1/admin` request's input is checked.
 * - `globalAdmin`: the bridge's own ADMIN_TOKEN (or a named one of ADMIN_TOKENS) only.
 */
export type Access = 'none' | 'signed' | 'pos' | 'admin' | 'globalAdmin';

export const TAGS = {
  POS: 'Checkouts and refunds posted by a POS or its integration.',
  Webhooks: "A POS's own webhook deliveries, verified by their signature.",
  Register: "What a cashier's register asks while the sale is open: Toast's loyalty integration, and a guest lookup for any POS.",
  Transactions: 'Ledger records and what an operator can do with them.',
  Operators: 'Who a token is, everything that needs a person, and who did what.',
  'Dead letters': 'Authentic webhook deliveries the bridge could not carry out, kept whole: retried by the bridge itself when the cause is transient, replayed by an operator otherwise.',
  Reports: 'Read-only comparisons of the POS, the ledger and the loyalty service.',
  Backfill: "Reading each merchant's POS accounts back from the POSes' own APIs, because webhooks are not guaranteed: what a lost webhook left out is recorded, what is recorded changes nothing.",
  Merchants: 'The merchants one bridge serves (global ADMIN_TOKEN only): their loyalty app install, POS accounts and tokens.',
  Operations: 'Health, readiness, metrics and this document.',
} as const;
export type Tag = keyof typeof TAGS;

/** A zod schema the document shows under a name of its own (`#/components/schemas/<component>`). */
export interface Named {
  component: string;
  schema: z.ZodType;
}

export const named = (component: string, schema: z.ZodType): Named => ({ component, schema });

/**
 * A schema as the document shows it: a zod schema (by its component name where it has one), any of
 * several, or plain JSON Schema for what the bridge does not read as a schema (a POS's own objects).
 */
export type Shown = z.ZodType | Named | { anyOf: readonly Shown[] } | { jsonSchema: Record<string, unknown> };

/** Answers every route shares, documented once under `#/components/responses`. */
export type SharedAnswer = 'Unauthorized' | 'RequestTimeout' | 'PayloadTooLarge' | 'UnsupportedMediaType' | 'InternalError' | 'Overloaded';

export interface AnswerSpec {
  description: string;
  /** The JSON body, when there is one. */
  json?: Shown;
  /** Other media types the route answers with (`Accept`), each with its body. */
  media?: Readonly<Record<string, Shown>>;
}

export type Answers = Readonly<Record<number, AnswerSpec | SharedAnswer>>;

/** An answer in the one error envelope. */
export const error = (description: string): AnswerSpec => ({ description, json: ErrorEnvelope });

/** A 404 that is either an error, or the record an answer is about (an order nobody knows). */
export const answerOrError = (description: string): AnswerSpec => ({ description, json: { anyOf: [PosAnswer, ErrorEnvelope] } });

/** The core's outcome of one order or refund, as a POS's post and an operator's action on a record answer it (views.ts `answerStatus`). */
export const OUTCOME_ANSWERS = {
  200: { description: 'Final now: accrued, partially_accrued, reversed, reverse_failed, skipped or failed (the loyalty service refused it; retrying cannot help), or a repeat of an order or refund already recorded (its recorded outcome, nothing sent again).', json: PosAnswer },
  202: { description: 'Recorded durably; delivery continues in the background (pending, in_doubt, reversal_pending). The answer comes within 2 s whatever the upstream does.', json: PosAnswer },
} satisfies Record<number, AnswerSpec>;

export const BAD_PATH = 'a path parameter that is not valid percent-encoding (invalid_path)';

export interface PathParam {
  description: string;
  /** Its values, as the document states them. */
  schema: z.ZodType<string>;
  /** How a value outside the schema is answered before the route runs (a 404: nothing has such an id); absent: the route (or its middleware) answers it. */
  refuse?: (value: string) => Error;
}

/** A JSON body the route reads, parsed before it runs (a 400 naming each field) with the schema the document shows. */
export interface ParsedBody<B extends z.ZodType> {
  schema: B;
  /** Its name under `#/components/schemas`. */
  component: string;
  /** Whether the document calls it required. */
  required: boolean;
  /** A request without a body is parsed as `{}` (each required field then named as missing); otherwise the body itself is missing. */
  emptyWhenAbsent?: true;
}

/** A body the route reads raw, as a POS sent it (signatures cover the exact bytes; the adapter parses it). */
export interface RawBody {
  raw: Shown;
  description: string;
  examples?: Readonly<Record<string, { summary: string; value: unknown }>>;
}

/** What the route's own middleware and handler depend on. */
export type HttpDeps = AppDeps & {
  /** The document generated from the routes (built once, on first use). */
  openApi(): object;
};

type Parsed<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteContext<Q, B> {
  req: Request;
  res: Response;
  /** The query as parsed by the route's `query` schema (undefined when it declares none: the query is then not read). */
  query: Q;
  /** The body as parsed by the route's body schema (undefined for a raw body). */
  body: B;
  deps: HttpDeps;
}

export interface RouteSpec<Q extends z.ZodType | undefined, B extends z.ZodType | undefined> {
  method: Method;
  /** As OpenAPI writes it: `{name}` for a path parameter (Express's `:name` is made from it). */
  path: string;
  operationId: string;
  tag: Tag;
  summary: string;
  description?: string;
  access: Access;
  params?: Readonly<Record<string, PathParam>>;
  query?: Q;
  body?: (B extends z.ZodType ? ParsedBody<B> : never) | RawBody;
  /** Every status the route itself answers; those of its access checks, of reading a body and of the server are added from them. */
  answers: Answers;
  /** Middleware after the access checks, before the handler (reading a POS's raw body). */
  before?(deps: HttpDeps): RequestHandler[];
  /** Sees this route's errors before the error handler does (counting refused webhooks). */
  onError?(deps: HttpDeps): ErrorRequestHandler;
  handle(ctx: RouteContext<Parsed<Q>, Parsed<B>>): unknown;
}

export type Route = RouteSpec<z.ZodType | undefined, z.ZodType | undefined>;

/** One route, typed: its handler sees the query and body as its schemas parse them. */
export function route<Q extends z.ZodType | undefined = undefined, B extends z.ZodType | undefined = undefined>(spec: RouteSpec<Q, B>): Route {
  return spec as unknown as Route;
}

/** Express's path for an OpenAPI one: `{transactionId}` → `:transactionId`. */
export function expressPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

/** Whether the route is one of `/v1/admin` (its access is an admin token's, and its input is checked first). */
export function isAdmin(route: Pick<Route, 'access'>): boolean {
  return route.access === 'admin' || route.access === 'globalAdmin';
}
