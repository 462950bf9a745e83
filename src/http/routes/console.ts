/**
 * The operator console (docs/operators.md "Console"): static files from `src/console/` (copied beside the
 * compiled code by `npm run build`), served at `/admin` with headers that keep the page to its own
 * files. Everything the page shows or does goes through `/v1/admin/*` with the operator's token,
 * so there is no session here to steal and nothing is served that the token would not be given.
 *
 * Middleware, not routes: the page is not part of the JSON API `/openapi.json` documents.
 */
import express, { Router } from 'express';
import { fileURLToPath } from 'node:url';

/** From src/http/routes (sources) and dist/src/http/routes (the build) alike: src/console beside it. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../console/', import.meta.url));

/**
 * No script or style but the console's own files (no inline script, so an injected tag does not
 * run), requests to this origin only, and no framing (clickjacking an operator into an action).
 */
export const CONSOLE_CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': CONSOLE_CSP,
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  // Revalidated on every load, so an upgraded bridge never runs yesterday's page against today's API.
  'Cache-Control': 'no-cache',
};

export function consoleRoutes(dir: string = CONSOLE_DIR): Router {
  const router = Router();
  router.use(
    '/admin',
    (req, res, next) => {
      // On every answer under /admin, the redirect to /admin/ and a 404 included.
      res.set(CONSOLE_HEADERS);
      // The page's relative URLs (console.css, js/main.js) resolve under /admin/ only. Redirected
      // here rather than by express.static, which would replace the policy with its own.
      if (req.path === '/' && !req.originalUrl.split('?')[0]!.endsWith('/')) return res.redirect(301, '/admin/');
      next();
    },
    express.static(dir, { index: 'index.html', dotfiles: 'ignore', redirect: false, fallthrough: true }),
  );
  return router;
}
