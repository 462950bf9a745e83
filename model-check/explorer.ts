/**
 * The explicit-state search (docs/correctness.md, "How it searches"): breadth first from the empty
 * world, so the first violation found is one of the shortest. States are not copied: a state is
 * rebuilt by replaying the events that led to it, the world being deterministic, from the nearest
 * state on its path that was calm (no call or read pending in any instance), which is restored from
 * a snapshot of its ledger, books, clock and instances. Each new state is checked against the
 * safety invariants and, with the world that reached it, for liveness by the fault-free
 * continuation (`firstLook`).
 */
import { enabledEvents } from './choices.js';
import { balanceViolation, safetyViolation } from './invariants.js';
import { continueFaultFree } from './liveness.js';
import type { Scenario } from './scenario.js';
import { stateKey } from './state-key.js';
import { World, type ModelEvent, type WorldSnapshot } from './world.js';
import { applyNoted } from './coverage.js';

export interface ExploreOptions {
  /** Stop after this many states (the search is then not exhaustive, and says so). */
  maxStates?: number;
  /** Called now and then with the figures so far. */
  progress?: (figures: ExploreFigures) => void;
}

export interface ExploreFigures {
  scenario: string;
  states: number;
  transitions: number;
  maxDepth: number;
  /** Fault-free continuations run (one from each state expanded), the events they applied, and how many stopped at a state an earlier one had shown to settle. */
  continuations: number;
  continuationSteps: number;
  continuationsRemembered: number;
  /** Events of the longest continuation. */
  longestContinuation: number;
  ms: number;
  exhaustive: boolean;
  /** The situations of issue 20's world the search went through (coverage.ts), sorted. */
  covered: string[];
}

export interface Violation {
  /** safety: an invariant broke (the balance included); liveness: the records do not settle without a person where the contract needs none. */
  kind: 'safety' | 'liveness';
  /** Where it showed: in a state the search reached, or on the fault-free continuation from one (`trace` then ends where faults stop). */
  where: 'search' | 'continuation';
  why: string;
  /** Events from the empty world to the state, one line each, then (liveness) the continuation's. */
  trace: string[];
  continuation: string[];
  summary: string[];
  /** Events on the path to the violating state (the counterexample's length). */
  length: number;
}

export interface ExploreResult {
  figures: ExploreFigures;
  violation?: Violation;
}

interface Node {
  parent: number;
  event?: ModelEvent;
  depth: number;
  key: string;
  /** The nearest calm node on the path (itself when calm): where a replay starts from. */
  base: number;
  /** The events enabled in it, found when it was first reached; dropped once it is expanded. */
  events?: ModelEvent[];
}

