/**
 * The house's never-rules (docs/architecture.md "Who may import whom"), checked over the import
 * graph of src/, adapters/, simulator/ and model-check/: every relative import of every module is read (static `import`/
 * `export … from` and dynamic `import()`), placed in its part, and held to the parts that part may
 * import. A new module outside every part fails too, so the map below is kept whole. No two modules
 * import each other, however indirectly: a circle hides which of them is the lower.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/**
 * Each part, lowest first, with the modules (paths from the repository root) it holds. A path that
 * ends in `/` holds that folder. The first match wins, so a module named alone goes before its folder.
 */
const PARTS = {
  kernel: ['src/kernel/'],
  contracts: ['src/loyalty/', 'src/pos/', 'src/webhooks/', 'src/config.ts'],
  adapters: ['adapters/'],
  state: ['src/state/'],
  ledger: ['src/ledger/'],
  merchants: ['src/merchants/'],
  core: ['src/core/'],
  jobs: ['src/backfill/', 'src/reconcile/'],
  http: ['src/http/'],
  simulator: ['simulator/'],
  modelCheck: ['model-check/'],
  root: ['src/bridge.ts', 'src/main.ts', 'src/sandbox.ts', 'src/launcher.ts'],
} as const;
type Part = keyof typeof PARTS;

/** Whom each part may import, besides itself. Everything not listed is a never-rule. */
const MAY_IMPORT: Record<Part, readonly Part[]> = {
  kernel: [],
  contracts: ['kernel'],
  // Pure translations: a POS's payloads to the neutral intents, through the POS contract only.
  adapters: ['kernel', 'contracts'],
  // What a store needs to index a record (its status, due time, whether it is open, what needs a
  // person, its customer's search keys) is a pure function of the record, below both the stores and
  // the core, so both decide by the same rule.
  state: ['kernel', 'contracts'],
  ledger: ['kernel', 'contracts', 'state'],
  merchants: ['kernel', 'contracts', 'state', 'ledger'],
  core: ['kernel', 'contracts', 'state', 'ledger'],
  jobs: ['kernel', 'contracts', 'state', 'ledger', 'merchants', 'core'],
  // The HTTP layer gets the POSes' schemas and settings through the POS contract, from the composition root.
  http: ['kernel', 'contracts', 'state', 'ledger', 'merchants', 'core', 'jobs'],
  // The simulator stands in for the loyalty service and the POS vendors: it knows their contracts, never the bridge's insides.
  simulator: ['kernel', 'contracts'],
  // The model check drives the real core over the memory ledger; its fake loyalty service keeps books as the simulator does.
  modelCheck: ['kernel', 'contracts', 'state', 'ledger', 'core', 'simulator'],
  // The composition root wires everything.
  root: ['kernel', 'contracts', 'adapters', 'state', 'ledger', 'merchants', 'core', 'jobs', 'http', 'simulator'],
};

function partOf(path: string): Part | undefined {
  for (const [part, members] of Object.entries(PARTS) as [Part, readonly string[]][]) {
    if (members.some((m) => (m.endsWith('/') ? path.startsWith(m) : path === m))) return part;
  }
  return undefined;
}

function modules(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return modules(path);
    return /\.ts$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s*['"](\.{1,2}\/[^'"]+)['"]|import\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*\)/g;

/** The relative imports of a module, as repository paths of the modules they name. */
function importsOf(path: string): string[] {
  const text = readFileSync(join(ROOT, path), 'utf8');
  return [...text.matchAll(IMPORT)].map((m) => relative(ROOT, resolve(ROOT, dirname(path), (m[1] ?? m[2])!)).replace(/\.js$/, '.ts'));
}

const ALL = ['src', 'adapters', 'simulator', 'model-check'].flatMap(modules);

describe('the import graph keeps to the house', () => {
  it('places every module of src/ and adapters/ in a part', () => {
    expect(ALL.filter((path) => partOf(path) === undefined)).toEqual([]);
    expect(ALL.length).toBeGreaterThan(100);
  });

  it('lists no module or folder that does not exist (a stale entry would hide where a file went)', () => {
    const listed = Object.values(PARTS).flat();
    expect(listed.filter((m) => (m.endsWith('/') ? !ALL.some((path) => path.startsWith(m)) : !ALL.includes(m)))).toEqual([]);
  });

  it('crosses no forbidden line', () => {
    const crossings = ALL.flatMap((from) => {
      const fromPart = partOf(from)!;
      return importsOf(from)
        .filter((to) => to.startsWith('src/') || to.startsWith('adapters/'))
        .map((to) => ({ from, to, toPart: partOf(to) }))
        .filter(({ toPart }) => toPart !== fromPart && !(toPart && MAY_IMPORT[fromPart].includes(toPart)))
        .map(({ from, to, toPart }) => `${from} (${fromPart}) imports ${to} (${toPart ?? 'no part'})`);
    });
    expect(crossings).toEqual([]);
  });

  it('holds no circle: no module imports, however indirectly, one that imports it (type-only imports count too)', () => {
    const graph = new Map(ALL.map((path) => [path, importsOf(path).filter((to) => to.startsWith('src/') || to.startsWith('adapters/'))]));
    const circles: string[] = [];
    const done = new Set<string>();
    const walk = (path: string, trail: string[]) => {
      const at = trail.indexOf(path);
      if (at >= 0) return void circles.push([...trail.slice(at), path].join(' -> '));
      if (done.has(path)) return;
      for (const next of graph.get(path) ?? []) walk(next, [...trail, path]);
      done.add(path);
    };
    for (const path of ALL) walk(path, []);
    expect(circles).toEqual([]);
    // The walk itself, on a known circle: were it blind, the check above would pass on anything.
    graph.set('src/a.ts', ['src/b.ts']).set('src/b.ts', ['src/a.ts']);
    done.clear();
    walk('src/a.ts', []);
    expect(circles).toEqual(['src/a.ts -> src/b.ts -> src/a.ts']);
  });

  it('reads imports as the check needs: a forbidden line drawn in a test module is found', () => {
    // The reader itself, on text that crosses a line: were it blind, the check above would pass on anything.
    const found = [...`import { x } from '../core/delivery.js';\nexport { y } from './z.js';\nconst m = await import('../http/app.js');`.matchAll(IMPORT)].map((m) => m[1] ?? m[2]);
    expect(found).toEqual(['../core/delivery.js', './z.js', '../http/app.js']);
  });
});
