/**
 * Configuration, parsed once at boot: `config/default.json`, then `config/<NODE_ENV>.json` if present,
 * then environment variables (env wins). Keys are the environment variable names themselves, so
 * every error names the variable to fix. Nothing else in the bridge reads `process.env`.
 *
 * Each POS's variables are declared by its adapter (src/pos/settings.ts); the composition root
 * passes the declarations in, since only it knows the adapters. They add to the schema below, and
 * their API address defaults lie beneath `config/default.json`.
 */
import { readFileSync, existsSync } from 'node:fs';
import { isIP } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { z } from 'zod';
import { isIsoCurrency } from './kernel/currencies.js';
import { isPhoneRegion } from './kernel/customer.js';
import { FAILPOINTS } from './kernel/failpoints.js';
import type { PosSettings } from './pos/contract.js';
import { accountShapeOf, type PosSettingDeclarations, type PosSettingsDeclaration } from './pos/settings.js';

const optionalSecret = z.string().trim().min(1).optional();
const url = z.url({ protocol: /^https?$/ });
const optionalUrl = url.optional();

/** Spelled-out units a duration is sometimes given in ("10s"), in milliseconds: said back as the figure to write instead. */
const TIME_UNITS: Record<string, number> = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000 };

/**
 * A whole number, from a variable's text or a config file's number. An error says what is expected
 * with its unit and an example, never "received NaN": `LOYALTY_TIMEOUT_MS=10s` is "must be a whole
 * number of milliseconds, e.g. 10000 (got "10s": 10s is 10000 milliseconds)". Only the value is
 * echoed, and these values are never secrets.
 */
function wholeNumber(o: { unit: string; what?: string; example: string; min?: number; max?: number; maxWhy?: string }) {
  const { unit, example, min = 0, max, maxWhy } = o;
  const expected = `${o.what ?? `a whole number of ${unit}`}, e.g. ${example}`;
  return z.unknown().transform((value, ctx): number => {
    if (value === undefined || value === null) {
      ctx.addIssue({ code: 'custom', message: `is required: ${expected}` });
      return z.NEVER;
    }
    const text = String(value).trim();
    const n = /^[+-]?\d+$/.test(text) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n)) {
      const spelled = /^(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)$/i.exec(text);
      const factor = spelled && unit === 'milliseconds' ? TIME_UNITS[spelled[2]!.toLowerCase()] : undefined;
      const hint = factor !== undefined ? `: ${text} is ${Math.round(Number(spelled![1]) * factor)} milliseconds` : '';
      ctx.addIssue({ code: 'custom', message: `must be ${expected} (got ${JSON.stringify(text.slice(0, 40))}${hint})` });
      return z.NEVER;
    }
    // "at least 1 millisecond", "at most 20 runs".
    const units = (bound: number) => (unit ? ` ${bound === 1 ? unit.replace(/s\b/, '') : unit}` : '');
    if (n < min) ctx.addIssue({ code: 'custom', message: `must be at least ${min}${units(min)}, e.g. ${example} (got ${n})` });
    else if (max !== undefined && n > max) ctx.addIssue({ code: 'custom', message: `must be at most ${max}${units(max)}${maxWhy ? `: ${maxWhy}` : ''} (got ${n})` });
    return n;
  });
}
/** A duration in milliseconds (every `*_MS` variable). */
const ms = (example: string, bounds: { min?: number; max?: number; maxWhy?: string } = {}) => wholeNumber({ unit: 'milliseconds', example, ...bounds });
/** A TCP port; 0 lets the system pick a free one. */
const port = (example: string) => wholeNumber({ unit: '', what: 'a port number from 0 to 65535', example, max: 65535 });
/** A POS API address: an http(s) URL once `{shop}` (the merchant's account there) is put in. */
const posApiUrl = z
  .string()
  .trim()
  .refine((value) => url.safeParse(value.replaceAll('{shop}', 'shop.example')).success, 'must be an http(s) URL ({shop} may stand for the shop domain)');

/** Whether a variable holds a credential (every *_TOKEN, *_TOKENS, *_KEY and *_SECRET): its value is never printed. */
function holdsSecret(variable: string): boolean {
  return /_(TOKENS?|KEY|SECRET)$/.test(variable);
}

/**
 * What a refused variable was given, said back (` (got "…")`), unless the message says it already or
 * the variable holds a secret (a token, key or secret is never printed); a URL's password is masked.
 */