export async function explore(scenario: Scenario, options: ExploreOptions = {}): Promise<ExploreResult> {
  const started = Date.now();
  const root = await World.create(scenario);
  const nodes: Node[] = [{ parent: -1, depth: 0, key: stateKey(root, true), base: 0 }];
  const visited = new Map<string, number>([[nodes[0]!.key, 0]]);
  const snapshots = new Map<number, WorldSnapshot>([[0, root.snapshot()]]);
  /** How many nodes still to expand replay from each snapshot: freed at zero. */
  const users = new Map<number, number>([[0, 1]]);
  const settles = new Set<string>();
  const figures: ExploreFigures = { scenario: scenario.name, states: 1, transitions: 0, maxDepth: 0, continuations: 0, continuationSteps: 0, continuationsRemembered: 0, longestContinuation: 0, ms: 0, exhaustive: true, covered: [] };
  const covered = new Set<string>();
  const finish = (exhaustive: boolean) => Object.assign(figures, { ms: Date.now() - started, exhaustive, covered: [...covered].sort() });
  let lastProgress = Date.now();

  const pathFrom = (index: number, stop: number): ModelEvent[] => {
    const events: ModelEvent[] = [];
    for (let i = index; i !== stop; i = nodes[i]!.parent) events.push(nodes[i]!.event!);
    return events.reverse();
  };
  /**
   * The state rebuilt, for one of its events. `check`: whether to check that the rebuild gives the
   * state it gave the first time (the model must be deterministic, and its snapshots whole). Done
   * for each state's first rebuild, so every path replayed is checked once; its other events'
   * rebuilds replay the same path, and checking each again cost a state key per transition.
   */
  const materialize = async (index: number, check: boolean): Promise<World> => {
    const node = nodes[index]!;
    const world = await World.restore(scenario, snapshots.get(node.base)!);
    for (const event of pathFrom(index, node.base)) await applyNoted(world, event);
    if (check && stateKey(world, true) !== node.key) throw new Error(`the model is not deterministic: replaying the path to state ${index} of ${scenario.name} gave another state`);
    return world;
  };
  const release = (base: number) => {
    const left = users.get(base)! - 1;
    if (left > 0) users.set(base, left);
    else {
      users.delete(base);
      snapshots.delete(base);
    }
  };

  /**
   * What a state needs a world in it for, done once with the world that first reached it (nothing
   * else has it in that state yet): the events enabled there, kept for its expansion, and its
   * fault-free continuation, which uses the world up. Done at expansion instead, each state was
   * rebuilt once more than its children need (a replay from the nearest calm state), a third of
   * the rebuilds. A continuation's violation so shows when its state is first reached, before any
   * state deeper than it, so the counterexample is still one of the shortest.
   */
  const firstLook = async (index: number, world: World): Promise<Violation | undefined> => {
    nodes[index]!.events = await enabledEvents(world);
    figures.continuations += 1;
    const live = await continueFaultFree(world, settles);
    figures.continuationSteps += live.steps;
    figures.longestContinuation = Math.max(figures.longestContinuation, live.steps);
    if (live.remembered) figures.continuationsRemembered += 1;
    if (!live.ok) return counterexample(scenario, pathOf(nodes, index), live.kind!, 'continuation', live.why!);
    return undefined;
  };

  const atRoot = await firstLook(0, root);
  if (atRoot) {
    finish(false);
    return { figures, violation: atRoot };
  }
  for (let index = 0; index < nodes.length; index++) {
    const node = nodes[index]!;
    const events = node.events!;
    node.events = undefined;
    for (const [i, event] of events.entries()) {
      figures.transitions += 1;
      const next = await materialize(index, i === 0);
      await applyNoted(next, event);
      for (const situation of next.covered) covered.add(situation);
      const key = stateKey(next, true);
      if (visited.has(key)) continue;
      const child = nodes.length;
      const calm = next.calm();
      nodes.push({ parent: index, event, depth: node.depth + 1, key, base: calm ? child : node.base });
      visited.set(key, child);
      figures.states += 1;
      figures.maxDepth = Math.max(figures.maxDepth, node.depth + 1);
      if (calm) {
        snapshots.set(child, next.snapshot());
        users.set(child, 1);
      } else users.set(node.base, users.get(node.base)! + 1);
      const broken = safetyViolation(next) ?? balanceViolation(next);
      if (broken) {
        finish(false);
        return { figures, violation: await counterexample(scenario, pathOf(nodes, child), 'safety', 'search', broken) };
      }
      const stuck = await firstLook(child, next);
      if (stuck) {
        finish(false);
        return { figures, violation: stuck };
      }
    }
    release(node.base);
    if (options.maxStates !== undefined && nodes.length >= options.maxStates) {
      figures.exhaustive = false;
      break;
    }
    if (options.progress && Date.now() - lastProgress > 10_000) {
      lastProgress = Date.now();
      options.progress({ ...figures, ms: Date.now() - started });
    }
  }
  finish(figures.exhaustive);
  return { figures };
}

function pathOf(nodes: Node[], index: number): ModelEvent[] {
  const events: ModelEvent[] = [];
  for (let i = index; i > 0; i = nodes[i]!.parent) events.push(nodes[i]!.event!);
  return events.reverse();
}

/** The path replayed from the empty world, each event in words before it is applied; for a violation on the continuation, the continuation after it. */
async function counterexample(scenario: Scenario, path: ModelEvent[], kind: Violation['kind'], where: Violation['where'], why: string): Promise<Violation> {
  const world = await World.create(scenario);
  const trace: string[] = [];
  for (const event of path) {
    trace.push(world.describe(event));
    await applyNoted(world, event);
  }
  const summary = world.summary();
  if (where === 'search') return { kind, where, why, trace, continuation: [], summary, length: path.length };
  // Run again without the remembered states, so that it shows every step (a continuation that fails never reached one of them).
  const again = await continueFaultFree(world, new Set(), true);
  if (again.why !== why) throw new Error(`the model is not deterministic: the continuation of a counterexample of ${scenario.name} ended otherwise (${again.why ?? 'it settled'})`);
  return { kind, where, why, trace, continuation: again.trace, summary: [...summary, '--- after the continuation:', ...world.summary()], length: path.length };
}
