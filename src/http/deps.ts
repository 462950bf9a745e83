/** What the HTTP layer is given by the composition root (src/bridge.ts): every route reads its part of it. */
import type { BackfillPoller } from '../backfill/poller.js';
import type { NamedAdminToken, PosAuthConfig } from '../config.js';
import type { Ingest } from '../core/ingest.js';
import type { OperatorActions } from '../core/operator.js';
import type { RegisterService } from '../core/register.js';
import type { Worker } from '../core/worker.js';
import type { StoreWithoutRecordWrites } from '../ledger/store.js';
import type { Logger } from '../kernel/logger.js';
import type { MerchantAdmin } from '../merchants/admin.js';
import type { Metrics } from '../core/metrics.js';
import type { ReconcileReporter } from '../reconcile/report.js';
import type { TokenDirectory } from './auth.js';
import type { UpstreamReadiness } from '../merchants/upstream-check.js';
import type { PosCatalogue } from '../pos/contract.js';

export interface AppDeps {
  ingest: Ingest;
  operator: OperatorActions;
  /** What a register asks while the sale is open (`/v1/toast/loyalty`, `/v1/lookup`). */
  register: RegisterService;
  /** This bridge instance's id (in-flight markers name it). */
  instanceId: string;
  worker: Worker;
  /** Reads of the ledger; records are written only through the core. */
  store: StoreWithoutRecordWrites;
  logger: Logger;
  metrics: Metrics;
  adminToken: string;
  /** ADMIN_TOKENS: named operators with global tokens. */
  namedAdminTokens?: readonly NamedAdminToken[];
  posAuth: PosAuthConfig;
  /** Managing merchants (`/v1/admin/merchants`). */
  merchants: MerchantAdmin;
  /** Which merchant a POS or admin token belongs to (the merchant registry). */
  tokens: TokenDirectory;
  /** The three-way reconcile report (`/v1/admin/reports/reconcile`). */
  reporter: ReconcileReporter;
  bodyLimitBytes: number;
  /** POS requests handled at once before more are shed (POS_MAX_IN_FLIGHT). */
  posMaxInFlight: number;
  /** What the last checks of the loyalty service's credentials found: `/readyz`'s upstream (src/merchants/upstream-check.ts). */
  upstreamReadiness: () => UpstreamReadiness;
  version: string;
  /** Backfill on request and its state (`/v1/admin/backfill`), with the schedule's settings it reports. */
  backfill: { poller: BackfillPoller; intervalMs: number; overlapMs: number };
  /** The POSes the bridge registers, as the routes and the document need them (the composition root's adapters). */
  catalogue: PosCatalogue;
}