function echoOf(variable: string, value: unknown, message: string): string {
  if (value === undefined || message.includes('(got ') || holdsSecret(variable)) return '';
  const text = String(value).replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
  return ` (got ${JSON.stringify(text.slice(0, 60))})`;
}

export interface NamedAdminToken {
  name: string;
  token: string;
}

/** Names an operator may have: they are the actor in the audit trail, beside `admin` and `merchant:<id>`. */
const OPERATOR_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/i;

/**
 * ADMIN_TOKENS=`name=token,name=token`: several global operators, told apart in the history and the
 * audit trail. A name is never `admin` nor starts with `merchant:` (the other actors); names and
 * tokens are unique; a token is 16 characters or more, like ADMIN_TOKEN. Errors name the entry by
 * its position and name, never the token. The tokens of other variables are checked against these
 * in acrossVariables.
 */
function parseNamedTokens(text: string, ctx: z.RefinementCtx): NamedAdminToken[] {
  const { tokens, problems } = readNamedTokens(text);
  for (const message of problems) ctx.addIssue({ code: 'custom', message });
  return tokens.map(({ name, token }) => ({ name, token }));
}

/** The entries of ADMIN_TOKENS that are well formed, each with its position, and a line for each that is not. */
function readNamedTokens(text: string): { tokens: (NamedAdminToken & { entry: string })[]; problems: string[] } {
  const tokens: (NamedAdminToken & { entry: string })[] = [];
  const problems: string[] = [];
  const entries = text.split(',').map((e) => e.trim()).filter(Boolean);
  entries.forEach((text, i) => {
    const at = text.indexOf('=');
    const name = at > 0 ? text.slice(0, at).trim() : '';
    const token = at > 0 ? text.slice(at + 1).trim() : '';
    const entry = `entry ${i + 1}${name && OPERATOR_NAME.test(name) ? ` (${name})` : ''}`;
    const problem = !name
      ? 'must be name=token'
      : !OPERATOR_NAME.test(name) || name.toLowerCase() === 'admin'
        ? `has a name that is not allowed (letters, digits, . _ -, up to 64, not "admin")`
        : token.length < 16
          ? 'has a token shorter than 16 characters'
          : tokens.some((t) => t.name === name)
            ? 'repeats a name'
            : tokens.some((t) => t.token === token)
              ? 'repeats a token'
              : undefined;
    if (problem) problems.push(`${entry} ${problem}`);
    else tokens.push({ name, token, entry });
  });
  return { tokens, problems };
}

/**
 * The loyalty service's address before `/api/v2/` (bridge-contract "Running it"): the client adds
 * `/api/v2/…` itself, so an address that already ends in it would call `/api/v2/api/v2/…`.
 */
const loyaltyBaseUrl = z
  .string()
  .trim()
  .refine((value) => url.safeParse(value).success, "must be the loyalty service's http(s) address, before /api/v2/, e.g. https://loyalty.example.com")
  .refine((value) => !/\/api\/v2\/?$/.test(value), 'must be the address before /api/v2/ (the bridge adds /api/v2/ itself): leave /api/v2 out');

