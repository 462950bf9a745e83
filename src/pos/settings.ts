/**
 * What one POS reads from configuration, declared by its adapter (`adapters/<pos>/settings.ts`):
 * the names of its variables, which of them holds what, their defaults, and any rule across them.
 * config.ts builds its schema and `Config.pos` from the declarations the composition root passes
 * it, so adding a POS adds a declaration and edits nothing in config.ts. Variable names and
 * defaults are public (docs/configuration.md): a declaration never renames one.
 */

/** One POS's settings, from configuration (`<POS>_…` variables). */
export interface PosSettings {
  /** Webhook signing secret / signature key / auth code. Unset outside sandbox: webhooks are refused. */
  webhookSecret?: string;
  /** Square signs the notification URL it was configured with, followed by the body. */
  notificationUrl?: string;
  /** Access token for the POS's own API (fetching id-only webhook objects and customers). */
  accessToken?: string;
  apiBaseUrl: string;
  /** The header that carries the access token, when it is not `Authorization: Bearer` (Shopify's `X-Shopify-Access-Token`). */
  accessTokenHeader?: string;
  /** The merchant's account on this POS (its id there), where one is bound: webhooks naming it are this merchant's. */
  account?: string;
  /** The key its register's loyalty calls carry (Toast's loyalty integration), where the POS has such calls. */
  registerKey?: string;
}

export interface PosSettingsDeclaration {
  /** The variable of the webhook signing secret (signature key, auth code); every POS's is `sandbox-webhook-secret` in sandbox. */
  webhookSecret?: string;
  /** The variable of the URL the POS signs with the body (Square), and what it is in sandbox when unset. */
  notificationUrl?: { variable: string; sandboxDefault(port: number): string };
  /** The variable of the access token for the POS's own API. */
  accessToken?: string;
  /**
   * The variable of the POS API's address, and its default; trailing slashes are dropped. `{shop}`
   * in it stands for the merchant's account on the POS (Shopify's shop domain).
   */
  apiBaseUrl?: { variable: string; default: string };
  /** The header that carries the access token, where the POS does not take `Authorization: Bearer` (Shopify). */
  accessTokenHeader?: string;
  /**
   * How this POS names a merchant's account (bridge-contract "Merchants"): the field of a merchant's
   * POS account that holds it (`merchantId`, `shopDomain`, `restaurantGuid`), the variable that
   * binds the default merchant to one, and whether a merchant's account may carry an access token
   * for the POS's API.
   */
  account?: { field: string; variable: string; accessToken: boolean; shape?: AccountShape };
  /**
   * The key a register's loyalty calls carry (Toast's loyalty integration API: the static key the
   * restaurant's integration was set up with): the field of a merchant's POS account that holds it
   * (a sealed secret) and the variable that holds the default merchant's.
   */
  registerKey?: { field: string; variable: string };
  /**
   * A rule across this POS's settings that no variable can check alone: what is wrong, naming the
   * variables, or undefined. Checked at start-up, after every variable is valid on its own.
   */
  check?(settings: PosSettings, sandbox: boolean): string | undefined;
}

/**
 * The shape of a POS's account ids (`account.shape`): what the bridge takes as one, from a variable,
 * a merchant's body or the loyalty service's credentials. An id the bridge calls the POS's API with
 * (Shopify's shop is its API's host) must be the POS's own shape: `localhost`, `127.0.0.1` or
 * `x/../y` named as a shop would send backfill there.
 */
export interface AccountShape {
  pattern: RegExp;
  /** What it must be, as a refusal says it ("must be …"). */
  says: string;
}

/** Where an adapter states no shape: letters, digits, dashes and underscores (Square, Clover, Toast and Loyverse ids all are). */
export const ACCOUNT_ID_SHAPE: AccountShape = { pattern: /^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$/, says: 'letters, digits, dashes and underscores (at most 128), as the POS writes its ids' };

/** The shape of this POS's account ids: its adapter's, else ACCOUNT_ID_SHAPE. */
export function accountShapeOf(declaration: PosSettingsDeclaration): AccountShape {
  return declaration.account?.shape ?? ACCOUNT_ID_SHAPE;
}

/** Every POS's declaration under its adapter's name, the key of `Config.pos`. */
export type PosSettingDeclarations = Readonly<Record<string, PosSettingsDeclaration>>;
