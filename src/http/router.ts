/**
 * Mounts the route table (`route.ts`): for each route, the middleware its access calls for, then
 * its own (a POS's raw body), then one handler that checks its path parameters, parses its body and
 * its query with the schemas the document shows, and runs it. Every `/v1/admin` request first has
 * its token checked, then its input (`adminInput`: query, path and body), before any route reads it,
 * whether or not a route matches it.
 */
import { Router, type RequestHandler } from 'express';
import type { IngestMerchant } from '../core/ingest.js';
import { parseWith } from '../kernel/validation.js';
import { adminAuth, posAuth, requireGlobalAdmin } from './auth.js';
import { adminInput } from './body.js';
import { expressPath, isAdmin, type Access, type HttpDeps, type Route } from './route.js';
import { unreachable } from '../kernel/unreachable.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** The merchant a direct post is for (its token's), active. */
    posMerchant?: IngestMerchant;
  }
}

export function mountRoutes(routes: readonly Route[], deps: HttpDeps): Router {
  const router = Router();
  router.use('/v1/admin', adminAuth({ token: deps.adminToken, named: deps.namedAdminTokens }, deps.tokens), adminInput());
  for (const route of routes) {
    // The admin prefix's checks above are what an admin route's access is: a route outside it would run without them.
    if (isAdmin(route) !== route.path.startsWith('/v1/admin/')) throw new Error(`${route.method.toUpperCase()} ${route.path}: admin access is the /v1/admin routes' and theirs only`);
    const path = expressPath(route.path);
    router[route.method](path, ...access(route.access, deps), ...(route.before?.(deps) ?? []), handler(route, deps));
    if (route.onError) router.use(path, route.onError(deps));
  }
  return router;
}

/** The middleware in front of a route, by who may call it (the /v1/admin prefix's are mounted once, above). */
function access(kind: Access, deps: HttpDeps): RequestHandler[] {
  switch (kind) {
    case 'none':
    case 'signed':
    case 'admin':
      return [];
    case 'globalAdmin':
      return [requireGlobalAdmin()];
    case 'pos':
      // Direct posts carry no signature: their credential is checked before anything else, even the POS name.
      return [posAuth(deps.posAuth, deps.tokens), activeMerchant(deps)];
    default:
      return unreachable(kind);
  }
}

/** A suspended merchant's posts are refused (403) before the body is read: nothing is recorded for it. */
function activeMerchant(deps: HttpDeps): RequestHandler {
  return (req, _res, next) => {
    deps.ingest.merchant(req.posPrincipal!.merchantId).then((merchant) => {
      req.posMerchant = merchant;
      next();
    }, next);
  };
}

/** Path parameters first (a value nothing can have is a 404), then the body, then the query; then the route. */
function handler(route: Route, deps: HttpDeps): RequestHandler {
  const params = Object.entries(route.params ?? {}).filter(([, param]) => param.refuse);
  const body = route.body && 'schema' in route.body ? route.body : undefined;
  return async (req, res) => {
    for (const [name, param] of params) {
      const value = req.params[name] as string;
      if (!param.schema.safeParse(value).success) throw param.refuse!(value);
    }
    const parsedBody = body ? parseWith(body.schema, req.body ?? (body.emptyWhenAbsent ? {} : undefined)) : undefined;
    const query = route.query ? parseWith(route.query, req.query) : undefined;
    await route.handle({ req, res, query, body: parsedBody, deps });
  };
}