const RawConfig = z.object({
  NODE_ENV: z.string().optional(),
  PORT: port('8080'),
  HOST: z
    .string()
    .trim()
    .refine((h) => isIP(h) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/.test(h), 'must be an IP address or a host name, e.g. 127.0.0.1 or 0.0.0.0')
    .optional(),
  LOYALTY_BASE_URL: loyaltyBaseUrl.optional(),
  LOYALTY_APP_TOKEN: optionalSecret,
  LOYALTY_API_KEY: optionalSecret,
  LOYALTY_TIMEOUT_MS: ms('10000', { min: 1 }),
  LOYALTY_RETRY_BASE_MS: ms('1000'),
  LEDGER_URL: z.string().regex(/^(file:.+|postgres(ql)?:\/\/.+)$/, 'must be file:<path> or postgres://…'),
  LEDGER_POOL_SIZE: wholeNumber({ unit: 'connections', example: '10', min: 1, max: 200 }),
  ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  ADMIN_TOKENS: z
    .string()
    .transform((text, ctx) => parseNamedTokens(text, ctx))
    .optional(),
  POS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  POS_AUTH: z.enum(['token', 'off'], 'must be token or off').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
  METRICS_MERCHANT_LABEL: z.enum(['on', 'off'], 'must be on or off'),
  METRICS_REFRESH_MS: ms('10000', { min: 100 }),
  DEFAULT_CURRENCY: z.string().refine(isIsoCurrency, 'must be an ISO 4217 currency code such as USD'),
  DEFAULT_PHONE_REGION: z.string().superRefine((value, ctx) => {
    if (!isPhoneRegion(value)) ctx.addIssue({ code: 'custom', message: `must be a two-letter region the phone rules know, such as US, GB or DE (got ${JSON.stringify(value.slice(0, 40))})` });
  }),
  ANSWER_BUDGET_MS: ms('1500', { min: 1, max: 1900, maxWhy: 'it must leave room to answer a POS within 2 s' }),
  REGISTER_BUDGET_MS: ms('2500', { min: 1, max: 4500, maxWhy: "Toast takes 5 s as a timeout: a register's answer must come before it" }),
  REGISTER_CACHE_MS: ms('30000', { min: 0 }),
  BODY_LIMIT_BYTES: wholeNumber({ unit: 'bytes', example: '1048576 (1 MiB)', min: 1 }),
  POS_MAX_IN_FLIGHT: wholeNumber({ unit: 'requests', example: '64', min: 1 }),
  WORKER_INTERVAL_MS: ms('1000', { min: 1 }),
  WORKER_CONCURRENCY: wholeNumber({ unit: 'records at once', example: '8', min: 1 }),
  IN_DOUBT_VERIFY_AFTER_MS: ms('5000'),
  HOLD_ATTENTION_AFTER_MS: ms('900000'),
  AMBIGUITY_POLICY: z.enum(['person', 'probe']),
  IN_DOUBT_GRACE_MS: ms('60000'),
  HISTORY_CLOCK_SKEW_MS: ms('60000'),
  SANDBOX_SIMULATOR_PORT: port('4010').optional(),
  SANDBOX_LEDGER: z.enum(['fresh', 'keep'], 'must be fresh (emptied at every sandbox start, as the simulator is) or keep').optional(),
  POS_API_TIMEOUT_MS: ms('5000', { min: 1 }),
  PARTIAL_REFUND_POLICY: z.enum(['reaccrue', 'full_only']),
  IN_FLIGHT_LEASE_MS: ms('120000 (2 minutes)', { min: 1 }),
  DEAD_LETTER_RETRY_BASE_MS: ms('60000 (a minute)', { min: 1 }),
  DEAD_LETTER_RETRY_MAX_ATTEMPTS: wholeNumber({ unit: 'runs', example: '8', max: 20 }),
  BACKFILL_INTERVAL_MS: ms('60000 (a minute; 0: off)').optional(),
  BACKFILL_OVERLAP_MS: ms('259200000 (72 hours)'),
  // Checked here for its shape only; the key itself is parsed where secrets are sealed.
  SECRETS_KEY: z
    .string()
    .trim()
    .refine((k) => Buffer.from(k, 'base64').length === 32 && /^[A-Za-z0-9+/]+={0,2}$/.test(k), 'must be 32 random bytes in base64 (openssl rand -base64 32)')
    .optional(),
  BRIDGE_FAILPOINTS: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter(Boolean))
    .refine((names) => names.every((n) => (FAILPOINTS as readonly string[]).includes(n)), `must name failpoints among ${FAILPOINTS.join(', ')}`)
    .optional(),
});
type RawConfig = z.infer<typeof RawConfig>;

/** The schema of the declared POS variables, each by what it holds. */
function posSchema(declarations: PosSettingDeclarations): Record<string, z.ZodType<string | undefined>> {
  const shape: Record<string, z.ZodType<string | undefined>> = {};
  const declare = (variable: string, schema: z.ZodType<string | undefined>) => {
    if (variable in RawConfig.shape || variable in shape) throw new Error(`POS settings declare ${variable} twice`);
    shape[variable] = schema;
  };
  for (const d of Object.values(declarations)) {
    if (d.webhookSecret) declare(d.webhookSecret, optionalSecret);
    if (d.notificationUrl) declare(d.notificationUrl.variable, optionalUrl);
    if (d.accessToken) declare(d.accessToken, optionalSecret);
    if (d.apiBaseUrl) declare(d.apiBaseUrl.variable, posApiUrl);
    // A register's key is chosen by the merchant, never issued: as long as a merchant's own (admin.ts).
    if (d.registerKey) declare(d.registerKey.variable, z.string().trim().min(24, 'must be at least 24 characters: it is what lets a register read guests and accrue').optional());
    if (d.account) {
      const shape = accountShapeOf(d);
      declare(d.account.variable, optionalSecret.refine((v) => v === undefined || shape.pattern.test(v), `must be ${shape.says}`));
    }
  }
  return shape;
}

/** The declared API addresses' defaults: the lowest layer, beneath `config/default.json`. */
function posDefaults(declarations: PosSettingDeclarations): Record<string, string> {
  return Object.fromEntries(Object.values(declarations).flatMap((d) => (d.apiBaseUrl ? [[d.apiBaseUrl.variable, d.apiBaseUrl.default]] : [])));
}

export interface Config {
  nodeEnv: string;
  /** No LOYALTY_BASE_URL: the built-in simulator is the upstream. Never in production. */
  sandbox: boolean;
  port: number;
  /**
   * The address the HTTP server listens on. Sandbox: 127.0.0.1 unless HOST says otherwise, since its
   * webhook secret is public (SANDBOX_WEBHOOK_SECRET) and anyone who reaches it could sign
   * deliveries; elsewhere 0.0.0.0, so a container stays reachable.
   */
  host: string;
  loyalty: {
    baseUrl?: string;
    appToken?: string;
    apiKey?: string;
    timeoutMs: number;
    retryBaseMs: number;
  };
  ledgerUrl: string;
  /** LEDGER_POOL_SIZE: this instance's PostgreSQL connections at most (instances × it must fit the server's max_connections, or PgBouncer's pool). */
  ledgerPoolSize: number;
  adminToken?: string;
  /** ADMIN_TOKENS: named operators' global tokens, each action recorded under its name. */
  namedAdminTokens: NamedAdminToken[];
  /** Seals merchants' secrets (base64 of 32 bytes). Required outside sandbox once a merchant is created; sandbox makes one. */
  secretsKey?: string;
  /** Who may post to `/v1/checkouts/*` and `/v1/refunds/*` (webhooks have their signatures instead). */
  posAuth: PosAuthConfig;
  logLevel: RawConfig['LOG_LEVEL'];
  defaultCurrency: string;
  defaultPhoneRegion: string;
  answerBudgetMs: number;
  /** A register's card reads (Toast's SEARCH and INQUIRE, a lookup): how long they may wait for the loyalty service, and how long an answer is reused. */
  register: { budgetMs: number; cacheMs: number };
  /** The `merchant` label on the per-merchant counters; off for very many merchants (one series per merchant each). */
  metricsMerchantLabel: boolean;
  /** How often the ledger's gauges (open records, attention, dead letters) are counted: a scrape reads the last count, never the ledger. */
  metricsRefreshMs: number;
  bodyLimitBytes: number;
  /** POS requests handled at once; more are answered 503 + Retry-After before their body is read. */
  posMaxInFlight: number;
  worker: { intervalMs: number; concurrency: number };
  inDoubt: { verifyAfterMs: number; graceMs: number; clockSkewMs: number; holdAttentionAfterMs: number; ambiguity: 'person' | 'probe' };
  sandboxSimulatorPort?: number;
  /**
   * Sandbox only: `fresh` (the default) empties the sandbox's own file ledger at every start, since
   * the in-process simulator's books start empty; `keep` keeps it (src/sandbox.ts prepareSandboxLedger).
   */
  sandboxLedger: 'fresh' | 'keep';
  posApiTimeoutMs: number;
  /** `reaccrue`: a partial refund reverses and accrues the remainder; `full_only`: only a full refund reverses. */
  partialRefundPolicy: 'reaccrue' | 'full_only';
  /** Several instances on PostgreSQL: how long a worker holds open records, and after how long another instance's in-flight call is taken over as in doubt. */
  inFlightLeaseMs: number;
  /**
   * Dead letters with a transient cause (the POS API timed out or answered 5xx/429): the unit of the
   * schedule of automatic runs (core/dead-letter-retry.ts) and how many runs before a person is needed.
   */
  deadLetterRetry: { baseMs: number; maxAttempts: number };
  /**
   * Backfill (docs/backfill-and-reconcile.md): scheduled passes every `intervalMs` (0: none; BACKFILL_INTERVAL_MS
   * unset is 0 outside sandbox and SANDBOX_BACKFILL_INTERVAL_MS in sandbox), each starting
   * `overlapMs` before the account's watermark.
   */
  backfill: { intervalMs: number; overlapMs: number };
  failpoints: string[];
  /** Per POS: webhook secret, notification URL, API token and base URL (see src/pos/contract.ts PosSettings). */
  pos: Record<string, PosSettings>;
}

/**
 * Direct POS posts carry no signature, so a credential is all that stops anyone who can reach the
 * bridge from accruing or reversing a customer's points. `token`: `Authorization: Bearer POS_TOKEN`
 * (no POS_TOKEN: every direct post is refused). `open`: no credential, only in sandbox (bound to
 * 127.0.0.1, test data) or where the deployment opted out with POS_AUTH=off (a private network).
 */
export type PosAuthConfig = { mode: 'token'; token?: string } | { mode: 'open'; because: 'sandbox' | 'POS_AUTH=off' };

export class ConfigError extends Error {}

/** The project root holds package.json: `src/` when run from sources, `dist/src/` when built. */
function findProjectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) return from;
  }
}
const defaultConfigDir = join(findProjectRoot(dirname(fileURLToPath(import.meta.url))), 'config');

function readJson(path: string): Record<string, unknown> {
  if (!existsSync(path)) return {};
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  } catch (error) {
    throw new ConfigError(`config file ${path} is not valid JSON: ${(error as Error).message}`);
  }
}

/** Empty environment strings mean "unset", as a shell `FOO= npm start` intends. */
function definedEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(env).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== ''));
}

/**
 * One setting as the bridge would read it (the environment, then `config/<NODE_ENV>.json`, then
 * `config/default.json`), unchecked: for the operator commands, which need LEDGER_URL and SECRETS_KEY
 * without the rest of a bridge's configuration.
 */
export function configuredValue(name: string, env: NodeJS.ProcessEnv = process.env, configDir = defaultConfigDir): string | undefined {
  const nodeEnv = env.NODE_ENV || 'development';
  const value = { ...readJson(join(configDir, 'default.json')), ...readJson(join(configDir, `${nodeEnv}.json`)), ...definedEnv(env) }[name];
  return value === undefined || value === null ? undefined : String(value);
}

/**
 * `posDeclarations` has no default: config.ts must not import the adapters (only the composition
 * root does), so main.ts, the tests and the scripts pass `posSettingDeclarations` from adapters/index.ts.
 */
export function loadConfig(posDeclarations: PosSettingDeclarations, env: NodeJS.ProcessEnv = process.env, configDir = defaultConfigDir): Config {
  const nodeEnv = env.NODE_ENV || 'development';
  const merged = { ...posDefaults(posDeclarations), ...readJson(join(configDir, 'default.json')), ...readJson(join(configDir, `${nodeEnv}.json`)), ...definedEnv(env) };
  const parsed = RawConfig.safeParse(merged);
  const posParsed = z.object(posSchema(posDeclarations)).safeParse(merged);
  // Every problem at once, each naming its variable: the bridge's own variables first, then the POS
  // variables in declaration order, then the rules across variables. A fix-and-retry loop that
  // shows one problem a run costs a deployment a start per variable.
  const problems = [...(parsed.error?.issues ?? []), ...(posParsed.error?.issues ?? [])].map((issue) => {
    const variable = issue.path.join('.') || '(config)';
    const required = issue.code === 'invalid_type' && merged[variable as keyof typeof merged] === undefined && !issue.message.startsWith('is required');
    // A choice among words (never a secret): the words, and what was given instead.
    if (issue.code === 'invalid_value') {
      const value = merged[variable as keyof typeof merged];
      const got = value === undefined ? ' (it is required)' : ` (got ${JSON.stringify(String(value).slice(0, 40))})`;
      const message = issue.message.startsWith('Invalid option') ? `must be one of ${issue.values.map(String).join(', ')}` : issue.message;
      return `${variable} ${message}${got}`;
    }
    if (required) return `${variable} ${issue.message} (it is required)`;
    return `${variable} ${issue.message === 'Invalid URL' ? 'must be an http(s) URL' : issue.message}${echoOf(variable, merged[variable as keyof typeof merged], issue.message)}`;
  });
  const given = (name: string) => merged[name as keyof typeof merged] !== undefined;
  const sandbox = !given('LOYALTY_BASE_URL');
  problems.push(...acrossVariables(merged, nodeEnv, sandbox, given));
  const raw = parsed.data;
  if (raw) {
    // A round is at most 5 requests (429s) each up to the timeout, plus 1+2+4+8 back-off units with 20% jitter.
    const longestRound = 5 * raw.LOYALTY_TIMEOUT_MS + 18 * raw.LOYALTY_RETRY_BASE_MS;
    if (raw.IN_FLIGHT_LEASE_MS <= longestRound) problems.push(`IN_FLIGHT_LEASE_MS must exceed the longest round of calls (${longestRound} milliseconds with this LOYALTY_TIMEOUT_MS and LOYALTY_RETRY_BASE_MS)`);
  }
  const pos = raw && posParsed.success ? posSettings(posDeclarations, posParsed.data, sandbox, raw.PORT) : undefined;
  if (pos) {
    for (const [name, declaration] of Object.entries(posDeclarations)) {
      const problem = declaration.check?.(pos[name]!, sandbox);
      if (problem) problems.push(problem);
    }
  }
  if (problems.length > 0 || !raw || !pos) throw new ConfigError(configProblems(problems));
  const posAuth = posAuthConfig(raw, sandbox);
  return {
    nodeEnv,
    sandbox,
    port: raw.PORT,
    host: raw.HOST ?? (sandbox ? '127.0.0.1' : '0.0.0.0'),
    loyalty: {
      baseUrl: raw.LOYALTY_BASE_URL?.replace(/\/+$/, ''),
      appToken: raw.LOYALTY_APP_TOKEN,
      apiKey: raw.LOYALTY_API_KEY,
      timeoutMs: raw.LOYALTY_TIMEOUT_MS,
      retryBaseMs: raw.LOYALTY_RETRY_BASE_MS,
    },
    ledgerUrl: raw.LEDGER_URL,
    ledgerPoolSize: raw.LEDGER_POOL_SIZE,
    adminToken: raw.ADMIN_TOKEN,
    namedAdminTokens: raw.ADMIN_TOKENS ?? [],
    secretsKey: raw.SECRETS_KEY,
    posAuth,
    logLevel: raw.LOG_LEVEL,
    defaultCurrency: raw.DEFAULT_CURRENCY,
    defaultPhoneRegion: raw.DEFAULT_PHONE_REGION,
    answerBudgetMs: raw.ANSWER_BUDGET_MS,
    register: { budgetMs: raw.REGISTER_BUDGET_MS, cacheMs: raw.REGISTER_CACHE_MS },
    metricsMerchantLabel: raw.METRICS_MERCHANT_LABEL === 'on',
    metricsRefreshMs: raw.METRICS_REFRESH_MS,
    bodyLimitBytes: raw.BODY_LIMIT_BYTES,
    posMaxInFlight: raw.POS_MAX_IN_FLIGHT,
    worker: { intervalMs: raw.WORKER_INTERVAL_MS, concurrency: raw.WORKER_CONCURRENCY },
    inDoubt: { verifyAfterMs: raw.IN_DOUBT_VERIFY_AFTER_MS, graceMs: raw.IN_DOUBT_GRACE_MS, clockSkewMs: raw.HISTORY_CLOCK_SKEW_MS, holdAttentionAfterMs: raw.HOLD_ATTENTION_AFTER_MS, ambiguity: raw.AMBIGUITY_POLICY },
    sandboxSimulatorPort: raw.SANDBOX_SIMULATOR_PORT,
    sandboxLedger: raw.SANDBOX_LEDGER ?? 'fresh',
    posApiTimeoutMs: raw.POS_API_TIMEOUT_MS,
    partialRefundPolicy: raw.PARTIAL_REFUND_POLICY,
    inFlightLeaseMs: raw.IN_FLIGHT_LEASE_MS,
    deadLetterRetry: { baseMs: raw.DEAD_LETTER_RETRY_BASE_MS, maxAttempts: raw.DEAD_LETTER_RETRY_MAX_ATTEMPTS },
    backfill: { intervalMs: raw.BACKFILL_INTERVAL_MS ?? (sandbox ? SANDBOX_BACKFILL_INTERVAL_MS : 0), overlapMs: raw.BACKFILL_OVERLAP_MS },
    failpoints: raw.BRIDGE_FAILPOINTS ?? [],
    pos,
  };
}

/** Who may post directly; the configurations it refuses are listed by acrossVariables. */
function posAuthConfig(raw: RawConfig, sandbox: boolean): PosAuthConfig {
  if (raw.POS_AUTH === 'off') return { mode: 'open', because: 'POS_AUTH=off' };
  if (raw.POS_TOKEN) return { mode: 'token', token: raw.POS_TOKEN };
  if (sandbox && raw.POS_AUTH === undefined) return { mode: 'open', because: 'sandbox' };
  return { mode: 'token' };
}

/**
 * The rules across variables, read from what was given (so they are listed beside the variables
 * whose values are wrong): what production needs, the upstream's token, POS_AUTH against POS_TOKEN,
 * ADMIN_TOKENS against the other tokens, failpoints. Each problem names its variables.
 */
function acrossVariables(merged: Record<string, unknown>, nodeEnv: string, sandbox: boolean, given: (name: string) => boolean): string[] {
  const problems: string[] = [];
  const posAuthOff = merged.POS_AUTH === 'off';
  if (posAuthOff && given('POS_TOKEN')) problems.push('POS_AUTH=off and POS_TOKEN are both set; unset one (POS_AUTH=off accepts direct POS posts without any credential)');
  problems.push(...reusedAdminTokens(merged));
  if (nodeEnv === 'production') {
    // The four a production bridge needs (docs/production.md), listed together.
    const missing = ['LOYALTY_BASE_URL', 'LOYALTY_APP_TOKEN', 'ADMIN_TOKEN', ...(posAuthOff ? [] : ['POS_TOKEN'])].filter((name) => !given(name));
    if (missing.length > 0) {
      const why = [
        ...(missing.includes('LOYALTY_BASE_URL') || missing.includes('LOYALTY_APP_TOKEN') ? ['sandbox never starts in production'] : []),
        ...(missing.includes('ADMIN_TOKEN') ? ['the admin API needs a token of at least 16 characters'] : []),
        ...(missing.includes('POS_TOKEN')
          ? ['without POS_TOKEN anyone who can reach /v1/checkouts and /v1/refunds could accrue or reverse points (set POS_AUTH=off only where those paths are reachable from a private network alone)']
          : []),
      ];
      problems.push(`NODE_ENV=production needs ${missing.join(', ')}: ${why.join('; ')}`);
    }
    if (given('BRIDGE_FAILPOINTS')) problems.push('BRIDGE_FAILPOINTS is for crash tests and is refused in production');
    problems.push(...placeholderCredentials(merged));
  } else if (!sandbox && !given('LOYALTY_APP_TOKEN')) {
    problems.push('LOYALTY_APP_TOKEN is required when LOYALTY_BASE_URL is set');
  }
  return problems;
}

/** What a placeholder looks like: the example file's `change-me` values and their kin. */
const PLACEHOLDER = /change[-_ ]?me|replace[-_ ]?me|placeholder|your[-_ ]?([a-z0-9]+[-_ ]){0,3}(token|key|secret|password)|^<.*>$|^(x+|todo|tbd|secret|password|token|example|test|default)$/i;

/** The shortest token an operator chooses that production takes (contract: "placeholders refused"). */
const PRODUCTION_CHOSEN_MIN = 24;

/**
 * In production, the credentials an operator chooses (ADMIN_TOKEN, each of ADMIN_TOKENS, POS_TOKEN,
 * TOAST_LOYALTY_KEY) must not be placeholders and must be at least 24 characters; those issued by
 * others (the loyalty service's app token and API key, a POS's secrets: every *_TOKEN, *_KEY and
 * *_SECRET variable) are taken as issued, but not as a placeholder either: docs/production.env.example,
 * copied as shipped, must not start a bridge that anyone who read the file could use. Named by the
 * variable, never by the value.
 */
function placeholderCredentials(merged: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const fix = 'set it to a long random value (e.g. openssl rand -base64 32)';
  const chosen: [name: string, value: string][] = (['ADMIN_TOKEN', 'POS_TOKEN', 'TOAST_LOYALTY_KEY'] as const).flatMap((name) => (typeof merged[name] === 'string' ? [[name, (merged[name] as string).trim()] as [string, string]] : []));
  if (typeof merged.ADMIN_TOKENS === 'string') for (const { entry, token } of readNamedTokens(merged.ADMIN_TOKENS).tokens) chosen.push([`ADMIN_TOKENS ${entry}`, token]);
  for (const [name, value] of chosen) {
    if (PLACEHOLDER.test(value)) problems.push(`${name} is a placeholder (as docs/production.env.example ships it): ${fix}`);
    // Shorter than its own rule's minimum is refused by that rule already (16 for the tokens; the
    // register key's is 24 everywhere): said once.
    else if (value.length >= (name === 'TOAST_LOYALTY_KEY' ? PRODUCTION_CHOSEN_MIN : 16) && value.length < PRODUCTION_CHOSEN_MIN) problems.push(`${name} must be at least ${PRODUCTION_CHOSEN_MIN} characters in production (it has ${value.length}): ${fix}`);
  }
  const issued = Object.keys(merged).filter((name) => holdsSecret(name) && !['ADMIN_TOKEN', 'ADMIN_TOKENS', 'POS_TOKEN', 'TOAST_LOYALTY_KEY', 'SECRETS_KEY'].includes(name)).sort();
  for (const name of issued) {
    const value = merged[name];
    if (typeof value === 'string' && PLACEHOLDER.test(value.trim())) problems.push(`${name} is a placeholder (as docs/production.env.example ships it): set it to the value issued for this bridge`);
  }
  return problems;
}

/**
 * An ADMIN_TOKENS entry whose token is also ADMIN_TOKEN or POS_TOKEN. With ADMIN_TOKEN's token the
 * operator would be recorded as `admin` (ADMIN_TOKEN is checked first), so the audit trail could not
 * tell them apart, which is what ADMIN_TOKENS is for (docs/operators.md); with POS_TOKEN's, every
 * system that posts checkouts would hold an operator's global admin token. Named by the entry's
 * position and name, never by the token.
 */
function reusedAdminTokens(merged: Record<string, unknown>): string[] {
  if (typeof merged.ADMIN_TOKENS !== 'string') return [];
  const others = (['ADMIN_TOKEN', 'POS_TOKEN'] as const).filter((variable) => typeof merged[variable] === 'string');
  const problems: string[] = [];
  for (const { entry, token } of readNamedTokens(merged.ADMIN_TOKENS).tokens) {
    for (const variable of others) {
      // Compared trimmed, as the entries are: a header's value never carries the spaces around a token.
      if (token === (merged[variable] as string).trim()) {
        problems.push(`ADMIN_TOKENS ${entry} reuses ${variable}'s token; give each operator a token of their own, used nowhere else`);
      }
    }
  }
  return problems;
}

/** One problem on one line; several, one line each under a count. */
function configProblems(problems: string[]): string {
  if (problems.length <= 1) return `invalid configuration: ${problems[0] ?? 'unreadable'}`;
  return `invalid configuration (${problems.length} problems):\n${problems.map((p) => `  - ${p}`).join('\n')}`;
}

/**
 * Outside sandbox an unset secret means that POS's webhooks are refused. In sandbox every POS gets
 * the secret `sandbox-webhook-secret`, so webhooks are still verified, with a key anyone can sign with.
 */
export const SANDBOX_WEBHOOK_SECRET = 'sandbox-webhook-secret';

/**
 * Sandbox reads its fake POS APIs back every minute, so a webhook left out (the "missed webhook"
 * demo) is accrued within a minute. Outside sandbox scheduled passes are off until BACKFILL_INTERVAL_MS
 * is set: each pass calls every merchant's POS API with that merchant's token (docs/backfill-and-reconcile.md).
 */
export const SANDBOX_BACKFILL_INTERVAL_MS = 60_000;

/** Each POS's settings from its declared variables; a POS without an API has the base URL ''. */
function posSettings(declarations: PosSettingDeclarations, values: Record<string, string | undefined>, sandbox: boolean, port: number): Record<string, PosSettings> {
  const secret = (value: string | undefined) => value ?? (sandbox ? SANDBOX_WEBHOOK_SECRET : undefined);
  const trim = (url: string) => url.replace(/\/+$/, '');
  const settings = ({ webhookSecret, notificationUrl, accessToken, apiBaseUrl, accessTokenHeader, account, registerKey }: PosSettingsDeclaration): PosSettings => ({
    ...(webhookSecret ? { webhookSecret: secret(values[webhookSecret]) } : {}),
    ...(notificationUrl ? { notificationUrl: values[notificationUrl.variable] ?? (sandbox ? notificationUrl.sandboxDefault(port) : undefined) } : {}),
    ...(accessToken ? { accessToken: values[accessToken] } : {}),
    apiBaseUrl: apiBaseUrl ? trim(values[apiBaseUrl.variable]!) : '',
    ...(accessTokenHeader ? { accessTokenHeader } : {}),
    ...(account && values[account.variable] ? { account: values[account.variable] } : {}),
    ...(registerKey && values[registerKey.variable] ? { registerKey: values[registerKey.variable] } : {}),
  });
  return Object.fromEntries(Object.entries(declarations).map(([pos, declaration]) => [pos, settings(declaration)]));
}
